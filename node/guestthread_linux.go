//go:build linux

package node

import "golang.org/x/sys/unix"

// guestNice is how much lower than the node's other threads a thread runs
// while it runs a guest: when guests and the front share a CPU, the kernel
// gives the thread that reads requests and writes answers the larger share
// and wakes it sooner.
const guestNice = 5

// baseNice is the nice value of the process at start (a thread inherits
// it); a guest thread returns to it afterwards.
var baseNice = func() int {
	// getpriority(2) returns 20 - nice through the raw system call.
	p, err := unix.Getpriority(unix.PRIO_PROCESS, 0)
	if err != nil {
		return 0
	}
	return 20 - p
}()

// lowerGuestThread lowers the calling thread's priority for a guest and
// returns the function that restores it. The caller has locked its
// goroutine to the thread and restores before unlocking. Failures leave
// the priority as it was (the guest still runs).
func lowerGuestThread() (restore func()) {
	tid := unix.Gettid()
	if unix.Setpriority(unix.PRIO_PROCESS, tid, min(baseNice+guestNice, 19)) != nil {
		return func() {}
	}
	return func() { _ = unix.Setpriority(unix.PRIO_PROCESS, tid, baseNice) }
}

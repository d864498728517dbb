//go:build linux

// The compile worker's thread priority on Linux (nice 10).

package runner

import "golang.org/x/sys/unix"

// compileNice is the nice value of a compile worker's thread: below the
// node's other threads, so compiles take the CPU running guests leave.
const compileNice = 10

// lowerThreadPriority lowers the calling OS thread's scheduling priority
// (on Linux, PRIO_PROCESS with a thread id applies to that thread only).
// The caller has locked its goroutine to the thread and never unlocks it,
// so the thread ends with the goroutine. A failure leaves the priority
// as it was: compiles still run, at normal priority.
func lowerThreadPriority() {
	_ = unix.Setpriority(unix.PRIO_PROCESS, unix.Gettid(), compileNice)
}

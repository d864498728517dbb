//go:build linux

// The compile worker's thread priority on Linux (nice 10).

package runner

import "golang.org/x/sys/unix"

// lowerThreadPriority lowers the calling OS thread's scheduling priority
// (on Linux, PRIO_PROCESS with a thread id applies to that thread only).
// The caller has locked its goroutine to the thread and never unlocks it,
// so the thread ends with the goroutine. A failure leaves the priority
// as it was: compiles still run, at normal priority.
func lowerThreadPriority() {
	_ = unix.Setpriority(unix.PRIO_PROCESS, unix.Gettid(), compileNice)
}

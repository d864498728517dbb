//go:build linux

package runner

import "golang.org/x/sys/unix"

// threadNice is the calling thread's nice value (the raw getpriority
// system call returns 20 - nice).
func threadNice() int {
	p, err := unix.Getpriority(unix.PRIO_PROCESS, unix.Gettid())
	if err != nil {
		return -100
	}
	return 20 - p
}

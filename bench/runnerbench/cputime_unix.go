//go:build unix

package main

// The process's CPU time on Unix systems, from getrusage.

import (
	"syscall"
	"time"
)

// cpuTime is the CPU time (user + system) this process has used so far, all
// threads included (GC workers too); 0 if unavailable.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// minorFaults is the minor page faults this process has taken so far, all
// threads included; 0 if unavailable.
func minorFaults() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return int64(ru.Minflt) //nolint:unconvert // int32 on some systems
}

//go:build !unix

package main

// The process's CPU time where it cannot be read: always 0.

import "time"

// cpuTime is unavailable here: CPU-time figures stay 0.
func cpuTime() time.Duration { return 0 }

// minorFaults is unavailable here: fault figures stay 0.
func minorFaults() int64 { return 0 }

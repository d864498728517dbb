//go:build !unix

package main

import "time"

// selfCPU is unavailable here (no getrusage): CPU figures stay 0.
func selfCPU() time.Duration { return 0 }

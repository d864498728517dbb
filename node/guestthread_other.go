//go:build !linux

package node

// lowerGuestThread does nothing where thread priorities are not set.
func lowerGuestThread() (restore func()) { return func() {} }

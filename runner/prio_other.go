//go:build !linux

// The compile worker's thread priority outside Linux: unchanged.

package runner

// lowerThreadPriority does nothing outside Linux: compiles run at the
// node's priority (still bounded by Config.CompileConcurrency).
func lowerThreadPriority() {}

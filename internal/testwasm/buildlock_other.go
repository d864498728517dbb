//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package testwasm

// WithBuildLock where flock is not available: no lock.

// WithBuildLock runs build (no lock between processes here; see the unix
// version).
func WithBuildLock(build func() error) error { return build() }

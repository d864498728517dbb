//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package testwasm

// WithBuildLock runs build (no lock between processes here; see the unix
// version).
func WithBuildLock(build func() error) error { return build() }

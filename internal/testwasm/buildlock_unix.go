//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package testwasm

// WithBuildLock on Unix systems: a flock shared by the test processes.

import (
	"os"
	"path/filepath"
	"syscall"
)

// WithBuildLock runs build while holding a lock shared by every test
// process of the machine (a file in the temporary directory, flock'ed), so
// that the wasm builds of several test packages run one at a time: go test
// runs packages in parallel, and on a cold build cache each `go build` for
// wasip1 would otherwise compile the same standard library at once. The
// first fills the cache and the others then find it. If the lock cannot be
// taken, build runs anyway.
func WithBuildLock(build func() error) error {
	f, err := os.OpenFile(filepath.Join(os.TempDir(), "latent-node-wasm-build.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return build()
	}
	defer func() { _ = f.Close() }()
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if err != syscall.EINTR {
			if err != nil {
				return build()
			}
			break
		}
	}
	defer func() { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN) }()
	return build()
}

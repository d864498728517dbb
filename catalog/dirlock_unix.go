//go:build unix

// The flock of LockDir on Unix systems.

package catalog

import (
	"os"
	"syscall"

	"github.com/cockroachdb/errors"
)

// flockExclusive takes f's exclusive flock without waiting.
func flockExclusive(f *os.File) error {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, syscall.EINTR):
			continue
		case errors.Is(err, syscall.EWOULDBLOCK):
			return errors.WithHint(errors.Wrapf(ErrDirInUse, "%s is locked", f.Name()),
				"stop the node that uses this data directory first")
		default:
			return errors.Wrapf(err, "catalog: lock %s", f.Name())
		}
	}
}

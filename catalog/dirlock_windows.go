// The lock of LockDir on Windows: LockFileEx on the lock file's first
// byte, exclusive and without waiting.

package catalog

import (
	"os"

	"github.com/cockroachdb/errors"
	"golang.org/x/sys/windows"
)

// flockExclusive takes an exclusive lock of f without waiting.
func flockExclusive(f *os.File) error {
	var ol windows.Overlapped
	err := windows.LockFileEx(windows.Handle(f.Fd()), windows.LOCKFILE_EXCLUSIVE_LOCK|windows.LOCKFILE_FAIL_IMMEDIATELY, 0, 1, 0, &ol)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, windows.ERROR_LOCK_VIOLATION):
		return errors.WithHint(errors.Wrapf(ErrDirInUse, "%s is locked", f.Name()),
			"stop the node that uses this data directory first")
	default:
		return errors.Wrapf(err, "catalog: lock %s", f.Name())
	}
}

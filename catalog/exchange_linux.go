// Swapping a record with its directory's spare file (renameat2
// RENAME_EXCHANGE) and syncfs, on Linux.

package catalog

import (
	"os"

	"github.com/cockroachdb/errors"
	"golang.org/x/sys/unix"
)

// exchange makes the file spare the file name: it swaps the two atomically
// (the old name becomes the spare), or renames spare to name when name does
// not exist yet or the file system cannot swap.
func exchange(spare, name string) error {
	err := unix.Renameat2(unix.AT_FDCWD, spare, unix.AT_FDCWD, name, unix.RENAME_EXCHANGE)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, unix.ENOENT), errors.Is(err, unix.EINVAL), errors.Is(err, unix.ENOSYS), errors.Is(err, unix.EOPNOTSUPP):
		return os.Rename(spare, name)
	}
	return &os.LinkError{Op: "renameat2", Old: spare, New: name, Err: err}
}

// syncfsAvailable: writeBulk makes its files durable with one syncfs.
const syncfsAvailable = true

// syncfs flushes the file system that holds dir: every file written to it
// before is durable after.
func syncfs(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return errors.Wrapf(err, "catalog: open %s", dir)
	}
	defer func() { _ = d.Close() }()
	return errors.Wrap(unix.Syncfs(int(d.Fd())), "catalog: syncfs")
}

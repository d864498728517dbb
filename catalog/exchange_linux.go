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

// syncAll makes the files durable: one syncfs of their file system (the
// files are in one data directory).
func syncAll(files []tempFile) error {
	if len(files) == 0 {
		return nil
	}
	f, ok := files[0].(interface{ Fd() uintptr })
	if !ok { // a test's wrapped file: one fsync each
		return syncEach(files)
	}
	return errors.Wrap(unix.Syncfs(int(f.Fd())), "catalog: syncfs")
}

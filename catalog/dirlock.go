// LockDir: the data directory's flock, held by every catalog of the
// process until it exits (ErrDirInUse for a second process).

package catalog

import (
	"os"
	"path/filepath"
	"sync"

	"github.com/cockroachdb/errors"
)

// ErrDirInUse: another process holds the data directory's lock (a running
// node, or a gc or restore in progress). Commands that change the data
// directory offline refuse with it.
var ErrDirInUse = errors.New("catalog: data directory in use by another process")

// lockFile is the file whose flock marks the data directory as held.
const lockFile = "catalog/lock"

// dirLocks are the lock files this process holds. A lock is taken once per
// process and kept until the process exits: the catalog has no Close, and
// several catalogs of one process (tests, a restart in place, a directory
// verified and then renamed) may open the same directory. Locks are told
// apart by the lock file's identity, not its path.
var dirLocks struct {
	sync.Mutex
	held []heldLock
}

type heldLock struct {
	f  *os.File
	fi os.FileInfo
}

// LockDir takes the data directory's exclusive lock for this process (an
// flock on catalog/lock, held until the process exits) or returns an error
// marked ErrDirInUse if another process holds it. Taking it again in the
// same process succeeds, also after the directory was renamed. Open calls
// it; an offline command calls it first, before it changes anything under
// the directory. Backup does not take it: it only reads.
func LockDir(dir string) error {
	name := filepath.Join(dir, filepath.FromSlash(lockFile))
	if err := os.MkdirAll(filepath.Dir(name), 0o750); err != nil {
		return storageErr(errors.Wrapf(err, "catalog: create %s", filepath.Dir(name)), "create directory")
	}
	dirLocks.Lock()
	defer dirLocks.Unlock()
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return storageErr(errors.Wrapf(err, "catalog: open %s", name), "create lock")
	}
	fi, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return errors.Wrapf(err, "catalog: lock %s", name)
	}
	for _, h := range dirLocks.held {
		if os.SameFile(h.fi, fi) {
			_ = f.Close()
			return nil
		}
	}
	if err := flockExclusive(f); err != nil {
		_ = f.Close()
		return err
	}
	dirLocks.held = append(dirLocks.held, heldLock{f: f, fi: fi})
	return nil
}

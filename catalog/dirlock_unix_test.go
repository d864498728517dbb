//go:build unix

package catalog

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/cockroachdb/errors"
)

// otherProcessLock takes dir's lock through an open file description of its
// own, as another process would, and returns it (closing drops the lock).
func otherProcessLock(t *testing.T, dir string) *os.File {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, "catalog"), 0o750); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(filepath.Join(dir, filepath.FromSlash(lockFile)), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		t.Fatalf("flock: %v", err)
	}
	return f
}

func TestLockDir(t *testing.T) {
	t.Run("held by another process", func(t *testing.T) {
		dir := t.TempDir()
		other := otherProcessLock(t, dir)
		_, err := Open(context.Background(), Config{Dir: dir, Inspector: newFakeInspector()})
		if !errors.Is(err, ErrDirInUse) {
			t.Fatalf("Open of a held directory: %v", err)
		}
		_ = other.Close()
		if _, err := Open(context.Background(), Config{Dir: dir, Inspector: newFakeInspector()}); err != nil {
			t.Fatalf("Open once the other process let go: %v", err)
		}
	})
	t.Run("held by this process", func(t *testing.T) {
		dir := t.TempDir()
		if err := LockDir(dir); err != nil {
			t.Fatal(err)
		}
		// Open in the same process shares the lock ...
		if _, err := Open(context.Background(), Config{Dir: dir, Inspector: newFakeInspector()}); err != nil {
			t.Fatal(err)
		}
		// ... also once renamed, and another description cannot take it.
		moved := filepath.Join(t.TempDir(), "moved")
		if err := os.Rename(dir, moved); err != nil {
			t.Fatal(err)
		}
		if err := LockDir(moved); err != nil {
			t.Fatalf("LockDir after a rename: %v", err)
		}
		f, err := os.Open(filepath.Join(moved, filepath.FromSlash(lockFile)))
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = f.Close() }()
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); !errors.Is(err, syscall.EWOULDBLOCK) {
			t.Fatalf("a second flock: %v, want EWOULDBLOCK", err)
		}
	})
}

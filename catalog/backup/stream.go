// The forms of a backup: a tar stream (NewTarSink, NewTarSource) or a
// directory (NewDirSink, NewDirSource), and the staged writes into a new
// directory that a directory sink and Restore share.

package backup

import (
	"archive/tar"
	"crypto/sha256"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/latent-node/latent-node/catalog"
)

// tarSink writes entries to a tar stream.
type tarSink struct {
	tw  *tar.Writer
	now time.Time
}

// NewTarSink returns a sink writing a tar stream to w; Close it to write
// the stream's end.
func NewTarSink(w io.Writer) interface {
	Sink
	Close() error
} {
	return &tarSink{tw: tar.NewWriter(w), now: time.Unix(0, 0)}
}

func (s *tarSink) Add(name string, size int64, r io.Reader) error {
	hdr := &tar.Header{Typeflag: tar.TypeReg, Name: name, Size: size, Mode: 0o600, ModTime: s.now, Format: tar.FormatPAX}
	if err := s.tw.WriteHeader(hdr); err != nil {
		return errors.Wrapf(err, "catalog: backup %s", name)
	}
	n, err := io.Copy(s.tw, io.LimitReader(r, size))
	if err == nil && n != size {
		err = io.ErrUnexpectedEOF
	}
	return errors.Wrapf(err, "catalog: backup %s", name)
}

func (s *tarSink) Close() error { return errors.Wrap(s.tw.Close(), "catalog: backup") }

// Source yields the entries of a backup in any order.
type Source interface {
	// Next returns the next entry (its name, size and bytes, valid until
	// the next call), or io.EOF after the last.
	Next() (name string, size int64, r io.Reader, err error)
}

type tarSource struct{ tr *tar.Reader }

// NewTarSource reads a backup from a tar stream written by NewTarSink.
func NewTarSource(r io.Reader) Source { return &tarSource{tr: tar.NewReader(r)} }

func (s *tarSource) Next() (string, int64, io.Reader, error) {
	for {
		hdr, err := s.tr.Next()
		if err == io.EOF {
			return "", 0, nil, io.EOF
		}
		if err != nil {
			return "", 0, nil, errors.Mark(errors.Wrap(err, "catalog: read backup stream"), ErrInvalid)
		}
		for k := range hdr.PAXRecords {
			// Go's reader expands a GNU sparse entry to its declared size
			// (about 10^4 times its bytes in the stream); a backup never
			// writes one.
			if strings.HasPrefix(k, "GNU.sparse.") {
				return "", 0, nil, errors.Wrapf(ErrInvalid, "entry %q is a sparse file", hdr.Name)
			}
		}
		switch hdr.Typeflag {
		case tar.TypeDir:
			continue
		case tar.TypeReg:
			return hdr.Name, hdr.Size, s.tr, nil
		}
		return "", 0, nil, errors.Wrapf(ErrInvalid, "entry %q is not a regular file", hdr.Name)
	}
}

// dirSource reads a backup directory written by a DirSink.
type dirSource struct {
	root  string
	names []string
	cur   *os.File
}

// NewDirSource reads a backup from a directory written by NewDirSink.
func NewDirSource(dir string) (interface {
	Source
	Close() error
}, error) {
	var names []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		if !d.Type().IsRegular() {
			return errors.Wrapf(ErrInvalid, "entry %q is not a regular file", filepath.ToSlash(rel))
		}
		names = append(names, filepath.ToSlash(rel))
		return nil
	})
	if err != nil {
		if errors.Is(err, ErrInvalid) {
			return nil, err
		}
		return nil, errors.Wrapf(err, "catalog: read backup %s", dir)
	}
	// The manifest first, then the signature, as a tar stream has them.
	rank := func(name string) int {
		switch name {
		case ManifestName:
			return 0
		case SignatureName:
			return 1
		}
		return 2
	}
	slices.SortStableFunc(names, func(a, b string) int { return rank(a) - rank(b) })
	return &dirSource{root: dir, names: names}, nil
}

func (s *dirSource) Next() (string, int64, io.Reader, error) {
	_ = s.Close()
	if len(s.names) == 0 {
		return "", 0, nil, io.EOF
	}
	name := s.names[0]
	s.names = s.names[1:]
	f, err := os.Open(filepath.Join(s.root, filepath.FromSlash(name)))
	if err != nil {
		return "", 0, nil, errors.Wrapf(err, "catalog: read backup entry %s", name)
	}
	fi, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return "", 0, nil, errors.Wrapf(err, "catalog: read backup entry %s", name)
	}
	s.cur = f
	return name, fi.Size(), f, nil
}

func (s *dirSource) Close() error {
	if s.cur == nil {
		return nil
	}
	err := s.cur.Close()
	s.cur = nil
	return errors.Wrap(err, "catalog: read backup")
}

// DirSink writes a backup's entries as files under a new directory; Commit
// makes it appear under its name, Abort removes what was written.
type DirSink struct {
	target, stage string
}

// NewDirSink prepares a backup into dir, which must not exist or be empty.
// Entries are written to a temporary sibling directory renamed to dir by
// Commit, so a failed backup leaves nothing under dir.
func NewDirSink(dir string) (*DirSink, error) {
	stage, err := stageDir(dir)
	if err != nil {
		return nil, err
	}
	return &DirSink{target: dir, stage: stage}, nil
}

// Add writes one entry.
func (s *DirSink) Add(name string, size int64, r io.Reader) error {
	_, err := writeStaged(s.stage, name, size, r)
	return err
}

// Commit renames the written backup to its directory.
func (s *DirSink) Commit() error { return commitStage(s.stage, s.target) }

// Abort removes the entries written so far.
func (s *DirSink) Abort() { _ = os.RemoveAll(s.stage) }

// stageDir checks that target does not exist or is an empty directory and
// creates a temporary sibling to write into.
func stageDir(target string) (string, error) {
	entries, err := os.ReadDir(target)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return "", errors.Mark(errors.Wrapf(err, "catalog: %s", target), ErrRestoreTarget)
	case len(entries) > 0:
		return "", errors.Wrapf(ErrRestoreTarget, "%s holds %d entries", target, len(entries))
	}
	parent := filepath.Dir(filepath.Clean(target))
	if err := os.MkdirAll(parent, 0o750); err != nil {
		return "", errors.Mark(errors.Wrapf(err, "catalog: create %s", parent), ErrRestoreTarget)
	}
	stage, err := os.MkdirTemp(parent, "."+filepath.Base(filepath.Clean(target))+".partial-")
	if err != nil {
		return "", catalog.MarkStorageFull(errors.Wrapf(err, "catalog: create a directory next to %s", target), "create directory")
	}
	return stage, nil
}

// writeStaged writes entry name of size bytes from r under root, fsyncs it
// and returns its sha256. A short or long entry is ErrInvalid.
func writeStaged(root, name string, size int64, r io.Reader) ([32]byte, error) {
	var sum [32]byte
	p := filepath.Join(root, filepath.FromSlash(name))
	if err := os.MkdirAll(filepath.Dir(p), 0o750); err != nil {
		return sum, catalog.MarkStorageFull(errors.Wrapf(err, "catalog: create %s", filepath.Dir(p)), "create directory")
	}
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		if errors.Is(err, fs.ErrExist) {
			return sum, errors.Wrapf(ErrInvalid, "entry %s appears twice", name)
		}
		return sum, catalog.MarkStorageFull(errors.Wrapf(err, "catalog: write %s", p), "write backup entry")
	}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(f, h), io.LimitReader(r, size+1))
	if err == nil && n != size {
		err = errors.Wrapf(ErrInvalid, "entry %s has %d bytes, its header says %d", name, n, size)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		if errors.Is(err, ErrInvalid) {
			return sum, err
		}
		return sum, catalog.MarkStorageFull(errors.Wrapf(err, "catalog: write %s", p), "write backup entry")
	}
	h.Sum(sum[:0])
	return sum, nil
}

// commitStage fsyncs the staged tree's directories and renames stage to
// target (replacing target if it is an empty directory; the result has the
// staged directory's mode, 0700).
func commitStage(stage, target string) error {
	err := filepath.WalkDir(stage, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		return catalog.SyncDir(p)
	})
	if err != nil {
		return err
	}
	// os.Rename refuses to replace a directory, even an empty one: remove
	// it first (os.Remove fails on a directory that is not empty).
	if err := os.Remove(target); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return errors.Mark(errors.Wrapf(err, "catalog: replace %s", target), ErrRestoreTarget)
	}
	if err := os.Rename(stage, target); err != nil {
		return errors.Mark(errors.Wrapf(err, "catalog: rename %s to %s", stage, target), ErrRestoreTarget)
	}
	return catalog.SyncDir(filepath.Dir(filepath.Clean(target)))
}

// layoutRoot is a data directory (or a staged one) whose files are named
// by their paths in the catalog's layout.
type layoutRoot string

// path is the host path of rel, a slash-separated path of the layout.
func (root layoutRoot) path(rel string) string {
	return filepath.Join(string(root), filepath.FromSlash(rel))
}

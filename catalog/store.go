// diskStore: atomic and bulk writes under the data directory, artifact
// staging and reads, record encoding, and the storage-full
// classification (MarkStorageFull).

package catalog

import (
	"bytes"
	"crypto/sha256"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/cockroachdb/errors"

	"github.com/latent-node/latent-node/vocab"
)

// Sentinels of the store.
var (
	// ErrArtifactNotFound: no artifact with the digest was uploaded.
	ErrArtifactNotFound = errors.New("catalog: artifact not found")
	// ErrDigestMismatch: uploaded bytes do not hash to the claimed digest.
	ErrDigestMismatch = errors.New("catalog: artifact digest mismatch")
	// ErrArtifactTooLarge: an upload exceeds the configured artifact size bound.
	ErrArtifactTooLarge = errors.New("catalog: artifact too large")
	// ErrCorruptRecord: a persisted record or artifact fails its checksum or
	// does not decode. The error names the file.
	ErrCorruptRecord = errors.New("catalog: corrupt persisted record")
	// ErrStorageFull: a write failed because the file system is full or the
	// quota of the data directory is exhausted (ENOSPC, EDQUOT). Nothing was
	// changed; retrying after space is freed can succeed. The error's message
	// names the operation and the errno text, never a host path; the
	// path-bearing cause stays reachable with errors.Unwrap for logs.
	ErrStorageFull = errors.New("catalog: storage full")
)

// artifactStore is how deploys and Open read module bytes; tests replace it
// to prove pins never do.
type artifactStore interface {
	get(d vocab.Digest, maxBytes int64) ([]byte, error)
}

// tempFile is a file being written before it takes its name. The store
// writes every file through one; wrap is the test seam that injects write
// failures.
type tempFile interface {
	io.Writer
	Sync() error
	Close() error
	Name() string
}

type diskStore struct {
	root string
	// wrap, when set, wraps the file about to be written for what: a
	// record's path under the root ("catalog/services/<hex>.rec", ...) or
	// "artifact-<hex>" for an upload.
	wrap func(f *os.File, what string) tempFile
}

func (s diskStore) path(rel string) string { return filepath.Join(s.root, filepath.FromSlash(rel)) }

func (s diskStore) wrapped(f *os.File, what string) tempFile {
	if s.wrap != nil {
		return s.wrap(f, what)
	}
	return f
}

func (s diskStore) init() error {
	for _, d := range []string{ArtifactsDir, ServicesDir, OwnersDir} {
		if err := os.MkdirAll(s.path(d), 0o750); err != nil {
			return storageErr(errors.Wrapf(err, "catalog: create %s", s.path(d)), "create directory")
		}
		if err := removeTemps(s.path(d)); err != nil {
			return err
		}
	}
	return removeTemps(s.path("catalog"))
}

// removeTemps deletes temporary files left by a write that crashed before its
// rename: they were never part of the catalog.
func removeTemps(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return errors.Wrapf(err, "catalog: read %s", dir)
	}
	for _, e := range entries {
		if IsTemp(e.Name()) {
			if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
				return errors.Wrapf(err, "catalog: remove stale %s", filepath.Join(dir, e.Name()))
			}
		}
	}
	return nil
}

// stagedArtifact is an upload written and verified in a temporary file of
// the artifact directory, not yet under its name.
type stagedArtifact struct {
	tmp  string
	size int64
}

// stageArtifact writes r to a temporary file, verifying its size bound and
// its digest, and fsyncs it. The caller commits or discards it.
func (s diskStore) stageArtifact(d vocab.Digest, r io.Reader, maxBytes int64) (stagedArtifact, error) {
	dir := s.path(ArtifactsDir)
	f, err := os.CreateTemp(dir, tmpPrefix+"artifact-*")
	if err != nil {
		return stagedArtifact{}, storageErr(errors.Wrap(err, "catalog: store artifact"), "store artifact")
	}
	tmp := s.wrapped(f, "artifact-"+d.Hex())
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(tmp, h), io.LimitReader(r, maxBytes+1))
	if err == nil && n > maxBytes {
		err = errors.Wrapf(ErrArtifactTooLarge, "larger than %d bytes", maxBytes)
	}
	if err == nil && vocab.DigestOf([32]byte(h.Sum(nil))) != d {
		err = ErrDigestMismatch
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(tmp.Name())
		return stagedArtifact{}, storageErr(errors.Wrap(err, "catalog: store artifact"), "store artifact")
	}
	return stagedArtifact{tmp: tmp.Name(), size: n}, nil
}

// commitArtifact renames a staged artifact to its digest's name (replacing
// an identical copy, or a damaged one) and fsyncs the directory.
func (s diskStore) commitArtifact(st stagedArtifact, d vocab.Digest) error {
	dir := s.path(ArtifactsDir)
	if err := os.Rename(st.tmp, filepath.Join(dir, d.Hex())); err != nil {
		s.discard(st)
		return storageErr(errors.Wrap(err, "catalog: store artifact"), "store artifact")
	}
	return storageErr(SyncDir(dir), "store artifact")
}

func (s diskStore) discard(st stagedArtifact) { _ = os.Remove(st.tmp) }

func (s diskStore) artifactPath(d vocab.Digest) string {
	return filepath.Join(s.path(ArtifactsDir), d.Hex())
}

func (s diskStore) get(d vocab.Digest, maxBytes int64) ([]byte, error) {
	name := s.artifactPath(d)
	f, err := os.Open(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, ErrArtifactNotFound
	}
	if err != nil {
		return nil, errors.Wrapf(err, "catalog: open %s", name)
	}
	defer func() { _ = f.Close() }()
	data, err := io.ReadAll(io.LimitReader(f, maxBytes+1))
	if err != nil {
		return nil, errors.Wrapf(err, "catalog: read %s", name)
	}
	if int64(len(data)) > maxBytes || vocab.DigestOf(sha256.Sum256(data)) != d {
		return nil, errors.Wrapf(ErrCorruptRecord, "%s does not match its digest", name)
	}
	return data, nil
}

// writeAtomic replaces the file rel with data: it writes and fsyncs the
// directory's spare file, swaps it with rel (renameat2 RENAME_EXCHANGE, or
// a rename where rel does not exist yet or the file system cannot swap),
// and fsyncs the directory. A restart after a crash sees the old or the
// new file whole, and so does a reader that opens and reads between two
// writes. Swapping keeps the old version as the next spare: replacing a
// record allocates and frees no inode (on ext4 without a journal, creating
// a file after many recent deletions scans them all); so a reader that
// still holds the old file when the next write truncates the spare can
// read it torn (catalog/backup reads again when that happens). Writes to one directory are serialized by the caller (the
// catalog's lock).
func (s diskStore) writeAtomic(rel string, data []byte) error {
	name := s.path(rel)
	dir := filepath.Dir(name)
	spare := filepath.Join(dir, spareName)
	f, err := os.OpenFile(spare, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return storageErr(errors.Wrapf(err, "catalog: write %s", name), "write record")
	}
	tmp := s.wrapped(f, rel)
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = exchange(spare, name)
	}
	if err == nil {
		err = SyncDir(dir)
	}
	return storageErr(errors.Wrapf(err, "catalog: write %s", name), "write record")
}

// spareName is the spare file of a record directory (a temporary file:
// Open removes it, listings skip it).
const spareName = tmpPrefix + "spare"

// bulkWrite is one file of writeBulk: its path and what makes its bytes,
// called when the file is written (a listing of 100,000 records never
// holds all their bytes at once).
type bulkWrite struct {
	rel  string
	data func() ([]byte, error)
}

// writeBulk replaces many files at once, for a full listing of the
// catalog: every file is written to a temporary file of its own, all of
// them are made durable together (syncfs on Linux, one flush for the file
// system instead of one per file), then each is renamed over its name and
// the directories are fsynced. A failure before the renames changes
// nothing; each rename is atomic, so readers and a restart see every file
// old or new, whole.
func (s diskStore) writeBulk(writes []bulkWrite) error {
	type staged struct{ tmp, name string }
	var done []staged
	cleanup := func() {
		for _, st := range done {
			_ = os.Remove(st.tmp)
		}
	}
	dirs := map[string]bool{}
	for _, w := range writes {
		name := s.path(w.rel)
		dir := filepath.Dir(name)
		dirs[dir] = true
		f, err := os.CreateTemp(dir, tmpPrefix+"bulk-*")
		if err != nil {
			cleanup()
			return storageErr(errors.Wrapf(err, "catalog: write %s", name), "write record")
		}
		done = append(done, staged{tmp: f.Name(), name: name})
		tmp := s.wrapped(f, w.rel)
		var data []byte
		if data, err = w.data(); err == nil {
			_, err = tmp.Write(data)
		}
		if err == nil && !syncfsAvailable {
			err = tmp.Sync()
		}
		if cerr := tmp.Close(); err == nil {
			err = cerr
		}
		if err != nil { // files are closed as they are written: a listing can be larger than the open-file limit
			cleanup()
			return storageErr(errors.Wrapf(err, "catalog: write %s", name), "write record")
		}
	}
	if err := syncfs(s.root); err != nil { // one file system: the data directory's
		cleanup()
		return storageErr(errors.Wrap(err, "catalog: write records"), "write record")
	}
	for i, st := range done {
		if err := os.Rename(st.tmp, st.name); err != nil {
			for _, rest := range done[i:] {
				_ = os.Remove(rest.tmp)
			}
			return storageErr(errors.Wrapf(err, "catalog: write %s", st.name), "write record")
		}
	}
	for dir := range dirs {
		if err := SyncDir(dir); err != nil {
			return storageErr(err, "write record")
		}
	}
	return nil
}

// removeAll removes the files rel and fsyncs their directories once.
func (s diskStore) removeAll(rels []string) error {
	dirs := map[string]bool{}
	for _, rel := range rels {
		name := s.path(rel)
		if err := os.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return errors.Wrapf(err, "catalog: remove %s", name)
		}
		dirs[filepath.Dir(name)] = true
	}
	for dir := range dirs {
		if err := SyncDir(dir); err != nil {
			return err
		}
	}
	return nil
}

func (s diskStore) remove(rel string) error { return s.removeAll([]string{rel}) }

// mkdir creates the directory rel (and its parents) and fsyncs its parent.
func (s diskStore) mkdir(rel string) error {
	name := s.path(rel)
	if _, err := os.Stat(name); err == nil {
		return nil
	}
	if err := os.MkdirAll(name, 0o750); err != nil {
		return storageErr(errors.Wrapf(err, "catalog: create %s", name), "create directory")
	}
	return storageErr(SyncDir(filepath.Dir(name)), "create directory")
}

// SyncDir fsyncs the directory dir, so that the names created, renamed or
// removed in it are durable (the backup package restores with it too).
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return errors.Wrapf(err, "catalog: open %s", dir)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return errors.Wrapf(err, "catalog: sync %s", dir)
}

// storageFullError is a write that failed for lack of space. Its message
// names the operation and the errno, never the path; the path-bearing cause
// is its Unwrap, for logs.
type storageFullError struct {
	op    string
	errno syscall.Errno
	cause error
}

func (e *storageFullError) Error() string {
	return "catalog: storage full: " + e.op + ": " + e.errno.Error()
}

func (e *storageFullError) Unwrap() error { return e.cause }

// MarkStorageFull returns err as an error marked ErrStorageFull if it was
// caused by ENOSPC or EDQUOT: its message is "catalog: storage full: " + op
// + ": " + the errno's text, without the host paths err may name (err stays
// its Unwrap, for logs). Any other err is returned unchanged, nil as nil.
// The catalog classifies its own writes with it; other layers that write
// under the data directory (a compile cache) may use it too.
func MarkStorageFull(err error, op string) error { return storageErr(err, op) }

func storageErr(err error, op string) error {
	if err == nil {
		return nil
	}
	var errno syscall.Errno
	if !errors.As(err, &errno) || (errno != syscall.ENOSPC && errno != syscall.EDQUOT) {
		return err
	}
	return errors.Mark(&storageFullError{op: op, errno: errno, cause: err}, ErrStorageFull)
}

// Record encoding. A record file is one header line and a JSON payload:
//
//	latent-record v1 <kind> <payload length> sha256:<hex of the payload>\n<payload>
//
// Decoding checks the header, the exact length, the checksum, then decodes the
// payload strictly (unknown fields refused).
const recordMagic = "latent-record v1"

func encodeRecord(kind string, payload []byte) []byte {
	sum := sha256.Sum256(payload)
	var b bytes.Buffer
	b.WriteString(recordMagic + " " + kind + " " + strconv.Itoa(len(payload)) + " " + string(vocab.DigestOf(sum)) + "\n")
	b.Write(payload)
	return b.Bytes()
}

func decodeRecord(kind string, data []byte, v any) error {
	nl := bytes.IndexByte(data, '\n')
	if nl < 0 || nl > 200 {
		return errors.New("missing record header")
	}
	fields := strings.Split(string(data[:nl]), " ")
	if len(fields) != 5 || fields[0]+" "+fields[1] != recordMagic {
		return errors.New("malformed record header")
	}
	if fields[2] != kind {
		return errors.New("record of another kind")
	}
	payload := data[nl+1:]
	n, err := strconv.Atoi(fields[3])
	if err != nil || n != len(payload) || strconv.Itoa(n) != fields[3] {
		return errors.New("record length does not match (truncated or extended)")
	}
	if d, err := vocab.ParseDigest(fields[4]); err != nil || d != vocab.DigestOf(sha256.Sum256(payload)) {
		return errors.New("record checksum does not match")
	}
	return errors.Wrap(vocab.DecodeStrict(payload, v), "record payload")
}

package catalog

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/latent-node/latent-node/vocab"
)

// Sentinels of backup and restore.
var (
	// ErrBackupInvalid: a backup is malformed, incomplete or tampered with
	// (an entry missing from or not matching its manifest, an artifact not
	// matching its digest, a record that does not decode). The error names
	// the entry. Restore wrote nothing.
	ErrBackupInvalid = errors.New("catalog: invalid backup")
	// ErrRestoreTarget: the restore target is not an empty directory (or
	// cannot be created). Restore wrote nothing.
	ErrRestoreTarget = errors.New("catalog: restore target is not an empty directory")
	// ErrBackupRace: the catalog kept changing while Backup read it (a
	// generation moved on every attempt). Retrying later can succeed.
	ErrBackupRace = errors.New("catalog: catalog changed during every backup attempt")
	// ErrBackupSignature: Restore was given a signing key and the backup is
	// unsigned or its signature does not match (written with another key,
	// or the manifest was changed). Restore wrote nothing.
	ErrBackupSignature = errors.New("catalog: backup signature missing or wrong")
)

// BackupManifestName is the backup entry that lists every other entry with
// its size and sha256. It is the first entry of a backup: Restore bounds
// and checks every other entry against it as it arrives.
const BackupManifestName = "BACKUP-MANIFEST"

// BackupSignatureName is the entry after the manifest in a signed backup:
// "hmac-sha256:" and the hex HMAC-SHA256 of the manifest's bytes under the
// operator's key, and a newline. The manifest names every other entry's
// sha256 and size, so the signature covers the whole backup.
const BackupSignatureName = "BACKUP-SIGNATURE"

// maxBackupManifestBytes bounds the manifest Restore reads into memory.
const maxBackupManifestBytes = 64 << 20

// signaturePrefix starts the signature entry.
const signaturePrefix = "hmac-sha256:"

// MinSignKeyBytes is the shortest key a backup is signed with.
const MinSignKeyBytes = 32

// backupMagic is the first line of the manifest.
const backupMagic = "latent-node backup v1"

// backupAttempts bounds how often Backup starts over because a generation
// was issued while it read the records.
const backupAttempts = 5

// BackupStats says what a backup holds.
type BackupStats struct {
	// Generation is the catalog generation the backup is consistent with.
	Generation vocab.Generation
	// Services, Owners and Artifacts count the records and artifacts.
	Services, Owners, Artifacts int
	// Bytes is the size of every entry but the manifest.
	Bytes int64
}

// BackupSink receives the entries of a backup, each once, the manifest
// first (then the signature of a signed backup).
type BackupSink interface {
	// Add stores the entry name (a slash-separated relative path) of size
	// bytes read from r.
	Add(name string, size int64, r io.Reader) error
}

// tarSink writes entries to a tar stream.
type tarSink struct {
	tw  *tar.Writer
	now time.Time
}

// NewTarSink returns a sink writing a tar stream to w; Close it to write
// the stream's end.
func NewTarSink(w io.Writer) interface {
	BackupSink
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

// backupEntry is one entry listed in a manifest.
type backupEntry struct {
	name string
	size int64
	sum  [32]byte
}

// snapshotFiles is what one consistent read of a data directory found.
type snapshotFiles struct {
	generation vocab.Generation
	records    map[string][]byte   // state, service and owner records by entry name
	artifacts  map[string]*os.File // open artifacts by entry name
	services   int
	owners     int
}

func (s *snapshotFiles) close() {
	for _, f := range s.artifacts {
		_ = f.Close()
	}
}

// BackupOptions configure a backup.
type BackupOptions struct {
	// SignKey, when set (at least MinSignKeyBytes), signs the backup: an
	// entry BackupSignatureName follows the manifest. Restore with the same
	// key (RestoreOptions.SignKey) accepts only a backup signed with it.
	SignKey []byte
}

// Backup is BackupWith without a signature.
func Backup(ctx context.Context, dataDir string, sink BackupSink) (BackupStats, error) {
	return BackupWith(ctx, dataDir, sink, BackupOptions{})
}

// BackupWith writes a consistent copy of the catalog under dataDir to sink:
// BackupManifestName first, listing each entry's size and sha256 (an
// artifact's is its digest), the signature when opts.SignKey is set, then
// the state record, every service record, every ownership record and
// every artifact an ownership record names. The compile cache is not
// included (a restart recompiles). Backup only reads: it works while a
// node serves from dataDir and takes no lock. It reads the state record,
// the other records, opens every artifact (an open file keeps its bytes
// even if garbage collection removes it afterwards), then reads the state
// record again and checks that the service records are still the files it
// read; if a deploy or delete changed them in between it starts over (at
// most a few times, then ErrBackupRace). The copy is therefore
// the catalog at one generation. Every artifact is verified against its
// digest while it is copied; a mismatch is ErrCorruptRecord (the sink then
// holds a backup that Restore refuses).
func BackupWith(ctx context.Context, dataDir string, sink BackupSink, opts BackupOptions) (BackupStats, error) {
	if opts.SignKey != nil && len(opts.SignKey) < MinSignKeyBytes {
		return BackupStats{}, errors.Newf("catalog: a backup signing key has at least %d bytes", MinSignKeyBytes)
	}
	var snap *snapshotFiles
	for attempt := 0; ; attempt++ {
		if attempt == backupAttempts {
			return BackupStats{}, ErrBackupRace
		}
		if err := ctx.Err(); err != nil {
			return BackupStats{}, errors.Wrap(err, "catalog: backup")
		}
		s, again, err := readSnapshot(diskStore{root: dataDir})
		if err != nil {
			return BackupStats{}, err
		}
		if !again {
			snap = s
			break
		}
	}
	defer snap.close()
	st := BackupStats{Generation: snap.generation, Services: snap.services, Owners: snap.owners, Artifacts: len(snap.artifacts)}
	// The manifest first: a record's sha256 from its bytes, an artifact's
	// from its name (verified while it is copied below).
	recordNames, artifactNames := slices.Sorted(mapKeys(snap.records)), slices.Sorted(mapKeys(snap.artifacts))
	var listed []backupEntry
	for _, name := range recordNames {
		data := snap.records[name]
		listed = append(listed, backupEntry{name: name, size: int64(len(data)), sum: sha256.Sum256(data)})
		st.Bytes += int64(len(data))
	}
	for _, name := range artifactNames {
		fi, err := snap.artifacts[name].Stat()
		if err != nil {
			return BackupStats{}, errors.Wrapf(err, "catalog: backup %s", name)
		}
		e := backupEntry{name: name, size: fi.Size()}
		if _, err := hex.Decode(e.sum[:], []byte(pathBase(name))); err != nil {
			return BackupStats{}, errors.Wrapf(ErrCorruptRecord, "catalog: artifact file %s", name)
		}
		listed = append(listed, e)
		st.Bytes += fi.Size()
	}
	m := encodeBackupManifest(snap.generation, listed)
	if err := sink.Add(BackupManifestName, int64(len(m)), bytes.NewReader(m)); err != nil {
		return BackupStats{}, err
	}
	if opts.SignKey != nil {
		sig := signManifest(opts.SignKey, m)
		if err := sink.Add(BackupSignatureName, int64(len(sig)), bytes.NewReader(sig)); err != nil {
			return BackupStats{}, err
		}
	}
	for _, name := range recordNames {
		data := snap.records[name]
		if err := sink.Add(name, int64(len(data)), bytes.NewReader(data)); err != nil {
			return BackupStats{}, err
		}
	}
	for i, name := range artifactNames {
		if err := ctx.Err(); err != nil {
			return BackupStats{}, errors.Wrap(err, "catalog: backup")
		}
		want := listed[len(recordNames)+i]
		h := sha256.New()
		if err := sink.Add(name, want.size, io.TeeReader(snap.artifacts[name], h)); err != nil {
			return BackupStats{}, err
		}
		var sum [32]byte
		h.Sum(sum[:0])
		if sum != want.sum {
			return BackupStats{}, errors.Wrapf(ErrCorruptRecord, "catalog: %s does not match its digest",
				filepath.Join(dataDir, filepath.FromSlash(name)))
		}
	}
	return st, nil
}

// signManifest is the signature entry of manifest under key.
func signManifest(key, manifest []byte) []byte {
	mac := hmac.New(sha256.New, key)
	mac.Write(manifest)
	return []byte(signaturePrefix + hex.EncodeToString(mac.Sum(nil)) + "\n")
}

// readSnapshot reads the records and opens the artifacts of the data
// directory. again reports that the catalog changed while it read (the
// caller starts over); the snapshot is then nil.
func readSnapshot(store diskStore) (_ *snapshotFiles, again bool, err error) {
	snap := &snapshotFiles{records: map[string][]byte{}, artifacts: map[string]*os.File{}}
	defer func() {
		if err != nil || again {
			snap.close()
		}
	}()
	gen1, state, err := readGeneration(store)
	if err != nil {
		return nil, false, err
	}
	if state != nil {
		snap.records[stateFile] = state
	}
	// Services: a record names artifacts its tenant owns.
	needed := map[vocab.Digest]string{}
	services, err := readDirNames(store.path(servicesDir))
	if err != nil {
		return nil, false, err
	}
	// A deploy writes only its service's record (through a new file renamed
	// over the old one), so the records read are checked again at the end:
	// the same names, each still the file that was read.
	read := map[string]fileID{}
	maxGen := gen1
	for _, file := range services {
		name := servicesDir + "/" + file
		data, id, err := readRecordFile(store.path(name))
		if errors.Is(err, fs.ErrNotExist) {
			return nil, true, nil // deleted while listed: a generation moved on
		}
		if err != nil {
			return nil, false, err
		}
		var rec serviceRecord
		if err := decodeRecord("service", data, &rec); err != nil {
			return nil, false, errors.Mark(errors.Wrapf(err, "catalog: %s", store.path(name)), ErrCorruptRecord)
		}
		for _, r := range rec.Manifest.Revisions {
			needed[r.Artifact] = name
		}
		snap.records[name] = data
		snap.services++
		read[file] = id
		maxGen = max(maxGen, rec.Generation)
	}
	// Ownership records, and the artifact each one names.
	tenants, err := readDirNames(store.path(ownersDir))
	if err != nil {
		return nil, false, err
	}
	for _, t := range tenants {
		files, err := readDirNames(store.path(ownersDir + "/" + t))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, false, err
		}
		for _, file := range files {
			name := ownersDir + "/" + t + "/" + file
			data, err := readBounded(store.path(name), 4096)
			if errors.Is(err, fs.ErrNotExist) {
				continue // collected while listed
			}
			if err != nil {
				return nil, false, err
			}
			var rec ownerRecord
			if err := decodeRecord("owner", data, &rec); err != nil {
				return nil, false, errors.Mark(errors.Wrapf(err, "catalog: %s", store.path(name)), ErrCorruptRecord)
			}
			if _, err := vocab.ParseDigest(string(rec.Digest)); err != nil {
				return nil, false, errors.Wrapf(ErrCorruptRecord, "catalog: %s names an invalid digest", store.path(name))
			}
			art := artifactsDir + "/" + rec.Digest.Hex()
			if snap.artifacts[art] == nil {
				f, err := os.Open(store.path(art))
				if errors.Is(err, fs.ErrNotExist) {
					// Collected after its record was read: an ownership
					// that no longer exists, unless a service uses it.
					continue
				}
				if err != nil {
					return nil, false, errors.Wrapf(err, "catalog: open %s", store.path(art))
				}
				snap.artifacts[art] = f
			}
			snap.records[name] = data
			snap.owners++
		}
	}
	for d := range needed {
		if snap.artifacts[artifactsDir+"/"+d.Hex()] == nil {
			return nil, true, nil // replaced and collected while read: start over
		}
	}
	gen2, _, err := readGeneration(store)
	if err != nil {
		return nil, false, err
	}
	if gen1 != gen2 {
		return nil, true, nil
	}
	if changed, err := recordsChanged(store, read); err != nil || changed {
		return nil, changed, err
	}
	snap.generation = maxGen
	return snap, false, nil
}

// fileID identifies one version of a record file: a write renames a new
// file (a new inode) over the old one.
type fileID struct {
	dev, ino uint64
	size     int64
	mtime    int64
}

func idOf(fi os.FileInfo) fileID {
	id := fileID{size: fi.Size(), mtime: fi.ModTime().UnixNano()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		id.dev, id.ino = uint64(st.Dev), uint64(st.Ino) //nolint:unconvert // Dev is uint32 on some platforms
	}
	return id
}

// readRecordFile reads a record file (at most maxRecordBytes) and returns
// the identity of the file it read.
func readRecordFile(name string) ([]byte, fileID, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, fileID{}, errors.Wrapf(err, "catalog: open %s", name)
	}
	defer func() { _ = f.Close() }()
	fi, err := f.Stat()
	if err != nil {
		return nil, fileID{}, errors.Wrapf(err, "catalog: stat %s", name)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxRecordBytes+1))
	if err != nil {
		return nil, fileID{}, errors.Wrapf(err, "catalog: read %s", name)
	}
	if int64(len(data)) > maxRecordBytes {
		return nil, fileID{}, errors.Wrapf(ErrCorruptRecord, "catalog: %s is larger than %d bytes", name, maxRecordBytes)
	}
	return data, idOf(fi), nil
}

// recordsChanged reports whether the service records are no longer
// exactly the files read.
func recordsChanged(store diskStore, read map[string]fileID) (bool, error) {
	now, err := readDirNames(store.path(servicesDir))
	if err != nil {
		return false, err
	}
	if len(now) != len(read) {
		return true, nil
	}
	for _, file := range now {
		want, ok := read[file]
		if !ok {
			return true, nil
		}
		fi, err := os.Lstat(store.path(servicesDir + "/" + file))
		if errors.Is(err, fs.ErrNotExist) {
			return true, nil
		}
		if err != nil {
			return false, errors.Wrapf(err, "catalog: stat %s", file)
		}
		if idOf(fi) != want {
			return true, nil
		}
	}
	return false, nil
}

// readGeneration reads catalog/state.rec: the generation and the record's
// bytes (nil and 0 when the catalog never issued one).
func readGeneration(store diskStore) (vocab.Generation, []byte, error) {
	data, err := readBounded(store.path(stateFile), 4096)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil, nil
	}
	if err != nil {
		return 0, nil, err
	}
	var st stateRecord
	if err := decodeRecord("state", data, &st); err != nil {
		return 0, nil, errors.Mark(errors.Wrapf(err, "catalog: %s", store.path(stateFile)), ErrCorruptRecord)
	}
	return st.Generation, data, nil
}

// readDirNames lists dir's entries, leaving out temporary files.
func readDirNames(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, errors.Wrapf(err, "catalog: read %s", dir)
	}
	var names []string
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), tmpPrefix) {
			names = append(names, e.Name())
		}
	}
	return names, nil
}

func encodeBackupManifest(gen vocab.Generation, entries []backupEntry) []byte {
	var b bytes.Buffer
	b.WriteString(backupMagic + "\n")
	b.WriteString("generation " + strconv.FormatUint(uint64(gen), 10) + "\n")
	for _, e := range entries {
		b.WriteString("sha256:" + hex.EncodeToString(e.sum[:]) + " " + strconv.FormatInt(e.size, 10) + " " + e.name + "\n")
	}
	return b.Bytes()
}

func decodeBackupManifest(data []byte) (map[string]backupEntry, error) {
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 4096), 4096)
	entries := map[string]backupEntry{}
	for i := 0; sc.Scan(); i++ {
		line := sc.Text()
		switch {
		case i == 0:
			if line != backupMagic {
				return nil, errors.Newf("not a backup manifest (first line %q)", line)
			}
			continue
		case i == 1:
			g, ok := strings.CutPrefix(line, "generation ")
			if _, err := strconv.ParseUint(g, 10, 64); !ok || err != nil {
				return nil, errors.Newf("line 2: want \"generation N\"")
			}
			continue
		}
		f := strings.Split(line, " ")
		if len(f) != 3 {
			return nil, errors.Newf("line %d: want \"sha256:HEX SIZE NAME\"", i+1)
		}
		d, err := vocab.ParseDigest(f[0])
		size, serr := strconv.ParseInt(f[1], 10, 64)
		if err != nil || serr != nil || size < 0 || backupEntryKind(f[2]) == "" {
			return nil, errors.Newf("line %d: malformed entry", i+1)
		}
		if _, dup := entries[f[2]]; dup {
			return nil, errors.Newf("line %d: %s listed twice", i+1, f[2])
		}
		var sum [32]byte
		if _, err := hex.Decode(sum[:], []byte(d.Hex())); err != nil {
			return nil, errors.Newf("line %d: malformed digest", i+1)
		}
		entries[f[2]] = backupEntry{name: f[2], size: size, sum: sum}
	}
	if err := sc.Err(); err != nil {
		return nil, errors.Wrap(err, "manifest")
	}
	return entries, nil
}

// backupEntryKind classifies an entry name by the data directory's layout:
// "state", "service", "owner", "artifact", or "" for a name that is none
// of them (refused).
func backupEntryKind(name string) string {
	parts := strings.Split(name, "/")
	hexRec := func(s string) bool {
		h, ok := strings.CutSuffix(s, ".rec")
		return ok && len(h) == 64 && vocab.IsLowerHex(h)
	}
	switch {
	case name == stateFile:
		return "state"
	case len(parts) == 3 && parts[0]+"/"+parts[1] == servicesDir && hexRec(parts[2]):
		return "service"
	case len(parts) == 4 && parts[0]+"/"+parts[1] == ownersDir && len(parts[2]) == 64 && vocab.IsLowerHex(parts[2]) && hexRec(parts[3]):
		return "owner"
	case len(parts) == 3 && parts[0]+"/"+parts[1] == artifactsDir && len(parts[2]) == 64 && vocab.IsLowerHex(parts[2]):
		return "artifact"
	}
	return ""
}

func pathBase(name string) string { return name[strings.LastIndexByte(name, '/')+1:] }

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// BackupSource yields the entries of a backup in any order.
type BackupSource interface {
	// Next returns the next entry (its name, size and bytes, valid until
	// the next call), or io.EOF after the last.
	Next() (name string, size int64, r io.Reader, err error)
}

type tarSource struct{ tr *tar.Reader }

// NewTarSource reads a backup from a tar stream written by NewTarSink.
func NewTarSource(r io.Reader) BackupSource { return &tarSource{tr: tar.NewReader(r)} }

func (s *tarSource) Next() (string, int64, io.Reader, error) {
	for {
		hdr, err := s.tr.Next()
		if err == io.EOF {
			return "", 0, nil, io.EOF
		}
		if err != nil {
			return "", 0, nil, errors.Mark(errors.Wrap(err, "catalog: read backup stream"), ErrBackupInvalid)
		}
		for k := range hdr.PAXRecords {
			// Go's reader expands a GNU sparse entry to its declared size
			// (about 10^4 times its bytes in the stream); a backup never
			// writes one.
			if strings.HasPrefix(k, "GNU.sparse.") {
				return "", 0, nil, errors.Wrapf(ErrBackupInvalid, "entry %q is a sparse file", hdr.Name)
			}
		}
		switch hdr.Typeflag {
		case tar.TypeDir:
			continue
		case tar.TypeReg:
			return hdr.Name, hdr.Size, s.tr, nil
		}
		return "", 0, nil, errors.Wrapf(ErrBackupInvalid, "entry %q is not a regular file", hdr.Name)
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
	BackupSource
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
			return errors.Wrapf(ErrBackupInvalid, "entry %q is not a regular file", filepath.ToSlash(rel))
		}
		names = append(names, filepath.ToSlash(rel))
		return nil
	})
	if err != nil {
		if errors.Is(err, ErrBackupInvalid) {
			return nil, err
		}
		return nil, errors.Wrapf(err, "catalog: read backup %s", dir)
	}
	// The manifest first, then the signature, as a tar stream has them.
	rank := func(name string) int {
		switch name {
		case BackupManifestName:
			return 0
		case BackupSignatureName:
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
		return "", storageErr(errors.Wrapf(err, "catalog: create a directory next to %s", target), "create directory")
	}
	return stage, nil
}

// writeStaged writes entry name of size bytes from r under root, fsyncs it
// and returns its sha256. A short or long entry is ErrBackupInvalid.
func writeStaged(root, name string, size int64, r io.Reader) ([32]byte, error) {
	var sum [32]byte
	p := filepath.Join(root, filepath.FromSlash(name))
	if err := os.MkdirAll(filepath.Dir(p), 0o750); err != nil {
		return sum, storageErr(errors.Wrapf(err, "catalog: create %s", filepath.Dir(p)), "create directory")
	}
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		if errors.Is(err, fs.ErrExist) {
			return sum, errors.Wrapf(ErrBackupInvalid, "entry %s appears twice", name)
		}
		return sum, storageErr(errors.Wrapf(err, "catalog: write %s", p), "write backup entry")
	}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(f, h), io.LimitReader(r, size+1))
	if err == nil && n != size {
		err = errors.Wrapf(ErrBackupInvalid, "entry %s has %d bytes, its header says %d", name, n, size)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		if errors.Is(err, ErrBackupInvalid) {
			return sum, err
		}
		return sum, storageErr(errors.Wrapf(err, "catalog: write %s", p), "write backup entry")
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
		return syncDir(p)
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
	return syncDir(filepath.Dir(filepath.Clean(target)))
}

// RestoreOptions bound a restore.
type RestoreOptions struct {
	// MaxArtifactBytes bounds one artifact entry (default
	// DefaultMaxArtifactBytes).
	MaxArtifactBytes int64
	// Quotas are the catalog options whose bounds the restored catalog
	// must meet, as a deploy would (zero fields: the defaults): MaxServices,
	// MaxServicesPerTenant, MaxArtifactsPerTenant, MaxArtifactBytesPerTenant,
	// MaxDeployedBytesPerTenant; Clock tells the time ownership records
	// may not be stamped beyond (by more than maxUploadSkew).
	Quotas Options
	// Tenants, when not nil, are the only tenants whose records a backup
	// may hold (the configuration's tenants).
	Tenants []vocab.TenantID
	// SignKey, when set, requires a backup signed with it (BackupOptions):
	// an unsigned or otherwise signed backup is ErrBackupSignature, refused
	// before any entry but the manifest is read.
	SignKey []byte
	// Verify, if set, is called with the staged data directory once every
	// entry is verified, before it is renamed to the target: it should open
	// the catalog there (Open re-verifies every record and inspects every
	// module) to prove the result loads. An error aborts the restore.
	Verify func(ctx context.Context, stagedDir string) error
}

// maxUploadSkew is how far in the future (by RestoreOptions.Quotas.Clock)
// an ownership record's upload time may be: clocks of the node that wrote
// the backup and of this one differ a little; a record far in the future
// would never be collected.
const maxUploadSkew = time.Hour

// maxSmallRecordBytes bounds a state or ownership record (as the catalog
// reads them).
const maxSmallRecordBytes = 4096

// RestoreStats says what a restore wrote.
type RestoreStats struct {
	Generation                  vocab.Generation
	Services, Owners, Artifacts int
	Bytes                       int64
}

// Restore writes the backup read from src as the data directory target,
// which must not exist or be an empty directory (else ErrRestoreTarget).
//
// The backup's first entry must be its manifest (BackupManifestName). It is
// decoded and bounded before anything is written: at most
// Quotas.MaxServices service records, at most Quotas.MaxArtifactsPerTenant
// ownership records per tenant (of opts.Tenants when set), no more
// artifacts than ownership records, each entry within its kind's size
// bound, and the artifacts' total within Quotas.MaxArtifactBytesPerTenant
// per tenant; so the bytes written are at most the sum of the listed
// sizes. With opts.SignKey the signature entry must come next and match.
// Every further entry must be listed, arrive once and have its listed
// size, else the restore stops at once; sparse tar entries are refused.
// Entries are written to a temporary sibling directory while their sha256
// is computed; then every entry must match the manifest (and every listed
// entry be present), every artifact its digest, every record its checksum,
// every ownership record's artifact be present with the recorded size and
// its upload time not in the future; every service's artifacts must be
// owned by the service's own tenant, and each tenant stay within the
// quotas, as a deploy would check them; then opts.Verify runs on the
// staged directory; only then is it renamed to target. On any failure the
// temporary directory is removed and target is untouched. A malformed or
// tampered backup is ErrBackupInvalid naming the entry.
//
// Backups written before the manifest came first (it was the last entry)
// are refused as a tar stream; extracted into a directory they restore
// with NewDirSource, which reads the manifest first.
func Restore(ctx context.Context, src BackupSource, target string, opts RestoreOptions) (RestoreStats, error) {
	if opts.MaxArtifactBytes <= 0 {
		opts.MaxArtifactBytes = DefaultMaxArtifactBytes
	}
	opts.Quotas.setDefaults()
	if opts.SignKey != nil && len(opts.SignKey) < MinSignKeyBytes {
		return RestoreStats{}, errors.Newf("catalog: a backup signing key has at least %d bytes", MinSignKeyBytes)
	}
	// The manifest, bounded, before anything is written.
	name, size, r, err := src.Next()
	if err == io.EOF || err == nil && name != BackupManifestName {
		return RestoreStats{}, errors.WithHint(errors.Wrapf(ErrBackupInvalid, "the first entry must be %s", BackupManifestName),
			"a backup written by an older latent-node has its manifest last: extract the tar stream into a directory and restore from it (--in DIR)")
	}
	if err != nil {
		return RestoreStats{}, err
	}
	if size < 0 || size > maxBackupManifestBytes {
		return RestoreStats{}, errors.Wrapf(ErrBackupInvalid, "%s is too large", name)
	}
	manifest, err := io.ReadAll(io.LimitReader(r, size))
	if err != nil || int64(len(manifest)) != size {
		return RestoreStats{}, errors.Mark(errors.Wrapf(errors.CombineErrors(err, io.ErrUnexpectedEOF), "catalog: read %s", name), ErrBackupInvalid)
	}
	listed, err := decodeBackupManifest(manifest)
	if err != nil {
		return RestoreStats{}, errors.Mark(errors.Wrapf(err, "catalog: %s", BackupManifestName), ErrBackupInvalid)
	}
	if err := boundManifest(listed, opts); err != nil {
		return RestoreStats{}, err
	}
	name, size, r, err = src.Next()
	if err != nil && err != io.EOF {
		return RestoreStats{}, err
	}
	if err == nil && name == BackupSignatureName {
		sig, rerr := io.ReadAll(io.LimitReader(r, min(max(size, 0), 1024)))
		if opts.SignKey != nil && (rerr != nil || !hmac.Equal(sig, signManifest(opts.SignKey, manifest))) {
			return RestoreStats{}, errors.Wrapf(ErrBackupSignature, "%s does not match this key", BackupSignatureName)
		}
		name, size, r, err = src.Next()
		if err != nil && err != io.EOF {
			return RestoreStats{}, err
		}
	} else if opts.SignKey != nil {
		return RestoreStats{}, errors.Wrapf(ErrBackupSignature, "the backup is not signed (no %s after the manifest)", BackupSignatureName)
	}
	stage, err := stageDir(target)
	if err != nil {
		return RestoreStats{}, err
	}
	committed := false
	defer func() {
		if !committed {
			_ = os.RemoveAll(stage)
		}
	}()
	got := map[string]backupEntry{}
	for ; err != io.EOF; name, size, r, err = src.Next() {
		if err != nil {
			return RestoreStats{}, err
		}
		if err := ctx.Err(); err != nil {
			return RestoreStats{}, errors.Wrap(err, "catalog: restore")
		}
		want, ok := listed[name]
		switch {
		case backupEntryKind(name) == "":
			return RestoreStats{}, errors.Wrapf(ErrBackupInvalid, "unexpected entry %q", name)
		case !ok:
			return RestoreStats{}, errors.Wrapf(ErrBackupInvalid, "entry %s is not listed in the manifest", name)
		case got[name].name != "":
			return RestoreStats{}, errors.Wrapf(ErrBackupInvalid, "entry %s appears twice", name)
		case size != want.size:
			return RestoreStats{}, errors.Wrapf(ErrBackupInvalid, "entry %s: %d bytes, the manifest lists %d", name, size, want.size)
		}
		sum, err := writeStaged(stage, name, size, r)
		if err != nil {
			return RestoreStats{}, err
		}
		got[name] = backupEntry{name: name, size: size, sum: sum}
	}
	st, err := checkRestored(stage, listed, got, opts)
	if err != nil {
		return RestoreStats{}, err
	}
	if opts.Verify != nil {
		if err := opts.Verify(ctx, stage); err != nil {
			return RestoreStats{}, errors.Wrap(err, "catalog: restored catalog does not open")
		}
	}
	if err := commitStage(stage, target); err != nil {
		return RestoreStats{}, err
	}
	committed = true
	return st, nil
}

// boundManifest checks the counts and sizes a manifest lists against the
// restore's bounds (Restore's comment), before anything is written.
func boundManifest(listed map[string]backupEntry, opts RestoreOptions) error {
	q := opts.Quotas
	allowed := map[string]bool{} // owner directories of opts.Tenants
	for _, t := range opts.Tenants {
		allowed[pathBase(tenantOwnersDir(t))] = true
	}
	var services, artifacts int
	var artifactBytes int64
	owners := map[string]int{} // per owner directory (tenant)
	for _, name := range slices.Sorted(mapKeys(listed)) {
		e := listed[name]
		limit := int64(maxSmallRecordBytes)
		switch backupEntryKind(name) {
		case "service":
			services++
			limit = maxRecordBytes
		case "owner":
			dir := strings.Split(name, "/")[2]
			if opts.Tenants != nil && !allowed[dir] {
				return errors.Wrapf(ErrBackupInvalid, "entry %s: ownership for a tenant the configuration does not name", name)
			}
			owners[dir]++
			if owners[dir] > q.MaxArtifactsPerTenant {
				return errors.Wrapf(ErrBackupInvalid, "the manifest lists more than %d ownership records of one tenant (max_artifacts_per_tenant)",
					q.MaxArtifactsPerTenant)
			}
		case "artifact":
			artifacts++
			artifactBytes += e.size
			limit = opts.MaxArtifactBytes
		}
		if e.size > limit {
			return errors.Wrapf(ErrBackupInvalid, "entry %s: %d bytes, at most %d allowed", name, e.size, limit)
		}
	}
	total := 0
	for _, n := range owners {
		total += n
	}
	switch {
	case services > q.MaxServices:
		return errors.Wrapf(ErrBackupInvalid, "the manifest lists %d services, more than %d (max_services)", services, q.MaxServices)
	case artifacts > total:
		return errors.Wrapf(ErrBackupInvalid, "the manifest lists %d artifacts but %d ownership records", artifacts, total)
	case artifactBytes > int64(len(owners))*q.MaxArtifactBytesPerTenant:
		return errors.Wrapf(ErrBackupInvalid, "the manifest lists %d bytes of artifacts, more than %d tenants may own (max_artifact_bytes_per_tenant)",
			artifactBytes, len(owners))
	}
	return nil
}

// checkRestored verifies the staged entries against the manifest and each
// other, and the catalog they make against opts's tenants and quotas.
func checkRestored(stage string, listed, got map[string]backupEntry, opts RestoreOptions) (RestoreStats, error) {
	var st RestoreStats
	for _, name := range slices.Sorted(mapKeys(listed)) {
		want, g := listed[name], got[name]
		switch {
		case g.name == "":
			return st, errors.Wrapf(ErrBackupInvalid, "entry %s is listed in the manifest but missing", name)
		case g.size != want.size || g.sum != want.sum:
			return st, errors.Wrapf(ErrBackupInvalid, "entry %s does not match its sha256 in the manifest", name)
		}
	}
	q := opts.Quotas
	store := diskStore{root: stage}
	tenantOK := func(t vocab.TenantID) bool { return opts.Tenants == nil || slices.Contains(opts.Tenants, t) }
	owned := map[vocab.TenantID]map[vocab.Digest]int64{} // per tenant: the artifacts it owns and their sizes
	artifacts := map[string]int64{}
	for _, name := range slices.Sorted(mapKeys(got)) {
		e := got[name]
		if _, ok := listed[name]; !ok {
			return st, errors.Wrapf(ErrBackupInvalid, "entry %s is not listed in the manifest", name)
		}
		st.Bytes += e.size
		if backupEntryKind(name) == "artifact" {
			if hex.EncodeToString(e.sum[:]) != pathBase(name) {
				return st, errors.Wrapf(ErrBackupInvalid, "artifact %s does not match its digest", name)
			}
			artifacts[pathBase(name)] = e.size
			st.Artifacts++
		}
	}
	// Ownership first: services are checked against it.
	latest := q.Clock.Now().Add(maxUploadSkew).UnixNano()
	var services []serviceRecord
	for _, name := range slices.Sorted(mapKeys(got)) {
		kind := backupEntryKind(name)
		if kind == "artifact" {
			continue
		}
		data, err := readBounded(store.path(name), maxRecordBytes)
		if err != nil {
			return st, err
		}
		switch kind {
		case "state":
			var rec stateRecord
			if err := decodeRecord("state", data, &rec); err != nil {
				return st, errors.Mark(errors.Wrapf(err, "catalog: backup entry %s", name), ErrBackupInvalid)
			}
			st.Generation = max(st.Generation, rec.Generation)
		case "owner":
			var rec ownerRecord
			if err := decodeRecord("owner", data, &rec); err != nil {
				return st, errors.Mark(errors.Wrapf(err, "catalog: backup entry %s", name), ErrBackupInvalid)
			}
			if _, err := vocab.ParseDigest(string(rec.Digest)); err != nil || ownerRecordPath(rec.Tenant, rec.Digest) != name {
				return st, errors.Wrapf(ErrBackupInvalid, "ownership record %s names another tenant or artifact", name)
			}
			if !tenantOK(rec.Tenant) {
				return st, errors.Wrapf(ErrBackupInvalid, "ownership record %s: tenant %q is not in the configuration", name, rec.Tenant)
			}
			size, ok := artifacts[rec.Digest.Hex()]
			if !ok || uint64(size) != rec.Bytes {
				return st, errors.Wrapf(ErrBackupInvalid, "ownership record %s: its artifact is missing or of another size", name)
			}
			if rec.Uploaded > latest {
				return st, errors.Wrapf(ErrBackupInvalid, "ownership record %s: uploaded in the future (%s)", name,
					time.Unix(0, rec.Uploaded).UTC().Format(time.RFC3339))
			}
			if owned[rec.Tenant] == nil {
				owned[rec.Tenant] = map[vocab.Digest]int64{}
			}
			owned[rec.Tenant][rec.Digest] = size
			st.Owners++
		case "service":
			var rec serviceRecord
			if err := decodeRecord("service", data, &rec); err != nil {
				return st, errors.Mark(errors.Wrapf(err, "catalog: backup entry %s", name), ErrBackupInvalid)
			}
			if rec.Manifest.Tenant != rec.Tenant || rec.Manifest.Service != rec.Service || serviceRecordPath(rec.Tenant, rec.Service) != name {
				return st, errors.Wrapf(ErrBackupInvalid, "service record %s names another service", name)
			}
			if !tenantOK(rec.Tenant) {
				return st, errors.Wrapf(ErrBackupInvalid, "service record %s: tenant %q is not in the configuration", name, rec.Tenant)
			}
			services = append(services, rec)
			st.Services++
			st.Generation = max(st.Generation, rec.Generation) // a deploy writes only its record
		}
	}
	if st.Services > 0 && got[stateFile].name == "" {
		return st, errors.Wrapf(ErrBackupInvalid, "%s is missing", stateFile)
	}
	// Per tenant, as a deploy checks: its services use only artifacts it
	// owns, their number and deployed bytes within the quotas; and as an
	// upload checks: the bytes it owns.
	perTenant := map[vocab.TenantID]int{}
	deployed := map[vocab.TenantID]map[vocab.Digest]bool{}
	for _, rec := range services {
		t := rec.Tenant
		perTenant[t]++
		if perTenant[t] > q.MaxServicesPerTenant {
			return st, errors.Wrapf(ErrBackupInvalid, "tenant %q has more than %d services (max_services_per_tenant)", t, q.MaxServicesPerTenant)
		}
		if deployed[t] == nil {
			deployed[t] = map[vocab.Digest]bool{}
		}
		for _, r := range rec.Manifest.Revisions {
			if _, err := vocab.ParseDigest(string(r.Artifact)); err != nil {
				return st, errors.Wrapf(ErrBackupInvalid, "service %s/%s names an invalid artifact", t, rec.Service)
			}
			if _, ok := owned[t][r.Artifact]; !ok {
				return st, errors.Wrapf(ErrBackupInvalid, "service %s/%s: artifact %s is not owned by tenant %q", t, rec.Service, r.Artifact, t)
			}
			deployed[t][r.Artifact] = true
		}
	}
	for _, t := range slices.Sorted(maps.Keys(deployed)) {
		var sum int64
		for d := range deployed[t] {
			sum += owned[t][d]
		}
		if sum > q.MaxDeployedBytesPerTenant {
			return st, errors.Wrapf(ErrBackupInvalid, "tenant %q deploys %d bytes of artifacts, more than %d (max_deployed_bytes_per_tenant)",
				t, sum, q.MaxDeployedBytesPerTenant)
		}
	}
	ownedBy := map[string]bool{}
	for _, t := range slices.Sorted(maps.Keys(owned)) {
		var sum int64
		for d, size := range owned[t] {
			sum += size
			ownedBy[d.Hex()] = true
		}
		if sum > q.MaxArtifactBytesPerTenant {
			return st, errors.Wrapf(ErrBackupInvalid, "tenant %q owns %d bytes of artifacts, more than %d (max_artifact_bytes_per_tenant)",
				t, sum, q.MaxArtifactBytesPerTenant)
		}
	}
	// An artifact nobody owns would be deleted by Open: refuse it instead,
	// a backup never holds one.
	for _, h := range slices.Sorted(mapKeys(artifacts)) {
		if !ownedBy[h] {
			return st, errors.Wrapf(ErrBackupInvalid, "artifact %s has no ownership record", h)
		}
	}
	return st, nil
}

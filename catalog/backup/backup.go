// Write: a consistent copy of a data directory (its records and owned
// artifacts, read while a node may serve) to a Sink, manifest first.

package backup

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/cockroachdb/errors"

	"github.com/latent-node/latent-node/catalog"
	"github.com/latent-node/latent-node/vocab"
)

// Sentinels of backup and restore.
var (
	// ErrInvalid: a backup is malformed, incomplete or tampered with
	// (an entry missing from or not matching its manifest, an artifact not
	// matching its digest, a record that does not decode). The error names
	// the entry. Restore wrote nothing.
	ErrInvalid = errors.New("catalog: invalid backup")
	// ErrRestoreTarget: the restore target is not an empty directory (or
	// cannot be created). Restore wrote nothing.
	ErrRestoreTarget = errors.New("catalog: restore target is not an empty directory")
	// ErrRace: the catalog kept changing while Write read it (a
	// generation moved on every attempt). Retrying later can succeed.
	ErrRace = errors.New("catalog: catalog changed during every backup attempt")
	// ErrSignature: Restore was given a signing key and the backup is
	// unsigned or its signature does not match (written with another key,
	// or the manifest was changed). Restore wrote nothing.
	ErrSignature = errors.New("catalog: backup signature missing or wrong")
)

// ManifestName is the backup entry that lists every other entry with
// its size and sha256. It is the first entry of a backup: Restore bounds
// and checks every other entry against it as it arrives.
const ManifestName = "BACKUP-MANIFEST"

// SignatureName is the entry after the manifest in a signed backup:
// "hmac-sha256:" and the hex HMAC-SHA256 of the manifest's bytes under the
// operator's key, and a newline. The manifest names every other entry's
// sha256 and size, so the signature covers the whole backup.
const SignatureName = "BACKUP-SIGNATURE"

// maxManifestBytes bounds the manifest Restore reads into memory.
const maxManifestBytes = 64 << 20

// signaturePrefix starts the signature entry.
const signaturePrefix = "hmac-sha256:"

// MinSignKeyBytes is the shortest key a backup is signed with.
const MinSignKeyBytes = 32

// backupMagic is the first line of the manifest.
const backupMagic = "latent-node backup v1"

// backupAttempts bounds how often Write starts over because a generation
// was issued while it read the records.
const backupAttempts = 5

// Stats says what a backup holds.
type Stats struct {
	// Generation is the catalog generation the backup is consistent with.
	Generation vocab.Generation
	// Services, Owners and Artifacts count the records and artifacts.
	Services, Owners, Artifacts int
	// Bytes is the size of every entry but the manifest.
	Bytes int64
}

// Sink receives the entries of a backup, each once, the manifest
// first (then the signature of a signed backup).
type Sink interface {
	// Add stores the entry name (a slash-separated relative path) of size
	// bytes read from r.
	Add(name string, size int64, r io.Reader) error
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

// Options configure a backup.
type Options struct {
	// SignKey, when set (at least MinSignKeyBytes), signs the backup: an
	// entry SignatureName follows the manifest. Restore with the same
	// key (RestoreOptions.SignKey) accepts only a backup signed with it.
	SignKey []byte
}

// Write writes a consistent copy of the catalog under dataDir to sink:
// ManifestName first, listing each entry's size and sha256 (an
// artifact's is its digest), the signature when opts.SignKey is set, then
// the state record, every service record, every ownership record and
// every artifact an ownership record names. The compile cache is not
// included (a restart recompiles). Write only reads: it works while a
// node serves from dataDir and takes no lock. It reads the state record,
// the other records, opens every artifact (an open file keeps its bytes
// even if garbage collection removes it afterwards), then reads the state
// record again and checks that the service records are still the files it
// read; if a deploy or delete changed them in between it starts over (at
// most a few times, then ErrRace). The copy is therefore
// the catalog at one generation. Every artifact is verified against its
// digest while it is copied; a mismatch is catalog.ErrCorruptRecord (the sink then
// holds a backup that Restore refuses).
func Write(ctx context.Context, dataDir string, sink Sink, opts Options) (Stats, error) {
	if opts.SignKey != nil && len(opts.SignKey) < MinSignKeyBytes {
		return Stats{}, errors.Newf("catalog: a backup signing key has at least %d bytes", MinSignKeyBytes)
	}
	var snap *snapshotFiles
	for attempt := 0; ; attempt++ {
		if attempt == backupAttempts {
			return Stats{}, ErrRace
		}
		if err := ctx.Err(); err != nil {
			return Stats{}, errors.Wrap(err, "catalog: backup")
		}
		s, again, err := readSnapshot(layoutRoot(dataDir))
		if err != nil {
			return Stats{}, err
		}
		if !again {
			snap = s
			break
		}
	}
	defer snap.close()
	st := Stats{Generation: snap.generation, Services: snap.services, Owners: snap.owners, Artifacts: len(snap.artifacts)}
	// The manifest first: a record's sha256 from its bytes, an artifact's
	// from its name (verified while it is copied below).
	recordNames, artifactNames := slices.Sorted(mapKeys(snap.records)), slices.Sorted(mapKeys(snap.artifacts))
	var listed []entry
	for _, name := range recordNames {
		data := snap.records[name]
		listed = append(listed, entry{name: name, size: int64(len(data)), sum: sha256.Sum256(data)})
		st.Bytes += int64(len(data))
	}
	for _, name := range artifactNames {
		fi, err := snap.artifacts[name].Stat()
		if err != nil {
			return Stats{}, errors.Wrapf(err, "catalog: backup %s", name)
		}
		e := entry{name: name, size: fi.Size()}
		if _, err := hex.Decode(e.sum[:], []byte(pathBase(name))); err != nil {
			return Stats{}, errors.Wrapf(catalog.ErrCorruptRecord, "catalog: artifact file %s", name)
		}
		listed = append(listed, e)
		st.Bytes += fi.Size()
	}
	m := encodeManifest(snap.generation, listed)
	if err := sink.Add(ManifestName, int64(len(m)), bytes.NewReader(m)); err != nil {
		return Stats{}, err
	}
	if opts.SignKey != nil {
		sig := signManifest(opts.SignKey, m)
		if err := sink.Add(SignatureName, int64(len(sig)), bytes.NewReader(sig)); err != nil {
			return Stats{}, err
		}
	}
	for _, name := range recordNames {
		data := snap.records[name]
		if err := sink.Add(name, int64(len(data)), bytes.NewReader(data)); err != nil {
			return Stats{}, err
		}
	}
	for i, name := range artifactNames {
		if err := ctx.Err(); err != nil {
			return Stats{}, errors.Wrap(err, "catalog: backup")
		}
		want := listed[len(recordNames)+i]
		h := sha256.New()
		if err := sink.Add(name, want.size, io.TeeReader(snap.artifacts[name], h)); err != nil {
			return Stats{}, err
		}
		var sum [32]byte
		h.Sum(sum[:0])
		if sum != want.sum {
			return Stats{}, errors.Wrapf(catalog.ErrCorruptRecord, "catalog: %s does not match its digest",
				filepath.Join(dataDir, filepath.FromSlash(name)))
		}
	}
	return st, nil
}

// readSnapshot reads the records and opens the artifacts of the data
// directory. again reports that the catalog changed while it read (the
// caller starts over); the snapshot is then nil.
func readSnapshot(store layoutRoot) (_ *snapshotFiles, again bool, err error) {
	snap := &snapshotFiles{records: map[string][]byte{}, artifacts: map[string]*os.File{}}
	defer func() {
		if err != nil || again {
			snap.close()
		}
	}()
	gen1, state, again, err := readGeneration(store)
	if err != nil || again {
		return nil, again, err
	}
	if state != nil {
		snap.records[catalog.StateFile] = state
	}
	// Services: a record names artifacts its tenant owns.
	needed := map[vocab.Digest]string{}
	services, err := readDirNames(store.path(catalog.ServicesDir))
	if err != nil {
		return nil, false, err
	}
	// A deploy writes only its service's record (through a new file renamed
	// over the old one), so the records read are checked again at the end:
	// the same names, each still the file that was read.
	read := map[string]fileID{}
	maxGen := gen1
	for _, file := range services {
		name := catalog.ServicesDir + "/" + file
		data, id, err := readFile(store.path(name), catalog.MaxRecordBytes)
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, errRewritten) {
			return nil, true, nil // deleted or rewritten while listed: a generation moved on
		}
		if err != nil {
			return nil, false, err
		}
		rec, err := catalog.DecodeServiceRecord(data)
		if err == nil && catalog.ServiceRecordPath(rec.Tenant, rec.Service) != name {
			// Another service's record: the file was reused and rewritten
			// whole before it was read, or it is corrupt.
			err = errors.New("the record is another service's")
		}
		if err != nil {
			again, err := undecodable(store.path(name), data, err)
			return nil, again, err
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
	tenants, err := readDirNames(store.path(catalog.OwnersDir))
	if err != nil {
		return nil, false, err
	}
	for _, t := range tenants {
		files, err := readDirNames(store.path(catalog.OwnersDir + "/" + t))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, false, err
		}
		for _, file := range files {
			name := catalog.OwnersDir + "/" + t + "/" + file
			data, _, err := readFile(store.path(name), maxSmallRecordBytes)
			if errors.Is(err, fs.ErrNotExist) {
				continue // collected while listed
			}
			if errors.Is(err, errRewritten) {
				return nil, true, nil
			}
			if err != nil {
				return nil, false, err
			}
			rec, err := catalog.DecodeOwnerRecord(data)
			if err == nil && catalog.OwnerRecordPath(rec.Tenant, rec.Digest) != name {
				err = errors.New("the record is another ownership's") // as for services
			}
			if err != nil {
				again, err := undecodable(store.path(name), data, err)
				return nil, again, err
			}
			if _, err := vocab.ParseDigest(string(rec.Digest)); err != nil {
				return nil, false, errors.Wrapf(catalog.ErrCorruptRecord, "catalog: %s names an invalid digest", store.path(name))
			}
			art := catalog.ArtifactsDir + "/" + rec.Digest.Hex()
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
		if snap.artifacts[catalog.ArtifactsDir+"/"+d.Hex()] == nil {
			return nil, true, nil // replaced and collected while read: start over
		}
	}
	gen2, _, again, err := readGeneration(store)
	if err != nil || again {
		return nil, again, err
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
	id.dev, id.ino = devIno(fi)
	return id
}

// readFile reads a file of at most maxBytes (a larger one is
// catalog.ErrCorruptRecord) and returns the identity of the file it read.
func readFile(name string, maxBytes int64) ([]byte, fileID, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, fileID{}, errors.Wrapf(err, "catalog: open %s", name)
	}
	defer func() { _ = f.Close() }()
	if readHook != nil {
		readHook(name, true)
	}
	fi, err := f.Stat()
	if err != nil {
		return nil, fileID{}, errors.Wrapf(err, "catalog: stat %s", name)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxBytes+1))
	if err != nil {
		return nil, fileID{}, errors.Wrapf(err, "catalog: read %s", name)
	}
	if readHook != nil {
		readHook(name, false)
	}
	// The catalog reuses a replaced record's file as the next write's
	// spare, so the file read can be rewritten in place while it is read:
	// then what was read may be torn, which is a race, not corruption.
	after, err := f.Stat()
	if err != nil {
		return nil, fileID{}, errors.Wrapf(err, "catalog: stat %s", name)
	}
	if idOf(after) != idOf(fi) {
		return nil, fileID{}, errors.Wrapf(errRewritten, "catalog: %s", name)
	}
	if int64(len(data)) > maxBytes {
		return nil, fileID{}, errors.Wrapf(catalog.ErrCorruptRecord, "catalog: %s is larger than %d bytes", name, maxBytes)
	}
	return data, idOf(fi), nil
}

// readHook, when set (tests only), runs in readFile once the file is open
// (before set) and just after its bytes are read.
var readHook func(name string, before bool)

// errRewritten: a record file changed while it was read (readFile).
var errRewritten = errors.New("rewritten while read")

// undecodable is the outcome of reading a record at path whose bytes data
// did not decode (or named another record), for cause: start over (again)
// when the file no longer holds those bytes, else the record is corrupt.
func undecodable(path string, data []byte, cause error) (again bool, err error) {
	if torn, err := rewritten(path, data); torn || err != nil {
		return torn, err
	}
	return false, errors.Mark(errors.Wrapf(cause, "catalog: %s", path), catalog.ErrCorruptRecord)
}

// rewritten reports, for a record whose bytes data did not decode,
// whether the file at name no longer holds them: replaced, deleted, or
// rewritten in place as the catalog's spare while it was read (a race,
// read again) rather than corrupt on disk. It compares the bytes, not the
// file's identity, since a rewrite of the same size within one tick of the
// file system's clock leaves the identity unchanged. An error reading it
// again, other than its absence, is returned as it is (not a race).
func rewritten(name string, data []byte) (bool, error) {
	f, err := os.Open(name)
	if errors.Is(err, fs.ErrNotExist) {
		return true, nil
	}
	if err != nil {
		return false, errors.Wrapf(err, "catalog: open %s", name)
	}
	defer func() { _ = f.Close() }()
	now, err := io.ReadAll(io.LimitReader(f, int64(len(data))+1))
	if err != nil {
		return false, errors.Wrapf(err, "catalog: read %s", name)
	}
	return !bytes.Equal(now, data), nil
}

// recordsChanged reports whether the service records are no longer
// exactly the files read.
func recordsChanged(store layoutRoot, read map[string]fileID) (bool, error) {
	now, err := readDirNames(store.path(catalog.ServicesDir))
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
		fi, err := os.Lstat(store.path(catalog.ServicesDir + "/" + file))
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
// bytes (nil and 0 when the catalog never issued one). again reports that
// a write changed the file while it was read.
func readGeneration(store layoutRoot) (_ vocab.Generation, _ []byte, again bool, _ error) {
	name := store.path(catalog.StateFile)
	data, _, err := readFile(name, maxSmallRecordBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil, false, nil
	}
	if errors.Is(err, errRewritten) {
		return 0, nil, true, nil
	}
	if err != nil {
		return 0, nil, false, err
	}
	gen, err := catalog.DecodeStateRecord(data)
	if err != nil {
		again, err := undecodable(name, data, err)
		return 0, nil, again, err
	}
	return gen, data, false, nil
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
		if !catalog.IsTemp(e.Name()) {
			names = append(names, e.Name())
		}
	}
	return names, nil
}

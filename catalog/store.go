package catalog

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/cockroachdb/errors"
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
)

// Layout under the data directory:
//
//	artifacts/sha256/<hex>            module bytes, named by their digest
//	catalog/state.rec                 the last generation issued
//	catalog/services/<hex>.rec        one record per deployed service; <hex> is
//	                                  sha256(tenant 0x00 service), so names never
//	                                  become paths
//
// Every file is written to a temporary file in the same directory, fsynced,
// renamed over its name, and the directory fsynced.
const (
	artifactsDir = "artifacts/sha256"
	servicesDir  = "catalog/services"
	stateFile    = "catalog/state.rec"
	tmpPrefix    = ".tmp-"
)

// artifactStore is the catalog's access to module bytes. Only deploys and
// Open touch it; tests replace it to prove pins never do.
type artifactStore interface {
	put(d Digest, r io.Reader, maxBytes int64) error
	get(d Digest, maxBytes int64) ([]byte, error)
}

type diskStore struct{ root string }

func (s diskStore) path(rel string) string { return filepath.Join(s.root, filepath.FromSlash(rel)) }

func (s diskStore) init() error {
	for _, d := range []string{artifactsDir, servicesDir} {
		if err := os.MkdirAll(s.path(d), 0o750); err != nil {
			return errors.Wrapf(err, "catalog: create %s", s.path(d))
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
		if strings.HasPrefix(e.Name(), tmpPrefix) {
			if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
				return errors.Wrapf(err, "catalog: remove stale %s", filepath.Join(dir, e.Name()))
			}
		}
	}
	return nil
}

func (s diskStore) put(d Digest, r io.Reader, maxBytes int64) error {
	dir := s.path(artifactsDir)
	tmp, err := os.CreateTemp(dir, tmpPrefix+"artifact-*")
	if err != nil {
		return errors.Wrap(err, "catalog: store artifact")
	}
	defer func() { _ = os.Remove(tmp.Name()) }() // a no-op after the rename
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(tmp, h), io.LimitReader(r, maxBytes+1))
	if err == nil && n > maxBytes {
		err = errors.Wrapf(ErrArtifactTooLarge, "larger than %d bytes", maxBytes)
	}
	if err == nil && DigestOf([32]byte(h.Sum(nil))) != d {
		err = ErrDigestMismatch
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return errors.Wrap(err, "catalog: store artifact")
	}
	if err := os.Rename(tmp.Name(), filepath.Join(dir, d.Hex())); err != nil {
		return errors.Wrap(err, "catalog: store artifact")
	}
	return syncDir(dir)
}

func (s diskStore) get(d Digest, maxBytes int64) ([]byte, error) {
	name := filepath.Join(s.path(artifactsDir), d.Hex())
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
	if int64(len(data)) > maxBytes || DigestOf(sha256.Sum256(data)) != d {
		return nil, errors.Wrapf(ErrCorruptRecord, "%s does not match its digest", name)
	}
	return data, nil
}

// writeAtomic replaces the file rel with data: temp file, fsync, rename, fsync dir.
func (s diskStore) writeAtomic(rel string, data []byte) error {
	name := s.path(rel)
	dir := filepath.Dir(name)
	tmp, err := os.CreateTemp(dir, tmpPrefix+filepath.Base(name)+"-*")
	if err != nil {
		return errors.Wrapf(err, "catalog: write %s", name)
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), name)
	}
	if err == nil {
		err = syncDir(dir)
	}
	return errors.Wrapf(err, "catalog: write %s", name)
}

func (s diskStore) remove(rel string) error {
	name := s.path(rel)
	if err := os.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return errors.Wrapf(err, "catalog: remove %s", name)
	}
	return syncDir(filepath.Dir(name))
}

func syncDir(dir string) error {
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

func serviceRecordPath(t TenantID, s ServiceName) string {
	sum := sha256.Sum256([]byte(string(t) + "\x00" + string(s)))
	return servicesDir + "/" + hex.EncodeToString(sum[:]) + ".rec"
}

// Record encoding. A record file is one header line and a JSON payload:
//
//	latent-record v1 <kind> <payload length> sha256:<hex of the payload>\n<payload>
//
// Decoding checks the header, the exact length, the checksum, then decodes the
// payload strictly (unknown fields refused).
const recordMagic = "latent-record v1"

// maxRecordBytes bounds a record file: a manifest plus per-revision module info.
const maxRecordBytes = 2 * MaxManifestBytes

func encodeRecord(kind string, payload []byte) []byte {
	sum := sha256.Sum256(payload)
	var b bytes.Buffer
	b.WriteString(recordMagic + " " + kind + " " + strconv.Itoa(len(payload)) + " " + string(DigestOf(sum)) + "\n")
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
	if d, err := ParseDigest(fields[4]); err != nil || d != DigestOf(sha256.Sum256(payload)) {
		return errors.New("record checksum does not match")
	}
	return errors.Wrap(decodeStrict(payload, v), "record payload")
}

// The data directory's layout (its paths) and the records in it, exported
// as far as a reader outside the package needs them: package catalog/backup
// copies and checks a data directory with these and nothing else of the
// catalog's internals.

package catalog

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"github.com/latent-node/latent-node/vocab"
)

// Layout under the data directory (the constants and the *Path functions
// are these paths: slash-separated, relative to the data directory):
//
//	artifacts/sha256/<hex>            module bytes, named by their digest, stored
//	                                  once whichever tenants uploaded them
//	catalog/state.rec                 the last generation issued
//	catalog/services/<hex>.rec        one record per deployed service; <hex> is
//	                                  sha256(tenant 0x00 service), so names never
//	                                  become paths
//	catalog/owners/<t>/<hex>.rec      one record per artifact a tenant owns: <t> is
//	                                  sha256(tenant), <hex> the artifact's digest;
//	                                  the record holds the tenant, the digest, the
//	                                  size and the upload time
//
// Every file is written to a temporary file in the same directory, fsynced,
// renamed over its name, and the directory fsynced. An upload writes the
// artifact before its ownership record; garbage collection removes the
// ownership record before the artifact. A crash in between leaves an artifact
// nobody owns, which Open deletes; it never leaves an ownership record
// without its artifact. A temporary file's name starts with tmpPrefix
// (IsTemp); it is never part of the catalog.
const (
	ArtifactsDir = "artifacts/sha256"
	ServicesDir  = "catalog/services"
	OwnersDir    = "catalog/owners"
	StateFile    = "catalog/state.rec"
	tmpPrefix    = ".tmp-"
)

// IsTemp reports whether name (a file name in a directory of the layout)
// is a temporary file: a write not (yet) renamed to its name.
func IsTemp(name string) bool { return strings.HasPrefix(name, tmpPrefix) }

// ServiceRecordPath is the path of the record of the tenant's service.
func ServiceRecordPath(t vocab.TenantID, s vocab.ServiceName) string {
	sum := sha256.Sum256([]byte(string(t) + "\x00" + string(s)))
	return ServicesDir + "/" + hex.EncodeToString(sum[:]) + ".rec"
}

// TenantOwnersDir is the directory of the tenant's ownership records.
func TenantOwnersDir(t vocab.TenantID) string {
	sum := sha256.Sum256([]byte(t))
	return OwnersDir + "/" + hex.EncodeToString(sum[:])
}

// OwnerRecordPath is the path of the tenant's ownership record of d.
func OwnerRecordPath(t vocab.TenantID, d vocab.Digest) string {
	return TenantOwnersDir(t) + "/" + d.Hex() + ".rec"
}

// MaxRecordBytes bounds a record file: a manifest plus per-revision module info.
const MaxRecordBytes = 2 * vocab.MaxManifestBytes

// stateRecord is the payload of StateFile.
type stateRecord struct {
	Generation vocab.Generation `json:"generation"`
}

// OwnerRecord is the payload of an ownership record (OwnerRecordPath): a
// tenant's claim on a stored artifact, with the artifact's size and the
// upload time (Unix nanoseconds) its grace period counts from.
type OwnerRecord struct {
	Tenant   vocab.TenantID `json:"tenant"`
	Digest   vocab.Digest   `json:"digest"`
	Bytes    uint64         `json:"bytes"`
	Uploaded int64          `json:"uploaded_unix_nano"`
}

// ServiceRecord is what DecodeServiceRecord returns of a service record:
// the service, the generation of its release and the manifest it was
// deployed with. (The record also holds the release and revision ids and
// the module facts, which Open checks against the artifacts.)
type ServiceRecord struct {
	Tenant     vocab.TenantID
	Service    vocab.ServiceName
	Generation vocab.Generation
	Manifest   vocab.Manifest
}

// DecodeStateRecord decodes the bytes of StateFile: the last generation
// issued by a deletion. An error says what is wrong with the record (its
// header, length, checksum or payload) without naming a file.
func DecodeStateRecord(data []byte) (vocab.Generation, error) {
	var rec stateRecord
	err := decodeRecord("state", data, &rec)
	return rec.Generation, err
}

// DecodeOwnerRecord decodes the bytes of an ownership record, as
// DecodeStateRecord does. It does not check that the record sits at its
// OwnerRecordPath or that its digest is valid.
func DecodeOwnerRecord(data []byte) (OwnerRecord, error) {
	var rec OwnerRecord
	err := decodeRecord("owner", data, &rec)
	return rec, err
}

// DecodeServiceRecord decodes the bytes of a service record, as
// DecodeStateRecord does. It does not validate the manifest or check that
// the record sits at its ServiceRecordPath.
func DecodeServiceRecord(data []byte) (ServiceRecord, error) {
	var rec serviceRecord
	if err := decodeRecord("service", data, &rec); err != nil {
		return ServiceRecord{}, err
	}
	return ServiceRecord{Tenant: rec.Tenant, Service: rec.Service, Generation: rec.Generation, Manifest: rec.Manifest}, nil
}

package cluster

// The cluster's etcd keys and the values stored under them: service
// records, the head, and member records.

import (
	"encoding/json"
	"strings"

	"github.com/cockroachdb/errors"

	"github.com/latent-node/latent-node/vocab"
)

// keys builds the cluster's etcd keys under one prefix.
type keys struct{ prefix string }

func (k keys) services() string { return k.prefix + "/services/" }
func (k keys) service(t vocab.TenantID, s vocab.ServiceName) string {
	return k.services() + string(t) + "/" + string(s)
}
func (k keys) head() string                   { return k.prefix + "/head" }
func (k keys) census(t vocab.TenantID) string { return k.prefix + "/census/" + string(t) }
func (k keys) secret() string                 { return k.prefix + "/secret" }
func (k keys) nodes() string                  { return k.prefix + "/nodes/" }
func (k keys) node(id string) string          { return k.nodes() + id }
func (k keys) holders(d vocab.Digest) string  { return k.prefix + "/artifacts/" + string(d) + "/" }
func (k keys) holder(d vocab.Digest, id string) string {
	return k.holders(d) + id
}

// pendings is the prefix of the announcements that a deploy of a release
// of tenant naming d is under way (one key per deploy, under the deploying
// node's lease): a peer asked to replicate d for tenant checks there.
func (k keys) pendings(t vocab.TenantID, d vocab.Digest) string {
	return k.prefix + "/pending/" + string(t) + "/" + string(d) + "/"
}

// serviceOf parses a service key.
func (k keys) serviceOf(key string) (vocab.TenantID, vocab.ServiceName, bool) {
	rest, ok := strings.CutPrefix(key, k.services())
	if !ok {
		return "", "", false
	}
	t, s, ok := strings.Cut(rest, "/")
	if !ok || t == "" || s == "" || strings.Contains(s, "/") {
		return "", "", false
	}
	return vocab.TenantID(t), vocab.ServiceName(s), true
}

// record is a service's value in etcd: the release's manifest and its id
// (derived from the content, so a re-read says whether a release landed).
type record struct {
	Release  vocab.ReleaseID `json:"release"`
	Manifest vocab.Manifest  `json:"manifest"`
}

// maxRecordBytes bounds a record read from etcd (etcd itself refuses
// values over about 1.5 MiB; manifests are far smaller).
const maxRecordBytes = 1 << 20

func decodeRecord(data []byte) (record, error) {
	if len(data) > maxRecordBytes {
		return record{}, errors.Newf("cluster: record of %d bytes", len(data))
	}
	var r record
	if err := json.Unmarshal(data, &r); err != nil {
		return record{}, errors.Wrap(err, "cluster: decode record")
	}
	return r, nil
}

// head is the head key's value: the last change.
type head struct {
	Tenant  vocab.TenantID    `json:"tenant"`
	Service vocab.ServiceName `json:"service"`
	Release vocab.ReleaseID   `json:"release,omitempty"` // empty for a delete
}

// Member is one node's record in etcd.
type Member struct {
	ID           string           `json:"name"` // the node id
	AdvertiseURL string           `json:"advertise_url"`
	Version      string           `json:"version"`
	Generation   vocab.Generation `json:"generation"`
	CatalogHash  string           `json:"catalog_hash"`
	Fresh        bool             `json:"fresh"`
	Ready        bool             `json:"ready"`
}

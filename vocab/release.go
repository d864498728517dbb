// The records the catalog hands out for a release (RevisionPolicy,
// Deployment) and the derivation of revision and release ids from a Spec.

package vocab

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"hash"
)

// RevisionPolicy is the small typed record admission reads for a revision of
// a release: everything policy needs and nothing else (no artifact bytes, no
// compiled code, no manifest tree). Attributes are deliberately absent.
type RevisionPolicy struct {
	Tenant     TenantID
	Service    ServiceName
	Name       RevisionName
	ID         RevisionID
	Release    ReleaseID
	Generation Generation
	Artifact   Digest
	TrustClass TrustClass
	// Ceiling is the deployment ceiling from the manifest (all three positive).
	Ceiling Budget
	// Capsule is the module's own memory limits.
	Capsule Capsule
	// Requirements are the declared threading model and the union of the
	// declared features and the features the module uses.
	Requirements Requirements
	Placement    Placement
	// Random is the source of the revision's random_get (manifest "random").
	Random Randomness
	// ABI is the revision's guest ABI (manifest "abi").
	ABI ABI
	// Instance is how activations get their instance (manifest "instance").
	Instance InstanceMode
	// Init is the initialisation export a snapshot or reuse instance runs
	// once (manifest "init"); empty: "_initialize" when the module exports
	// it, else none.
	Init FunctionName
	// Outbound are the hosts its guest may send requests to (manifest
	// "allowed_outbound_hosts"); none: every request is denied.
	Outbound OutboundHosts
}

// RevisionRef names a revision of a deployed release.
type RevisionRef struct {
	Name RevisionName `json:"name"`
	ID   RevisionID   `json:"id"`
}

// Deployment summarizes the active release of a service.
type Deployment struct {
	Tenant     TenantID      `json:"tenant"`
	Service    ServiceName   `json:"service"`
	Release    ReleaseID     `json:"release"`
	Generation Generation    `json:"generation"`
	Revisions  []RevisionRef `json:"revisions"`
}

// Identity derivation. Both ids hash a length-prefixed canonical encoding of
// the validated spec (never the JSON text), so field order, whitespace, size
// spellings ("32MiB" or 33554432) and attribute order do not matter, and the
// same content gives the same id on every run. The "rev1"/"rel1" prefixes
// version the derivation; a change to it must change the prefix. (A field
// encoded only when it is not its default, such as the random source, the
// guest ABI or the instance mode, is no change: every id derived before it existed stays the
// same.)

// Canon is the canonical encoding the identities hash: sha256 over a
// domain string, then length-prefixed strings and big-endian integers, so
// that no two sequences of values encode alike. The catalog's own content
// hash (Pin.Hash) uses it too.
type Canon struct{ h hash.Hash }

// NewCanon starts an encoding in domain (which versions it).
func NewCanon(domain string) Canon {
	c := Canon{h: sha256.New()}
	c.Str(domain)
	return c
}

// Str encodes s, prefixed by its length.
func (c Canon) Str(s string) {
	var b [binary.MaxVarintLen64]byte
	c.h.Write(b[:binary.PutUvarint(b[:], uint64(len(s)))])
	c.h.Write([]byte(s))
}

// U64 encodes v in 8 bytes, big-endian.
func (c Canon) U64(v uint64) {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], v)
	c.h.Write(b[:])
}

// Strs encodes the length of ss, then each string.
func (c Canon) Strs(ss []string) {
	c.U64(uint64(len(ss)))
	for _, s := range ss {
		c.Str(s)
	}
}

// Sum returns the sha256 of the encoding so far.
func (c Canon) Sum() []byte { return c.h.Sum(nil) }

// Hex returns Sum in lowercase hex.
func (c Canon) Hex() string { return hex.EncodeToString(c.Sum()) }

// RevisionID is the identity of the revision i of s: "rev1-" and the hex
// sha256 of its canonical encoding with the tenant and the service.
func (s Spec) RevisionID(i int) RevisionID {
	r := s.Revisions[i]
	c := NewCanon("latent-node revision v1")
	c.Str(string(s.Tenant))
	c.Str(string(s.Service))
	c.Str(string(r.Name))
	c.Str(string(r.Artifact))
	c.Str(string(r.TrustClass))
	c.U64(uint64(r.Threading))
	c.U64(uint64(r.Features))
	c.U64(r.Ceiling.CPUFuel)
	c.U64(r.Ceiling.MemoryBytes)
	c.U64(uint64(r.Ceiling.WallTime))
	as, rs, zs := r.Placement.sets()
	c.Strs(as)
	c.Strs(rs)
	c.Strs(zs)
	c.U64(uint64(len(r.Attributes)))
	for _, a := range r.Attributes {
		c.Str(a.Key)
		c.Str(a.Value)
	}
	// Only a non-default random source is encoded, after everything else:
	// revisions without one keep the ids they had before the field existed
	// (records stored then still load), and a revision that opts in gets
	// another id than the same revision without it.
	if r.Random != RandomSecure {
		c.Str("random")
		c.U64(uint64(r.Random))
	}
	// The same for the guest ABI, after the random source.
	if r.ABI != ABIStdio {
		c.Str("abi")
		c.U64(uint64(r.ABI))
	}
	// The same for the instance mode and the initialisation export, after
	// the guest ABI (each only when set: the default mode is "fresh", the
	// default export none, and init is refused unless the mode is not
	// fresh).
	if r.Instance != InstanceFresh {
		c.Str("instance")
		c.U64(uint64(r.Instance))
	}
	if r.Init != "" {
		c.Str("init")
		c.Str(string(r.Init))
	}
	// And the allowed outbound hosts, in their canonical form and order,
	// when there are any: other hosts make another revision.
	if len(r.Outbound) > 0 {
		c.Str("outbound")
		c.Strs(r.Outbound.Strings())
	}
	return RevisionID(revisionIDPrefix + c.Hex())
}

// ReleaseID is the identity of the release s: "rel1-" and the hex sha256
// of the tenant, the service, the revisions' ids and the routes in
// manifest order.
func (s Spec) ReleaseID() ReleaseID {
	c := NewCanon("latent-node release v1")
	c.Str(string(s.Tenant))
	c.Str(string(s.Service))
	c.U64(uint64(len(s.Revisions)))
	for i := range s.Revisions {
		c.Str(string(s.RevisionID(i)))
	}
	c.U64(uint64(len(s.Routes)))
	for _, r := range s.Routes {
		c.Str(string(r.Name))
		c.Str(string(r.Function))
		c.U64(uint64(len(r.Targets)))
		for _, t := range r.Targets {
			c.Str(string(s.Revisions[t.Revision].Name))
			c.U64(uint64(t.Weight))
		}
	}
	return ReleaseID(releaseIDPrefix + c.Hex())
}

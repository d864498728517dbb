package catalog

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"hash"
	"slices"
	"strconv"
	"strings"
	"unique"
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

// service is one deployed service inside a snapshot. It is immutable.
type service struct {
	tenant     TenantID
	name       ServiceName
	generation Generation
	release    ReleaseID
	policies   []RevisionPolicy
	attributes [][]Attribute // per revision; nil when no revision has any
	routes     []route       // sorted by name
}

// A service is kept compact: a catalog holds up to hundreds of thousands of
// them, and every pointer in one is memory and garbage-collector work. So
// it keeps no manifest (Catalog.Manifest reads the service's record), its
// routes are a sorted slice and its revisions are found by scanning (at
// most MaxRevisions and MaxRoutes).

type route struct {
	name     RouteName
	function FunctionName
	targets  []routeTarget
}

// routeTarget is one target of a route: the revision's index in
// service.policies and the running sum of the weights up to it.
type routeTarget struct {
	revision   int32
	cumulative uint32
}

// intern returns the canonical copy of a name many services repeat
// (tenants, artifact digests, trust classes, revision, route and function
// names): one copy per distinct value, freed when no service uses it.
func intern[T ~string](v T) T { return T(unique.Make(string(v)).Value()) }

// route returns the service's route of that name.
func (s *service) route(name RouteName) (*route, bool) {
	i, ok := slices.BinarySearchFunc(s.routes, name, func(r route, n RouteName) int { return strings.Compare(string(r.name), string(n)) })
	if !ok {
		return nil, false
	}
	return &s.routes[i], true
}

// revision returns the index of the revision with that id.
func (s *service) revision(id RevisionID) (int, bool) {
	for i := range s.policies {
		if s.policies[i].ID == id {
			return i, true
		}
	}
	return 0, false
}

func (s *service) deployment() Deployment {
	d := Deployment{Tenant: s.tenant, Service: s.name, Release: s.release, Generation: s.generation,
		Revisions: make([]RevisionRef, len(s.policies))}
	for i, p := range s.policies {
		d.Revisions[i] = RevisionRef{Name: p.Name, ID: p.ID}
	}
	return d
}

// artifacts returns the distinct artifacts of the service's revisions, in
// revision order: the module references the catalog holds for it.
func (s *service) artifacts() []Digest {
	out := make([]Digest, 0, len(s.policies))
	for _, p := range s.policies {
		if !slices.Contains(out, p.Artifact) {
			out = append(out, p.Artifact)
		}
	}
	return out
}

// buildService turns a validated spec and the inspection of its modules into
// an immutable service. Problems that need the modules (memory, exports,
// threading) are reported with their manifest field.
func buildService(s spec, modules []ModuleInfo, gen Generation) (*service, error) {
	var p problems
	release := releaseID(s)
	svc := &service{
		tenant: s.tenant, name: s.service, generation: gen, release: release,
		policies: make([]RevisionPolicy, len(s.revisions)),
		routes:   make([]route, 0, len(s.routes)),
	}
	for i, r := range s.revisions {
		f := "revisions[" + strconv.Itoa(i) + "]"
		mod := modules[i]
		if err := mod.validate(); err != nil {
			p.addErr(f+".artifact", err)
			continue
		}
		switch floor := mod.MinMemoryBytes + mod.FixedMemoryBytes; {
		case r.ceiling.MemoryBytes < mod.MinMemoryBytes:
			p.add(f+".ceiling.memory_bytes", "is smaller than the module's initial memory of %d bytes", mod.MinMemoryBytes)
		case r.ceiling.MemoryBytes < floor:
			p.add(f+".ceiling.memory_bytes", "is smaller than the module's initial memory and tables, %d bytes", floor)
		}
		if mod.Threading == ThreadingShared && r.threading != ThreadingShared {
			p.add(f+".threading", `the module uses shared memory; declare threading = "shared"`)
		}
		id := revisionID(s, r)
		svc.policies[i] = RevisionPolicy{
			Tenant: intern(s.tenant), Service: s.service, Name: intern(r.name), ID: id, Release: release, Generation: gen,
			Artifact: intern(r.artifact), TrustClass: intern(r.trustClass), Ceiling: r.ceiling,
			Capsule: Capsule{MinMemoryBytes: mod.MinMemoryBytes + mod.FixedMemoryBytes,
				MaxMemoryBytes: mod.MaxMemoryBytes + mod.FixedMemoryBytes + CallStackBytes},
			Requirements: Requirements{Threading: r.threading, Features: r.features.Union(mod.Features)},
			Placement:    r.placement, Random: r.random, ABI: r.abi, Instance: r.instance, Init: intern(r.init),
		}
		if r.init != "" && !mod.exports(r.init) {
			p.add(f+".init", "the module does not export this function")
		}
		if len(r.attributes) > 0 {
			if svc.attributes == nil {
				svc.attributes = make([][]Attribute, len(s.revisions))
			}
			svc.attributes[i] = r.attributes
		}
	}
	for i, r := range s.routes {
		rt := route{name: intern(r.name), function: intern(r.function), targets: make([]routeTarget, len(r.targets))}
		var sum uint32
		for j, t := range r.targets {
			if !modules[t.revision].exports(r.function) {
				p.add("routes["+strconv.Itoa(i)+"].function", "revision %q does not export this function", s.revisions[t.revision].name)
			}
			sum += t.weight
			rt.targets[j] = routeTarget{revision: int32(t.revision), cumulative: sum}
		}
		svc.routes = append(svc.routes, rt)
	}
	slices.SortFunc(svc.routes, func(a, b route) int { return strings.Compare(string(a.name), string(b.name)) })
	if err := p.err(); err != nil {
		return nil, err
	}
	return svc, nil
}

// Identity derivation. Both ids hash a length-prefixed canonical encoding of
// the validated spec (never the JSON text), so field order, whitespace, size
// spellings ("32MiB" or 33554432) and attribute order do not matter, and the
// same content gives the same id on every run. The "rev1"/"rel1" prefixes
// version the derivation; a change to it must change the prefix. (A field
// encoded only when it is not its default, such as the random source, the
// guest ABI or the instance mode, is no change: every id derived before it existed stays the
// same.)

type canon struct{ h hash.Hash }

func newCanon(domain string) canon {
	c := canon{h: sha256.New()}
	c.str(domain)
	return c
}

func (c canon) str(s string) {
	var b [binary.MaxVarintLen64]byte
	c.h.Write(b[:binary.PutUvarint(b[:], uint64(len(s)))])
	c.h.Write([]byte(s))
}

func (c canon) u64(v uint64) {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], v)
	c.h.Write(b[:])
}

func (c canon) strs(ss []string) {
	c.u64(uint64(len(ss)))
	for _, s := range ss {
		c.str(s)
	}
}

func (c canon) hex() string { return hex.EncodeToString(c.h.Sum(nil)) }

func revisionID(s spec, r revisionSpec) RevisionID {
	c := newCanon("latent-node revision v1")
	c.str(string(s.tenant))
	c.str(string(s.service))
	c.str(string(r.name))
	c.str(string(r.artifact))
	c.str(string(r.trustClass))
	c.u64(uint64(r.threading))
	c.u64(uint64(r.features))
	c.u64(r.ceiling.CPUFuel)
	c.u64(r.ceiling.MemoryBytes)
	c.u64(uint64(r.ceiling.WallTime))
	as, rs, zs := r.placement.sets()
	c.strs(as)
	c.strs(rs)
	c.strs(zs)
	c.u64(uint64(len(r.attributes)))
	for _, a := range r.attributes {
		c.str(a.Key)
		c.str(a.Value)
	}
	// Only a non-default random source is encoded, after everything else:
	// revisions without one keep the ids they had before the field existed
	// (records stored then still load), and a revision that opts in gets
	// another id than the same revision without it.
	if r.random != RandomSecure {
		c.str("random")
		c.u64(uint64(r.random))
	}
	// The same for the guest ABI, after the random source.
	if r.abi != ABIStdio {
		c.str("abi")
		c.u64(uint64(r.abi))
	}
	// The same for the instance mode and the initialisation export, after
	// the guest ABI (each only when set: the default mode is "fresh", the
	// default export none, and init is refused unless the mode is not
	// fresh).
	if r.instance != InstanceFresh {
		c.str("instance")
		c.u64(uint64(r.instance))
	}
	if r.init != "" {
		c.str("init")
		c.str(string(r.init))
	}
	return RevisionID(revisionIDPrefix + c.hex())
}

func releaseID(s spec) ReleaseID {
	c := newCanon("latent-node release v1")
	c.str(string(s.tenant))
	c.str(string(s.service))
	c.u64(uint64(len(s.revisions)))
	for _, r := range s.revisions {
		c.str(string(revisionID(s, r)))
	}
	c.u64(uint64(len(s.routes)))
	for _, r := range s.routes {
		c.str(string(r.name))
		c.str(string(r.function))
		c.u64(uint64(len(r.targets)))
		for _, t := range r.targets {
			c.str(string(s.revisions[t.revision].name))
			c.u64(uint64(t.weight))
		}
	}
	return ReleaseID(releaseIDPrefix + c.hex())
}

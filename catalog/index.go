// The copy-on-write index of services, the writer's index with its
// per-tenant counters, and the catalog's additive hash.

package catalog

import (
	"encoding/binary"
	"maps"
	"slices"
	"strings"

	"github.com/google/btree"

	"github.com/latent-node/latent-node/vocab"
)

// The services of the catalog live in a copy-on-write B-tree ordered by
// tenant, then service name (github.com/google/btree: Clone is O(1), and a
// later change copies only the nodes on its path). The writer owns one
// mutable tree (index.tree, in Catalog.mu.index); every published
// snapshot holds a clone of it that nobody changes again. So a deploy or a delete costs O(log N) in
// time and allocated bytes, a pin is one pointer, and an old pin keeps
// alive only the nodes the catalog has replaced since (not a copy of the
// catalog). What the deploy path checks (a tenant's service count, the
// artifacts its services use, the snapshots they need) is kept in counters
// beside the tree, updated with it.

// indexDegree is the B-tree's degree: nodes hold 15 to 31 services, a tree
// of 100,000 services is 4 levels deep, and a change copies about 4 nodes
// of at most 31 entries.
const indexDegree = 16

// entry is one service of the index. The key is a copy of the service's
// identity so that a lookup compares strings without loading the service.
type entry struct {
	key serviceKey
	svc *service
}

func lessEntry(a, b entry) bool { return compareKeys(a.key, b.key) < 0 }

// newIndex returns an empty index. It keeps no free list: a node freed by
// the writer could still be reachable from a published clone.
func newIndex() *btree.BTreeG[entry] {
	return btree.NewWithFreeListG(indexDegree, lessEntry, btree.NewFreeListG[entry](0))
}

// get returns the service under k in the snapshot.
func (s *snapshot) get(k serviceKey) (*service, bool) {
	if s == nil || s.services == nil {
		return nil, false
	}
	e, ok := s.services.Get(entry{key: k})
	return e.svc, ok
}

// len returns the number of services in the snapshot.
func (s *snapshot) len() int {
	if s == nil || s.services == nil {
		return 0
	}
	return s.services.Len()
}

// each calls fn for every service in tenant and name order until fn
// returns false.
func (s *snapshot) each(fn func(*service) bool) {
	if s == nil || s.services == nil {
		return
	}
	s.services.Ascend(func(e entry) bool { return fn(e.svc) })
}

// tenantFrom calls fn for tenant's services named after after (all of them
// when after is empty), in name order, until fn returns false: O(log N)
// to find the first, then O(1) per service.
func (s *snapshot) tenantFrom(tenant vocab.TenantID, after vocab.ServiceName, fn func(*service) bool) {
	if s == nil || s.services == nil {
		return
	}
	s.services.AscendGreaterOrEqual(entry{key: serviceKey{tenant, after}}, func(e entry) bool {
		if e.key.tenant != tenant {
			return false
		}
		if after != "" && e.key.service == after {
			return true
		}
		return fn(e.svc)
	})
}

// indexSum is an order-independent digest of the services and their
// releases: the lane-wise sum (mod 2^64) of a sha256 per service, so that
// adding or removing a service updates it in O(1). Pin.Hash is derived from
// it. It identifies content for comparing nodes that trust each other; it
// is not a defence against someone choosing service names to collide.
type indexSum [4]uint64

func serviceSum(svc *service) indexSum {
	h := vocab.NewCanon("catalog service v1")
	h.Str(string(svc.tenant))
	h.Str(string(svc.name))
	h.Str(string(svc.release))
	b := h.Sum()
	var s indexSum
	for i := range s {
		s[i] = binary.BigEndian.Uint64(b[8*i:])
	}
	return s
}

func (s *indexSum) add(svc *service) {
	v := serviceSum(svc)
	for i := range s {
		s[i] += v[i]
	}
}

func (s *indexSum) sub(svc *service) {
	v := serviceSum(svc)
	for i := range s {
		s[i] -= v[i]
	}
}

func (s indexSum) hash(services int) string {
	h := vocab.NewCanon("catalog v2")
	h.U64(uint64(services))
	for _, v := range s {
		h.U64(v)
	}
	return h.Hex()
}

// tenantUse is what a tenant's services use, counted as they are added to
// and removed from the writer's index: the deploy path's quota checks and
// garbage collection read these instead of walking the catalog.
type tenantUse struct {
	name      vocab.TenantID // the tenant, one copy shared by its index entries
	services  int
	artifacts map[vocab.Digest]int // services of the tenant that use each artifact
	snapshots map[SnapshotSpec]int // snapshot revisions that need each snapshot
}

// snapshotKey is the snapshot a revision of instance mode snapshot needs,
// as the runner keys it (MemoryBytes zero).
func snapshotKey(p vocab.RevisionPolicy) SnapshotSpec {
	return SnapshotSpec{Tenant: p.Tenant, Artifact: p.Artifact, Init: p.Init, Random: p.Random}
}

// count adds (delta 1) or removes (delta -1) svc's uses; a snapshot no
// longer needed is appended to zeroed.
func (u *tenantUse) count(svc *service, delta int, zeroed *[]SnapshotSpec) {
	u.services += delta
	for _, d := range svc.artifacts() {
		bump(u.artifacts, d, delta)
	}
	for _, p := range svc.policies {
		if p.Instance == vocab.InstanceSnapshot && bump(u.snapshots, snapshotKey(p), delta) {
			*zeroed = append(*zeroed, snapshotKey(p))
		}
	}
}

// bump adds delta to m[k] and reports whether that took k out of m.
func bump[K comparable](m map[K]int, k K, delta int) bool {
	if m[k] += delta; m[k] <= 0 {
		delete(m, k)
		return true
	}
	return false
}

// index is the writer's index: the services in a mutable B-tree and the
// counters kept beside it. The catalog holds one (Catalog.mu.index);
// every method requires the catalog's lock.
type index struct {
	tree *btree.BTreeG[entry]          // the services; published as clones
	use  map[vocab.TenantID]*tenantUse // what each tenant's services in tree use
	sum  indexSum                      // of tree
	// zeroed are the snapshots whose count reached zero since the last
	// takeUnused (some may be counted again since).
	zeroed []SnapshotSpec
}

// reset empties the index and its counters.
func (x *index) reset() {
	x.tree = newIndex()
	x.use = map[vocab.TenantID]*tenantUse{}
	x.sum = indexSum{}
	x.zeroed = nil
}

// put makes svc the service under its key and returns the one it replaced.
func (x *index) put(svc *service) (*service, bool) {
	// The entry's tenant shares the tenant's one copy of the name: a lookup
	// compares it without touching memory of its own per service.
	tenant := svc.tenant
	if u := x.use[tenant]; u != nil {
		tenant = u.name
	}
	prev, replaced := x.tree.ReplaceOrInsert(entry{key: serviceKey{tenant, svc.name}, svc: svc})
	if replaced {
		x.uncount(prev.svc)
	}
	u := x.use[tenant]
	if u == nil {
		u = &tenantUse{name: tenant, artifacts: map[vocab.Digest]int{}, snapshots: map[SnapshotSpec]int{}}
		x.use[tenant] = u
	}
	u.count(svc, 1, &x.zeroed)
	x.sum.add(svc)
	return prev.svc, replaced
}

// remove removes the service under k and returns it.
func (x *index) remove(k serviceKey) (*service, bool) {
	prev, ok := x.tree.Delete(entry{key: k})
	if ok {
		x.uncount(prev.svc)
	}
	return prev.svc, ok
}

func (x *index) uncount(svc *service) {
	u := x.use[svc.tenant]
	u.count(svc, -1, &x.zeroed)
	if u.services == 0 {
		delete(x.use, svc.tenant)
	}
	x.sum.sub(svc)
}

// view is the index as the immutable view of generation gen: an O(1)
// clone nobody changes again.
func (x *index) view(gen vocab.Generation) *snapshot {
	return &snapshot{generation: gen, services: x.tree.Clone(), sum: x.sum}
}

// uses reports whether one of the tenant's services uses artifact d.
func (x *index) uses(t vocab.TenantID, d vocab.Digest) bool {
	u := x.use[t]
	return u != nil && u.artifacts[d] > 0
}

// services returns how many services the tenant has.
func (x *index) services(t vocab.TenantID) int {
	if u := x.use[t]; u != nil {
		return u.services
	}
	return 0
}

// takeUnused returns the snapshots that reached zero since the last call
// and still are: what no service needs any more.
func (x *index) takeUnused() []SnapshotSpec {
	var unused []SnapshotSpec
	seen := map[SnapshotSpec]bool{}
	for _, sp := range x.zeroed {
		if u := x.use[sp.Tenant]; !seen[sp] && (u == nil || u.snapshots[sp] == 0) {
			seen[sp] = true
			unused = append(unused, sp)
		}
	}
	x.zeroed = nil
	return unused
}

// snapshotsInUse returns the snapshots the tenant's services need, sorted.
func (x *index) snapshotsInUse(t vocab.TenantID) []SnapshotSpec {
	u := x.use[t]
	if u == nil {
		return nil
	}
	return slices.SortedFunc(maps.Keys(u.snapshots), func(a, b SnapshotSpec) int {
		switch {
		case a.Artifact != b.Artifact:
			return strings.Compare(string(a.Artifact), string(b.Artifact))
		case a.Init != b.Init:
			return strings.Compare(string(a.Init), string(b.Init))
		}
		return int(a.Random) - int(b.Random)
	})
}

// SnapshotsInUse returns the snapshots the tenant's deployed services need
// now (one per artifact, init and random source of its snapshot
// revisions, MemoryBytes zero), sorted: what a runner keeps for the tenant.
// It reads a counter kept with the catalog, not the services.
func (c *Catalog) SnapshotsInUse(tenant vocab.TenantID) []SnapshotSpec {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.index.snapshotsInUse(tenant)
}

// ServiceCount returns how many services the tenant has deployed now,
// from a counter.
func (c *Catalog) ServiceCount(tenant vocab.TenantID) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.index.services(tenant)
}

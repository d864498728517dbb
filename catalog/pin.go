// Pin, the immutable view: Resolve (the routing hash), Policy, the
// service listings.

package catalog

import (
	"cmp"
	"encoding/json"
	"slices"
	"sync"

	"github.com/cockroachdb/errors"
	"github.com/google/btree"

	"github.com/latent-node/latent-node/vocab"
)

// ErrRevisionNotAvailable is returned when a target or a resolved revision does
// not match the pinned catalog view: unknown tenant, service, route or
// function, another release or generation, or a revision the route does not
// target.
var ErrRevisionNotAvailable = errors.New("catalog: revision not available")

// ErrRouteNotFound is what Resolve returns for a target whose service is
// deployed without the route; for a service that is not deployed it returns
// ErrServiceNotFound. Both errors are also ErrRevisionNotAvailable.
var ErrRouteNotFound = errors.New("catalog: route not found")

// The errors of Resolve, built once: resolving an unknown target allocates
// nothing.
var (
	errNoService = errors.Mark(errors.WithMessage(ErrServiceNotFound, "resolve"), ErrRevisionNotAvailable)
	errNoRoute   = errors.Mark(errors.WithMessage(ErrRouteNotFound, "resolve"), ErrRevisionNotAvailable)
)

type serviceKey struct {
	tenant  vocab.TenantID
	service vocab.ServiceName
}

// snapshot is one immutable state of the catalog.
type snapshot struct {
	generation vocab.Generation     // the latest generation issued when the snapshot was made
	services   *btree.BTreeG[entry] // a clone of the writer's index, never changed (nil: empty)
	sum        indexSum             // of services
	hash       struct {             // Pin.Hash, computed on first use
		once sync.Once
		v    string
	}
}

// Pin is an immutable view of the catalog at one moment. Resolution and policy
// lookup through one pin always agree with each other, and a pin keeps serving
// exactly the policy it saw after the catalog moves on. A Pin is a trusted,
// in-process capability: it is not serializable, and its holder must not
// retain unbounded numbers of old pins (each keeps its snapshot alive).
//
// The zero Pin is an empty view: everything resolves to ErrRevisionNotAvailable.
type Pin struct {
	s *snapshot
}

// Generation returns the catalog generation of the view: the last generation
// issued before the pin was taken.
func (p Pin) Generation() vocab.Generation {
	if p.s == nil {
		return 0
	}
	return p.s.generation
}

// ResolvedRevision identifies the revision a route resolved to, within one
// pinned view. Every identity field is verified again by Policy.
type ResolvedRevision struct {
	Tenant     vocab.TenantID
	Service    vocab.ServiceName
	Route      vocab.RouteName
	Function   vocab.FunctionName
	Revision   vocab.RevisionID
	Release    vocab.ReleaseID
	Generation vocab.Generation
	// ABI is the revision's guest interface (its policy's), for the caller
	// that shapes the input before admission; Policy does not check it.
	ABI vocab.ABI
	// Attributes are the revision's informational labels (a fresh copy). They
	// are untrusted for policy: Policy ignores them, and admission counts them
	// only against its metadata bounds.
	Attributes []vocab.Attribute
}

func (p Pin) service(t vocab.TenantID, s vocab.ServiceName) (*service, bool) {
	return p.s.get(serviceKey{t, s})
}

// Resolve picks the revision of target for routingKey. A weighted route picks
// deterministically: the same key gives the same revision within one pin (see
// the package doc for the hash). Resolution does no I/O and allocates only to
// copy the revision's attributes. A service that is not deployed is
// ErrServiceNotFound, a route the service does not have ErrRouteNotFound;
// both are also ErrRevisionNotAvailable.
func (p Pin) Resolve(target vocab.Target, routingKey string) (ResolvedRevision, error) {
	svc, ok := p.service(target.Tenant, target.Service)
	if !ok {
		return ResolvedRevision{}, errNoService
	}
	rt, ok := svc.route(target.Route)
	if !ok {
		return ResolvedRevision{}, errNoRoute
	}
	i := int(rt.targets[rt.pick(target, routingKey)].revision)
	pol := &svc.policies[i]
	var attrs []vocab.Attribute
	if svc.attributes != nil {
		attrs = slices.Clone(svc.attributes[i])
	}
	return ResolvedRevision{
		Tenant: svc.tenant, Service: svc.name, Route: target.Route, Function: rt.function,
		Revision: pol.ID, Release: svc.release, Generation: svc.generation, ABI: pol.ABI,
		Attributes: attrs,
	}, nil
}

// Policy returns the policy of a resolved revision after verifying its whole
// identity tuple (tenant, service, route, function, revision, release,
// generation) against this pin. It does not reselect: any revision the route
// targets is accepted. Attributes are ignored. The lookup is a bounded
// in-memory index operation: no filesystem, no artifact, no compilation.
func (p Pin) Policy(r ResolvedRevision) (vocab.RevisionPolicy, error) {
	svc, ok := p.service(r.Tenant, r.Service)
	if !ok {
		return vocab.RevisionPolicy{}, errors.Wrap(ErrRevisionNotAvailable, "no such service")
	}
	if svc.generation != r.Generation || svc.release != r.Release {
		return vocab.RevisionPolicy{}, errors.Wrap(ErrRevisionNotAvailable, "another generation")
	}
	rt, ok := svc.route(r.Route)
	if !ok || rt.function != r.Function {
		return vocab.RevisionPolicy{}, errors.Wrap(ErrRevisionNotAvailable, "no such route")
	}
	i, ok := svc.revision(r.Revision)
	if !ok || !slices.ContainsFunc(rt.targets, func(t routeTarget) bool { return int(t.revision) == i }) {
		return vocab.RevisionPolicy{}, errors.Wrap(ErrRevisionNotAvailable, "revision not targeted by the route")
	}
	return svc.policies[i], nil
}

// Deployment returns the active release of a service in this view.
func (p Pin) Deployment(tenant vocab.TenantID, name vocab.ServiceName) (vocab.Deployment, bool) {
	svc, ok := p.service(tenant, name)
	if !ok {
		return vocab.Deployment{}, false
	}
	return svc.deployment(), true
}

// Len returns the number of services in this view.
func (p Pin) Len() int { return p.s.len() }

// Services returns the deployments of a tenant in this view, ordered by
// service name: O(log N + the tenant's services).
func (p Pin) Services(tenant vocab.TenantID) []vocab.Deployment {
	out, _ := p.ServicesPage(tenant, "", 0)
	return out
}

// ServicesPage returns at most limit (all when limit <= 0) of the tenant's
// deployments named after after (from the first when after is empty),
// ordered by service name, and whether more follow: O(log N + limit).
func (p Pin) ServicesPage(tenant vocab.TenantID, after vocab.ServiceName, limit int) (_ []vocab.Deployment, more bool) {
	out := []vocab.Deployment{}
	p.s.tenantFrom(tenant, after, func(svc *service) bool {
		if limit > 0 && len(out) == limit {
			more = true
			return false
		}
		out = append(out, svc.deployment())
		return true
	})
	return out, more
}

// Artifacts returns the digests every deployed revision of this view uses,
// sorted and without duplicates (for preparing modules after a restart):
// O(N).
func (p Pin) Artifacts() []vocab.Digest {
	var out []vocab.Digest
	p.s.each(func(svc *service) bool {
		for _, pol := range svc.policies {
			out = append(out, pol.Artifact)
		}
		return true
	})
	slices.Sort(out)
	return slices.Compact(out)
}

// encodeManifest is m as JSON: how a service keeps its manifest. A
// manifest is small and bounded, and one that was decoded or validated
// always encodes.
func encodeManifest(m vocab.Manifest) []byte {
	data, err := json.Marshal(m)
	if err != nil {
		panic(errors.AssertionFailedf("catalog: marshal manifest: %v", err))
	}
	return data
}

// pick returns the index of the target that routingKey selects. The point is
// h mod total, where h is the routing hash of the target and key; the targets
// own consecutive intervals of [0, total) in manifest order, each as wide as
// its weight.
func (r *route) pick(t vocab.Target, routingKey string) int {
	if len(r.targets) == 1 {
		return 0
	}
	total := r.targets[len(r.targets)-1].cumulative
	point := uint32(routingHash(t, routingKey) % uint64(total))
	i, _ := slices.BinarySearchFunc(r.targets, point+1, func(t routeTarget, v uint32) int { return cmp.Compare(t.cumulative, v) })
	return i
}

// routingHash is FNV-1a (64-bit) over tenant, service, route and key separated
// by 0x00 bytes, finished with the SplitMix64 mixer so that nearby keys
// ("user-1", "user-2") spread evenly. It depends only on the target and the key,
// not on the release, so a key stays on its revision across redeploys unless
// the weights move its point into another interval.
func routingHash(t vocab.Target, key string) uint64 {
	const offset, prime = 14695981039346656037, 1099511628211
	h := uint64(offset)
	for _, s := range [...]string{string(t.Tenant), string(t.Service), string(t.Route), key} {
		for i := 0; i < len(s); i++ {
			h ^= uint64(s[i])
			h *= prime
		}
		h *= prime // the 0x00 separator: h ^= 0 is a no-op
	}
	h ^= h >> 30
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 27
	h *= 0x94d049bb133111eb
	h ^= h >> 31
	return h
}

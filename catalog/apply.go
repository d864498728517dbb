// Applying a history ordered elsewhere (a cluster's store): Check, Apply
// and Replace, and the view's Hash and AllServices they are compared by.

package catalog

import (
	"cmp"
	"context"

	"github.com/cockroachdb/errors"

	"github.com/latent-node/latent-node/vocab"
)

// A catalog normally issues its own generations (Deploy, Delete). In a
// cluster the order of releases is decided elsewhere — a store every node
// watches — and each node applies that history to its own catalog: Check
// inspects a release before it is proposed, Apply publishes changes under
// the generation the store gave them, Replace swaps in a whole listing. The
// store is then the source of truth: Apply and Replace do not apply the
// per-tenant quotas (the proposing node checked them against its view).

// ErrGenerationNotNewer is returned by Apply and Replace for a generation
// that is not above the catalog's: the served generation never goes down. A
// Replace at the catalog's own generation with the same content is not an
// error (nothing changes).
var ErrGenerationNotNewer = errors.New("catalog: generation is not newer than the catalog's")

// Change is one service's new state in an externally ordered history: its
// manifest, or nil when the service was deleted.
type Change struct {
	Tenant   vocab.TenantID
	Service  vocab.ServiceName
	Manifest *vocab.Manifest
}

// Check validates m and inspects its modules exactly as Deploy would,
// without publishing anything: the deployment Deploy would make, with
// generation 0. Its problems are Deploy's.
func (c *Catalog) Check(ctx context.Context, m vocab.Manifest) (vocab.Deployment, error) {
	s, modules, refs, err := c.prepare(ctx, m)
	if err != nil {
		return vocab.Deployment{}, err
	}
	defer c.mods.release(refs)
	svc, err := buildService(s, modules, 0)
	if err != nil {
		return vocab.Deployment{}, err
	}
	return svc.deployment(), nil
}

// Apply publishes changes as one step under generation gen, which must be
// above the catalog's (ErrGenerationNotNewer otherwise). Every manifest is
// validated and inspected first (its artifacts must be stored for its
// tenant); on any error nothing changes. The records are persisted before
// the new view is published.
func (c *Catalog) Apply(ctx context.Context, gen vocab.Generation, changes []Change) error {
	prepared, refs, err := c.prepareAll(ctx, changes)
	if err != nil {
		return err
	}
	replaced, err := c.publishAt(ctx, gen, false, prepared)
	if err != nil {
		c.mods.release(refs)
		return err
	}
	c.mods.release(replaced)
	c.notifyUnused()
	return nil
}

// Replace makes the catalog exactly manifests (one per service) under
// generation gen: a full listing of the store at one revision, after a
// history gap. gen must be above the catalog's generation, or equal to it
// with the same services and releases (then nothing changes).
func (c *Catalog) Replace(ctx context.Context, gen vocab.Generation, manifests []vocab.Manifest) error {
	changes := make([]Change, len(manifests))
	for i := range manifests {
		changes[i] = Change{Tenant: manifests[i].Tenant, Service: manifests[i].Service, Manifest: &manifests[i]}
	}
	prepared, refs, err := c.prepareAll(ctx, changes)
	changes, manifests = nil, nil // prepared holds copies: a caller that keeps none lets a large listing go
	if err != nil {
		return err
	}
	if cur := c.cur.Load(); cur.generation == gen {
		c.mods.release(refs)
		same := cur.len() == len(prepared)
		for k, p := range prepared {
			svc, ok := cur.get(k)
			same = same && ok && p != nil && svc.release == p.s.ReleaseID()
		}
		if same {
			return nil
		}
		return errors.Wrapf(ErrGenerationNotNewer, "catalog: replace at generation %d with other services than the catalog's", gen)
	}
	replaced, err := c.publishAt(ctx, gen, true, prepared)
	if err != nil {
		c.mods.release(refs)
		return err
	}
	c.mods.release(replaced)
	c.notifyUnused()
	return nil
}

// preparedService is a release validated and inspected, not yet built at
// a generation.
type preparedService struct {
	s        vocab.Spec
	manifest []byte // JSON, for the record
	modules  []ModuleInfo
}

// prepareAll validates and inspects the manifests of changes; a deletion
// is a key with a nil value. On error it released the references it took.
func (c *Catalog) prepareAll(ctx context.Context, changes []Change) (_ map[serviceKey]*preparedService, refs []vocab.Digest, err error) {
	defer func() {
		if err != nil {
			c.mods.release(refs)
			refs = nil
		}
	}()
	prepared := map[serviceKey]*preparedService{}
	// An inspector that hands out no references answers the same for the
	// same digest: a listing of many services over a few modules inspects
	// each module once. (One that does is asked for a reference per
	// service, through ModuleAcquirer when it has that.)
	var seen map[vocab.Digest]ModuleInfo
	if c.mods.releaser == nil {
		seen = map[vocab.Digest]ModuleInfo{}
	}
	for _, ch := range changes {
		k := serviceKey{ch.Tenant, ch.Service}
		if ch.Manifest == nil {
			prepared[k] = nil
			continue
		}
		m := *ch.Manifest // validate copies what the service keeps; the record is encoded now
		s, err := vocab.NewSpec(m)
		if err != nil {
			return nil, refs, err
		}
		if s.Tenant != ch.Tenant || s.Service != ch.Service {
			return nil, refs, errors.Newf("catalog: change of %s/%s carries the manifest of %s/%s", ch.Tenant, ch.Service, s.Tenant, s.Service)
		}
		modules, r, err := c.mods.inspectAll(ctx, s, c.arts.Has, seen)
		refs = append(refs, r...)
		if err != nil {
			return nil, refs, errors.Wrapf(err, "catalog: %s/%s", s.Tenant, s.Service)
		}
		prepared[k] = &preparedService{s: s, manifest: encodeManifest(m), modules: modules}
	}
	return prepared, refs, nil
}

// publishAt builds the prepared services at generation gen (above the
// current one), persists them, removes the records of deleted services
// (with whole, of every service not in prepared) and publishes the result.
// It returns the module references of the services replaced or removed.
func (c *Catalog) publishAt(ctx context.Context, gen vocab.Generation, whole bool, prepared map[serviceKey]*preparedService) ([]vocab.Digest, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return nil, errors.Wrap(err, "catalog: apply")
	}
	old := c.cur.Load()
	// Against the published generation: an attempt at gen that failed
	// while writing published nothing, and the same history retried must
	// apply (its records overwrite what the failed attempt wrote).
	if gen <= old.generation {
		return nil, errors.Wrapf(ErrGenerationNotNewer, "catalog: generation %d, the catalog is at %d", gen, old.generation)
	}
	// Everything is built before anything is written or changed: a
	// manifest that does not build leaves the catalog as it was.
	built := make(map[serviceKey]*service, len(prepared))
	for k, p := range prepared {
		if p == nil {
			continue
		}
		svc, err := buildService(p.s, p.modules, gen)
		if err != nil {
			return nil, err
		}
		built[k] = svc
	}
	// Removing a record needs the generation on disk first (a restart
	// must not issue it again); a written record carries its own.
	var removed []serviceKey
	if whole {
		old.each(func(svc *service) bool {
			if k := (serviceKey{svc.tenant, svc.name}); built[k] == nil {
				removed = append(removed, k)
			}
			return true
		})
	} else {
		for k, p := range prepared {
			if _, ok := old.get(k); ok && p == nil {
				removed = append(removed, k)
			}
		}
	}
	if len(removed) > 0 {
		if err := c.commitGenerationLocked(gen); err != nil {
			return nil, err
		}
	}
	c.mu.generation = max(c.mu.generation, gen)
	var replaced []vocab.Digest
	if whole {
		// A full listing mostly repeats what the catalog has: a service
		// whose release is unchanged keeps its record and its generation,
		// and gives back the references its preparation took.
		for k, svc := range built {
			if prev, ok := old.get(k); ok && prev.release == svc.release {
				delete(built, k)
				replaced = append(replaced, svc.artifacts()...)
			}
		}
	}
	var removes []string
	for _, k := range removed {
		removes = append(removes, ServiceRecordPath(k.tenant, k.service))
	}
	if err := c.store.removeAll(removes); err != nil {
		return nil, err
	}
	if len(built) == 1 {
		for k, svc := range built {
			if err := c.writeServiceLocked(svc, prepared[k].manifest, prepared[k].modules); err != nil {
				return nil, err
			}
		}
	} else {
		writes := make([]bulkWrite, 0, len(built))
		for k, svc := range built {
			writes = append(writes, bulkWrite{rel: ServiceRecordPath(k.tenant, k.service), data: func() ([]byte, error) {
				return serviceRecordBytes(svc, prepared[k].manifest, prepared[k].modules)
			}})
		}
		if err := c.store.writeBulk(writes); err != nil {
			return nil, err
		}
	}
	for _, k := range removed {
		if prev, ok := c.mu.index.remove(k); ok {
			replaced = append(replaced, prev.artifacts()...)
		}
	}
	for _, svc := range built {
		if prev, ok := c.mu.index.put(svc); ok {
			replaced = append(replaced, prev.artifacts()...)
		}
	}
	c.cur.Store(c.mu.index.view(gen))
	return replaced, nil
}

// Hash identifies the services and releases of the view (not its
// generation): two nodes with the same hash serve the same releases. It is
// computed once per snapshot.
func (p Pin) Hash() string {
	if p.s == nil {
		return indexSum{}.hash(0)
	}
	p.s.hash.once.Do(func() { p.s.hash.v = p.s.sum.hash(p.s.len()) })
	return p.s.hash.v
}

// compareKeys orders services by tenant, then name.
func compareKeys(a, b serviceKey) int {
	return cmp.Or(cmp.Compare(a.tenant, b.tenant), cmp.Compare(a.service, b.service))
}

// AllServices returns the deployments of every service in the view,
// ordered by tenant and service.
func (p Pin) AllServices() []vocab.Deployment {
	out := make([]vocab.Deployment, 0, p.s.len())
	p.s.each(func(svc *service) bool {
		out = append(out, svc.deployment())
		return true
	})
	return out
}

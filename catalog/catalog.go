// Catalog and Config: Open (rebuilding every persisted release), Deploy,
// Delete, Manifest and Pin.

package catalog

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/latent-node/latent-node/vocab"
)

// Sentinels of the catalog.
var (
	// ErrServiceNotFound: the service is not deployed.
	ErrServiceNotFound = errors.New("catalog: service not found")
	// ErrCatalogFull: deploying a new service would exceed Config.MaxServices.
	ErrCatalogFull = errors.New("catalog: too many services")
)

// Defaults of Config.
const (
	DefaultMaxServices               = 4096
	DefaultMaxArtifactBytes          = 64 << 20
	DefaultMaxServicesPerTenant      = 256
	DefaultMaxArtifactsPerTenant     = 256
	DefaultMaxArtifactBytesPerTenant = 1 << 30
	DefaultMaxDeployedBytesPerTenant = 128 << 20
	DefaultArtifactGrace             = time.Hour
)

// Config configures a catalog: its values, then its collaborators (the
// module inspector, the clock).
type Config struct {
	// Dir is the node's data directory; the catalog owns its "artifacts" and
	// "catalog" subdirectories. Required.
	Dir string
	// Inspector examines modules at deploy and at Open. Required.
	Inspector ModuleInspector
	// OnInspect, if set, is called when the catalog hands a module to the
	// Inspector (Done false) and when the Inspector answered (Done true),
	// so that the node can say what a multi-second compile is doing. It is
	// not called for a module the Inspector held already (AcquireModule).
	OnInspect func(InspectEvent)
	// OnSnapshotsUnused, if set, is called after a deploy, delete, Apply
	// or Replace with the snapshots (MemoryBytes zero, as SnapshotsInUse
	// gives them) that no deployed revision needs any more, so that the
	// runner drops them: the catalog counts each snapshot's revisions as
	// they come and go, so this costs the change, not the catalog.
	OnSnapshotsUnused func([]SnapshotSpec)
	// MaxServices bounds the number of deployed services of the whole node
	// (default 4096). Keep it at least the number of tenants times
	// MaxServicesPerTenant: otherwise, once the tenants together deploy
	// MaxServices services, a new service of any tenant is refused with
	// ErrCatalogFull (first come, first served) even below its own quota;
	// replacing or deleting existing services keeps working.
	MaxServices int
	// MaxArtifactBytes bounds one module (default 64 MiB).
	MaxArtifactBytes int64
	// MaxServicesPerTenant bounds the services one tenant deploys (default
	// 256). Above MaxServices it never applies: one tenant alone can then
	// fill the node.
	MaxServicesPerTenant int
	// MaxArtifactsPerTenant bounds the artifacts one tenant owns (default 256).
	MaxArtifactsPerTenant int
	// MaxArtifactBytesPerTenant bounds the total size of the artifacts one
	// tenant owns (default 1 GiB). Each owner is charged the full size of an
	// artifact, even when another tenant uploaded the same bytes.
	MaxArtifactBytesPerTenant int64
	// MaxDeployedBytesPerTenant bounds the total size of the distinct
	// artifacts the tenant's deployed services use (default 128 MiB): what
	// the node compiles and keeps for the tenant. A deploy is checked
	// against the services the tenant would have after it (the release it
	// replaces no longer counts). Open does not enforce it: a tenant above a
	// lowered bound keeps its services and may only delete them or replace
	// them with releases that do not grow its deployed bytes.
	MaxDeployedBytesPerTenant int64
	// ArtifactGrace is how long after its upload an artifact that none of
	// its tenant's services uses survives Artifacts.CollectGarbage (default
	// 1 hour).
	ArtifactGrace time.Duration
	// Clock stamps uploads (default: the wall clock).
	Clock vocab.Clock
}

func (o *Config) SetDefaults() {
	if o.MaxServices <= 0 {
		o.MaxServices = DefaultMaxServices
	}
	if o.MaxArtifactBytes <= 0 {
		o.MaxArtifactBytes = DefaultMaxArtifactBytes
	}
	if o.MaxServicesPerTenant <= 0 {
		o.MaxServicesPerTenant = DefaultMaxServicesPerTenant
	}
	if o.MaxArtifactsPerTenant <= 0 {
		o.MaxArtifactsPerTenant = DefaultMaxArtifactsPerTenant
	}
	if o.MaxArtifactBytesPerTenant <= 0 {
		o.MaxArtifactBytesPerTenant = DefaultMaxArtifactBytesPerTenant
	}
	if o.MaxDeployedBytesPerTenant <= 0 {
		o.MaxDeployedBytesPerTenant = DefaultMaxDeployedBytesPerTenant
	}
	if o.ArtifactGrace <= 0 {
		o.ArtifactGrace = DefaultArtifactGrace
	}
	if o.Clock == nil {
		o.Clock = vocab.WallClock
	}
}

// Catalog is the pinned deployment catalog of a node. Deploys and deletes are
// serialized, persisted, then published by swapping one atomic pointer; Pin
// reads that pointer and never blocks. Catalog starts no goroutines. Its
// artifact store (uploads, ownership, quotas, garbage collection) is its
// Artifacts.
type Catalog struct {
	opts  Config
	store *diskStore
	mods  modules    // the inspector's side: inspection, snapshots, references (inspect.go)
	arts  *Artifacts // ownership of the stored artifacts, guarded by mu too (artifacts.go)
	cur   atomic.Pointer[snapshot]

	mu struct {
		sync.Mutex
		generation vocab.Generation // last generation issued (persisted before use)
		index      index            // the services and their counters (index.go)
	}
}

// Artifacts returns the catalog's artifact store: uploads, ownership,
// the tenants' artifact quotas and garbage collection.
func (c *Catalog) Artifacts() *Artifacts { return c.arts }

// Open opens or creates the catalog under opts.Dir and rebuilds every
// persisted release: each record's checksum is verified, its manifest
// validated again, its artifacts verified against their digests and inspected
// again, and the recomputed ids, generation and module facts must equal the
// recorded ones. Any difference is an error naming the file; nothing is
// skipped and no partial catalog is returned. Open first takes the data
// directory's lock (LockDir): another process holding it gives ErrDirInUse.
func Open(ctx context.Context, opts Config) (*Catalog, error) {
	if opts.Dir == "" {
		return nil, errors.New("catalog: Config.Dir is required")
	}
	if opts.Inspector == nil {
		return nil, errors.New("catalog: Config.Inspector is required")
	}
	opts.SetDefaults()
	if err := LockDir(opts.Dir); err != nil {
		return nil, err
	}
	c := &Catalog{opts: opts, store: &diskStore{root: opts.Dir}}
	c.mods = newModules(opts.Inspector, c.store, opts.MaxArtifactBytes)
	c.mods.onInspect, c.mods.clock = opts.OnInspect, opts.Clock
	c.arts = newArtifacts(&c.mu.Mutex, &c.mu.index, c.store, opts)
	if err := c.store.init(); err != nil {
		return nil, err
	}
	if err := c.arts.load(); err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.mu.index.reset()
	c.mu.Unlock()
	// Loading inspects modules, and on a failure gives references back:
	// without c.mu held (ModuleReleaser's rule). Nothing else uses the
	// catalog before Open returns.
	gen, err := c.load(ctx)
	c.mu.Lock()
	if err == nil {
		c.mu.generation = gen
		c.cur.Store(c.mu.index.view(gen))
		err = c.arts.settleLocked(c.cur.Load())
	}
	var refs []vocab.Digest
	if err != nil {
		c.mu.index.tree.Ascend(func(e entry) bool {
			refs = append(refs, e.svc.artifacts()...)
			return true
		})
	}
	c.mu.Unlock()
	if err != nil {
		c.mods.release(refs)
		return nil, err
	}
	return c, nil
}

// recordOf is a service's record with its manifest as M: serviceRecord
// decodes it, storedServiceRecord writes the JSON a deploy encoded once
// (the same JSON).
type recordOf[M any] struct {
	Tenant     vocab.TenantID      `json:"tenant"`
	Service    vocab.ServiceName   `json:"service"`
	Generation vocab.Generation    `json:"generation"`
	Release    vocab.ReleaseID     `json:"release"`
	Revisions  []vocab.RevisionRef `json:"revisions"`
	Modules    []ModuleInfo        `json:"modules"`
	Manifest   M                   `json:"manifest"`
}

type (
	serviceRecord       = recordOf[vocab.Manifest]
	storedServiceRecord = recordOf[json.RawMessage]
)

// load rebuilds the persisted services into the writer's index and
// returns the last generation issued: the state record's, or a service
// record's if higher (a deploy writes only its service's record). On error
// the caller releases the module references of the index. It takes c.mu
// only to change the index and the state.
func (c *Catalog) load(ctx context.Context) (vocab.Generation, error) {
	var last vocab.Generation
	statePath := c.store.path(StateFile)
	data, err := readBounded(statePath, 4096)
	haveState := err == nil
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return 0, err
	default:
		var st stateRecord
		if err := decodeRecord("state", data, &st); err != nil {
			return 0, errors.Mark(errors.Wrapf(err, "catalog: %s", statePath), ErrCorruptRecord)
		}
		last = st.Generation
	}

	dir := c.store.path(ServicesDir)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0, errors.Wrapf(err, "catalog: read %s", dir)
	}
	if !haveState && len(entries) == 0 {
		// A new catalog: its state record exists from the start, so a
		// service record without one is always a damaged directory.
		c.mu.Lock()
		err := c.commitGenerationLocked(0)
		c.mu.Unlock()
		if err != nil {
			return 0, err
		}
		haveState = true
	}
	if len(entries) > c.opts.MaxServices {
		return 0, errors.WithHint(errors.Wrapf(ErrCatalogFull, "catalog: %d services persisted", len(entries)),
			"raise the catalog's service bound or delete services")
	}
	if len(entries) > 0 && !haveState {
		return 0, errors.Wrapf(ErrCorruptRecord, "catalog: %s exists but %s is missing", filepath.Join(dir, entries[0].Name()), statePath)
	}
	services, errs := c.loadServices(ctx, entries)
	c.mu.Lock()
	for _, svc := range services {
		if svc != nil {
			c.mu.index.put(svc) // on error too: the caller releases what the index holds
			last = max(last, svc.generation)
		}
	}
	c.mu.Unlock()
	for i, err := range errs {
		if err != nil {
			return 0, errors.Mark(errors.Wrapf(err, "catalog: %s", filepath.Join(dir, entries[i].Name())), ErrCorruptRecord)
		}
	}
	return last, nil
}

// loadServices loads the service records of entries on up to GOMAXPROCS
// goroutines (reading, decoding, validating and rebuilding a record is
// CPU work of about 50-100 µs; a restart at 100,000 services is dominated
// by it), which it waits for. The result i is entries[i]'s service or its
// error; after the first error the records not yet started are skipped
// (nil, nil).
func (c *Catalog) loadServices(ctx context.Context, entries []os.DirEntry) ([]*service, []error) {
	services, errs := make([]*service, len(entries)), make([]error, len(entries))
	var next atomic.Int64
	var failed atomic.Bool
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(entries), 8) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= len(entries) || failed.Load() {
					return
				}
				services[i], errs[i] = c.loadService(ctx, entries[i].Name())
				if errs[i] != nil {
					failed.Store(true)
				}
			}
		})
	}
	wg.Wait()
	return services, errs
}

// loadService loads and checks one service record.
func (c *Catalog) loadService(ctx context.Context, file string) (*service, error) {
	if !strings.HasSuffix(file, ".rec") {
		return nil, errors.New("not a service record (unexpected file in the catalog directory)")
	}
	data, err := readBounded(c.store.path(ServicesDir+"/"+file), MaxRecordBytes)
	if err != nil {
		return nil, err
	}
	var rec serviceRecord
	if err := decodeRecord("service", data, &rec); err != nil {
		return nil, err
	}
	s, err := vocab.NewSpec(rec.Manifest)
	if err != nil {
		return nil, errors.Wrap(err, "recorded manifest")
	}
	switch {
	case rec.Tenant != s.Tenant || rec.Service != s.Service:
		return nil, errors.New("record names another service than its manifest")
	case ServicesDir+"/"+file != ServiceRecordPath(s.Tenant, s.Service):
		return nil, errors.New("record is stored under another service's name")
	case rec.Generation == 0:
		return nil, errors.New("record has no generation")
	case len(rec.Modules) != len(s.Revisions):
		return nil, errors.New("record has module facts for another number of revisions")
	}
	modules, refs, err := c.mods.inspectAll(ctx, s, nil, nil)
	if err != nil {
		return nil, err
	}
	svc, err := checkLoaded(s, rec, modules)
	if err != nil {
		c.mods.release(refs)
		return nil, err
	}
	return svc, nil
}

func checkLoaded(s vocab.Spec, rec serviceRecord, modules []ModuleInfo) (*service, error) {
	for i := range modules {
		if !modules[i].equal(rec.Modules[i]) {
			return nil, errors.Newf("revision %d: the artifact inspects differently than recorded", i)
		}
	}
	svc, err := buildService(s, modules, rec.Generation)
	if err != nil {
		return nil, errors.Wrap(err, "recorded manifest")
	}
	if svc.release != rec.Release || !slices.Equal(svc.deployment().Revisions, rec.Revisions) {
		return nil, errors.New("recomputed release or revision ids differ from the record")
	}
	return svc, nil
}

func readBounded(name string, maxBytes int64) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, errors.Wrapf(err, "catalog: open %s", name)
	}
	defer func() { _ = f.Close() }()
	data, err := io.ReadAll(io.LimitReader(f, maxBytes+1))
	if err != nil {
		return nil, errors.Wrapf(err, "catalog: read %s", name)
	}
	if int64(len(data)) > maxBytes {
		return nil, errors.Wrapf(ErrCorruptRecord, "catalog: %s is larger than %d bytes", name, maxBytes)
	}
	return data, nil
}

// Manifest returns the active release of a service with its manifest, read
// from the service's record (one file): the catalog keeps no manifests in
// memory. The record is written before a release is published, so this may
// answer a release a concurrent deploy is about to publish.
// ErrServiceNotFound when the service is not deployed.
func (c *Catalog) Manifest(tenant vocab.TenantID, name vocab.ServiceName) (vocab.Deployment, vocab.Manifest, error) {
	path := c.store.path(ServiceRecordPath(tenant, name))
	data, err := readBounded(path, MaxRecordBytes)
	if errors.Is(err, os.ErrNotExist) {
		return vocab.Deployment{}, vocab.Manifest{}, ErrServiceNotFound
	}
	if err != nil {
		return vocab.Deployment{}, vocab.Manifest{}, err
	}
	var rec serviceRecord
	if err := decodeRecord("service", data, &rec); err != nil {
		return vocab.Deployment{}, vocab.Manifest{}, errors.Mark(errors.Wrapf(err, "catalog: %s", path), ErrCorruptRecord)
	}
	if rec.Tenant != tenant || rec.Service != name {
		return vocab.Deployment{}, vocab.Manifest{}, errors.Wrapf(ErrCorruptRecord, "catalog: %s names another service", path)
	}
	return vocab.Deployment{Tenant: rec.Tenant, Service: rec.Service, Release: rec.Release, Generation: rec.Generation,
		Revisions: rec.Revisions}, rec.Manifest, nil
}

// Pin returns the current immutable view. It never blocks and never fails.
func (c *Catalog) Pin() Pin { return Pin{s: c.cur.Load()} }

// Deploy validates m, inspects its modules, and activates it as the service's
// release under the next generation. The release is persisted before it is
// published; on any error nothing changes and the previous release keeps
// serving. Concurrent deploys are serialized: each gets its own generation
// and the last one to finish is the active release. A revision may only use
// an artifact its tenant owns (see Artifacts.Put); any other digest is refused
// exactly like one never uploaded. A new service beyond the tenant's quota is
// refused with ErrTenantQuota (before anything is inspected), beyond the
// node's bound with ErrCatalogFull. A release that would take the tenant's
// deployed bytes beyond Config.MaxDeployedBytesPerTenant is refused with
// ErrTenantQuota too, checked before inspection and again, authoritatively,
// under the catalog's lock before publishing.
func (c *Catalog) Deploy(ctx context.Context, m vocab.Manifest) (vocab.Deployment, error) {
	s, modules, refs, err := c.prepare(ctx, m)
	if err != nil {
		return vocab.Deployment{}, err
	}
	dep, replaced, err := c.publish(ctx, s, encodeManifest(m), modules) // the service keeps JSON, not the caller's slices
	if err != nil {
		c.mods.release(refs)
		return vocab.Deployment{}, err
	}
	c.mods.release(replaced)
	c.notifyUnused()
	return dep, nil
}

// prepare validates m, checks that the tenant has room for it (services,
// deployed bytes) and inspects its modules: what Deploy and Check do
// before publishing. On success the caller owns one module reference per
// digest in refs.
func (c *Catalog) prepare(ctx context.Context, m vocab.Manifest) (vocab.Spec, []ModuleInfo, []vocab.Digest, error) {
	s, err := vocab.NewSpec(m)
	if err != nil {
		return vocab.Spec{}, nil, nil, err
	}
	c.mu.Lock()
	err = c.serviceRoomLocked(s.Tenant, s.Service)
	if err == nil {
		err = c.deployedRoomLocked(s)
	}
	c.mu.Unlock()
	if err != nil {
		return vocab.Spec{}, nil, nil, err
	}
	modules, refs, err := c.mods.inspectAll(WithDeployingTenant(ctx, s.Tenant), s, c.arts.Has, nil)
	if err != nil {
		return vocab.Spec{}, nil, nil, err
	}
	if err := c.mods.prepareSnapshots(ctx, s, modules); err != nil {
		c.mods.release(refs)
		return vocab.Spec{}, nil, nil, err
	}
	return s, modules, refs, nil
}

// publish builds, persists and publishes the service under the next
// generation. It returns the module references of the release it replaced.
func (c *Catalog) publish(ctx context.Context, s vocab.Spec, manifest []byte, modules []ModuleInfo) (vocab.Deployment, []vocab.Digest, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return vocab.Deployment{}, nil, errors.Wrap(err, "catalog: deploy")
	}
	if err := c.serviceRoomLocked(s.Tenant, s.Service); err != nil {
		return vocab.Deployment{}, nil, err
	}
	// Garbage collection may have taken an artifact since it was inspected:
	// it then answers as unknown, so no release ever names a removed artifact.
	var p vocab.Problems
	for i, r := range s.Revisions {
		if !c.arts.ownsLocked(s.Tenant, r.Artifact) {
			p.Add("revisions["+strconv.Itoa(i)+"].artifact", unknownArtifact)
		}
	}
	if err := p.Err(); err != nil {
		return vocab.Deployment{}, nil, err
	}
	if err := c.deployedRoomLocked(s); err != nil {
		return vocab.Deployment{}, nil, err
	}
	gen := c.mu.generation + 1
	svc, err := buildService(s, modules, gen)
	if err != nil {
		return vocab.Deployment{}, nil, err
	}
	c.mu.generation = gen // issued: a failed write below burns it
	if err := c.writeServiceLocked(svc, manifest, modules); err != nil {
		return vocab.Deployment{}, nil, err
	}
	var replaced []vocab.Digest
	if prev, ok := c.mu.index.put(svc); ok {
		replaced = prev.artifacts()
	}
	c.cur.Store(c.mu.index.view(gen))
	return svc.deployment(), replaced, nil
}

// writeServiceLocked persists svc's record. The record carries its
// generation, so a deploy fsyncs one file: Open takes the highest
// generation of the state and the service records as the last issued.
//
// REQUIRES: c.mu held.
func (c *Catalog) writeServiceLocked(svc *service, manifest []byte, modules []ModuleInfo) error {
	data, err := serviceRecordBytes(svc, manifest, modules)
	if err != nil {
		return err
	}
	return c.store.writeAtomic(ServiceRecordPath(svc.tenant, svc.name), data)
}

// serviceRecordBytes is the record file of svc.
func serviceRecordBytes(svc *service, manifest []byte, modules []ModuleInfo) ([]byte, error) {
	rec := storedServiceRecord{Tenant: svc.tenant, Service: svc.name, Generation: svc.generation, Release: svc.release,
		Revisions: svc.deployment().Revisions, Modules: modules, Manifest: manifest}
	payload, err := json.Marshal(rec)
	if err != nil {
		return nil, errors.Wrap(err, "catalog: encode record")
	}
	return encodeRecord("service", payload), nil
}

// serviceRoomLocked reports whether the catalog has room for the tenant's
// service: an existing service can always be replaced; a new one needs
// room in the tenant's quota and in the node's bound. It reads counters:
// O(log N).
//
// REQUIRES: c.mu held.
func (c *Catalog) serviceRoomLocked(tenant vocab.TenantID, name vocab.ServiceName) error {
	if c.mu.index.tree.Has(entry{key: serviceKey{tenant, name}}) {
		return nil
	}
	used := 0
	if u := c.mu.index.use[tenant]; u != nil {
		used = u.services
	}
	if used >= c.opts.MaxServicesPerTenant {
		return &QuotaError{Dimension: QuotaServices, Limit: uint64(c.opts.MaxServicesPerTenant), Used: uint64(used)}
	}
	if c.mu.index.tree.Len() >= c.opts.MaxServices {
		return errors.WithHint(ErrCatalogFull, "delete unused services or raise the node's service bound")
	}
	return nil
}

// deployedRoomLocked reports whether the tenant's deployed bytes stay within
// Config.MaxDeployedBytesPerTenant once s replaces the tenant's service of
// the same name. The deployed bytes are the sum of the sizes (from the
// ownership records) of the distinct artifacts the tenant's services use;
// an artifact shared by several services or revisions counts once. A
// deploy that does not grow them always fits, so a tenant above a lowered
// bound can still shrink. An artifact the tenant does not own counts zero:
// the deploy is refused as unknown anyway. It reads the tenant's artifact
// counters: O(the tenant's distinct artifacts), not O(services).
//
// REQUIRES: c.mu held.
func (c *Catalog) deployedRoomLocked(s vocab.Spec) error {
	size := func(d vocab.Digest) uint64 { return c.arts.sizeLocked(s.Tenant, d) }
	var inUse map[vocab.Digest]int
	if u := c.mu.index.use[s.Tenant]; u != nil {
		inUse = u.artifacts
	}
	var prev []vocab.Digest // the artifacts of the release s replaces
	if e, ok := c.mu.index.tree.Get(entry{key: serviceKey{s.Tenant, s.Service}}); ok {
		prev = e.svc.artifacts()
	}
	var used, next uint64
	for d, n := range inUse {
		used += size(d)
		if n > 1 || !slices.Contains(prev, d) {
			next += size(d) // still used by another service
		}
	}
	added := map[vocab.Digest]bool{}
	for _, r := range s.Revisions {
		if added[r.Artifact] {
			continue
		}
		added[r.Artifact] = true
		if n := inUse[r.Artifact]; n == 0 || (n == 1 && slices.Contains(prev, r.Artifact)) {
			next += size(r.Artifact)
		}
	}
	if limit := uint64(c.opts.MaxDeployedBytesPerTenant); next > limit && next > used {
		return &QuotaError{Dimension: QuotaDeployedBytes, Limit: limit, Used: used}
	}
	return nil
}

// Delete removes a service under the next generation; pins taken before keep
// serving it. It returns that generation.
func (c *Catalog) Delete(ctx context.Context, tenant vocab.TenantID, name vocab.ServiceName) (vocab.Generation, error) {
	gen, deleted, err := c.delete(ctx, tenant, name)
	if err != nil {
		return 0, err
	}
	c.mods.release(deleted)
	c.notifyUnused()
	return gen, nil
}

// notifyUnused tells Config.OnSnapshotsUnused of the snapshots the
// changes published so far left without a revision.
func (c *Catalog) notifyUnused() {
	c.mu.Lock()
	unused := c.mu.index.takeUnused()
	c.mu.Unlock()
	if len(unused) > 0 && c.opts.OnSnapshotsUnused != nil {
		c.opts.OnSnapshotsUnused(unused)
	}
}

func (c *Catalog) delete(ctx context.Context, tenant vocab.TenantID, name vocab.ServiceName) (vocab.Generation, []vocab.Digest, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return 0, nil, errors.Wrap(err, "catalog: delete")
	}
	key := serviceKey{tenant, name}
	if !c.mu.index.tree.Has(entry{key: key}) {
		return 0, nil, ErrServiceNotFound
	}
	gen := c.mu.generation + 1
	if err := c.commitGenerationLocked(gen); err != nil {
		return 0, nil, err
	}
	if err := c.store.remove(ServiceRecordPath(tenant, name)); err != nil {
		return 0, nil, err
	}
	svc, _ := c.mu.index.remove(key)
	c.cur.Store(c.mu.index.view(gen))
	return gen, svc.artifacts(), nil
}

// commitGenerationLocked persists gen as the last generation issued. It is
// written before the record that uses it, so a crash in between leaves an
// unused generation (a harmless gap), never a reused one.
//
// REQUIRES: c.mu held.
func (c *Catalog) commitGenerationLocked(gen vocab.Generation) error {
	payload, err := json.Marshal(stateRecord{Generation: gen})
	if err != nil {
		return errors.Wrap(err, "catalog: encode state")
	}
	if err := c.store.writeAtomic(StateFile, encodeRecord("state", payload)); err != nil {
		return err
	}
	c.mu.generation = gen
	return nil
}

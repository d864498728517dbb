package catalog

import (
	"context"
	"encoding/json"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/errors"
)

// Sentinels of the catalog.
var (
	// ErrServiceNotFound: the service is not deployed.
	ErrServiceNotFound = errors.New("catalog: service not found")
	// ErrCatalogFull: deploying a new service would exceed Options.MaxServices.
	ErrCatalogFull = errors.New("catalog: too many services")
)

// Defaults of Options.
const (
	DefaultMaxServices      = 4096
	DefaultMaxArtifactBytes = 64 << 20
)

// Options configure a catalog.
type Options struct {
	// Dir is the node's data directory; the catalog owns its "artifacts" and
	// "catalog" subdirectories. Required.
	Dir string
	// Inspector examines modules at deploy and at Open. Required.
	Inspector ModuleInspector
	// MaxServices bounds the number of deployed services (default 4096).
	MaxServices int
	// MaxArtifactBytes bounds one module (default 64 MiB).
	MaxArtifactBytes int64
}

// Catalog is the pinned deployment catalog of a node. Deploys and deletes are
// serialized, persisted, then published by swapping one atomic pointer; Pin
// reads that pointer and never blocks. Catalog starts no goroutines.
type Catalog struct {
	opts  Options
	store diskStore
	arts  artifactStore
	cur   atomic.Pointer[snapshot]

	mu struct {
		sync.Mutex
		generation Generation // last generation issued (persisted before use)
	}
}

// Open opens or creates the catalog under opts.Dir and rebuilds every
// persisted release: each record's checksum is verified, its manifest
// validated again, its artifacts verified against their digests and inspected
// again, and the recomputed ids, generation and module facts must equal the
// recorded ones. Any difference is an error naming the file; nothing is
// skipped and no partial catalog is returned.
func Open(ctx context.Context, opts Options) (*Catalog, error) {
	if opts.Dir == "" {
		return nil, errors.New("catalog: Options.Dir is required")
	}
	if opts.Inspector == nil {
		return nil, errors.New("catalog: Options.Inspector is required")
	}
	if opts.MaxServices <= 0 {
		opts.MaxServices = DefaultMaxServices
	}
	if opts.MaxArtifactBytes <= 0 {
		opts.MaxArtifactBytes = DefaultMaxArtifactBytes
	}
	c := &Catalog{opts: opts, store: diskStore{root: opts.Dir}}
	c.arts = c.store
	if err := c.store.init(); err != nil {
		return nil, err
	}
	snap, err := c.load(ctx)
	if err != nil {
		return nil, err
	}
	c.mu.generation = snap.generation
	c.cur.Store(snap)
	return c, nil
}

type stateRecord struct {
	Generation Generation `json:"generation"`
}

type serviceRecord struct {
	Tenant     TenantID      `json:"tenant"`
	Service    ServiceName   `json:"service"`
	Generation Generation    `json:"generation"`
	Release    ReleaseID     `json:"release"`
	Revisions  []RevisionRef `json:"revisions"`
	Modules    []ModuleInfo  `json:"modules"`
	Manifest   Manifest      `json:"manifest"`
}

func (c *Catalog) load(ctx context.Context) (*snapshot, error) {
	snap := &snapshot{services: map[serviceKey]*service{}}
	statePath := c.store.path(stateFile)
	data, err := readBounded(statePath, 4096)
	haveState := err == nil
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return nil, err
	default:
		var st stateRecord
		if err := decodeRecord("state", data, &st); err != nil {
			return nil, errors.Mark(errors.Wrapf(err, "catalog: %s", statePath), ErrCorruptRecord)
		}
		snap.generation = st.Generation
	}

	dir := c.store.path(servicesDir)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, errors.Wrapf(err, "catalog: read %s", dir)
	}
	for _, e := range entries {
		name := filepath.Join(dir, e.Name())
		if !haveState {
			return nil, errors.Wrapf(ErrCorruptRecord, "catalog: %s exists but %s is missing", name, statePath)
		}
		svc, err := c.loadService(ctx, e.Name(), snap.generation)
		if err != nil {
			return nil, errors.Mark(errors.Wrapf(err, "catalog: %s", name), ErrCorruptRecord)
		}
		snap.services[serviceKey{svc.tenant, svc.name}] = svc
	}
	if len(snap.services) > c.opts.MaxServices {
		return nil, errors.WithHint(errors.Wrapf(ErrCatalogFull, "catalog: %d services persisted", len(snap.services)),
			"raise the catalog's service bound or delete services")
	}
	return snap, nil
}

func (c *Catalog) loadService(ctx context.Context, file string, last Generation) (*service, error) {
	if !strings.HasSuffix(file, ".rec") {
		return nil, errors.New("not a service record (unexpected file in the catalog directory)")
	}
	data, err := readBounded(c.store.path(servicesDir+"/"+file), maxRecordBytes)
	if err != nil {
		return nil, err
	}
	var rec serviceRecord
	if err := decodeRecord("service", data, &rec); err != nil {
		return nil, err
	}
	s, err := validate(rec.Manifest)
	if err != nil {
		return nil, errors.Wrap(err, "recorded manifest")
	}
	switch {
	case rec.Tenant != s.tenant || rec.Service != s.service:
		return nil, errors.New("record names another service than its manifest")
	case servicesDir+"/"+file != serviceRecordPath(s.tenant, s.service):
		return nil, errors.New("record is stored under another service's name")
	case rec.Generation == 0 || rec.Generation > last:
		return nil, errors.New("record generation is newer than the catalog state")
	case len(rec.Modules) != len(s.revisions):
		return nil, errors.New("record has module facts for another number of revisions")
	}
	modules, err := c.inspectAll(ctx, s)
	if err != nil {
		return nil, err
	}
	for i := range modules {
		if !modules[i].equal(rec.Modules[i]) {
			return nil, errors.Newf("revision %d: the artifact inspects differently than recorded", i)
		}
	}
	svc, err := buildService(s, rec.Manifest, modules, rec.Generation)
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

// Pin returns the current immutable view. It never blocks and never fails.
func (c *Catalog) Pin() Pin { return Pin{s: c.cur.Load()} }

// PutArtifact stores a module under its digest, verifying the digest while
// writing. Storing the same artifact twice is harmless.
func (c *Catalog) PutArtifact(ctx context.Context, d Digest, r io.Reader) error {
	if _, err := ParseDigest(string(d)); err != nil {
		return errors.Mark(errors.Wrap(err, "catalog: artifact digest"), ErrInvalidName)
	}
	if err := ctx.Err(); err != nil {
		return errors.Wrap(err, "catalog: store artifact")
	}
	return c.arts.put(d, r, c.opts.MaxArtifactBytes)
}

// inspectAll loads and inspects the artifact of every revision (each distinct
// digest once). Missing or refused modules are reported per revision field.
func (c *Catalog) inspectAll(ctx context.Context, s spec) ([]ModuleInfo, error) {
	var p problems
	modules := make([]ModuleInfo, len(s.revisions))
	done := map[Digest]int{}
	for i, r := range s.revisions {
		if j, ok := done[r.artifact]; ok {
			modules[i] = modules[j]
			continue
		}
		f := "revisions[" + strconv.Itoa(i) + "].artifact"
		data, err := c.arts.get(r.artifact, c.opts.MaxArtifactBytes)
		switch {
		case errors.Is(err, ErrArtifactNotFound):
			p.add(f, "no artifact with this digest was uploaded")
			continue
		case err != nil:
			return nil, err
		}
		info, err := c.opts.Inspector.Inspect(ctx, r.artifact, data)
		if err != nil {
			if ctxErr := ctx.Err(); ctxErr != nil {
				return nil, errors.Wrap(ctxErr, "catalog: inspect")
			}
			p.addErr(f, errors.Wrap(err, "module rejected"))
			continue
		}
		info.Exports = slices.Clone(info.Exports)
		modules[i], done[r.artifact] = info, i
	}
	if err := p.err(); err != nil {
		return nil, err
	}
	return modules, nil
}

// Deploy validates m, inspects its modules, and activates it as the service's
// release under the next generation. The release is persisted before it is
// published; on any error nothing changes and the previous release keeps
// serving. Concurrent deploys are serialized: each gets its own generation
// and the last one to finish is the active release.
func (c *Catalog) Deploy(ctx context.Context, m Manifest) (Deployment, error) {
	s, err := validate(m)
	if err != nil {
		return Deployment{}, err
	}
	m = cloneManifest(m) // the caller keeps its slices and maps
	modules, err := c.inspectAll(ctx, s)
	if err != nil {
		return Deployment{}, err
	}

	c.mu.Lock()
	defer c.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return Deployment{}, errors.Wrap(err, "catalog: deploy")
	}
	old := c.cur.Load()
	key := serviceKey{s.tenant, s.service}
	if _, exists := old.services[key]; !exists && len(old.services) >= c.opts.MaxServices {
		return Deployment{}, errors.WithHint(ErrCatalogFull, "delete unused services or raise the node's service bound")
	}
	gen := c.mu.generation + 1
	svc, err := buildService(s, m, modules, gen)
	if err != nil {
		return Deployment{}, err
	}
	rec := serviceRecord{Tenant: svc.tenant, Service: svc.name, Generation: gen, Release: svc.release,
		Revisions: svc.deployment().Revisions, Modules: modules, Manifest: m}
	payload, err := json.Marshal(rec)
	if err != nil {
		return Deployment{}, errors.Wrap(err, "catalog: encode record")
	}
	if err := c.commitGenerationLocked(gen); err != nil {
		return Deployment{}, err
	}
	if err := c.store.writeAtomic(serviceRecordPath(s.tenant, s.service), encodeRecord("service", payload)); err != nil {
		return Deployment{}, err
	}
	next := &snapshot{generation: gen, services: maps.Clone(old.services)}
	next.services[key] = svc
	c.cur.Store(next)
	return svc.deployment(), nil
}

// Delete removes a service under the next generation; pins taken before keep
// serving it. It returns that generation.
func (c *Catalog) Delete(ctx context.Context, tenant TenantID, name ServiceName) (Generation, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return 0, errors.Wrap(err, "catalog: delete")
	}
	old := c.cur.Load()
	key := serviceKey{tenant, name}
	if _, ok := old.services[key]; !ok {
		return 0, ErrServiceNotFound
	}
	gen := c.mu.generation + 1
	if err := c.commitGenerationLocked(gen); err != nil {
		return 0, err
	}
	if err := c.store.remove(serviceRecordPath(tenant, name)); err != nil {
		return 0, err
	}
	next := &snapshot{generation: gen, services: maps.Clone(old.services)}
	delete(next.services, key)
	c.cur.Store(next)
	return gen, nil
}

// commitGenerationLocked persists gen as the last generation issued. It is
// written before the record that uses it, so a crash in between leaves an
// unused generation (a harmless gap), never a reused one.
//
// REQUIRES: c.mu held.
func (c *Catalog) commitGenerationLocked(gen Generation) error {
	payload, err := json.Marshal(stateRecord{Generation: gen})
	if err != nil {
		return errors.Wrap(err, "catalog: encode state")
	}
	if err := c.store.writeAtomic(stateFile, encodeRecord("state", payload)); err != nil {
		return err
	}
	c.mu.generation = gen
	return nil
}

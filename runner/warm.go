// Warm instances: the snapshot and reuse instance modes.
//
// A fresh revision instantiates its module for every activation and runs the
// guest's initialisation each time. A snapshot or reuse revision keeps warm
// instances instead, one per activation running at once, in a pool keyed by
// tenant and revision (never shared across revisions or tenants):
//
//   - snapshot: the module is instantiated once per tenant, digest and
//     initialisation export and initialised under the deploy-time bounds
//     (Config.InitFuel, Config.InitTimeout); its linear memory and mutable
//     globals are kept as the snapshot. A warm instance starts from the
//     snapshot, and after every activation its memory and globals are put
//     back, so nothing one activation writes reaches the next. An instance
//     that cannot be put back exactly (its memory grew, its module can
//     change tables or drop segments, or the activation did not succeed) is
//     closed and the next activation recreates one from the snapshot,
//     without running the initialisation again.
//   - reuse: the warm instance keeps its state from one activation to the
//     next, until it has served Config.ReuseMaxActivations, an activation
//     did not succeed, its memory passed three quarters of the grant, or it
//     stayed idle for Config.WarmIdleTimeout (SweepWarm closes idle
//     instances of either mode on that timeout).
//
// Config.MaxWarmInstances bounds the instances idle and running together:
// an activation that ends with the pool at the bound gives up the longest
// idle instance, or its own when the running ones fill the bound (an
// activation past it thus runs on an instance not kept); the instances of
// a module go with its last reference.

package runner

import (
	"context"
	"maps"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/errors"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"

	"github.com/latent-node/latent-node/admission"
	"github.com/latent-node/latent-node/catalog"
	"github.com/latent-node/latent-node/runner/internal/fuel"
	"github.com/latent-node/latent-node/runner/internal/image"
	"github.com/latent-node/latent-node/runner/internal/wasiio"
	"github.com/latent-node/latent-node/runner/wasihttp"
	"github.com/latent-node/latent-node/vocab"
)

// Defaults of the warm-instance configuration.
const (
	DefaultMaxWarmInstances = 16
	DefaultInitFuel         = 1 << 32
	DefaultInitTimeout      = 10 * time.Second
)

// InitializeExport is a reactor's initialisation export, called before the
// route's function when the revision names no other.
const InitializeExport vocab.FunctionName = "_initialize"

// ErrInitFailed marks a snapshot whose initialisation did not succeed (it
// trapped, exited, or exceeded the deploy-time bounds): the module's fault.
var ErrInitFailed = errors.New("runner: initialisation failed")

// ErrSnapshotQuota marks a snapshot refused because the tenant's snapshot
// images would exceed Config.MaxSnapshotBytesPerTenant.
var ErrSnapshotQuota = errors.New("runner: snapshot bytes quota exceeded")

// WarmStats counts the warm-instance pool's work since the runner started,
// and what it holds now.
type WarmStats struct {
	// Snapshots created (an initialisation run) and snapshot activations
	// started on an instance put back from its snapshot (Restored) or
	// recreated from it (Recreated: a new instance whose memory and globals
	// were set from the snapshot).
	Snapshots, Restored, Recreated uint64
	// Reuse activations on an instance that served before (Reused), on a new
	// one (Created), and instances recycled (Recycled: closed after an
	// activation, at the activation bound, for memory or an unsuccessful
	// outcome, or for idleness).
	Reused, Created, Recycled uint64
	// Idle is the instances the pool holds; SnapshotBytes the bytes of the
	// snapshot images it holds, in all (per tenant: SnapshotBytesByTenant).
	Idle          int
	SnapshotBytes uint64
}

// warmKey is a pool's key: instances are never shared across tenants or
// revisions.
type warmKey struct {
	tenant vocab.TenantID
	rev    vocab.RevisionID
}

// snapKey identifies a snapshot: the same module initialised by the same
// export with the same random source for the same tenant. Tenants never share one: what a guest derived
// at initialisation (hash seeds, for one) is in its image.
type snapKey struct {
	tenant vocab.TenantID
	digest vocab.Digest
	init   vocab.FunctionName
	random vocab.Randomness
}

// snapshot is a module's state after its initialisation.
type snapshot struct {
	key   snapKey
	ready chan struct{} // closed once memory, globals and err are set
	// img is linear memory after initialisation (a sealed memfd that every
	// instance maps copy-on-write), size its length; globals the values of
	// the module's mutable globals (module.globals, in order).
	img     *image.Image
	size    uint64
	globals []uint64
	err     error // the initialisation's failure, reported to every activation
}

// warmInstance is an instantiated module of one tenant's revision.
type warmInstance struct {
	key      warmKey
	m        *module
	snap     *snapshot     // snapshot mode; nil for reuse
	mem      *image.Memory // its memory: over snap.img, or the blank image for reuse (nil: wazero's)
	reserved uint64        // mem's address space (reservation): the largest grant it can serve
	mod      api.Module
	b        *binding
	http     *wasihttp.Instance  // a reused component's kept handles; nil otherwise
	globals  []api.MutableGlobal // m.globals
	fuel     api.MutableGlobal
	stack    api.MutableGlobal // fuel.StackExport
	stackLow api.MutableGlobal // fuel.StackLowExport
	// fns are the functions activations called, kept: wazero's
	// ExportedFunction makes a new call engine (with its stack) each time.
	fns    map[string]api.Function
	served int
	// Idle: since when, and the neighbours in idleSet's long list.
	idleSince    time.Time
	older, newer *warmInstance
}

// warmPool holds the idle warm instances and the snapshots, and makes,
// runs and closes them: it instantiates into rt with bindings from
// bindings, and initialises snapshots on compiler's worker.
type warmPool struct {
	rt       wazero.Runtime
	bindings *bindingPool
	compiler *compiler
	cfg      warmConfig

	// blank is the empty image reuse instances take their memory from
	// (address space reserved once, grown in place, off the Go heap); nil
	// until the first reuse instance, or if it could not be made (wazero's
	// allocator then).
	blankOnce sync.Once
	blank     *image.Image

	mu        sync.Mutex
	idle      idleSet
	running   atomic.Int64                             // instances running an activation
	snaps     map[vocab.TenantID]map[snapKey]*snapshot // by tenant
	snapsOf   map[vocab.Digest]map[snapKey]*snapshot   // the same by module: dropDigest reads one module's
	snapBytes map[vocab.TenantID]uint64
	snapTotal uint64 // the sum of snapBytes
	stats     WarmStats
}

// warmConfig is what the warm pool reads of Config.
type warmConfig struct {
	FuelSlice                 uint64
	MaxOutputBytes            int
	InitFuel                  uint64
	InitTimeout               time.Duration
	MaxSnapshotBytesPerTenant uint64
	ReuseMaxActivations       int
	MaxWarmInstances          int
	WarmIdleTimeout           time.Duration
}

func newWarmPool(rt wazero.Runtime, bindings *bindingPool, c *compiler, cfg Config) *warmPool {
	return &warmPool{rt: rt, bindings: bindings, compiler: c,
		cfg: warmConfig{FuelSlice: cfg.FuelSlice, MaxOutputBytes: cfg.MaxOutputBytes, InitFuel: cfg.InitFuel,
			InitTimeout: cfg.InitTimeout, MaxSnapshotBytesPerTenant: cfg.MaxSnapshotBytesPerTenant,
			ReuseMaxActivations: cfg.ReuseMaxActivations, MaxWarmInstances: cfg.MaxWarmInstances,
			WarmIdleTimeout: cfg.WarmIdleTimeout},
		idle: newIdleSet(), snaps: map[vocab.TenantID]map[snapKey]*snapshot{},
		snapsOf: map[vocab.Digest]map[snapKey]*snapshot{}, snapBytes: map[vocab.TenantID]uint64{}}
}

// WarmStats returns the warm-instance counters and sizes. It costs the
// same however many tenants hold snapshots (a metrics scrape reads it
// under the lock every warm activation takes).
func (r *Runner) WarmStats() WarmStats {
	p := r.warm
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.stats
	s.Idle = p.idle.n
	s.SnapshotBytes = p.snapTotal
	return s
}

// SnapshotBytesByTenant returns the bytes of each tenant's snapshot
// images (tenants without any are left out): the administrators' view,
// a copy of one entry per such tenant.
func (r *Runner) SnapshotBytesByTenant() map[vocab.TenantID]uint64 {
	p := r.warm
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.snapBytes)
}

// DropSnapshots drops the snapshots of specs, which no deployed revision
// uses any more (catalog.Config.OnSnapshotsUnused), with their idle
// instances (running ones close when they finish), at the cost of those
// alone; one a new deploy needs again is made again when first used.
func (r *Runner) DropSnapshots(specs []catalog.SnapshotSpec) {
	keys := make([]snapKey, 0, len(specs))
	for _, spec := range specs {
		if m := r.modules.acquire(spec.Artifact); m != nil { // else its release dropped them (dropDigest)
			keys = append(keys, snapKey{spec.Tenant, spec.Artifact, initExport(m, admission.Obligations{Init: spec.Init}), spec.Random})
			r.modules.unref(m)
		}
	}
	r.warm.closeWarm(r.warm.drop(keys))
}

// drop drops the made snapshots of keys (one being made is a deploy's
// that has not published yet) and returns their idle instances to close.
func (p *warmPool) drop(keys []snapKey) []*warmInstance {
	p.mu.Lock()
	defer p.mu.Unlock()
	var closing []*warmInstance
	for _, k := range keys {
		s := p.snaps[k.tenant][k]
		if s == nil || !made(s) {
			continue
		}
		p.dropSnapshotLocked(s)
		for wk := range p.idle.keys[k.digest] { // the module's keys; dropKey deletes from the map: allowed
			if list := p.idle.byKey[wk]; list[0].snap == s {
				closing = append(closing, p.idle.dropKey(wk)...)
			}
		}
	}
	p.stats.Recycled += uint64(len(closing))
	return closing
}

// made reports whether s's initialisation ended.
func made(s *snapshot) bool {
	select {
	case <-s.ready:
		return true
	default:
		return false
	}
}

// current reports whether s is still the pool's snapshot for its key.
func (p *warmPool) current(s *snapshot) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.snaps[s.key.tenant][s.key] == s
}

// SnapshotBytes returns the bytes of tenant's snapshot images.
func (r *Runner) SnapshotBytes(tenant vocab.TenantID) uint64 {
	return r.warm.snapshotBytes(tenant)
}

// snapshotBytes is SnapshotBytes.
func (p *warmPool) snapshotBytes(tenant vocab.TenantID) uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.snapBytes[tenant]
}

// take returns an idle instance of k (the most recently used), counted
// as restored (snapshot) or reused, or nil. An instance whose memory
// reserved less than grant is not used: it is removed, counted recycled,
// and given back as small to close.
func (p *warmPool) take(k warmKey, snapshot bool, grant uint64) (w, small *warmInstance) {
	p.mu.Lock()
	defer p.mu.Unlock()
	w = p.idle.take(k)
	switch {
	case w == nil:
	case w.mem != nil && grant > w.reserved:
		p.stats.Recycled++
		return nil, w
	case snapshot:
		p.stats.Restored++
	default:
		p.stats.Reused++
	}
	return w, nil
}

// put returns w to the pool and gives back the instances to close: those
// idle longer than idle, the longest idle while idle and running pass max.
func (p *warmPool) put(w *warmInstance, now time.Time, max int, idle time.Duration) []*warmInstance {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.idle.add(w, now)
	closing := p.idle.expire(now, idle)
	for p.idle.n > 0 && p.idle.n+int(p.running.Load()) > max {
		closing = append(closing, p.idle.dropOldest())
	}
	p.stats.Recycled += uint64(len(closing))
	return closing
}

// expire removes the instances idle longer than idle at now and gives them
// back to close.
func (p *warmPool) expire(now time.Time, idle time.Duration) []*warmInstance {
	p.mu.Lock()
	defer p.mu.Unlock()
	closing := p.idle.expire(now, idle)
	p.stats.Recycled += uint64(len(closing))
	return closing
}

// SweepWarm closes, until ctx ends, the warm instances that stayed idle for
// Config.WarmIdleTimeout, looking every quarter of it (at least every
// second): an instance nobody calls again is closed without waiting for
// another activation to come back to the pool. The node runs it as an
// actor.
func (r *Runner) SweepWarm(ctx context.Context) error {
	t := time.NewTicker(max(r.cfg.WarmIdleTimeout/4, time.Second))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case now := <-t.C:
			r.sweepWarm(now)
		}
	}
}

// sweepWarm closes the instances idle for WarmIdleTimeout at now.
func (r *Runner) sweepWarm(now time.Time) {
	r.warm.closeWarm(r.warm.expire(now, r.cfg.WarmIdleTimeout))
}

// dropDigest removes the idle instances and the snapshots of a module whose
// last reference went, and gives back the instances to close.
func (p *warmPool) dropDigest(d vocab.Digest) []*warmInstance {
	p.mu.Lock()
	defer p.mu.Unlock()
	closing := p.idle.dropDigest(d)
	for _, s := range p.snapsOf[d] { // dropSnapshotLocked deletes s from the map ranged over: allowed
		p.dropSnapshotLocked(s)
	}
	p.stats.Recycled += uint64(len(closing))
	return closing
}

// addSnapshotLocked adds s to the maps.
// REQUIRES: p.mu held.
func (p *warmPool) addSnapshotLocked(s *snapshot) {
	k := s.key
	if p.snaps[k.tenant] == nil {
		p.snaps[k.tenant] = map[snapKey]*snapshot{}
	}
	p.snaps[k.tenant][k] = s
	if p.snapsOf[k.digest] == nil {
		p.snapsOf[k.digest] = map[snapKey]*snapshot{}
	}
	p.snapsOf[k.digest][k] = s
}

// forgetSnapshotLocked removes k's snapshot from the maps.
// REQUIRES: p.mu held.
func (p *warmPool) forgetSnapshotLocked(k snapKey) {
	delete(p.snaps[k.tenant], k)
	if len(p.snaps[k.tenant]) == 0 {
		delete(p.snaps, k.tenant)
	}
	delete(p.snapsOf[k.digest], k)
	if len(p.snapsOf[k.digest]) == 0 {
		delete(p.snapsOf, k.digest)
	}
}

// dropSnapshotLocked forgets s, gives its bytes back to its tenant and
// closes its image (instances made from it keep their own mappings).
// REQUIRES: p.mu held.
func (p *warmPool) dropSnapshotLocked(s *snapshot) {
	p.forgetSnapshotLocked(s.key)
	p.uncharge(s)
	if s.img != nil {
		_ = s.img.Close()
	}
}

// uncharge gives a ready snapshot's bytes back to its tenant.
// REQUIRES: p.mu held.
func (p *warmPool) uncharge(s *snapshot) {
	if !made(s) || s.err != nil { // its creator charges nothing until it is made
		return
	}
	p.snapTotal -= s.size
	if left := p.snapBytes[s.key.tenant] - s.size; left > 0 {
		p.snapBytes[s.key.tenant] = left
	} else {
		delete(p.snapBytes, s.key.tenant)
	}
}

// closeWarm closes instances the pool gave back.
func (p *warmPool) closeWarm(ws []*warmInstance) {
	for _, w := range ws {
		p.closeInstance(w)
	}
}

func (p *warmPool) closeInstance(w *warmInstance) {
	_ = w.mod.Close(context.Background())
	if w.mem != nil {
		_ = w.mem.Close()
	}
	p.bindings.release(w.b)
}

// reservation is the address space a new instance's memory reserves: the
// grant (memory.grow checks it), at least the snapshot's image, at most the
// module's maximum, which is 4 GiB for a module that declares none: per
// instance, that ran out of address space at about 32,000 instances.
func reservation(m *module, s *snapshot, grant uint64) uint64 {
	r := (grant + vocab.WasmPageBytes - 1) / vocab.WasmPageBytes * vocab.WasmPageBytes
	if s != nil && s.img != nil {
		r = max(r, s.img.Len())
	}
	return min(r, m.info.MaxMemoryBytes)
}

// imageFor is the image a new instance's memory comes from: its snapshot's,
// else (reuse) the blank one, over which it grows in place (on wazero's
// allocator it sat on the Go heap, copied at every memory.grow).
func (p *warmPool) imageFor(s *snapshot) *image.Image {
	if s != nil {
		return s.img
	}
	p.blankOnce.Do(func() {
		// Off Linux an image's memory is a Go slice of its whole cap:
		// wazero's allocator does better there.
		if runtime.GOOS != "linux" {
			return
		}
		if img, err := image.New(nil); err == nil {
			p.blank = img
		}
	})
	return p.blank
}

// close closes the idle instances, the snapshots' images and the blank
// image (Runner.Close).
func (p *warmPool) close() {
	p.mu.Lock()
	var closing []*warmInstance
	for w := p.idle.dropOldest(); w != nil; w = p.idle.dropOldest() {
		closing = append(closing, w)
	}
	for _, ts := range p.snaps {
		for _, s := range ts {
			if made(s) { // else its maker publishes it, or closes it on failure
				p.dropSnapshotLocked(s)
			}
		}
	}
	p.mu.Unlock()
	p.closeWarm(closing)
	p.blankOnce.Do(func() {}) // no blank image after this
	if p.blank != nil {
		_ = p.blank.Close()
	}
}

// initExport is the initialisation export of a revision: the one it names,
// else a reactor's _initialize when the module exports it, else none.
func initExport(m *module, ob admission.Obligations) vocab.FunctionName {
	if ob.Init != "" {
		return ob.Init
	}
	if _, ok := slices.BinarySearch(m.info.Exports, InitializeExport); ok {
		return InitializeExport
	}
	return ""
}

// snapshotFor returns the snapshot of ob's tenant, module and
// initialisation export, creating it (once; concurrent callers wait) on
// first use, on a compile worker (bounded, lower priority: an
// initialisation is deploy-time work). grant bounds the initialisation's
// memory, and a snapshot made earlier must fit it too.
func (p *warmPool) snapshotFor(ctx context.Context, m *module, ob admission.Obligations, grant uint64) (*snapshot, error) {
	s, err := p.makeSnapshot(ctx, m, ob, grant)
	if err == nil && s.size+m.tableBytes > grant {
		err = errors.Mark(errors.Newf("runner: the snapshot's memory (%d bytes) and tables (%d bytes) exceed the memory ceiling (%d bytes)",
			s.size, m.tableBytes, grant), ErrInitFailed)
	}
	return s, err
}

func (p *warmPool) makeSnapshot(ctx context.Context, m *module, ob admission.Obligations, grant uint64) (*snapshot, error) {
	k := snapKey{ob.Tenant, m.digest, initExport(m, ob), ob.Random}
	p.mu.Lock()
	s := p.snaps[k.tenant][k]
	if s == nil {
		s = &snapshot{key: k, ready: make(chan struct{})}
		p.addSnapshotLocked(s)
		p.mu.Unlock()
		werr := p.compiler.onWorker(ctx, func() error {
			p.initialise(ctx, m, ob, s, grant)
			return nil
		})
		p.mu.Lock()
		if werr != nil && s.err == nil {
			s.err = errors.Wrap(werr, "runner: initialise") // cancelled while waiting, or a panic (a host fault)
		}
		if s.err == nil {
			used := p.snapBytes[k.tenant]
			if used+s.size > p.cfg.MaxSnapshotBytesPerTenant {
				s.err = errors.Mark(errors.Newf("runner: the snapshot (%d bytes) would take tenant %s past node.max_snapshot_bytes_per_tenant (%d of %d bytes in use)",
					s.size, k.tenant, used, p.cfg.MaxSnapshotBytesPerTenant), ErrSnapshotQuota)
			} else {
				p.snapBytes[k.tenant] = used + s.size
				p.snapTotal += s.size
				p.stats.Snapshots++
			}
		}
		if s.err != nil && s.img != nil {
			_ = s.img.Close()
		}
		if s.err != nil && p.snaps[k.tenant][k] == s {
			// A failure is not kept: the next activation (or a deploy that
			// fixed the quota) tries again.
			p.forgetSnapshotLocked(k)
		}
		close(s.ready)
		p.mu.Unlock()
		return s, s.err
	}
	p.mu.Unlock()
	select {
	case <-s.ready:
		return s, s.err
	case <-ctx.Done():
		return nil, errors.Wrap(ctx.Err(), "runner: waiting for a snapshot")
	}
}

// PrepareSnapshot initialises a snapshot revision's module at deploy
// (catalog.SnapshotPreparer): the snapshot is kept for the activations, and
// an initialisation that fails refuses the deploy with what went wrong.
func (r *Runner) PrepareSnapshot(ctx context.Context, spec catalog.SnapshotSpec) error {
	m := r.modules.acquire(spec.Artifact)
	if m == nil {
		return errors.Mark(errors.AssertionFailedf("runner: snapshot of %s before its module was prepared", spec.Artifact), catalog.ErrHostFault)
	}
	defer r.modules.unref(m)
	_, err := r.warm.snapshotFor(ctx, m, admission.Obligations{Tenant: spec.Tenant, Artifact: spec.Artifact, Init: spec.Init,
		Random: spec.Random}, spec.MemoryBytes)
	return err
}

var _ catalog.SnapshotPreparer = (*Runner)(nil)

// initialise instantiates m and runs its initialisation for s under the
// deploy-time bounds, then keeps its memory and mutable globals.
func (p *warmPool) initialise(ctx context.Context, m *module, ob admission.Obligations, s *snapshot, grant uint64) {
	start := time.Now()
	a := &activation{remaining: p.cfg.InitFuel, budget: p.cfg.InitFuel, slice: p.cfg.FuelSlice,
		deadline: start.Add(p.cfg.InitTimeout), started: start, grant: grant, tableBytes: m.tableBytes,
		args:   wasiio.List{N: 1, Parts: [2][2]string{{"", string(s.key.init)}}},
		random: ob.Random, revision: vocab.RevisionID("init " + string(s.key.digest) + " " + string(s.key.init))}
	a.stdout = wasiio.Stdout{Cap: p.cfg.MaxOutputBytes}
	runCtx := context.WithValue(ctx, activationKey{}, a)
	a.ctx = runCtx
	b := p.bindings.bind(a)
	defer p.bindings.release(b)
	var st *wasihttp.Activation
	if m.info.Component {
		// A component's start (its core modules' start functions and
		// initialisers) may call the host: it gets an activation of its
		// own, with no request, whose handles must all be gone at the end.
		st = wasihttp.NewActivation(wasihttp.Request{Method: "GET", PathWithQuery: "/", Scheme: "http", Authority: "localhost"},
			(*httpEnv)(b), wasihttp.Limits{MaxBodyBytes: p.cfg.MaxOutputBytes})
		defer st.Close()
		runCtx = wasihttp.WithActivation(runCtx, st)
	}
	fail := func(err error) {
		kind, code, trap := classify(a, err, time.Now(), a.mod == nil)
		detail := kind.String()
		switch {
		case kind == Trap:
			detail += " (" + trap + ")"
		case kind == DeclaredError:
			detail += " (exit status " + strconv.FormatUint(uint64(code), 10) + ")"
		}
		if kind == Success {
			detail = "it exited"
		}
		msg := "runner: initialising the module (%s) failed: %s"
		if tail := a.stderr.Bytes(); len(tail) > 0 {
			msg += "; stderr: " + string(tail)
		}
		s.err = errors.Mark(errors.Newf(msg, s.key.init, detail), ErrInitFailed)
	}
	mod, err := p.rt.InstantiateModule(runCtx, m.compiled, b.cfg)
	if err != nil {
		fail(err)
		return
	}
	defer func() { _ = mod.Close(runCtx) }()
	if err := a.settle(a.start(runCtx, mod, m.hasStart, string(s.key.init), "")); err != nil {
		fail(err)
		return
	}
	if a.memRefused || a.stdout.Overflow {
		fail(nil)
		return
	}
	if st != nil && st.Live() > 0 {
		// The snapshot's memory would name handles that no later
		// activation's table holds.
		s.err = errors.Mark(errors.Newf("runner: the component's initialisation keeps %d resource handles, which a snapshot cannot hold",
			st.Live()), ErrInitFailed)
		return
	}
	var view []byte
	if mem := mod.Memory(); mem != nil {
		view, _ = mem.Read(0, mem.Size())
	}
	if s.size = uint64(len(view)); s.size+m.tableBytes > grant {
		s.err = errors.Mark(errors.Newf("runner: after initialisation the module's memory (%d bytes) and tables (%d bytes) exceed the memory ceiling (%d bytes)",
			s.size, m.tableBytes, grant), ErrInitFailed)
		return
	}
	img, err := image.New(view)
	if err != nil {
		s.err = errors.Mark(errors.Wrap(err, "runner: keep the snapshot's memory"), catalog.ErrHostFault)
		return
	}
	s.img = img
	s.globals = make([]uint64, len(m.globals))
	for i, name := range m.globals {
		g, ok := mod.ExportedGlobal(name).(api.MutableGlobal)
		if !ok {
			s.err = errors.AssertionFailedf("runner: instrumented module without global %s", name)
			return
		}
		s.globals[i] = g.Get()
	}
}

// newWarm instantiates an instance for k, from s when it is a snapshot
// instance. The activation a is bound to it.
func (p *warmPool) newWarm(ctx context.Context, m *module, k warmKey, s *snapshot, a *activation) (*warmInstance, error) {
	var mem *image.Memory
	reserved := reservation(m, s, a.grant)
	if img := p.imageFor(s); img != nil {
		var err error
		mem, err = img.NewMemory(reserved)
		switch {
		case err == nil:
			ctx = experimental.WithMemoryAllocator(ctx, mem)
		case s != nil:
			return nil, err
		default:
			mem = nil // reuse: wazero's allocator, when address space is short
		}
	}
	b := p.bindings.bind(a)
	mod, err := p.rt.InstantiateModule(ctx, m.compiled, b.cfg)
	if err != nil {
		p.bindings.release(b)
		if mem != nil {
			mem.Free() // wazero dropped the instance without freeing its memory
			_ = mem.Close()
		}
		return nil, err
	}
	w := &warmInstance{key: k, m: m, snap: s, mem: mem, reserved: reserved, mod: mod, b: b, globals: make([]api.MutableGlobal, len(m.globals))}
	w.fuel, _ = mod.ExportedGlobal(fuel.FuelExport).(api.MutableGlobal)
	w.stack, _ = mod.ExportedGlobal(fuel.StackExport).(api.MutableGlobal)
	w.stackLow, _ = mod.ExportedGlobal(fuel.StackLowExport).(api.MutableGlobal)
	w.fns = map[string]api.Function{}
	for i, name := range m.globals {
		w.globals[i], _ = mod.ExportedGlobal(name).(api.MutableGlobal)
	}
	if w.fuel == nil || slices.Contains(w.globals, nil) {
		p.closeInstance(w)
		return nil, errors.AssertionFailedf("runner: instrumented module without its exported globals")
	}
	if s != nil {
		if err := mem.Attach(mod.Memory()); err != nil {
			p.closeInstance(w)
			return nil, err
		}
		w.setGlobals()
	}
	return w, nil
}

// call calls w's exported function name.
func (w *warmInstance) call(ctx context.Context, name string) error {
	fn, err := w.fn(name)
	if err != nil {
		return err
	}
	_, err = fn.Call(ctx)
	return err
}

// fn is w's exported function name, kept for the next activations.
func (w *warmInstance) fn(name string) (api.Function, error) {
	fn := w.fns[name]
	if fn == nil {
		if fn = w.mod.ExportedFunction(name); fn == nil {
			return nil, errors.AssertionFailedf("runner: %s not exported", name)
		}
		w.fns[name] = fn
	}
	return fn, nil
}

// setGlobals sets a snapshot instance's mutable globals to the snapshot's
// and its fuel to none.
func (w *warmInstance) setGlobals() {
	for i, g := range w.globals {
		g.Set(w.snap.globals[i])
	}
	w.fuel.Set(0)
}

// restore puts a snapshot instance's memory and globals back to its
// snapshot: the pages any activation wrote are copied back from the image
// (image.Memory.Restore; Reset, which drops them, where /proc/self/pagemap
// cannot be read). It fails when the memory grew past the image: wazero
// cannot shrink it, so the instance is recreated.
func (w *warmInstance) restore() error {
	if _, err := w.mem.Restore(); err != nil {
		if errors.Is(err, image.ErrGrown) || errors.Is(err, image.ErrClosed) {
			return err
		}
		if err := w.mem.Reset(); err != nil {
			return err
		}
	}
	w.setGlobals()
	return nil
}

// runWarm is RunWith for a snapshot or reuse revision, from the point where
// the activation a is set up; guestFor makes the HTTP guest of an HTTP
// revision once the instance's binding (and for a reused component its
// kept handles) is known, nil for stdio, and the outcome carries its
// answer.
func (p *warmPool) runWarm(ctx context.Context, m *module, ob admission.Obligations, a *activation,
	guestFor func(*binding, *wasihttp.Instance) httpGuest) Outcome {
	k := warmKey{ob.Tenant, ob.Revision}
	var s *snapshot
	if ob.Instance == vocab.InstanceSnapshot {
		var err error
		if s, err = p.snapshotFor(ctx, m, ob, a.grant); err != nil {
			return initOutcome(a, err)
		}
	}
	w, small := p.take(k, s != nil, a.grant)
	if small != nil {
		p.closeInstance(small)
	}
	created := w == nil
	if created {
		var err error
		if w, err = p.newWarm(a.ctx, m, k, s, a); err != nil {
			kind, code, trap := classify(a, err, time.Now(), true)
			return Outcome{Kind: kind, ExitCode: code, TrapKind: trap, ExecutionTime: a.executionTime(time.Now()), Err: err}
		}
		p.created(s != nil)
		if s == nil {
			if a.remaining < m.instantiationFuel {
				p.closeInstance(w)
				return Outcome{Kind: FuelExhausted, FuelUsed: a.budget, ExecutionTime: a.executionTime(time.Now()),
					Err: errors.Wrap(errFuelExhausted, "runner: instantiation")}
			}
			a.remaining -= m.instantiationFuel
		}
	} else {
		w.b.a, w.b.seeded = a, false
	}
	linear := uint64(0)
	if mem := w.mod.Memory(); mem != nil {
		linear = uint64(mem.Size())
	}
	if linear+a.tableBytes > a.grant {
		p.closeInstance(w)
		return Outcome{Kind: MemoryExhausted, ExecutionTime: a.executionTime(time.Now()),
			Err: errors.Newf("runner: the grant (%d bytes) is below the instance's memory (%d bytes) plus the tables (%d bytes)",
				a.grant, linear, a.tableBytes)}
	}
	p.running.Add(1)
	w.fuel.Set(0)
	if m.info.Component && s == nil && w.http == nil {
		w.http = wasihttp.NewInstance(wasihttp.Limits{}) // a reused component keeps its handles
	}
	guest := guestFor(w.b, w.http)
	// A new reuse instance is initialised by its first activation (which is
	// charged for it, as a fresh one is); a snapshot instance never is.
	var err error
	switch {
	case created && s == nil && guest != nil:
		err = guest.enter(a.ctx, a, w.mod, m.hasStart, string(initExport(m, ob)), string(ob.Function))
	case created && s == nil:
		err = a.start(a.ctx, w.mod, m.hasStart, string(initExport(m, ob)), string(ob.Function))
	default:
		if err = a.bindModule(w.mod, w.stack, w.stackLow); err == nil {
			if guest != nil {
				err = guest.call(a.ctx, w, string(ob.Function))
			} else {
				err = w.call(a.ctx, string(ob.Function))
			}
		}
	}
	// A negative fuel global is settled here, and never reaches the next
	// activation: each starts from w.fuel.Set(0) above.
	err = a.settle(err)
	stopped := time.Now()
	kind, code, trap := classify(a, err, stopped, false)
	out := Outcome{Kind: kind, ExitCode: code, TrapKind: trap, FuelUsed: a.used(), ExecutionTime: a.executionTime(stopped),
		MemoryPeakBytes: a.memoryPeak(), Stdout: a.stdout.Buf, StderrTail: a.stderr.Bytes(), Err: err}
	if kind == PlatformFailure {
		out.Quarantine = true
	}
	out = finish(out, guest)
	w.b.a = nil
	p.running.Add(-1)
	// An activation that exited (proc_exit, even with status 0) closed its
	// module: only one that returned from its function may keep it.
	if p.keep(w, kind, err, a.grant) {
		p.closeWarm(p.put(w, stopped, p.cfg.MaxWarmInstances, p.cfg.WarmIdleTimeout))
	} else {
		p.closeInstance(w)
		p.recycled()
	}
	return out
}

// keep decides whether w may serve another activation, and puts a snapshot
// instance back to its snapshot.
func (p *warmPool) keep(w *warmInstance, kind Kind, err error, grant uint64) bool {
	if kind != Success || err != nil {
		return false
	}
	if w.snap != nil {
		return !w.m.mutatesTables && p.current(w.snap) && w.restore() == nil
	}
	w.served++
	if w.served >= p.cfg.ReuseMaxActivations {
		return false
	}
	mem := w.mod.Memory()
	return mem == nil || uint64(mem.Size()) <= grant/4*3
}

// created counts an activation started on a new instance: made from its
// snapshot (recreated) or a new reuse instance. take counts the others.
func (p *warmPool) created(snapshot bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if snapshot {
		p.stats.Recreated++
	} else {
		p.stats.Created++
	}
}

func (p *warmPool) recycled() {
	p.mu.Lock()
	p.stats.Recycled++
	p.mu.Unlock()
}

// initOutcome is the outcome of an activation whose snapshot could not be
// made: the module's initialisation failed (a trap of kind
// "instantiation"), or the tenant's snapshot quota is full
// (memory-exhausted), or the wait was cancelled.
func initOutcome(a *activation, err error) Outcome {
	out := Outcome{Kind: Trap, TrapKind: TrapInstantiation, ExecutionTime: a.executionTime(time.Now()), Err: err}
	switch {
	case errors.Is(err, ErrSnapshotQuota):
		out.Kind, out.TrapKind = MemoryExhausted, ""
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		out.Kind, out.TrapKind = Cancelled, ""
	case !errors.Is(err, ErrInitFailed):
		out.Kind, out.TrapKind, out.Quarantine = PlatformFailure, "", false
	}
	return out
}

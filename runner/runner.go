// Runner: New, Config, Inspect (deploy-time validation and compile) and
// Run (one activation on a fresh instance), the host's errors.

package runner

import (
	"context"
	"crypto/sha256"
	"slices"
	"time"

	"github.com/cockroachdb/errors"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/latent-node/latent-node/admission"
	"github.com/latent-node/latent-node/catalog"
	"github.com/latent-node/latent-node/runner/internal/component"
	"github.com/latent-node/latent-node/runner/internal/fuel"
	"github.com/latent-node/latent-node/runner/internal/outbound"
	"github.com/latent-node/latent-node/runner/internal/sigledger"
	"github.com/latent-node/latent-node/runner/internal/wasiio"
	"github.com/latent-node/latent-node/runner/wasihttp"
	"github.com/latent-node/latent-node/vocab"
)

// WASIModule is the only import module a guest may use.
const WASIModule = "wasi_snapshot_preview1"

// Defaults of Config.
const (
	DefaultMaxOutputBytes     = 1 << 20
	DefaultFuelSlice          = 1 << 20 // ≈ 1 ms of compiled code between context checks
	DefaultCompileConcurrency = 1
	DefaultMaxCompiledBytes   = 1 << 30

	DefaultMaxSnapshotBytesPerTenant = 256 << 20
	DefaultReuseMaxActivations       = 1000
	DefaultWarmIdleTimeout           = time.Minute
	// DefaultMaxSignaturesPerTenant: a Go guest declares a few hundred
	// distinct function types, a Rust or C one fewer, and deploys of one
	// toolchain share most of theirs (the ledger: internal/sigledger).
	DefaultMaxSignaturesPerTenant = 20_000
)

// Limits are the deploy limits a module must stay within (the
// [deploy_limits] configuration keys): a module over one is refused at
// Inspect with an error naming the key, marked ErrLimit. Zero fields take
// DefaultLimits' values.
type Limits = fuel.Limits

// LimitError is the structured form of a deploy-limit refusal (errors.As);
// Key is "deploy_limits.<key>".
type LimitError = fuel.LimitError

// ErrLimit marks a module refused for a deploy limit.
var ErrLimit = fuel.ErrLimit

// DefaultLimits returns the deploy limits used for zero fields of Limits.
func DefaultLimits() Limits { return fuel.DefaultLimits() }

// Config configures a Runner.
type Config struct {
	// CacheDir holds wazero's compilation cache, so a restart does not
	// recompile from scratch. Empty: an in-memory cache.
	CacheDir string
	// MaxOutputBytes caps a guest's stdout (default 1 MiB).
	MaxOutputBytes int
	// MaxStreamedBytes caps a wasi-http response streamed to its Sink
	// (wasihttp.Limits.MaxStreamBytes: 0 its default, negative none).
	MaxStreamedBytes int64
	// FuelSlice is how much fuel the guest gets between two slow-path checks
	// of its context (default 1<<20).
	FuelSlice uint64
	// OnSlice, if set, is called on the guest's goroutine at every slow-path
	// check (about every FuelSlice of fuel: at the first check point after
	// a slice is spent, at most fuel.Info.MaxDebt later; and at host calls
	// that empty the slice): the node yields its processor to the network
	// there.
	OnSlice func()
	// Limits are the deploy limits Inspect enforces (zero fields: defaults).
	Limits Limits
	// CompileConcurrency is how many compiles run at a time (default 1).
	CompileConcurrency int
	// MaxCompiledBytes bounds the estimated size of the compiled modules the
	// runner keeps (default 1 GiB; see CompiledBytesEstimate). An Inspect
	// that would exceed it fails with ErrCompiledCacheFull.
	MaxCompiledBytes uint64
	// MaxSignaturesPerTenant bounds the distinct function signatures new to
	// the node that one tenant's deploys may bring (default
	// DefaultMaxSignaturesPerTenant): the runtime keeps every signature it
	// compiled until the node restarts. Only deploys are refused
	// (catalog.DeployingTenant); re-inspection and applied releases are
	// counted.
	MaxSignaturesPerTenant int
	// MaxSnapshotBytesPerTenant bounds the snapshot images (linear memory
	// after initialisation) of one tenant's snapshot revisions that the
	// runner holds (default DefaultMaxSnapshotBytesPerTenant); a deploy
	// past it is refused.
	MaxSnapshotBytesPerTenant uint64
	// ReuseMaxActivations is how many activations a reuse instance serves
	// before it is recycled (default DefaultReuseMaxActivations).
	ReuseMaxActivations int
	// WarmIdleTimeout is how long a warm instance (snapshot or reuse) may
	// stay unused before it is closed (default DefaultWarmIdleTimeout).
	WarmIdleTimeout time.Duration
	// MaxWarmInstances bounds the idle warm instances of snapshot and reuse
	// revisions the runner keeps (default DefaultMaxWarmInstances).
	MaxWarmInstances int
	// InitFuel and InitTimeout bound the initialisation of a snapshot
	// (defaults DefaultInitFuel and DefaultInitTimeout); its memory is
	// bounded by the revision's grant.
	InitFuel    uint64
	InitTimeout time.Duration
	// OnCacheDiscard, if set, is called when Inspect found a corrupt entry
	// in the on-disk compilation cache, discarded it and compiled again (so
	// the caller can log a warning). Its error names no host path.
	OnCacheDiscard func(error)
}

// Errors of Inspect that are the host's, not the module's. Each message
// says what happened without host paths; the cause is kept for logs.
var (
	// ErrCompiledCacheFull: keeping one more compiled module would exceed
	// Config.MaxCompiledBytes. Retry once other releases are released.
	ErrCompiledCacheFull = errors.New("runner: compiled module cache full")
	// ErrStorageFull: the compilation cache could not be written because the
	// disk is full (ENOSPC) or over quota (EDQUOT). The error is also
	// marked catalog.ErrStorageFull and wraps the syscall.Errno (errors.Is,
	// errors.As).
	ErrStorageFull = errors.New("runner: insufficient storage")
	// ErrCompileFailed: wazero did not compile a module the instrumenter had
	// validated, and not because of the disk cache: a host fault.
	ErrCompileFailed = errors.New("runner: compile failed")
)

// deterministicSeed is the random_get seed of a revision that opted into
// deterministic randomness (vocab.RandomDeterministic): a hash of its
// revision id, so every activation of the revision, on every node and after
// restarts, reads the same stream and the same input replays exactly.
func deterministicSeed(rev vocab.RevisionID) [32]byte {
	h := sha256.New()
	h.Write([]byte("latent-node random_get v1\x00"))
	h.Write([]byte(rev))
	var seed [32]byte
	h.Sum(seed[:0])
	return seed
}

// Cell is what Run needs from a leased execution cell (cellpool.Lease
// implements it): linear memory for one activation, capped at limitBytes,
// and a way to say that an instantiation failed before wazero could free
// that memory (so the cell is not quarantined for it).
type Cell interface {
	WithMemory(ctx context.Context, limitBytes uint64) context.Context
	AbandonMemory()
}

// Runner executes admitted activations in wazero. It compiles each artifact
// once, at deploy (it implements catalog.ModuleInspector), and never at
// admission or execution. The only goroutines it starts are compile
// workers, which Inspect waits for.
type Runner struct {
	cfg   Config
	rt    wazero.Runtime
	cache wazero.CompilationCache
	// wasi is the type of every function the WASI host module exports, read
	// from the runtime: imports are checked against it; http is the same
	// for the wasi-http host modules, by module name (component.go).
	wasi map[string]api.FunctionDefinition
	http wasihttp.Host

	bindings *bindingPool // module configurations lent to activations (wasi.go)

	compiler *compiler // the bounded compile worker (compile.go)

	sigs *sigledger.Ledger // the function signatures the runtime holds

	warm *warmPool // warm instances and snapshots (warm.go)

	modules *moduleTable // compiled modules by digest (modules.go)

	outbound *outbound.Client // wasi-http guests' outgoing requests
}

var _ catalog.ModuleInspector = (*Runner)(nil)

// New creates the wazero runtime (compiler engine, core features 2.0, the
// compilation cache) with WASI and the fuel host module defined.
// WithCloseOnContextDone stays off: deadlines go through the fuel slow path.
func New(ctx context.Context, cfg Config) (*Runner, error) {
	if cfg.MaxOutputBytes <= 0 {
		cfg.MaxOutputBytes = DefaultMaxOutputBytes
	}
	if cfg.FuelSlice == 0 {
		cfg.FuelSlice = DefaultFuelSlice
	}
	if cfg.CompileConcurrency <= 0 {
		cfg.CompileConcurrency = DefaultCompileConcurrency
	}
	if cfg.MaxSignaturesPerTenant <= 0 {
		cfg.MaxSignaturesPerTenant = DefaultMaxSignaturesPerTenant
	}
	if cfg.MaxCompiledBytes == 0 {
		cfg.MaxCompiledBytes = DefaultMaxCompiledBytes
	}
	if cfg.MaxSnapshotBytesPerTenant == 0 {
		cfg.MaxSnapshotBytesPerTenant = DefaultMaxSnapshotBytesPerTenant
	}
	if cfg.ReuseMaxActivations <= 0 {
		cfg.ReuseMaxActivations = DefaultReuseMaxActivations
	}
	if cfg.WarmIdleTimeout <= 0 {
		cfg.WarmIdleTimeout = DefaultWarmIdleTimeout
	}
	if cfg.MaxWarmInstances <= 0 {
		cfg.MaxWarmInstances = DefaultMaxWarmInstances
	}
	if cfg.InitFuel == 0 {
		cfg.InitFuel = DefaultInitFuel
	}
	if cfg.InitTimeout <= 0 {
		cfg.InitTimeout = DefaultInitTimeout
	}
	var cache wazero.CompilationCache
	if cfg.CacheDir != "" {
		var err error
		if cache, err = wazero.NewCompilationCacheWithDir(cfg.CacheDir); err != nil {
			return nil, errors.Wrap(err, "runner: compilation cache")
		}
	} else {
		cache = wazero.NewCompilationCache()
	}
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigCompiler().
		WithCoreFeatures(api.CoreFeaturesV2).WithCompilationCache(cache))
	if err := defineWASI(ctx, rt); err != nil {
		_ = rt.Close(ctx)
		return nil, err
	}
	if err := instantiateHost(ctx, rt); err != nil {
		_ = rt.Close(ctx)
		return nil, err
	}
	httpDefs, err := wasihttp.DefineHost(ctx, rt)
	if err != nil {
		_ = rt.Close(ctx)
		return nil, errors.Wrap(err, "runner")
	}
	r := &Runner{cfg: cfg, rt: rt, cache: cache, wasi: rt.Module(WASIModule).ExportedFunctionDefinitions(), http: httpDefs,
		bindings: newBindingPool(), compiler: newCompiler(rt, cfg),
		sigs: sigledger.New(cfg.MaxSignaturesPerTenant), outbound: outbound.New(nil)}
	r.warm = newWarmPool(rt, r.bindings, r.compiler, cfg)
	r.modules = newModuleTable(r.compiler, cfg.MaxCompiledBytes, func(d vocab.Digest) { r.warm.closeWarm(r.warm.dropDigest(d)) })
	return r, nil
}

// Close releases the idle warm instances, the snapshot images, the runtime
// and every compiled module.
func (r *Runner) Close(ctx context.Context) error {
	r.warm.close()
	err := r.rt.Close(ctx)
	return errors.CombineErrors(err, r.cache.Close(ctx))
}

// Inspect validates module against the deploy limits, refuses imports that
// are not WASI preview 1 functions of the right type, reads its memory
// limits, features and exports, instruments it for fuel and compiles it
// (once per digest while it is referenced; the compilation cache makes a
// restart cheap). A successful Inspect hands the caller one reference to
// the compiled module, given back with ReleaseModule. A digest whose module
// is compiled and referenced already is not inspected again: Inspect takes
// a reference and returns the information it found the first time, without
// waiting for a worker. Refusals of the module name what to fix;
// ErrCompiledCacheFull, ErrStorageFull, ErrCompileFailed and a panic while
// inspecting are the host's (catalog.ErrHostFault). No error contains a
// host path.
func (r *Runner) Inspect(ctx context.Context, digest vocab.Digest, module []byte) (info catalog.ModuleInfo, err error) {
	if m := r.modules.acquire(digest); m != nil {
		info = m.info
		info.Exports = slices.Clone(m.info.Exports)
		return info, nil
	}
	werr := r.compiler.onWorker(ctx, func() error {
		info, err = r.inspect(ctx, digest, module)
		return nil
	})
	if werr != nil {
		return catalog.ModuleInfo{}, errors.Wrap(werr, "runner: inspect")
	}
	return info, err
}

// inspect is Inspect on a worker.
//
// REQUIRES: the caller runs on a worker (onWorker).
func (r *Runner) inspect(ctx context.Context, digest vocab.Digest, module []byte) (catalog.ModuleInfo, error) {
	isComponent := component.IsComponent(module)
	if isComponent {
		merged, err := wasihttp.Flatten(module)
		if err != nil {
			return catalog.ModuleInfo{}, errors.Wrap(err, "runner: inspect")
		}
		module = merged
	}
	res, err := fuel.Instrument(module, fuel.Config{Limits: r.cfg.Limits})
	if err != nil {
		return catalog.ModuleInfo{}, errors.Wrap(err, "runner: inspect")
	}
	var info catalog.ModuleInfo
	if isComponent {
		info, err = r.componentInfo(res.Info)
	} else {
		info, err = r.moduleInfo(res.Info)
	}
	if err != nil {
		return catalog.ModuleInfo{}, err
	}
	tenant, deploying := catalog.DeployingTenant(ctx)
	if err := r.sigs.Charge(tenant, deploying, res.Info.Signatures); err != nil {
		return catalog.ModuleInfo{}, err
	}
	if err := r.modules.prepare(ctx, digest, res, info); err != nil {
		return catalog.ModuleInfo{}, err
	}
	return info, nil
}

func (r *Runner) moduleInfo(in fuel.Info) (catalog.ModuleInfo, error) {
	for _, imp := range in.Imports {
		if err := r.checkImport(imp); err != nil {
			return catalog.ModuleInfo{}, err
		}
	}
	var exports []vocab.FunctionName
	hasMemory := false
	for _, e := range in.Exports {
		switch {
		case e.Kind == fuel.ExternFunc:
			exports = append(exports, vocab.FunctionName(e.Name))
		case e.Kind == fuel.ExternMemory && e.Name == "memory":
			hasMemory = true
		}
	}
	if !hasMemory || len(exports) == 0 {
		return catalog.ModuleInfo{}, errors.New(`runner: a guest exports "memory" and its functions ("_start" for a command, the route's function for a reactor)`)
	}
	slices.Sort(exports)
	info, err := baseInfo(in)
	info.Exports = slices.Compact(exports)
	return info, err
}

// baseInfo is what every instrumented module's info holds: its memory
// bounds, fixed bytes and features.
func baseInfo(in fuel.Info) (catalog.ModuleInfo, error) {
	info := catalog.ModuleInfo{
		MinMemoryBytes: uint64(in.MemoryMinPages) * vocab.WasmPageBytes,
		MaxMemoryBytes: vocab.MaxWasm32MemoryBytes,
		// Tables live on the Go heap, charged to the grant (see Run).
		FixedMemoryBytes: in.TableBytes,
		Threading:        vocab.ThreadingSingle,
	}
	if in.HasMemoryMax {
		info.MaxMemoryBytes = uint64(in.MemoryMaxPages) * vocab.WasmPageBytes
	}
	for _, name := range in.Features.Names() {
		f, err := vocab.ParseFeature(name)
		if err != nil {
			return catalog.ModuleInfo{}, errors.AssertionFailedf("runner: unknown feature %q", name)
		}
		info.Features |= vocab.FeatureSetOf(f)
	}
	return info, nil
}

// instantiationFuel is what instantiating a module costs, charged before
// wazero instantiates it: one unit per 64 bytes of data segments, one per
// element segment entry, one per table element allocated (the tables'
// minimums), and 1024 per page of initial memory (wazero allocates and the
// cell zeroes it).
func instantiationFuel(in fuel.Info) uint64 {
	return in.DataBytes>>ioShift + in.ElemCount + in.TableMinElements + uint64(in.MemoryMinPages)*1024
}

// Run executes one activation on cell under exec's obligations and returns
// its outcome. The permit's deadline and ctx's cancellation are enforced
// through the fuel slow path. Run never panics: a panic anywhere is a
// platform failure that quarantines the cell. The caller releases the cell
// (Quarantine when Outcome.Quarantine) and then the permit.
//
// Run holds its own reference to the compiled module while it runs; a
// caller that resolved the artifact earlier pins it with Acquire so that it
// is still there when Run starts.
func (r *Runner) Run(ctx context.Context, exec *admission.ExecutionPermit, cell Cell, input []byte) Outcome {
	return r.RunWith(ctx, exec, cell, Input{Body: input})
}

// Input is what an activation reads.
type Input struct {
	// Body is the guest's stdin.
	Body []byte
	// Environ is a WAGI revision's CGI environment (wagi.Request.Environ),
	// after LATENT_ACTIVATION_ID and LATENT_REVISION; a stdio revision
	// never sees it.
	Environ []string
	// HTTP is a wasi-http revision's request (its Body is the request's
	// body; Body above is then unused). Nil: a POST of Body to "/".
	HTTP *wasihttp.Request
	// OnSlice, if set, is called on the guest's goroutine at every
	// slow-path check, after Config.OnSlice: the node may pause the
	// activation there for a fairer one (it must not stop the guest). It
	// returns how long it held the guest, which Outcome.ExecutionTime
	// leaves out (the deadline keeps running meanwhile).
	OnSlice func() time.Duration
}

// RunWith is Run with the whole input. For an HTTP revision (WAGI,
// wasi-http) a successful activation's answer is read by its ABI
// (httpGuest): Outcome.Response, or the outcome MalformedResponse.
func (r *Runner) RunWith(ctx context.Context, exec *admission.ExecutionPermit, cell Cell, in Input) (out Outcome) {
	start := time.Now()
	var a *activation // once made: its execution time leaves its pauses out
	defer func() {
		if p := recover(); p != nil {
			took := time.Since(start)
			if a != nil {
				took = a.executionTime(time.Now())
			}
			out = Outcome{Kind: PlatformFailure, Quarantine: true, ExecutionTime: took,
				Err: errors.Newf("runner: panic: %v", p)}
		}
	}()
	ob := exec.Obligations()
	pm := r.modules.acquire(ob.Artifact)
	if pm == nil {
		return Outcome{Kind: PlatformFailure, Err: errors.AssertionFailedf("runner: artifact %s was not prepared", ob.Artifact)}
	}
	defer r.modules.unref(pm)
	budget := exec.Budget()
	if pm.minMemoryBytes > budget.MemoryBytes {
		// Admission grants at least the module's initial memory; this is a
		// broken invariant, refused before wazero sees it.
		return Outcome{Kind: PlatformFailure, Err: errors.AssertionFailedf("runner: grant below the module's initial memory")}
	}
	if budget.MemoryBytes-pm.minMemoryBytes < pm.tableBytes {
		// The tables (on the Go heap, up to their largest size) come out of
		// the grant too; a grant that cannot hold them with the initial
		// memory is refused before anything is allocated.
		return Outcome{Kind: MemoryExhausted, ExecutionTime: time.Since(start),
			Err: errors.Newf("runner: the grant (%d bytes) is below the initial memory (%d bytes) plus the tables (%d bytes)",
				budget.MemoryBytes, pm.minMemoryBytes, pm.tableBytes)}
	}
	// Every fresh and snapshot activation pays for an instance (a snapshot's
	// costs the node what a fresh one would, and charging it keeps their
	// fuel equal); a reuse activation pays only when it gets a new one.
	instFuel := pm.instantiationFuel
	if ob.Instance == vocab.InstanceReuse {
		instFuel = 0
	}
	if instFuel > budget.CPUFuel {
		// Instantiating would cost more than the whole budget: nothing is
		// instantiated, and the budget counts as spent.
		return Outcome{Kind: FuelExhausted, FuelUsed: budget.CPUFuel, ExecutionTime: time.Since(start),
			Err: errors.Wrap(errFuelExhausted, "runner: instantiation")}
	}
	a = r.newActivation(ctx, exec, in, pm, start, budget.CPUFuel-instFuel)
	if ob.Instance != vocab.InstanceFresh {
		return r.warm.runWarm(ctx, pm, ob, a, func(b *binding, inst *wasihttp.Instance) httpGuest { return r.httpGuestFor(ob, in, b, inst) })
	}
	runCtx := a.ctx
	callCtx := cell.WithMemory(runCtx, budget.MemoryBytes)

	b := r.bindings.bind(a)
	guest := r.httpGuestFor(ob, in, b, nil)
	mod, err := r.rt.InstantiateModule(callCtx, pm.compiled, b.cfg)
	instantiated := err == nil
	if err != nil {
		cell.AbandonMemory() // wazero dropped the instance without freeing its memory
	} else {
		init, entry := "", string(ob.Function)
		if ob.Function != vocab.DefaultFunction {
			init = string(initExport(pm, ob)) // a reactor: initialised before its function
		}
		if guest != nil {
			err = guest.enter(callCtx, a, mod, pm.hasStart, init, entry)
		} else {
			err = a.start(callCtx, mod, pm.hasStart, init, entry)
		}
		err = a.settle(err)
	}
	stopped := time.Now()
	kind, code, trap := classify(a, err, stopped, !instantiated)
	out = Outcome{Kind: kind, ExitCode: code, TrapKind: trap, FuelUsed: a.used(), ExecutionTime: a.executionTime(stopped),
		MemoryPeakBytes: a.memoryPeak(), Stdout: a.stdout.Buf, StderrTail: a.stderr.Bytes(), Err: err}
	if mod != nil {
		if cerr := mod.Close(callCtx); cerr != nil {
			out.Quarantine = true
			out.Err = errors.CombineErrors(out.Err, cerr)
		}
	}
	out = finish(out, guest)
	r.bindings.release(b)
	if kind == PlatformFailure {
		out.Quarantine = true
	}
	return out
}

// newActivation is the host-side state of exec's activation with fuel of
// its budget left to hand out; its context (a.ctx) carries it.
func (r *Runner) newActivation(ctx context.Context, exec *admission.ExecutionPermit, in Input, pm *module, start time.Time, fuelLeft uint64) *activation {
	ob, budget := exec.Obligations(), exec.Budget()
	// The deadline is checked on the slow path and when sleeping, not by a
	// context timer: no timer per activation.
	a := &activation{remaining: fuelLeft, budget: budget.CPUFuel, slice: r.cfg.FuelSlice, onSlice: r.cfg.OnSlice, pause: in.OnSlice,
		deadline: exec.Deadline(), started: start, grant: budget.MemoryBytes, tableBytes: pm.tableBytes, input: in.Body,
		args:    wasiio.List{N: 1, Parts: [2][2]string{{"", string(ob.Function)}}},
		environ: wasiio.List{N: 2, Parts: [2][2]string{{"LATENT_ACTIVATION_ID=", exec.ID()}, {"LATENT_REVISION=", string(ob.Revision)}}},
		random:  ob.Random, revision: ob.Revision,
	}
	if ob.ABI == vocab.ABIWAGI {
		a.environ.Extra = in.Environ
	}
	a.stdout = wasiio.Stdout{Cap: r.cfg.MaxOutputBytes}
	a.ctx = context.WithValue(ctx, activationKey{}, a)
	return a
}

// finish reads an HTTP revision's successful answer (guest nil: a stdio
// revision, whose output is the answer) and releases the guest's state.
func finish(out Outcome, guest httpGuest) Outcome {
	if guest == nil {
		return out
	}
	if g, ok := guest.(*wasiHTTPGuest); ok {
		out.Calls = g.st.Calls()
	}
	if out.Kind == Success {
		guest.answer(&out)
	}
	guest.release()
	return out
}

// start sets up the instantiated module's stack budget and calls, in
// order, the original start function (exported by the instrumenter) when
// first is set (the module has one and this is the instance's first call), the initialisation export init and the entrypoint entry
// (each when not empty).
func (a *activation) start(ctx context.Context, mod api.Module, first bool, init, entry string) error {
	stack, _ := mod.ExportedGlobal(fuel.StackExport).(api.MutableGlobal)
	stackLow, _ := mod.ExportedGlobal(fuel.StackLowExport).(api.MutableGlobal)
	if err := a.bindModule(mod, stack, stackLow); err != nil {
		return err
	}
	if first {
		fn := mod.ExportedFunction(fuel.StartExport)
		if fn == nil {
			return errors.AssertionFailedf("runner: %s not exported", fuel.StartExport)
		}
		if _, err := fn.Call(ctx); err != nil {
			return err
		}
	}
	for _, name := range [2]string{init, entry} {
		if name == "" {
			continue
		}
		fn := mod.ExportedFunction(name)
		if fn == nil {
			return errors.AssertionFailedf("runner: %s not exported", name)
		}
		if _, err := fn.Call(ctx); err != nil {
			return err
		}
	}
	return nil
}

// bindModule makes mod, with its stack globals, the activation's module and
// gives the guest the stack budget its grant leaves.
func (a *activation) bindModule(mod api.Module, stack, stackLow api.MutableGlobal) error {
	a.mod, a.stack, a.stackLow = mod, stack, stackLow
	if a.stack == nil || a.stackLow == nil {
		return errors.AssertionFailedf("runner: instrumented module without mutable stack globals")
	}
	linear := uint64(0)
	if m := mod.Memory(); m != nil {
		linear = uint64(m.Size())
	}
	// The grant covers the linear memory, the tables (at their largest
	// size) and the call stack together: the guest may take whatever the
	// memory and the tables do not use as stack, and grow takes its pages
	// from the same budget.
	budget := a.grant - min(linear+a.tableBytes, a.grant)
	a.stack.Set(budget)
	a.stackLow.Set(budget)
	return nil
}

// memoryPeak is the most of the grant the guest used at once: the grant
// minus the lowest the stack budget went (which starts below the grant by
// the linear memory and the tables, and which memory growth lowers as
// well); zero when the module was not instantiated. A frame whose entry
// found the budget spent trapped before it ran, so the peak stops at the
// grant.
func (a *activation) memoryPeak() uint64 {
	if a.stackLow == nil {
		return 0
	}
	low := max(int64(a.stackLow.Get()), 0)
	return a.grant - min(uint64(low), a.grant)
}

// used is the fuel consumed: handed out minus what the guest still holds,
// which is more than handed out while the global is negative (the guest
// spent fuel after its last check; settle hands out what covers it). It is
// at most the budget: a debt the budget could not cover is not billed.
func (a *activation) used() uint64 {
	held := int64(0)
	if a.mod != nil {
		if g, ok := a.mod.ExportedGlobal(fuel.FuelExport).(api.MutableGlobal); ok {
			held = int64(g.Get())
		}
	}
	handed := a.budget - a.remaining
	if held < 0 {
		return min(handed+uint64(-held), a.budget)
	}
	return handed - min(uint64(held), handed)
}

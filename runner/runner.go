package runner

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/cockroachdb/errors"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/latent-node/latent-node/admission"
	"github.com/latent-node/latent-node/catalog"
	"github.com/latent-node/latent-node/runner/internal/fuel"
)

// WASIModule is the only import module a guest may use.
const WASIModule = "wasi_snapshot_preview1"

// Defaults of Config.
const (
	DefaultMaxOutputBytes = 1 << 20
	DefaultFuelSlice      = 1 << 20 // ≈ 1 ms of compiled code between context checks
)

// Config configures a Runner.
type Config struct {
	// CacheDir holds wazero's compilation cache, so a restart does not
	// recompile from scratch. Empty: an in-memory cache.
	CacheDir string
	// MaxOutputBytes caps a guest's stdout (default 1 MiB).
	MaxOutputBytes int
	// MaxCallDepth bounds nested calls of defined functions (default
	// fuel.DefaultMaxCallDepth). Admission's CallDepthLimit must not exceed it.
	MaxCallDepth uint32
	// FuelSlice is how much fuel the guest gets between two slow-path checks
	// of its context (default 1<<20).
	FuelSlice uint64
}

// randSeed seeds every activation's random_get. It is fixed, as wazero's
// default source is, so fuel use and output stay deterministic for the same
// module and input (a guest's runtime, Go's for one, reads random bytes at
// start and branches on them). Guests do not get secret entropy from the
// node. ChaCha8 is used because wazero's default seeds a math/rand source
// per instance, which cost 18 % of a trivial activation; a binding reseeds
// its own source for each activation.
var randSeed = [32]byte{'l', 'a', 't', 'e', 'n', 't', '-', 'n', 'o', 'd', 'e'}

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
// admission or execution. It starts no goroutines.
type Runner struct {
	cfg   Config
	rt    wazero.Runtime
	cache wazero.CompilationCache

	// base is the module configuration every binding starts from.
	base     wazero.ModuleConfig
	bindings sync.Pool // idle *binding

	mu      sync.RWMutex
	modules map[catalog.Digest]prepared
}

// prepared is a compiled module and what Run checks before instantiating it.
type prepared struct {
	compiled       wazero.CompiledModule
	minMemoryBytes uint64
}

var _ catalog.ModuleInspector = (*Runner)(nil)

// New creates the wazero runtime (compiler engine, core features 2.0, the
// compilation cache) with WASI and the fuel host module defined.
// WithCloseOnContextDone stays off: deadlines go through the fuel slow path.
func New(ctx context.Context, cfg Config) (*Runner, error) {
	if cfg.MaxOutputBytes <= 0 {
		cfg.MaxOutputBytes = DefaultMaxOutputBytes
	}
	if cfg.MaxCallDepth == 0 {
		cfg.MaxCallDepth = fuel.DefaultMaxCallDepth
	}
	if cfg.FuelSlice == 0 {
		cfg.FuelSlice = DefaultFuelSlice
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
	base := wazero.NewModuleConfig().WithName("").WithStartFunctions()
	return &Runner{cfg: cfg, rt: rt, cache: cache, base: base, modules: map[catalog.Digest]prepared{}}, nil
}

// Close releases the runtime and every compiled module.
func (r *Runner) Close(ctx context.Context) error {
	err := r.rt.Close(ctx)
	return errors.CombineErrors(err, r.cache.Close(ctx))
}

// Inspect validates module, refuses imports outside WASI, reads its memory
// limits, features and exports, instruments it for fuel and compiles it (once
// per digest; the compilation cache makes a restart cheap). Errors name what
// to fix and contain no host paths.
func (r *Runner) Inspect(ctx context.Context, digest catalog.Digest, module []byte) (catalog.ModuleInfo, error) {
	res, err := fuel.Instrument(module, fuel.Config{MaxCallDepth: r.cfg.MaxCallDepth})
	if err != nil {
		return catalog.ModuleInfo{}, errors.Wrap(err, "runner: inspect")
	}
	info, err := moduleInfo(res.Info)
	if err != nil {
		return catalog.ModuleInfo{}, err
	}
	r.mu.RLock()
	_, done := r.modules[digest]
	r.mu.RUnlock()
	if done {
		return info, nil
	}
	compiled, err := r.rt.CompileModule(ctx, res.Module)
	if err != nil {
		return catalog.ModuleInfo{}, errors.Wrap(err, "runner: compile")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, done := r.modules[digest]; done {
		_ = compiled.Close(ctx)
	} else {
		r.modules[digest] = prepared{compiled: compiled, minMemoryBytes: info.MinMemoryBytes}
	}
	return info, nil
}

func moduleInfo(in fuel.Info) (catalog.ModuleInfo, error) {
	for _, imp := range in.Imports {
		if imp.Module != WASIModule {
			return catalog.ModuleInfo{}, errors.Newf("runner: import %s.%s is not allowed (only %s imports are)",
				imp.Module, imp.Name, WASIModule)
		}
	}
	var exports []catalog.FunctionName
	hasMemory, hasStart := false, false
	for _, e := range in.Exports {
		switch {
		case e.Kind == fuel.ExternFunc:
			exports = append(exports, catalog.FunctionName(e.Name))
			hasStart = hasStart || e.Name == "_start"
		case e.Kind == fuel.ExternMemory && e.Name == "memory":
			hasMemory = true
		}
	}
	if !hasMemory || !hasStart {
		return catalog.ModuleInfo{}, errors.New(`runner: a wasi-stdio guest exports "_start" and "memory"`)
	}
	slices.Sort(exports)
	info := catalog.ModuleInfo{
		MinMemoryBytes: uint64(in.MemoryMinPages) * 65536,
		MaxMemoryBytes: catalog.MaxWasm32MemoryBytes,
		Threading:      catalog.ThreadingSingle,
		Exports:        slices.Compact(exports),
	}
	if in.HasMemoryMax {
		info.MaxMemoryBytes = uint64(in.MemoryMaxPages) * 65536
	}
	for _, name := range in.Features.Names() {
		f, err := catalog.ParseFeature(name)
		if err != nil {
			return catalog.ModuleInfo{}, errors.AssertionFailedf("runner: unknown feature %q", name)
		}
		info.Features |= catalog.FeatureSetOf(f)
	}
	return info, nil
}

// Prepared reports whether the artifact was compiled (by Inspect).
func (r *Runner) Prepared(digest catalog.Digest) bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	_, ok := r.modules[digest]
	return ok
}

// Run executes one activation on cell under exec's obligations and returns
// its outcome. The permit's deadline and ctx's cancellation are enforced
// through the fuel slow path. Run never panics: a panic anywhere is a
// platform failure that quarantines the cell. The caller releases the cell
// (Quarantine when Outcome.Quarantine) and then the permit.
func (r *Runner) Run(ctx context.Context, exec *admission.ExecutionPermit, cell Cell, input []byte) (out Outcome) {
	start := time.Now()
	defer func() {
		if p := recover(); p != nil {
			out = Outcome{Kind: PlatformFailure, Quarantine: true, ExecutionTime: time.Since(start),
				Err: errors.Newf("runner: panic: %v", p)}
		}
	}()
	ob := exec.Obligations()
	r.mu.RLock()
	pm, ok := r.modules[ob.Artifact]
	r.mu.RUnlock()
	if !ok {
		return Outcome{Kind: PlatformFailure, Err: errors.AssertionFailedf("runner: artifact %s was not prepared", ob.Artifact)}
	}
	budget := exec.Budget()
	if pm.minMemoryBytes > budget.MemoryBytes {
		// Admission grants at least the module's initial memory; this is a
		// broken invariant, refused before wazero sees it.
		return Outcome{Kind: PlatformFailure, Err: errors.AssertionFailedf("runner: grant below the module's initial memory")}
	}

	// The deadline is checked on the slow path and when sleeping, not by a
	// context timer: no timer per activation.
	a := &activation{remaining: budget.CPUFuel, budget: budget.CPUFuel, slice: r.cfg.FuelSlice,
		deadline: exec.Deadline(), memLimitPages: uint32(min(budget.MemoryBytes/65536, 65536)), input: input,
		args:    wasiList{n: 1, parts: [2][2]string{{"", string(ob.Function)}}},
		environ: wasiList{n: 2, parts: [2][2]string{{"LATENT_ACTIVATION_ID=", exec.ID()}, {"LATENT_REVISION=", string(ob.Revision)}}},
	}
	a.stdout = cappedWriter{a: a, cap: r.cfg.MaxOutputBytes}
	runCtx := context.WithValue(ctx, activationKey{}, a)
	a.ctx = runCtx
	callCtx := cell.WithMemory(runCtx, budget.MemoryBytes)

	b := r.bind(a)
	mod, err := r.rt.InstantiateModule(callCtx, pm.compiled, b.cfg)
	if err != nil {
		cell.AbandonMemory() // wazero dropped the instance without freeing its memory
	} else {
		a.mod = mod
		if m := mod.Memory(); m != nil {
			a.memPeakPages = max(a.memPeakPages, m.Size()/65536)
		}
		fn := mod.ExportedFunction(string(ob.Function))
		if fn == nil {
			err = errors.AssertionFailedf("runner: entrypoint not exported")
		} else {
			_, err = fn.Call(callCtx)
		}
	}
	stopped := time.Now()
	elapsed := stopped.Sub(start)
	kind, code, trap := classify(a, err, stopped)
	out = Outcome{Kind: kind, ExitCode: code, TrapKind: trap, FuelUsed: a.used(), ExecutionTime: elapsed,
		MemoryPeakBytes: uint64(a.memPeakPages) * 65536, Stdout: a.stdout.buf, StderrTail: a.stderr.Bytes(), Err: err}
	if mod != nil {
		if cerr := mod.Close(callCtx); cerr != nil {
			out.Quarantine = true
			out.Err = errors.CombineErrors(out.Err, cerr)
		}
	}
	r.release(b)
	if kind == PlatformFailure {
		out.Quarantine = true
	}
	return out
}

// used is the fuel consumed: handed out minus what the guest still holds.
func (a *activation) used() uint64 {
	held := int64(0)
	if a.mod != nil {
		if g, ok := a.mod.ExportedGlobal(fuel.FuelExport).(api.MutableGlobal); ok {
			held = int64(g.Get())
		}
	}
	handed := a.budget - a.remaining
	if held <= 0 {
		return handed
	}
	return handed - min(uint64(held), handed)
}

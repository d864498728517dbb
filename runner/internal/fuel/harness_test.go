package fuel

import (
	"bytes"
	"context"
	"crypto/sha256"
	"hash/fnv"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/cockroachdb/errors"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
	"github.com/tetratelabs/wazero/sys"

	"github.com/latent-node/latent-node/vocab"
)

// This file is a small stand-in for the runner's host side: the fuel, grow
// and depth imports and a way to run a module with a budget.

// Typed errors the host functions panic with; wazero hands them back
// wrapped, so errors.Is finds them.
var (
	errFuelExhausted = errors.New("test host: fuel exhausted")
	errDepthExceeded = errors.New("test host: call depth exceeded")
)

// meter is one activation's host-side state.
type meter struct {
	budget  int64 // the activation's budget
	left    int64 // not yet handed to the guest
	slice   int64 // handed out per tick
	pageCap uint32

	ticks    int
	refusals int
	grows    int
	fuel     api.MutableGlobal // the guest's fuel global, once known

	// hostCalls counts the calls of env.visible; negativeAtHost those that
	// found the fuel global negative (the rewrite checks before host calls,
	// so never).
	hostCalls, negativeAtHost int
}

func newMeter(budget int64) *meter {
	return &meter{budget: budget, left: budget, slice: 1 << 20, pageCap: 64}
}

// used is the fuel the guest consumed: what it was handed minus what it did
// not spend. When the guest stopped with the global negative (it ran
// unchecked code after its last check) that is more than it was handed.
func (me *meter) used() int64 {
	handed := me.budget - me.left
	if me.fuel == nil {
		return handed
	}
	return handed - int64(me.fuel.Get())
}

// settle is the host's accounting once the guest has stopped: it hands out
// slices while the global is negative and reports whether the budget
// covered the debt (see the runner's activation.settle).
func (me *meter) settle() bool {
	if me.fuel == nil {
		return true
	}
	f := int64(me.fuel.Get())
	for f < 0 && me.left > 0 {
		take := min(me.slice, me.left)
		me.left -= take
		f += take
	}
	me.fuel.Set(uint64(f))
	return f >= 0
}

type meterKey struct{}

func meterFrom(ctx context.Context) *meter { return ctx.Value(meterKey{}).(*meter) }

// tick implements the slow-path contract: add slices to the global until it
// is non-negative, check the context, trap when the budget is spent.
func tick(ctx context.Context, mod api.Module) {
	me := meterFrom(ctx)
	if me.fuel == nil {
		me.fuel = mod.ExportedGlobal(FuelExport).(api.MutableGlobal)
	}
	me.ticks++
	if err := ctx.Err(); err != nil {
		panic(err)
	}
	f := int64(me.fuel.Get())
	for f < 0 {
		if me.left == 0 {
			panic(errFuelExhausted)
		}
		take := min(me.slice, me.left)
		me.left -= take
		f += take
		me.fuel.Set(uint64(f))
	}
}

func grow(ctx context.Context, mod api.Module, delta uint32) uint32 {
	me := meterFrom(ctx)
	mem := mod.Memory()
	pages := mem.Size() / vocab.WasmPageBytes
	if uint64(pages)+uint64(delta) > uint64(me.pageCap) {
		me.refusals++
		return 0xffffffff
	}
	old, ok := mem.Grow(delta)
	if !ok {
		return 0xffffffff
	}
	me.grows++
	return old
}

func depthExceeded(context.Context) { panic(errDepthExceeded) }

var i32Type = []api.ValueType{api.ValueTypeI32}

// hostVisible is env.visible, x -> 3x+1, a host function with an effect:
// it counts its calls in the meter, if any, and those that found the fuel
// global negative.
func hostVisible(ctx context.Context, mod api.Module, stack []uint64) {
	if me, ok := ctx.Value(meterKey{}).(*meter); ok {
		me.hostCalls++
		if me.fuel == nil && me.hostCalls == 1 {
			me.fuel, _ = mod.ExportedGlobal(FuelExport).(api.MutableGlobal)
		}
		if me.fuel != nil && int64(me.fuel.Get()) < 0 {
			me.negativeAtHost++
		}
	}
	stack[0] = uint64(uint32(stack[0])*3 + 1)
}

// engine is a wazero runtime with WASI, the fuel host module and a shared
// compilation cache.
type engine struct {
	rt wazero.Runtime

	mu       sync.Mutex
	compiled map[[32]byte]wazero.CompiledModule
}

// compile returns wasm compiled, compiling each distinct module once per
// process (the interpreter has no compilation cache of its own).
func (e *engine) compile(t testing.TB, wasm []byte) wazero.CompiledModule {
	t.Helper()
	key := sha256.Sum256(wasm)
	e.mu.Lock()
	cm, ok := e.compiled[key]
	e.mu.Unlock()
	if ok {
		return cm
	}
	cm, err := e.rt.CompileModule(context.Background(), wasm)
	if err != nil {
		t.Fatalf("compile: %v", err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.compiled) > 200 { // fuzzing: do not keep every input
		for k, old := range e.compiled {
			_ = old.Close(context.Background())
			delete(e.compiled, k)
		}
	}
	e.compiled[key] = cm
	return cm
}

var (
	cache   = wazero.NewCompilationCache()
	engines sync.Map // bool (compiler) -> *engine
	engMu   sync.Mutex
)

func getEngine(t testing.TB, compiler bool) *engine {
	t.Helper()
	engMu.Lock()
	defer engMu.Unlock()
	if e, ok := engines.Load(compiler); ok {
		return e.(*engine)
	}
	ctx := context.Background()
	cfg := wazero.NewRuntimeConfigInterpreter()
	if compiler {
		cfg = wazero.NewRuntimeConfigCompiler()
	}
	rt := wazero.NewRuntimeWithConfig(ctx, cfg.WithCompilationCache(cache).WithCoreFeatures(api.CoreFeaturesV2))
	wasi_snapshot_preview1.MustInstantiate(ctx, rt)
	_, err := rt.NewHostModuleBuilder(ImportModule).
		NewFunctionBuilder().WithFunc(tick).Export(TickName).
		NewFunctionBuilder().WithFunc(grow).Export(GrowName).
		NewFunctionBuilder().WithFunc(depthExceeded).Export(DepthName).
		Instantiate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_, err = rt.NewHostModuleBuilder("env").
		NewFunctionBuilder().WithFunc(func(context.Context, uint32, uint32) {}).Export("host_log").
		NewFunctionBuilder().WithFunc(func(_ context.Context, x uint32) uint32 { return x*3 + 1 }).Export("f").
		NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(hostVisible), i32Type, i32Type).Export("visible").
		Instantiate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	e := &engine{rt: rt, compiled: map[[32]byte]wazero.CompiledModule{}}
	engines.Store(compiler, e)
	return e
}

func ctxWith(ctx context.Context, me *meter) context.Context {
	return context.WithValue(ctx, meterKey{}, me)
}

func moduleConfig() wazero.ModuleConfig {
	return wazero.NewModuleConfig().WithName("").WithStartFunctions()
}

// outcome is what one run of a module did.
type outcome struct {
	stdout, stderr string
	exit           int    // proc_exit code, -1 if none
	trap           string // first line of any other error
	err            error
	results        []uint64
	fuel           int64  // consumed (instrumented runs)
	stack, low     int64  // the stack globals after the run
	counter        uint64 // the exported global "cnt", if any
	memHash        uint64 // FNV-1a of the memory exported as "mem", if any
	me             *meter
}

func (o outcome) behaviour() string {
	return "stdout=" + strconv.Quote(o.stdout) + " exit=" + strconv.Itoa(o.exit) + " trap=" + o.trap
}

// run instantiates wasm (without running start functions named _start) and
// calls fn with args, or _start if fn is empty. A nil meter gets a large
// budget.
func (e *engine) run(t testing.TB, wasm []byte, stdin, fn string, me *meter, args ...uint64) outcome {
	t.Helper()
	if me == nil {
		me = newMeter(1 << 40)
	}
	ctx := context.WithValue(context.Background(), meterKey{}, me)
	cm := e.compile(t, wasm)
	var stdout, stderr bytes.Buffer
	cfg := wazero.NewModuleConfig().WithName("").WithStartFunctions().
		WithStdin(strings.NewReader(stdin)).WithStdout(&stdout).WithStderr(&stderr)
	o := outcome{exit: -1, me: me}
	mod, err := e.rt.InstantiateModule(ctx, cm, cfg)
	if err == nil {
		defer func() { _ = mod.Close(ctx) }()
		if fn == "" {
			fn = "_start"
		}
		f := mod.ExportedFunction(fn)
		if f == nil {
			t.Fatalf("no export %q", fn)
		}
		// The instrumented module's start function is an export.
		if start := mod.ExportedFunction(StartExport); start != nil {
			_, err = start.Call(ctx)
		}
		if err == nil {
			o.results, err = f.Call(ctx, args...)
		}
	}
	o.stdout, o.stderr = stdout.String(), stderr.String()
	if mod != nil {
		if g, ok := mod.ExportedGlobal(FuelExport).(api.MutableGlobal); ok {
			me.fuel = g
		}
	}
	var exit *sys.ExitError
	if !me.settle() && !errors.Is(err, errFuelExhausted) && !errors.Is(err, errDepthExceeded) {
		// The guest stopped (returned, exited or trapped) owing fuel the
		// budget cannot cover: it ran out before it stopped.
		err = errors.Wrapf(errFuelExhausted, "settled after %v", err)
	}
	switch {
	case err == nil:
	case errors.As(err, &exit):
		o.exit = int(exit.ExitCode())
	default:
		o.err = err
		o.trap, _, _ = strings.Cut(err.Error(), "\n")
	}
	if mod != nil {
		if g := mod.ExportedGlobal("cnt"); g != nil {
			o.counter = g.Get()
		}
		if mem := mod.ExportedMemory("mem"); mem != nil {
			b, _ := mem.Read(0, mem.Size())
			h := fnv.New64a()
			h.Write(b)
			o.memHash = h.Sum64()
		}
		if me.fuel != nil {
			o.stack = int64(mod.ExportedGlobal(StackExport).Get())
			o.low = int64(mod.ExportedGlobal(StackLowExport).Get())
		}
	}
	o.fuel = me.used()
	return o
}

// mustInstrument instruments wasm and checks the output with wazero and,
// when installed, wasm-validate.
func mustInstrument(t testing.TB, wasm []byte, cfg Config) *Result {
	t.Helper()
	res, err := Instrument(wasm, cfg)
	if err != nil {
		t.Fatalf("Instrument: %+v", err)
	}
	getEngine(t, false).compile(t, res.Module) // wazero validates it
	wasmValidate(t, res.Module)
	return res
}

var wasmValidatePath = sync.OnceValue(func() string {
	p, _ := exec.LookPath("wasm-validate")
	return p
})

// wasmValidate runs wabt's wasm-validate on wasm when it is installed.
func wasmValidate(t testing.TB, wasm []byte) {
	t.Helper()
	p := wasmValidatePath()
	if p == "" {
		return
	}
	f := t.TempDir() + "/m.wasm"
	if err := os.WriteFile(f, wasm, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(p, f)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("wasm-validate: %v\n%s", err, out)
	}
}

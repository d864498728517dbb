// wasi_snapshot_preview1 (wazero's, with args_* and environ_* reading the
// activation from the call's context and the iovec functions of wasiio
// charging every iovec), the import check, and the binding
// pool (bindingPool): module configurations lent to one activation at a
// time.

package runner

import (
	"context"
	crand "crypto/rand"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cockroachdb/errors"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
	"github.com/tetratelabs/wazero/sys"

	"github.com/latent-node/latent-node/runner/internal/fuel"
	"github.com/latent-node/latent-node/runner/internal/wasiio"
	"github.com/latent-node/latent-node/vocab"
)

// defineWASI instantiates wasi_snapshot_preview1 in rt: wazero's functions,
// except args_get, args_sizes_get, environ_get and environ_sizes_get, which
// read the activation from the call's context (with them the module
// configuration does not depend on the activation, so it is built once per
// binding instead of once per activation, see binding), and the iovec
// functions, which charge every iovec a guest names (wasiio).
func defineWASI(ctx context.Context, rt wazero.Runtime) error {
	b := rt.NewHostModuleBuilder(WASIModule)
	wasi_snapshot_preview1.NewFunctionExporter().ExportFunctions(b)
	wasiio.Define(b, func(ctx context.Context) wasiio.Stdio { return (*wasiStdio)(activationFrom(ctx)) })
	i32 := api.ValueTypeI32
	for _, l := range []struct {
		name      string // "args" or "environ"
		of        func(*activation) *wasiio.List
		getParams []string
		sizeNames []string
	}{
		{"args", func(a *activation) *wasiio.List { return &a.args },
			[]string{"argv", "argv_buf"}, []string{"result.argc", "result.argv_len"}},
		{"environ", func(a *activation) *wasiio.List { return &a.environ },
			[]string{"environ", "environ_buf"}, []string{"result.environc", "result.environv_len"}},
	} {
		get := func(ctx context.Context, mod api.Module, stack []uint64) {
			a := activationFrom(ctx)
			list := l.of(a)
			if len(list.Extra) > 0 {
				// A CGI environment (up to wagi.MaxEnvironBytes) is copied
				// like stdio, charged by size; the two fixed entries stay
				// free as they always were.
				a.chargeHostCall(uint64(list.Size()) >> ioShift)
			}
			stack[0] = uint64(list.Write(mod.Memory(), uint32(stack[0]), uint32(stack[1])))
		}
		sizes := func(ctx context.Context, mod api.Module, stack []uint64) {
			a := activationFrom(ctx)
			list := l.of(a)
			a.chargeHostCall(uint64(len(list.Extra))) // the size sums a CGI environment's entries on every call
			stack[0] = uint64(list.WriteSizes(mod.Memory(), uint32(stack[0]), uint32(stack[1])))
		}
		b.NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(get), []api.ValueType{i32, i32}, []api.ValueType{i32}).
			WithParameterNames(l.getParams...).WithResultNames("errno").Export(l.name + "_get")
		b.NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(sizes), []api.ValueType{i32, i32}, []api.ValueType{i32}).
			WithParameterNames(l.sizeNames...).WithResultNames("errno").Export(l.name + "_sizes_get")
	}
	_, err := b.Instantiate(ctx)
	return errors.Wrap(err, "runner: define WASI")
}

// binding is a module configuration built once and lent to one activation
// at a time: its stdin, stdout, stderr, clocks, sleep, yield and random
// source forward to the activation bound to it (and charge it fuel). Each
// wazero.ModuleConfig.With… call copies the configuration, so an activation
// makes none of them; RATIONALE.md gives the cost this avoids.
type binding struct {
	cfg    wazero.ModuleConfig
	a      *activation
	rand   *rand.ChaCha8
	seeded bool // rand was seeded for a
}

// bindingPool holds the idle bindings, each built once from base, the
// module configuration every binding starts from.
type bindingPool struct {
	base wazero.ModuleConfig
	idle sync.Pool // idle *binding
}

func newBindingPool() *bindingPool {
	return &bindingPool{base: wazero.NewModuleConfig().WithName("").WithStartFunctions()}
}

// bind lends a binding from the pool to a; release returns it. A binding
// lost with a panicking Run is simply not returned.
func (p *bindingPool) bind(a *activation) *binding {
	b, _ := p.idle.Get().(*binding)
	if b == nil {
		b = &binding{rand: rand.NewChaCha8([32]byte{})}
		b.cfg = p.base.WithStdin((*bindingStdin)(b)).WithStdout((*bindingStdout)(b)).
			WithStderr((*bindingStderr)(b)).WithRandSource((*bindingRand)(b)).
			WithNanosleep(b.nanosleep).WithOsyield(b.osyield).
			WithWalltime(b.walltime, sys.ClockResolution(time.Microsecond)).
			WithNanotime(b.nanotime, sys.ClockResolution(time.Microsecond))
	}
	b.a, b.seeded = a, false
	return b
}

func (p *bindingPool) release(b *binding) {
	b.a = nil
	p.idle.Put(b)
}

// MonotonicStart is what a guest's monotonic clock reads when its
// activation starts. The clock counts from there in whole microseconds
// (its resolution): a guest learns how long it has run, not how long the
// node has, and gets no nanosecond timer. It does not start at zero, which
// some programs take for "unset".
const MonotonicStart = time.Millisecond

// The clocks, sleeps and yields of the bound activation, each charged
// hostCallFuel.

func (b *binding) walltime() (sec int64, nsec int32) {
	b.a.chargeHostCall(hostCallFuel)
	t := time.Now()
	return t.Unix(), int32(t.Nanosecond())
}

func (b *binding) nanotime() int64 {
	b.a.chargeHostCall(hostCallFuel)
	return (MonotonicStart + time.Since(b.a.started)).Truncate(time.Microsecond).Nanoseconds()
}

func (b *binding) nanosleep(ns int64) {
	b.a.chargeHostCall(hostCallFuel)
	b.a.nanosleep(ns)
}

// osyield only charges: a guest does not get to yield the host's thread.
func (b *binding) osyield() { b.a.chargeHostCall(hostCallFuel) }

type (
	bindingStdin  binding
	bindingStdout binding
	bindingStderr binding
	bindingRand   binding
)

// wasiStdio is an activation's stdio for the iovec functions (wasiio):
// stdin, stdout and stderr charged by size.
type wasiStdio activation

func (s *wasiStdio) Charge(n uint64)            { (*activation)(s).chargeHostCall(n) }
func (s *wasiStdio) Read(p []byte) (int, error) { return (*activation)(s).readInput(p) }
func (s *wasiStdio) Sleep(d time.Duration) {
	(*activation)(s).chargeHostCall(hostCallFuel)
	(*activation)(s).nanosleep(int64(d))
}
func (s *wasiStdio) Write(fd uint32, p []byte) error {
	a := (*activation)(s)
	a.charge(a.ctx, uint64(len(p))>>ioShift)
	w := io.Writer(&a.stdout)
	if fd == 2 {
		w = &a.stderr
	}
	_, err := w.Write(p)
	return err
}

func (b *bindingStdin) Read(p []byte) (int, error)   { return b.a.readInput(p) }
func (b *bindingStdout) Write(p []byte) (int, error) { return b.a.stdout.Write(p) }
func (b *bindingStderr) Write(p []byte) (int, error) { return b.a.stderr.Write(p) }

// Read is random_get: the activation's stream, charged by size like stdio.
func (b *bindingRand) Read(p []byte) (int, error) {
	b.a.chargeHostCall(uint64(len(p)) >> ioShift)
	if !b.seeded {
		(*binding)(b).seed()
	}
	return b.rand.Read(p)
}

// seed starts the bound activation's random stream, on its first
// random_get: an activation that reads no random bytes costs no seeding.
// By default (vocab.RandomSecure) the seed is 32 bytes from crypto/rand,
// so no two activations read the same stream; a revision that opted into
// vocab.RandomDeterministic gets deterministicSeed of its revision id.
// ChaCha8 is a cryptographically strong generator, so the secure stream is
// as good as crypto/rand's own bytes and costs one getrandom per activation
// instead of one per call (RATIONALE.md).
func (b *binding) seed() {
	var seed [32]byte
	if b.a.random == vocab.RandomDeterministic {
		seed = deterministicSeed(b.a.revision)
	} else {
		_, _ = crand.Read(seed[:]) // never fails: crypto/rand panics instead of returning an error
	}
	b.rand.Seed(seed)
	b.seeded = true
}

// checkImport accepts imp only if it is a function the runner's
// wasi_snapshot_preview1 module exports, with exactly that function's type.
func (r *Runner) checkImport(imp fuel.Import) error {
	if imp.Module != WASIModule {
		return errors.Newf("runner: import %s.%s is not allowed (only %s imports are)", imp.Module, imp.Name, WASIModule)
	}
	def, ok := r.wasi[imp.Name]
	if !ok || imp.Kind != fuel.ExternFunc {
		return errors.Newf("runner: import %s.%s is not a WASI preview 1 function", imp.Module, imp.Name)
	}
	if !slices.Equal(imp.Params, def.ParamTypes()) || !slices.Equal(imp.Results, def.ResultTypes()) {
		return errors.Newf("runner: import %s.%s has type %s; want %s", imp.Module, imp.Name,
			funcType(imp.Params, imp.Results), funcType(def.ParamTypes(), def.ResultTypes()))
	}
	return nil
}

// funcType writes a function type as "(i32, i32) -> (i32)".
func funcType(params, results []api.ValueType) string {
	list := func(ts []api.ValueType) string {
		names := make([]string, len(ts))
		for i, t := range ts {
			names[i] = api.ValueTypeName(t)
		}
		return "(" + strings.Join(names, ", ") + ")"
	}
	return list(params) + " -> " + list(results)
}

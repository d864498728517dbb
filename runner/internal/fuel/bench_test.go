package fuel

import (
	"bytes"
	"context"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/latent-node/latent-node/internal/testwasm"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
)

// fibModule exports fib(n i64) i64, the naive doubly recursive Fibonacci.
func fibModule() []byte {
	return wasmModule(
		types(functype(i64, i64)),
		funcs(0),
		exports(exportEntry("fib", ExternFunc, 0)),
		codes(body(nil,
			localGet(0), i64c(2), op(opI64LtU),
			ifElse(api.ValueTypeI64,
				localGet(0),
				cat(localGet(0), i64c(1), op(opI64Sub), call(0),
					localGet(0), i64c(2), op(opI64Sub), call(0), op(opI64Add))),
		)),
	)
}

// loopModule exports mix(n i64) i64: n rounds of compute.wat's LCG and
// xorshift, as a do-while loop with the condition at the bottom.
func loopModule() []byte {
	const x = 1
	return wasmModule(
		types(functype(i64, i64)),
		funcs(0),
		exports(exportEntry("mix", ExternFunc, 0)),
		codes(body([]localGroup{{1, api.ValueTypeI64}},
			i64c(-7046029254386353131), localSet(x),
			loop(blockEmpty,
				localGet(x), i64c(6364136223846793005), op(opI64Mul), i64c(1442695040888963407), op(opI64Add), localSet(x),
				localGet(x), localGet(x), i64c(29), op(opI64ShrU), op(0x85 /* i64.xor */), localSet(x),
				localGet(0), i64c(1), op(opI64Sub), localTee(0), i64c(0), op(0x52 /* i64.ne */), brIf(0),
			),
			localGet(x),
		)),
	)
}

// callable is an instantiated export ready for CallWithStack.
type callable struct {
	ctx   context.Context
	f     api.Function
	me    *meter
	stack []uint64
}

func newCallable(b testing.TB, wasm []byte, fn string) *callable {
	e := getEngine(b, true)
	me := newMeter(1 << 62)
	ctx := context.WithValue(context.Background(), meterKey{}, me)
	cm, err := e.rt.CompileModule(ctx, wasm)
	if err != nil {
		b.Fatal(err)
	}
	mod, err := e.rt.InstantiateModule(ctx, cm, wazero.NewModuleConfig().WithName(""))
	if err != nil {
		b.Fatal(err)
	}
	return &callable{ctx: ctx, f: mod.ExportedFunction(fn), me: me, stack: make([]uint64, 1)}
}

// call calls the export with arg and returns the time it took.
func (c *callable) call(b testing.TB, arg uint64) time.Duration {
	c.stack[0] = arg
	start := time.Now()
	if err := c.f.CallWithStack(c.ctx, c.stack); err != nil {
		b.Fatal(err)
	}
	return time.Since(start)
}

// benchRatio alternates calls of the plain and the instrumented export and
// reports the median of the per-pair time ratios (metered/plain), which is
// robust against load from other processes.
func benchRatio(b *testing.B, wasm []byte, fn string, arg uint64, cfg Config) {
	plain := newCallable(b, wasm, fn)
	metered := newCallable(b, mustInstrument(b, wasm, cfg).Module, fn)
	var ratios []float64
	var tp, tm time.Duration
	for b.Loop() {
		p := plain.call(b, arg)
		m := metered.call(b, arg)
		tp, tm = tp+p, tm+m
		ratios = append(ratios, float64(m)/float64(p))
	}
	slices.Sort(ratios)
	b.ReportMetric(ratios[len(ratios)/2], "ratio")
	b.ReportMetric(float64(tp.Nanoseconds())/float64(b.N), "plain-ns/op")
	b.ReportMetric(float64(tm.Nanoseconds())/float64(b.N), "metered-ns/op")
}

// BenchmarkRatio reports metered ÷ plain for recursive fib(25) and a tight
// loop of 100k rounds (the runner's targets: ≤ 1.3 and ≤ ~2).
func BenchmarkRatio(b *testing.B) {
	b.Run("fib", func(b *testing.B) { benchRatio(b, fibModule(), "fib", 25, Config{}) })
	b.Run("loop", func(b *testing.B) { benchRatio(b, loopModule(), "mix", 100_000, Config{}) })
	b.Run("sum", func(b *testing.B) { benchRatio(b, sumModule(), "sum", 100_000, Config{}) })
}

// sumModule exports sum(n i64) i64 = n + (n-1) + ... + 1: the tightest
// loop, four useful operators per iteration.
func sumModule() []byte {
	const acc = 1
	return wasmModule(
		types(functype(i64, i64)),
		funcs(0),
		exports(exportEntry("sum", ExternFunc, 0)),
		codes(body([]localGroup{{1, api.ValueTypeI64}},
			loop(blockEmpty,
				localGet(acc), localGet(0), op(opI64Add), localSet(acc),
				localGet(0), i64c(1), op(opI64Sub), localTee(0), i64c(0), op(0x52 /* i64.ne */), brIf(0),
			),
			localGet(acc),
		)),
	)
}

// benchCall measures calls of export fn(arg) of wasm, plain or instrumented.
func benchCall(b *testing.B, wasm []byte, fn string, arg uint64, metered bool) {
	if metered {
		wasm = mustInstrument(b, wasm, Config{}).Module
	}
	c := newCallable(b, wasm, fn)
	b.ResetTimer()
	for b.Loop() {
		c.stack[0] = arg
		if err := c.f.CallWithStack(c.ctx, c.stack); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if metered {
		b.ReportMetric(float64(c.me.used())/float64(b.N), "fuel/op")
	}
}

func BenchmarkFib(b *testing.B) {
	for _, metered := range []bool{false, true} {
		b.Run(name(metered), func(b *testing.B) { benchCall(b, fibModule(), "fib", 25, metered) })
	}
}

func BenchmarkLoop(b *testing.B) {
	for _, metered := range []bool{false, true} {
		b.Run(name(metered), func(b *testing.B) { benchCall(b, loopModule(), "mix", 100_000, metered) })
	}
}

// BenchmarkWASI runs whole activations of the fib and compute fixtures
// (instantiate, read N from stdin, compute, print).
func BenchmarkWASI(b *testing.B) {
	for _, tc := range []struct{ name, stdin string }{{"fib", "25"}, {"compute", "1000000"}} {
		for _, metered := range []bool{false, true} {
			b.Run(tc.name+"/"+name(metered), func(b *testing.B) {
				e := getEngine(b, true)
				wasm := testwasm.Bytes(b, tc.name)
				if metered {
					wasm = mustInstrument(b, wasm, Config{}).Module
				}
				e.run(b, wasm, tc.stdin, "", nil) // compile once into the cache
				for b.Loop() {
					o := e.run(b, wasm, tc.stdin, "", nil)
					if o.err != nil || o.exit >= 0 {
						b.Fatal(o.behaviour())
					}
				}
			})
		}
	}
}

func BenchmarkInstrument(b *testing.B) {
	for _, name := range []string{"fib", "goguest"} {
		b.Run(name, func(b *testing.B) {
			var wasm []byte
			if name == "goguest" {
				wasm = testwasm.BuildGoGuest(b)
			} else {
				wasm = testwasm.Bytes(b, name)
			}
			lim := DefaultLimits()
			m, err := decodeModule(wasm, &lim)
			if err != nil {
				b.Fatal(err)
			}
			_ = m
			b.SetBytes(int64(len(wasm)))
			for b.Loop() {
				m, _ := decodeModule(wasm, &lim)
				if _, err := m.instrument(DefaultMaxStackBytes); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func name(metered bool) string {
	if metered {
		return "metered"
	}
	return "plain"
}

// reactor is a warm instance of a WAGI reactor ($LATENT_BENCH_ROUTER) whose
// export is called activation after activation, as the runner's reuse mode
// does, with nothing reset but stdout.
type reactor struct {
	ctx    context.Context
	mod    api.Module
	f      api.Function
	me     *meter
	stdin  bytes.Reader
	stdout bytes.Buffer
}

func newReactor(b testing.TB, wasm []byte, fn string) *reactor {
	e := getEngine(b, true)
	r := &reactor{me: newMeter(1 << 62)}
	r.me.pageCap = 1 << 16
	r.ctx = context.WithValue(context.Background(), meterKey{}, r.me)
	cm, err := e.rt.CompileModule(r.ctx, wasm)
	if err != nil {
		b.Fatal(err)
	}
	cfg := wazero.NewModuleConfig().WithName("").WithStartFunctions().WithStdin(&r.stdin).WithStdout(&r.stdout).
		WithEnv("LATENT_ACTIVATION_ID", "bench").WithEnv("LATENT_REVISION", "v1").
		WithEnv("REQUEST_METHOD", "GET").WithEnv("PATH_INFO", "/hello").WithEnv("QUERY_STRING", "name=Ada").
		WithEnv("SERVER_PROTOCOL", "HTTP/1.1").WithEnv("HTTP_ACCEPT_LANGUAGE", "fr-CH, fr;q=0.9, en;q=0.8").
		WithSysWalltime().WithSysNanotime()
	mod, err := e.rt.InstantiateModule(r.ctx, cm, cfg)
	if err != nil {
		b.Fatal(err)
	}
	r.mod = mod
	b.Cleanup(func() { _ = mod.Close(context.Background()) })
	for _, init := range []string{StartExport, "_initialize"} {
		if f := mod.ExportedFunction(init); f != nil {
			if _, err := f.Call(r.ctx); err != nil {
				b.Fatal(err)
			}
		}
	}
	if r.f = mod.ExportedFunction(fn); r.f == nil {
		b.Fatalf("no export %q", fn)
	}
	for range 3 {
		r.call(b)
	}
	return r
}

func (r *reactor) call(b testing.TB) time.Duration {
	r.stdout.Reset()
	r.stdin.Reset(nil)
	start := time.Now()
	if _, err := r.f.Call(r.ctx); err != nil {
		b.Fatal(err)
	}
	d := time.Since(start)
	if r.stdout.Len() == 0 {
		b.Fatal("no output")
	}
	return d
}

// BenchmarkReactor calls the Go router reactor named by
// $LATENT_BENCH_ROUTER warm (one instance, export web per call), plain and
// instrumented with the test host's tick, grow and depth functions,
// alternately: what metering costs a reuse activation without the runner.
// It reports the median per-call times and the median of the per-pair
// ratios.
func BenchmarkReactor(b *testing.B) {
	p := os.Getenv("LATENT_BENCH_ROUTER")
	if p == "" {
		b.Skip("LATENT_BENCH_ROUTER not set")
	}
	wasm, err := os.ReadFile(p)
	if err != nil {
		b.Fatal(err)
	}
	res, err := Instrument(wasm, Config{})
	if err != nil {
		b.Fatal(err)
	}
	plain := newReactor(b, wasm, "web")
	metered := newReactor(b, res.Module, "web")
	var ratios, tps, tms []float64
	f0 := metered.me.used()
	for b.Loop() {
		p := plain.call(b)
		m := metered.call(b)
		tps, tms = append(tps, float64(p)), append(tms, float64(m))
		ratios = append(ratios, float64(m)/float64(p))
	}
	med := func(xs []float64) float64 { slices.Sort(xs); return xs[len(xs)/2] }
	b.ReportMetric(float64(metered.me.used()-f0)/float64(b.N), "fuel/op")
	b.ReportMetric(med(ratios), "ratio")
	b.ReportMetric(med(tps), "plain-p50-ns")
	b.ReportMetric(med(tms), "metered-p50-ns")
}

package fuel

import (
	"context"
	"runtime"
	"testing"

	"github.com/cockroachdb/errors"
	"github.com/tetratelabs/wazero/api"
)

// Frame shapes for the call stack accounting: each module exports rec(n
// i32) i64, which recurses n deep and keeps values live across its
// recursive call in a different way.

// liveModule keeps k i64 values on the operand stack across the call.
func liveModule(k int) []byte {
	var pre, post []byte
	for i := range k {
		pre = cat(pre, localGet(0), op(opI64ExtendU), i64c(int64(i)), op(opI64Add))
		post = cat(post, op(opI64Add))
	}
	return recModule(functype(i32, i64), nil, cat(pre, localGet(0), i32c(1), op(opI32Sub), call(0), post))
}

// pressureModule keeps k i64 remainders (whose lowering needs fixed
// registers and temporaries) live across the call.
func pressureModule(k int) []byte {
	var pre, post []byte
	for i := range k {
		pre = cat(pre, localGet(0), op(opI64ExtendU), i64c(int64(i)+7), op(0x81 /* i64.rem_s */),
			localGet(0), op(opI64ExtendU), i64c(int64(i)), op(0x88 /* i64.shr_u */), op(0x83 /* i64.and */))
		post = cat(post, op(opI64Add))
	}
	return recModule(functype(i32, i64), nil, cat(pre, localGet(0), i32c(1), op(opI32Sub), call(0), post))
}

// vectorModule keeps k v128 values on the operand stack across the call.
func vectorModule(k int) []byte {
	const tmp = 1
	var pre, post []byte
	for range k {
		pre = cat(pre, localGet(0), op(prefixSIMD), u32(0x11)) // i32x4.splat
	}
	for range k - 1 {
		post = cat(post, op(prefixSIMD), u32(0xae)) // i32x4.add
	}
	return recModule(functype(i32, i64), []localGroup{{1, api.ValueTypeI64}}, cat(pre,
		localGet(0), i32c(1), op(opI32Sub), call(0), localSet(tmp),
		post, op(prefixSIMD), u32(0x1b), op(0), op(opI64ExtendU), localGet(tmp), op(opI64Add)))
}

// paramsModule passes p i64 parameters down and uses them after the call.
func paramsModule(p int) []byte {
	params := append([]byte{api.ValueTypeI32}, make([]byte, p)...)
	for i := range p {
		params[1+i] = api.ValueTypeI64
	}
	var args, post []byte
	for i := range p {
		args = cat(args, localGet(uint32(1+i)))
		post = cat(post, localGet(uint32(1+i)), op(opI64Add))
	}
	return recModule(functype(params, i64), nil, cat(localGet(0), i32c(1), op(opI32Sub), args, call(0), post))
}

// localsModule sets l i64 locals before the call and sums them after it.
func localsModule(l int) []byte {
	var pre, post []byte
	for i := range l {
		pre = cat(pre, localGet(0), op(opI64ExtendU), i64c(int64(i)), op(opI64Add), localSet(uint32(1+i)))
		post = cat(post, localGet(uint32(1+i)), op(opI64Add))
	}
	return recModule(functype(i32, i64), []localGroup{{uint32(l), api.ValueTypeI64}}, cat(pre,
		localGet(0), i32c(1), op(opI32Sub), call(0), post))
}

// sequenceModule redefines a local k times, each new value live across a
// call of the host function env.f (the engine gives every value spilled
// across a call a slot of its own).
func sequenceModule(k int) []byte {
	const x = 1
	code := cat(localGet(0), op(opI64ExtendU), localSet(x))
	for range k {
		code = cat(code, localGet(x), i64c(3), op(opI64Mul), localSet(x), i32c(1), call(0), op(opDrop))
	}
	return recModule(functype(i32, i64), []localGroup{{1, api.ValueTypeI64}},
		cat(code, localGet(0), i32c(1), op(opI32Sub), call(1), localGet(x), op(opI64Add)), importFunc("env", "f", 1))
}

// recModule is rec(n): n == 0 ? 0 : body. With an import, the function
// index of rec is 1.
func recModule(ft []byte, locals []localGroup, rec []byte, imps ...[]byte) []byte {
	var impSec []byte
	if len(imps) > 0 {
		impSec = imports(imps...)
	}
	return wasmModule(
		types(ft, functype(i32, i32)),
		impSec,
		funcs(0),
		exports(exportEntry("rec", ExternFunc, uint32(len(imps)))),
		codes(body(locals, localGet(0), op(opI32Eqz), ifElse(api.ValueTypeI64, i64c(0), rec))),
	)
}

// stackRun calls rec(depth) (further parameters 1) of the instrumented
// wasm with the stack globals at budget, and returns the Go heap allocated
// during the call, the stack charged (budget - low) and the error.
func stackRun(t testing.TB, wasm []byte, budget int64, depth uint64) (alloc uint64, charged int64, err error) {
	t.Helper()
	e := getEngine(t, true)
	ctx := ctxWith(context.Background(), newMeter(1<<50))
	mod, err := e.rt.InstantiateModule(ctx, e.compile(t, wasm), moduleConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer mod.Close(ctx)
	for _, name := range []string{StackExport, StackLowExport} {
		if g := mod.ExportedGlobal(name); g != nil {
			g.(api.MutableGlobal).Set(uint64(budget))
		}
	}
	f := mod.ExportedFunction("rec")
	args := make([]uint64, len(f.Definition().ParamTypes()))
	for i := range args {
		args[i] = 1
	}
	args[0] = depth
	// Warm up the call engine (its first stack) with a shallow call.
	if _, err := f.Call(ctx, 0); len(args) == 1 && err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err = f.Call(ctx, args...)
	runtime.ReadMemStats(&after)
	if g := mod.ExportedGlobal(StackLowExport); g != nil {
		charged = budget - int64(g.Get())
	}
	return after.TotalAlloc - before.TotalAlloc, charged, err
}

type stackShape struct {
	name string
	wasm []byte
}

func stackShapes() []stackShape {
	return []stackShape{
		{"live1", liveModule(1)},
		{"live16", liveModule(16)},
		{"live200", liveModule(200)},
		{"pressure100", pressureModule(100)},
		{"vector8", vectorModule(8)},
		{"vector100", vectorModule(100)},
		{"params8", paramsModule(8)},
		{"params100", paramsModule(100)},
		{"locals10", localsModule(10)},
		{"locals1000", localsModule(1000)},
		{"sequence200", sequenceModule(200)},
	}
}

// TestStack_calibration checks FrameCost against the engine: the Go heap
// wazero allocates for its call stack while rec recurses is at most the
// stack charged, plus the innermost frame and the call's own constant.
func TestStack_calibration(t *testing.T) {
	for _, sh := range stackShapes() {
		t.Run(sh.name, func(t *testing.T) {
			res := mustInstrument(t, sh.wasm, Config{})
			depths := []uint64{100, 1000, 3000}
			if testing.Short() {
				depths = depths[1:2]
			}
			for _, depth := range depths {
				alloc, charged, err := stackRun(t, res.Module, 1<<40, depth)
				if err != nil {
					t.Fatalf("depth %d: %v", depth, err)
				}
				slack := res.Info.MaxFrameBytes + 64<<10
				if alloc > uint64(charged)+slack {
					t.Errorf("depth %d: wazero allocated %d bytes, charged %d + %d", depth, alloc, charged, slack)
				}
				plain, _, _ := stackRun(t, sh.wasm, 0, depth)
				t.Logf("depth %5d: charged %9d (%5d/frame), allocated %9d instrumented, %9d plain (%.2f of charged)",
					depth, charged, charged/int64(depth), alloc, plain, float64(alloc)/float64(charged))
			}
		})
	}
}

// TestStack_bomb: values live across deep recursion with a 4 MiB budget
// trap call-depth-exceeded having allocated no more than the budget (plus a
// constant) of Go heap for wazero's stack.
func TestStack_bomb(t *testing.T) {
	const budget = 4 << 20
	for _, sh := range stackShapes() {
		t.Run(sh.name, func(t *testing.T) {
			res := mustInstrument(t, sh.wasm, Config{MaxStackBytes: budget})
			alloc, charged, err := stackRun(t, res.Module, budget, 1_000_000)
			if !errors.Is(err, errDepthExceeded) {
				t.Fatalf("want depth exceeded, have %v", err)
			}
			if alloc > budget+res.Info.MaxFrameBytes+64<<10 {
				t.Errorf("allocated %d bytes for a budget of %d", alloc, budget)
			}
			t.Logf("allocated %d, charged %d (max frame %d)", alloc, charged, res.Info.MaxFrameBytes)
		})
	}
	// Negative control: without instrumentation the same recursion takes
	// far more.
	alloc, _, err := stackRun(t, liveModule(200), 0, 10_000)
	if err != nil || alloc < 8*budget {
		t.Errorf("plain: %d bytes (%v), want more than %d", alloc, err, 8*budget)
	}
	t.Logf("plain live200 at depth 10000: %d bytes", alloc)
}

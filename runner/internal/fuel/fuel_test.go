package fuel

import (
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/errors"
	"github.com/latent-node/latent-node/internal/testwasm"
	"github.com/tetratelabs/wazero/api"
)

// countModule exports count(k i32) i32, which loops k times:
//
//	block
//	  loop
//	    local.get i; local.get k; i32.ge_u; br_if 1   ;; 4
//	    local.get i; i32.const 1; i32.add; local.set i ;; 4
//	    br 0                                           ;; 1
//	  end
//	end
//	local.get i                                        ;; 1
//
// The entry region (block, loop) costs 0. The loop body is one region of 9
// (br_if merged), entered k+1 times: the last entry leaves through br_if but
// has paid for its whole region. The end of the block is a branch target, so
// local.get starts a region of 1. Fuel = 9(k+1) + 1 = 9k + 10.
func countModule() []byte {
	const k, i = 0, 1
	return wasmModule(
		types(functype(i32, i32)),
		funcs(0),
		exports(exportEntry("count", ExternFunc, 0)),
		codes(body([]localGroup{{1, api.ValueTypeI32}},
			block(blockEmpty,
				loop(blockEmpty,
					localGet(i), localGet(k), op(opI32GeU), brIf(1),
					localGet(i), i32c(1), op(0x6a /* i32.add */), localSet(i),
					br(0),
				),
			),
			localGet(i),
		)),
	)
}

func TestFuel_exactLoop(t *testing.T) {
	e := getEngine(t, true)
	res := mustInstrument(t, countModule(), Config{})
	for _, k := range []uint64{0, 1, 2, 10, 1000, 123456} {
		o := e.run(t, res.Module, "", "count", nil, k)
		if o.err != nil || o.results[0] != k {
			t.Fatalf("count(%d) = %v, %v", k, o.results, o.err)
		}
		if want := int64(9*k + 10); o.fuel != want {
			t.Errorf("count(%d): fuel = %d, want 9k+10 = %d", k, o.fuel, want)
		}
	}
}

// TestFuel_exactFib checks hoisting: fib's entry region (local.get,
// i64.const, i64.lt_u, if: 4) also pays for the dearer else arm (9), and the
// then arm (1) refunds 8. A leaf call costs 5, an inner call 13, and fib(n)
// makes fib(n+1) leaf calls, so fuel = 5·fib(n+1) + 13·(fib(n+1)-1).
func TestFuel_exactFib(t *testing.T) {
	e := getEngine(t, true)
	res := mustInstrument(t, fibModule(), Config{})
	fib := func(n int) int64 {
		a, b := int64(0), int64(1)
		for range n {
			a, b = b, a+b
		}
		return a
	}
	for _, n := range []int{0, 1, 2, 10, 20} {
		o := e.run(t, res.Module, "", "fib", nil, uint64(n))
		if o.err != nil || int64(o.results[0]) != fib(n) {
			t.Fatalf("fib(%d) = %v, %v", n, o.results, o.err)
		}
		leaves := fib(n + 1)
		if want := 5*leaves + 13*(leaves-1); o.fuel != want {
			t.Errorf("fib(%d): fuel = %d, want %d", n, o.fuel, want)
		}
	}
}

// TestFuel_computeLinear checks compute.wasm: each round of its loop is one
// region of 21 operators (see compute.wat), and printing costs 19 per digit
// of the result, so fuel - 21·N - 19·digits is the same for every 4-digit N.
func TestFuel_computeLinear(t *testing.T) {
	e := getEngine(t, true)
	res := mustInstrument(t, testwasm.Bytes(t, "compute"), Config{})
	var base int64 = -1
	for _, n := range []int64{1000, 2000, 5000, 9999} {
		o := e.run(t, res.Module, strconv.FormatInt(n, 10), "", nil)
		if o.err != nil || o.exit >= 0 {
			t.Fatal(o.behaviour())
		}
		digits := int64(len(strings.TrimSpace(o.stdout)))
		rest := o.fuel - 21*n - 19*digits
		if base < 0 {
			base = rest
		}
		if rest != base {
			t.Errorf("N=%d: fuel %d = 21N + 19·%d + %d, want constant part %d", n, o.fuel, digits, rest, base)
		}
		t.Logf("N=%d: fuel %d", n, o.fuel)
	}
}

// TestFuel_deterministic runs the same activation with different slice
// sizes (so a different number of ticks) and on both engines.
func TestFuel_deterministic(t *testing.T) {
	tests := []struct{ name, stdin string }{
		{"compute", "3000"}, {"fib", "15"}, {"echo", strings.Repeat("x", 70000)}, {"hello", "ann"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := mustInstrument(t, testwasm.Bytes(t, tc.name), Config{})
			var want outcome
			for i, slice := range []int64{1 << 20, 1 << 20, 1, 7, 1000} {
				for _, compiler := range []bool{true, false} {
					me := newMeter(1 << 40)
					me.slice = slice
					o := getEngine(t, compiler).run(t, res.Module, tc.stdin, "", me)
					if i == 0 && compiler {
						want = o
						continue
					}
					if o.fuel != want.fuel || o.behaviour() != want.behaviour() {
						t.Errorf("slice %d compiler=%v: fuel %d (%s), want %d (%s)",
							slice, compiler, o.fuel, o.behaviour(), want.fuel, want.behaviour())
					}
				}
			}
		})
	}
}

// TestFuel_exhausted checks that a spent budget stops the guest with the
// typed error once the whole budget is handed out, owing at most
// Info.MaxDebt: the guest may run code that no check follows past the end
// of its budget, up to the next check. What it used at that point does not
// depend on the slice size.
func TestFuel_exhausted(t *testing.T) {
	e := getEngine(t, true)
	tests := []struct {
		name, stdin string
		budget      int64
		slice       int64
	}{
		{"infinite", "", 1_000_000, 1 << 20},
		{"infinite", "", 1_000_000, 4096},
		{"infinite", "", 5, 1},
		{"compute", "1000000000000", 123_457, 1000},
		{"fib", "60", 2_000_000, 1 << 16},
	}
	for _, tc := range tests {
		t.Run(tc.name+"/"+strconv.FormatInt(tc.budget, 10), func(t *testing.T) {
			res := mustInstrument(t, testwasm.Bytes(t, tc.name), Config{})
			var used int64
			// A slice of one unit ticks once per charge: a million host
			// calls for the larger budgets, 16 s under the race detector.
			// The short suite takes the smallest slice that keeps it to
			// about ten thousand ticks; the full run keeps 1.
			smallest := int64(1)
			if testing.Short() {
				smallest = max(1, tc.budget/10_000)
			}
			for i, slice := range []int64{tc.slice, smallest, 1 << 30} {
				me := newMeter(tc.budget)
				me.slice = slice
				o := e.run(t, res.Module, tc.stdin, "", me)
				if !errors.Is(o.err, errFuelExhausted) {
					t.Fatalf("want fuel exhausted, have %s (%v)", o.behaviour(), o.err)
				}
				if i == 0 {
					used = o.fuel
				}
				debt := o.fuel - tc.budget
				if me.left != 0 || debt <= 0 || debt > int64(res.Info.MaxDebt) || o.fuel != used {
					t.Errorf("slice %d: left %d, used %d, want 0 and budget %d + a debt in (0, %d], the same for every slice (%d)",
						slice, me.left, o.fuel, tc.budget, res.Info.MaxDebt, used)
				}
				if f := int64(me.fuel.Get()); f >= 0 {
					t.Errorf("fuel global %d after exhaustion, want < 0 (the unpaid charges)", f)
				}
			}
		})
	}
}

// deepModule exports rec(d i32) i32, which records d in the exported global
// "deep" and calls rec(d+1) forever.
func deepModule() []byte {
	return wasmModule(
		types(functype(i32, i32)),
		funcs(0),
		section(secGlobal, vec(cat([]byte{api.ValueTypeI32, 1}, i32c(0), op(opEnd)))),
		exports(exportEntry("rec", ExternFunc, 0), exportEntry("deep", ExternGlobal, 0)),
		codes(body(nil,
			localGet(0), globalSet(0),
			localGet(0), i32c(1), op(0x6a /* i32.add */), call(0),
		)),
	)
}

// frameOf returns the frame cost of a module's only defined function.
func frameOf(t *testing.T, wasm []byte) int64 {
	t.Helper()
	return int64(mustInstrument(t, wasm, Config{}).Info.MaxFrameBytes)
}

func TestDepth(t *testing.T) {
	e := getEngine(t, true)
	c := frameOf(t, deepModule())
	for _, k := range []int64{0, 1, 999, 4999} {
		// A budget of (k+1)·c - 1 lets k+1 frames run: frame d is entered
		// with budget - (d-1)·c left. One more byte lets a frame more run.
		for _, extra := range []int64{0, 1} {
			budget := (k+1)*c - 1 + extra
			t.Run(strconv.FormatInt(budget, 10), func(t *testing.T) {
				res := mustInstrument(t, deepModule(), Config{MaxStackBytes: uint64(budget)})
				ctx := ctxWith(t.Context(), newMeter(1<<40))
				cm, err := e.rt.CompileModule(ctx, res.Module)
				if err != nil {
					t.Fatal(err)
				}
				mod, err := e.rt.InstantiateModule(ctx, cm, moduleConfig())
				if err != nil {
					t.Fatal(err)
				}
				defer mod.Close(ctx)
				_, err = mod.ExportedFunction("rec").Call(ctx, 1)
				if !errors.Is(err, errDepthExceeded) {
					t.Fatalf("want depth exceeded, have %v", err)
				}
				// The frame beyond the budget stopped at its entry, before
				// it stored its d.
				if deep := int64(mod.ExportedGlobal("deep").Get()); deep != k+1+extra {
					t.Errorf("deepest frame = %d, want %d", deep, k+1+extra)
				}
				// The low-water mark is the stack left at the deepest entry
				// that ran, or below the re-entry of the first frame (its
				// entry ticks: fuel starts at 0), but never below 0.
				want := max(0, budget-max(k+extra, 1)*c)
				if low := int64(mod.ExportedGlobal(StackLowExport).Get()); low != want {
					t.Errorf("low-water mark %d, want %d", low, want)
				}
			})
		}
	}
	t.Run("recursion.wasm", func(t *testing.T) {
		res := mustInstrument(t, testwasm.Bytes(t, "recursion"), Config{})
		o := e.run(t, res.Module, "", "", nil)
		if !errors.Is(o.err, errDepthExceeded) {
			t.Fatalf("want depth exceeded, have %s (%v)", o.behaviour(), o.err)
		}
		// With a huge budget the fuel runs out first.
		res = mustInstrument(t, testwasm.Bytes(t, "recursion"), Config{MaxStackBytes: 1 << 40})
		o = e.run(t, res.Module, "", "", newMeter(2_000_000))
		if !errors.Is(o.err, errFuelExhausted) {
			t.Fatalf("want fuel exhausted, have %s (%v)", o.behaviour(), o.err)
		}
	})
	t.Run("bad config", func(t *testing.T) {
		if _, err := Instrument(countModule(), Config{MaxStackBytes: 1 << 63}); err == nil {
			t.Error("MaxStackBytes 2^63 accepted")
		}
	})
}

func TestGrow(t *testing.T) {
	e := getEngine(t, true)
	res := mustInstrument(t, testwasm.Bytes(t, "grow"), Config{})
	me := newMeter(1 << 40)
	me.pageCap = 16
	o := e.run(t, res.Module, "", "", me)
	if o.err != nil || o.stdout != "15\n" {
		t.Fatalf("have %s (%v), want stdout 15", o.behaviour(), o.err)
	}
	if me.refusals != 1 || me.grows != 15 {
		t.Errorf("grows %d, refusals %d, want 15 and 1", me.grows, me.refusals)
	}
}

// bulkModule exports fill(n i32) (memory.fill of n bytes at 0), tgrow(n
// i32) i32 (table.grow by n), tfill(n i32) (table.fill of n elements at 0),
// copy(n i32) (memory.copy of n bytes from 0 to 0) and tcopy(n i32)
// (table.copy of n elements from 0 to 0). The table has 128 elements and
// may grow to 1000.
func bulkModule() []byte {
	return wasmModule(
		types(functype(i32, none), functype(i32, i32)),
		funcs(0, 1, 0, 0, 0),
		section(secTable, vec(cat([]byte{valFuncref, 1}, u32(128), u32(1000)))),
		memory(1, 1),
		exports(exportEntry("fill", ExternFunc, 0), exportEntry("tgrow", ExternFunc, 1),
			exportEntry("tfill", ExternFunc, 2), exportEntry("copy", ExternFunc, 3), exportEntry("tcopy", ExternFunc, 4)),
		codes(
			body(nil, i32c(0), i32c(7), localGet(0), misc(miscMemoryFill, 0)),
			body(nil, op(opRefNull, valFuncref), localGet(0), misc(miscTableGrow, 0)),
			body(nil, i32c(0), op(opRefNull, valFuncref), localGet(0), misc(miscTableFill, 0)),
			body(nil, i32c(0), i32c(0), localGet(0), misc(miscMemoryCopy, 0, 0)),
			body(nil, i32c(0), i32c(0), localGet(0), misc(miscTableCopy, 0, 0)),
		),
	)
}

func TestFuel_bulk(t *testing.T) {
	e := getEngine(t, true)
	res := mustInstrument(t, bulkModule(), Config{})
	if want := FeatureBulkMemory | FeatureReferenceTypes; res.Info.Features != want {
		t.Errorf("features %v, want %v", res.Info.Features.Names(), want.Names())
	}
	tests := []struct {
		fn       string
		n        uint64
		wantFuel int64
	}{
		{"fill", 0, 4},
		{"fill", 63, 4},
		{"fill", 64, 5},
		{"fill", 6400, 104},
		{"fill", 65536, 4 + 1024},
		{"tgrow", 0, 3},
		{"tgrow", 10, 13},
		{"tgrow", 872, 3 + 872}, // to the maximum
		{"tgrow", 873, 3},       // refused (-1): only the static cost
		{"tgrow", 0xffffffff, 3},
		{"tfill", 128, 4 + 2},
		{"copy", 65536, 4 + 1024},
		{"tcopy", 64, 4 + 1},
	}
	for _, tc := range tests {
		o := e.run(t, res.Module, "", tc.fn, nil, tc.n)
		if o.err != nil {
			t.Fatalf("%s(%d): %v", tc.fn, tc.n, o.err)
		}
		if o.fuel != tc.wantFuel {
			t.Errorf("%s(%d): fuel %d, want %d", tc.fn, tc.n, o.fuel, tc.wantFuel)
		}
	}
	// A huge length (unsigned) is charged only up to the memory or table
	// size, so under a small budget the operation's own bounds check traps;
	// a budget below the in-bounds part stops it first (negative control).
	for _, tc := range []struct {
		fn       string
		n        uint64
		inBounds int64 // fuel of the call up to the operation's bounds check
	}{
		{"fill", 0xfffffff0, 4 + 1024},
		{"copy", 0x80000000, 4 + 1024},
		{"tfill", 0xffffffff, 4 + 2},
		{"tcopy", 1 << 20, 4 + 2},
	} {
		o := e.run(t, res.Module, "", tc.fn, newMeter(1_000_000), tc.n)
		if o.err == nil || !strings.Contains(o.err.Error(), "out of bounds") && !strings.Contains(o.err.Error(), "invalid table access") || o.fuel != tc.inBounds {
			t.Errorf("%s(%#x): %v, fuel %d, want out of bounds with fuel %d", tc.fn, tc.n, o.err, o.fuel, tc.inBounds)
		}
		// The dynamic charge is checked before the operation runs: the
		// guest owes 1 when it stops.
		me := newMeter(tc.inBounds - 1)
		o = e.run(t, res.Module, "", tc.fn, me, tc.n)
		if !errors.Is(o.err, errFuelExhausted) || o.fuel != tc.inBounds {
			t.Errorf("%s(%#x), budget %d: %v, fuel %d, want exhausted at %d", tc.fn, tc.n, tc.inBounds-1, o.err, o.fuel, tc.inBounds)
		}
	}
	// A successful grow is charged after it ran: under a budget below the
	// delta it completes, then the tick traps.
	o := e.run(t, res.Module, "", "tgrow", newMeter(100), 500)
	if !errors.Is(o.err, errFuelExhausted) {
		t.Errorf("tgrow(500) with budget 100: %v", o.err)
	}
}

func TestInstrument_goGuest(t *testing.T) {
	wasm := testwasm.BuildGoGuest(t)
	// The Go guest's deepest calls charge about 1.1 MB (see FrameCost).
	res := mustInstrument(t, wasm, Config{MaxStackBytes: 4 << 20})
	// Compiling 3 MB twice with the compiler takes seconds under -race; the
	// interpreter checks the same behaviour.
	e := getEngine(t, !testing.Short())
	for _, stdin := range []string{`{"words":["b","a","b"]}`, `not json`} {
		want := e.run(t, wasm, stdin, "", nil)
		have := e.run(t, res.Module, stdin, "", nil)
		if want.behaviour() != have.behaviour() || want.stderr != have.stderr {
			t.Errorf("stdin %q:\nwant %s %q\nhave %s %q", stdin, want.behaviour(), want.stderr, have.behaviour(), have.stderr)
		}
		t.Logf("stdin %q: %s, fuel %d, %d ticks", stdin, have.behaviour(), have.fuel, have.me.ticks)
	}
	if res.Info.Features&FeatureSignExtension == 0 {
		t.Errorf("features %v: Go uses sign-extension", res.Info.Features.Names())
	}
}

// TestFuel_blockParams instruments a loop and an if/else that take
// parameters (multi-value block types): the charges inside them must leave
// the operand stack alone.
//
//	local.get 0
//	loop (type 0)                   ;; [i32] -> [i32]
//	  i32.const 1; i32.sub; local.tee 1; local.get 1; br_if 0
//	end                             ;; x iterations, leaves 0
//	local.get 0; i32.eqz
//	if (type 0) i32.const 100; i32.add else i32.const 7; i32.add end
//
// Fuel: entry 1, loop body 5 per iteration, then 3 + the hoisted arm (2):
// 5x + 6.
func TestFuel_blockParams(t *testing.T) {
	wasm := wasmModule(
		types(functype(i32, i32)),
		funcs(0),
		exports(exportEntry("f", ExternFunc, 0)),
		codes(body([]localGroup{{1, api.ValueTypeI32}},
			localGet(0),
			op(opLoop, 0), i32c(1), op(opI32Sub), localTee(1), localGet(1), brIf(0), op(opEnd),
			localGet(0), op(opI32Eqz),
			op(opIf, 0), i32c(100), op(0x6a), op(opElse), i32c(7), op(0x6a), op(opEnd),
		)),
	)
	res := mustInstrument(t, wasm, Config{})
	if res.Info.Features != FeatureMultiValue {
		t.Errorf("features %v", res.Info.Features.Names())
	}
	e := getEngine(t, true)
	for _, x := range []uint64{1, 5, 100} {
		o := e.run(t, res.Module, "", "f", nil, x)
		if o.err != nil || o.results[0] != 7 {
			t.Fatalf("f(%d) = %v, %v", x, o.results, o.err)
		}
		if want := int64(5*x + 6); o.fuel != want {
			t.Errorf("f(%d): fuel %d, want %d", x, o.fuel, want)
		}
	}
}

// mixModule exports mix(a i32, b i64, c f32, d f64) f64: a == 0 ? b + c + d
// : mix(a-1, b+3, c, d+d), so every parameter type reaches the result.
func mixModule() []byte {
	return wasmModule(
		types(functype([]byte{api.ValueTypeI32, api.ValueTypeI64, api.ValueTypeF32, api.ValueTypeF64}, []byte{api.ValueTypeF64})),
		funcs(0),
		exports(exportEntry("mix", ExternFunc, 0)),
		codes(body(nil,
			localGet(0), op(0x45 /* i32.eqz */),
			ifElse(api.ValueTypeF64,
				cat(localGet(1), op(0xb9 /* f64.convert_i64_s */), localGet(2), op(0xbb /* f64.promote_f32 */),
					op(0xa0 /* f64.add */), localGet(3), op(0xa0)),
				cat(localGet(0), i32c(1), op(0x6b /* i32.sub */), localGet(1), i64c(3), op(0x7c /* i64.add */),
					localGet(2), localGet(3), localGet(3), op(0xa0), call(0))),
		)),
	)
}

// TestEntry_reentry: when a function's entry charge runs the slow path, the
// function enters itself again with the same arguments (see emitEntry). With
// a slice of 1 every entry ticks; the result, the fuel and the depth bound
// are those of a run that never ticks at entry.
func TestEntry_reentry(t *testing.T) {
	e := getEngine(t, true)
	res := mustInstrument(t, mixModule(), Config{})
	want := float64(7+3*50) + 1.5 + 0.25*math.Pow(2, 50)
	args := []uint64{50, 7, uint64(math.Float32bits(1.5)), math.Float64bits(0.25)}
	var fuel int64
	for _, slice := range []int64{1 << 20, 1} {
		me := newMeter(1 << 40)
		me.slice = slice
		o := e.run(t, res.Module, "", "mix", me, args...)
		if o.err != nil || math.Float64frombits(o.results[0]) != want {
			t.Fatalf("slice %d: mix = %v (%v), want %v", slice, math.Float64frombits(o.results[0]), o.err, want)
		}
		if slice == 1 {
			if o.fuel != fuel || me.ticks < 51 {
				t.Fatalf("slice 1: fuel %d with %d ticks, want %d with at least one per call", o.fuel, me.ticks, fuel)
			}
		}
		fuel = o.fuel
	}
	// Re-entry frames are not charged to the stack global: 51 nested calls
	// fit in a budget of 50 frames and not in one byte less, whatever the
	// slice.
	c := frameOf(t, mixModule())
	for _, slice := range []int64{1 << 20, 1} {
		for _, tc := range []struct {
			budget int64
			ok     bool
		}{{50 * c, true}, {50*c - 1, false}} {
			me := newMeter(1 << 40)
			me.slice = slice
			o := e.run(t, mustInstrument(t, mixModule(), Config{MaxStackBytes: uint64(tc.budget)}).Module, "", "mix", me, args...)
			if (o.err == nil) != tc.ok || (!tc.ok && !errors.Is(o.err, errDepthExceeded)) {
				t.Errorf("slice %d, budget %d: %v", slice, tc.budget, o.err)
			}
			if tc.ok && o.stack != tc.budget {
				t.Errorf("slice %d: stack global %d after return, want %d", slice, o.stack, tc.budget)
			}
		}
	}
}

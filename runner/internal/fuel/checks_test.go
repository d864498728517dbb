package fuel

import (
	"os"
	"testing"

	"github.com/cockroachdb/errors"

	"github.com/tetratelabs/wazero/api"
)

// counters reads the check and charge counters of an instance
// instrumented with Config.countChecks.
type counters struct{ checks, charges api.Global }

func (c counters) read() (checks, charges uint64) { return c.checks.Get(), c.charges.Get() }

// TestChecks_router counts the fuel checks and the (positive) region
// charges one activation of the Go router reactor ($LATENT_BENCH_ROUTER)
// executes. Before checks were placed only where they are needed, every
// positive charge was followed by one; the test fails if that is the case
// again (the check points must be well below the charges).
func TestChecks_router(t *testing.T) {
	p := os.Getenv("LATENT_BENCH_ROUTER")
	if p == "" {
		t.Skip("LATENT_BENCH_ROUTER not set")
	}
	wasm, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	res := mustInstrument(t, wasm, Config{countChecks: true})
	r := newReactor(t, res.Module, "web")
	t.Logf("MaxDebt %d", res.Info.MaxDebt)
	c := r.counters(t)
	checks0, charges0 := c.read()
	const n = 20
	f0 := r.me.used()
	for range n {
		r.call(t)
	}
	checks, charges := c.read()
	checks, charges = (checks-checks0)/n, (charges-charges0)/n
	t.Logf("per activation: %d checks, %d positive region charges, %d fuel", checks, charges, (r.me.used()-f0)/n)
	if checks*2 > charges {
		t.Errorf("%d checks for %d charges: want fewer than half", checks, charges)
	}
}

// wantOwing fails t unless err is the fuel running out and the fuel used
// is above budget by at most maxDebt (and by something: the check that
// stopped the guest found the budget spent).
func wantOwing(t *testing.T, err error, used, budget int64, maxDebt uint64) {
	t.Helper()
	if debt := used - budget; !errors.Is(err, errFuelExhausted) || debt <= 0 || debt > int64(maxDebt) {
		t.Errorf("%v, used %d of a budget of %d: want exhausted owing (0, %d]", err, used, budget, maxDebt)
	}
}

func (r *reactor) counters(t testing.TB) counters {
	t.Helper()
	c := counters{r.mod.ExportedGlobal(checksExport), r.mod.ExportedGlobal(chargesExport)}
	if c.checks == nil || c.charges == nil {
		t.Fatal("no counters: instrument with countChecks")
	}
	return c
}

// spin is k operators of cost 1 that do nothing: k × (i32.const 1; drop),
// drop being free.
func spin(k int) []byte {
	var out []byte
	for range k {
		out = cat(out, i32c(1), op(opDrop))
	}
	return out
}

// merge is a block that a br_if on local 0 targets: the code after it is a
// merge region, charged without a check unless something needs one.
func merge() []byte { return block(blockEmpty, localGet(0), brIf(0)) }

// TestChecks_loops checks that every loop iteration passes a check, for
// loops closed by br (with the header charged on the paths into it), by
// br_if and by br_table, none of which call anything: a budget far below
// what the loop would run stops it, owing at most Info.MaxDebt. Without
// the back-edge checks the loops would run to the end of their count and
// the debt would be millions (the loops end: a missing check fails the
// test rather than hanging it).
func TestChecks_loops(t *testing.T) {
	e := getEngine(t, true)
	brTableLoop := wasmModule(
		types(functype(i32, i32)),
		funcs(0),
		exports(exportEntry("count", ExternFunc, 0)),
		codes(body(nil,
			block(blockEmpty,
				loop(blockEmpty,
					merge(), spin(5),
					localGet(0), i32c(1), op(opI32Sub), localTee(0),
					op(opI32Eqz), brTable(1, 0), // 0: back to the loop; else leave
				),
			),
			localGet(0),
		)),
	)
	for _, tc := range []struct {
		name string
		wasm []byte
		fn   string
		arg  uint64
	}{
		{"br", countModule(), "count", 1 << 22},
		{"br_if", sumModule(), "sum", 1 << 22},
		{"do-while", loopModule(), "mix", 1 << 22},
		{"br_table", brTableLoop, "count", 1 << 22},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := mustInstrument(t, tc.wasm, Config{})
			const budget = 10_000
			me := newMeter(budget)
			me.slice = 1000
			o := e.run(t, res.Module, "", tc.fn, me, tc.arg)
			wantOwing(t, o.err, o.fuel, budget, res.Info.MaxDebt)
		})
	}
}

// TestChecks_hostCall checks that a host call is a check point: a guest
// that has run unchecked code past the end of its budget is stopped before
// the host runs, never calling it with the fuel global negative. The first
// budget that covers only the entry shows the weaker property: the guest
// ran a whole unchecked region (spin) after its budget was spent.
func TestChecks_hostCall(t *testing.T) {
	const k = 100
	wasm := wasmModule(
		types(functype(i32, i32)),
		imports(importFunc("env", "visible", 0)),
		funcs(0),
		exports(exportEntry("run", ExternFunc, 1)),
		codes(body(nil,
			merge(), spin(k), // unchecked
			merge(), localGet(0), call(0), // checked: it calls the host
			merge(), // not the exit region, whose check would cover the call
		)),
	)
	res := mustInstrument(t, wasm, Config{countChecks: true})
	e := getEngine(t, true)
	full := e.run(t, res.Module, "", "run", nil, 0)
	if full.err != nil || full.me.hostCalls != 1 {
		t.Fatalf("%v, %d host calls", full.err, full.me.hostCalls)
	}
	const entry = 2 // block, local.get, br_if
	for budget := int64(1); budget < full.fuel; budget += 1 + budget/8 {
		me := newMeter(budget)
		me.slice = 1
		o := e.run(t, res.Module, "", "run", me, 0)
		if !errors.Is(o.err, errFuelExhausted) || me.hostCalls != 0 || me.negativeAtHost != 0 {
			t.Fatalf("budget %d of %d: %v, %d host calls", budget, full.fuel, o.err, me.hostCalls)
		}
		if budget == entry && o.fuel-budget < k {
			t.Errorf("budget %d: stopped owing %d, want at least the unchecked %d", budget, o.fuel-budget, k)
		}
	}
}

// TestChecks_exit checks that a function that ran unchecked code checks
// before it returns, so that the debt stays within one body (MaxDebt)
// even when every frame of a deep recursion runs unchecked code on the way
// back up. Without exit checks nothing would stop the guest until the host
// settles after the last return, owing about depth × k.
func TestChecks_exit(t *testing.T) {
	const k, depth = 50, 1000
	cfg := Config{MaxStackBytes: 1 << 30}
	wasm := wasmModule(
		types(functype(i32, i32)),
		funcs(0),
		exports(exportEntry("rec", ExternFunc, 0)),
		codes(body(nil,
			block(blockEmpty,
				localGet(0), op(opI32Eqz), brIf(0),
				localGet(0), i32c(1), op(opI32Sub), call(0), op(opDrop),
			),
			spin(k), // unchecked, on the way back up
			merge(), localGet(0),
		)),
	)
	res := mustInstrument(t, wasm, cfg)
	e := getEngine(t, true)
	full := e.run(t, res.Module, "", "rec", nil, depth)
	if full.err != nil {
		t.Fatal(full.err)
	}
	if res.Info.MaxDebt >= 2*k {
		t.Fatalf("MaxDebt %d, want one body's unchecked %d and a little", res.Info.MaxDebt, k)
	}
	for _, budget := range []int64{full.fuel / 2, full.fuel - 1, full.fuel - k} {
		me := newMeter(budget)
		o := e.run(t, res.Module, "", "rec", me, depth)
		wantOwing(t, o.err, o.fuel, budget, res.Info.MaxDebt)
	}
}

// TestChecks_staleClean: a region whose check is left out because it is
// entered only right after a checked region must be judged on the final
// charges, after loop headers were moved and if arms hoisted. A loop at
// the very top of another loop is the case: when the inner loop opens,
// the outer header is empty and follows a check, but the inner header's
// charge is later moved onto it, so the outer header ends up charged and
// unchecked. The inner header branches to the outer loop, so it must check;
// judged on the early state, it did not, and the two loops spun forever
// without a check (here: bounded by n, a debt of millions against a
// MaxDebt of a few units).
func TestChecks_staleClean(t *testing.T) {
	wasm := wasmModule(
		types(functype(i32, i32)),
		funcs(0),
		exports(exportEntry("spin", ExternFunc, 0)),
		codes(body(nil,
			loop(blockEmpty,
				loop(blockEmpty,
					localGet(0), i32c(1), op(opI32Sub), localTee(0),
					brIf(1), // to the outer loop
				),
			),
			localGet(0),
		)),
	)
	res := mustInstrument(t, wasm, Config{})
	e := getEngine(t, true)
	const budget = 10_000
	me := newMeter(budget)
	me.slice = 1000
	o := e.run(t, res.Module, "", "spin", me, 1_000_000)
	wantOwing(t, o.err, o.fuel, budget, res.Info.MaxDebt)
}

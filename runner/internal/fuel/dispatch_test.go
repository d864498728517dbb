package fuel

import (
	"context"
	"testing"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
)

// dispatchModule is a function in the shape Go's compiler gives functions
// that jump: a loop whose body opens three blocks and dispatches on a
// local ($pc, local 1) with a br_table; every jump sets $pc to a constant
// and branches to the loop. jumps(n) starts in code block 0, jumps forward
// to code block 1, which counts n down and jumps back to code block 0 while
// it is not zero, then falls through to code block 2 and returns n.
// variant "go" is that shape; "nop" breaks it with a nop before the blocks
// (no dispatch loop: every jump is a check point, and the fuel is the
// same, a nop costing nothing); "condbr" adds a br_if to the loop that is
// never taken, so the loop's header cannot be charged on the jumps and
// they are check points again.
func dispatchModule(variant string) []byte {
	const k = 20
	var head, tail []byte
	switch variant {
	case "nop":
		head = op(opNop)
	case "condbr":
		tail = cat(i32c(0), brIf(0)) // in code block 2: the loop is label 0
	}
	return wasmModule(
		types(functype(i32, i32)),
		funcs(0),
		exports(exportEntry("jumps", ExternFunc, 0)),
		codes(body([]localGroup{{1, api.ValueTypeI32}},
			loop(blockEmpty, head,
				block(blockEmpty,
					block(blockEmpty,
						block(blockEmpty,
							localGet(1), brTable(2, 0, 1, 2),
						),
						// Code block 0: forward to code block 1.
						spin(k), i32c(1), localSet(1), br(2),
					),
					// Code block 1: n--; while n != 0, back to code block 0.
					spin(k), localGet(0), i32c(1), op(opI32Sub), localTee(0),
					ifElse(blockEmpty, cat(i32c(0), localSet(1), br(2)), nil),
				),
				// Code block 2.
				spin(k), tail,
			),
			localGet(0),
		)),
	)
}

// runCounted runs jumps(n) of an instrumented module with the check
// counters and returns the checks executed, the fuel used and the error.
func runCounted(t *testing.T, e *engine, wasm []byte, me *meter, n uint64) (checks uint64, fuel int64, err error) {
	t.Helper()
	ctx := context.WithValue(context.Background(), meterKey{}, me)
	mod, err := e.rt.InstantiateModule(ctx, e.compile(t, wasm), wazero.NewModuleConfig().WithName(""))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = mod.Close(ctx) }()
	_, err = mod.ExportedFunction("jumps").Call(ctx, n)
	return mod.ExportedGlobal(checksExport).Get(), me.used(), err
}

// TestChecks_dispatch: in a dispatch loop, a jump to a later code block is
// not a check point and a jump back is (every repetition passes a check).
// The fuel does not depend on it. Without the dispatch shape, or with a
// loop header that cannot be charged on the jumps, every jump checks (the
// controls). A budget far below what the back-and-forth runs stops it
// owing at most Info.MaxDebt.
func TestChecks_dispatch(t *testing.T) {
	e := getEngine(t, true)
	type run struct {
		checks uint64
		fuel   int64
	}
	counted := map[string][]run{}
	for _, variant := range []string{"go", "nop", "condbr"} {
		res := mustInstrument(t, dispatchModule(variant), Config{countChecks: true})
		for _, n := range []uint64{1, 5} {
			checks, fuel, err := runCounted(t, e, res.Module, newMeter(1<<40), n)
			if err != nil {
				t.Fatalf("%s, n=%d: %v", variant, n, err)
			}
			counted[variant] = append(counted[variant], run{checks, fuel})
		}
	}
	for i, n := range []uint64{1, 5} {
		g, nop, cb := counted["go"][i], counted["nop"][i], counted["condbr"][i]
		if g.fuel != nop.fuel || g.fuel+2 != cb.fuel { // condbr runs i32.const and br_if once more
			t.Errorf("n=%d: fuel %d (go), %d (nop), %d (condbr): want the same (condbr 2 more)", n, g.fuel, nop.fuel, cb.fuel)
		}
		// n forward jumps (0 to 1) and n-1 back (1 to 0).
		if nop.checks-g.checks != n || cb.checks != nop.checks {
			t.Errorf("n=%d: %d checks (go), %d (nop), %d (condbr): want the %d forward jumps unchecked in go only",
				n, g.checks, nop.checks, cb.checks, n)
		}
	}
	res := mustInstrument(t, dispatchModule("go"), Config{countChecks: true})
	const budget = 10_000
	me := newMeter(budget)
	me.slice = 1000
	_, fuel, err := runCounted(t, e, res.Module, me, 1<<22)
	wantOwing(t, err, fuel, budget, res.Info.MaxDebt)
}

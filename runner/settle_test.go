package runner

import (
	"context"
	"testing"
	"time"

	"github.com/cockroachdb/errors"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/sys"

	"github.com/latent-node/latent-node/admission"
	"github.com/latent-node/latent-node/internal/testwasm"
	"github.com/latent-node/latent-node/runner/internal/fuel"
)

// fuelGlobalModule is a module that only exports a mutable i64 global
// named fuel.FuelExport: enough for the host's accounting.
func fuelGlobalModule() []byte {
	b := []byte{0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00,
		0x06, 0x06, 0x01, 0x7e, 0x01, 0x42, 0x00, 0x0b} // global: mut i64 = 0
	b = append(b, 0x07, byte(3+len(fuel.FuelExport)+1), 0x01, byte(len(fuel.FuelExport)))
	b = append(b, fuel.FuelExport...)
	return append(b, 0x03, 0x00) // export global 0
}

// TestSettle checks the host's accounting of a guest that stopped with the
// fuel global negative (it ran unchecked code after its last check): the
// debt is paid from the budget when it can be, the fuel used is then
// handed out minus the global, and a debt the budget cannot cover turns a
// return, an exit or a trap into fuel exhaustion, billed at the budget.
// The host's own stops keep their kind.
func TestSettle(t *testing.T) {
	ctx := context.Background()
	rt := wazero.NewRuntime(ctx)
	defer func() { _ = rt.Close(ctx) }()
	mod, err := rt.Instantiate(ctx, fuelGlobalModule())
	if err != nil {
		t.Fatal(err)
	}
	g := mod.ExportedGlobal(fuel.FuelExport).(api.MutableGlobal)
	trap := errors.New("wasm error: unreachable")
	for _, tc := range []struct {
		name            string
		remaining, debt uint64
		err             error
		exhausted       bool
		used            uint64 // of a budget of 1000, 1000-remaining handed out
	}{
		{"covered by a slice", 900, 30, nil, false, 130},
		{"covered by several slices", 900, 250, nil, false, 350},
		{"covered by the rest exactly", 900, 900, nil, false, 1000},
		{"trap covered", 900, 5, trap, false, 105},
		{"return not covered", 900, 901, nil, true, 1000},
		{"exit not covered", 0, 1, sys.NewExitError(0), true, 1000},
		{"trap not covered", 10, 500, trap, true, 1000},
		{"deadline kept", 0, 7, errDeadline, false, 1000},
		{"call depth kept", 0, 7, errCallDepth, false, 1000},
		{"no debt", 900, 0, nil, false, 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := &activation{mod: mod, budget: 1000, remaining: tc.remaining, slice: 100}
			g.Set(uint64(-int64(tc.debt)))
			before := a.used()
			got := a.settle(tc.err)
			if errors.Is(got, errFuelExhausted) != tc.exhausted {
				t.Fatalf("settle(%v) = %v, want exhausted %v", tc.err, got, tc.exhausted)
			}
			if !tc.exhausted && got != tc.err {
				t.Fatalf("settle(%v) = %v, want it unchanged", tc.err, got)
			}
			if a.used() != tc.used || before != tc.used {
				t.Fatalf("used %d before settling and %d after, want %d", before, a.used(), tc.used)
			}
			if int64(g.Get()) < 0 && !tc.exhausted && tc.remaining > 0 {
				t.Fatalf("global %d after settling a covered debt", int64(g.Get()))
			}
		})
	}
}

// TestRun_trapOwingFuel checks a trap whose fuel the budget does not
// cover: a budget one short of what the trapping guest uses makes it fuel
// exhaustion, billed at the budget, whether a check or the settlement
// after the trap found the debt; the exact budget lets it trap.
func TestRun_trapOwingFuel(t *testing.T) {
	e := newEnv(t)
	e.deploy("trap_oob", testwasm.Bytes(t, "trap_oob"), ceiling(1<<40, 1<<20, 10*time.Second))
	full := e.run("trap_oob", "", admission.BudgetRequest{})
	if full.Kind != Trap {
		t.Fatalf("%s (%v)", full.Kind, full.Err)
	}
	out := e.run("trap_oob", "", admission.BudgetRequest{CPUFuel: full.FuelUsed - 1, HasCPUFuel: true})
	if out.Kind != FuelExhausted || out.FuelUsed != full.FuelUsed-1 {
		t.Fatalf("one unit short: %s used %d (%v)", out.Kind, out.FuelUsed, out.Err)
	}
	out = e.run("trap_oob", "", admission.BudgetRequest{CPUFuel: full.FuelUsed, HasCPUFuel: true})
	if out.Kind != Trap || out.FuelUsed != full.FuelUsed {
		t.Fatalf("exact budget: %s used %d (%v)", out.Kind, out.FuelUsed, out.Err)
	}
}

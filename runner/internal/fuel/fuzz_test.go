package fuel

import (
	"math/rand/v2"
	"testing"

	"github.com/cockroachdb/errors"
	"github.com/latent-node/latent-node/internal/testwasm"
)

// FuzzInstrument: Instrument's output is always valid, and it never calls
// a module invalid that wazero accepts (it may refuse one: ErrUnsupported,
// ErrReserved, ErrLimit). Instrument itself only succeeds when wazero accepts the
// original.
//
//	go test -run '^$' -fuzz '^FuzzInstrument$' -fuzztime 60s ./runner/internal/fuel/
func FuzzInstrument(f *testing.F) {
	for _, name := range testwasm.Names() {
		f.Add(testwasm.Bytes(f, name))
	}
	f.Add(renumberModule())
	f.Add(bulkModule())
	f.Add(fibModule())
	f.Add(countModule())
	f.Add(globalsModule())
	f.Add(importedGlobalsModule())
	f.Fuzz(func(t *testing.T, wasm []byte) {
		res, err := Instrument(wasm, Config{MaxStackBytes: 100_000})
		switch {
		case err == nil:
			if err := validate(res.Module); err != nil {
				t.Fatalf("output does not validate: %v", err)
			}
			exported := globalExports(t, res.Module)
			for k, i := range res.Info.MutableGlobals {
				if k > 0 && i <= res.Info.MutableGlobals[k-1] {
					t.Fatalf("MutableGlobals %v not ascending", res.Info.MutableGlobals)
				}
				if g, ok := exported[GlobalExport(i)]; !ok || g != i {
					t.Fatalf("%s not exported as global %d", GlobalExport(i), i)
				}
			}
			if _, err := Instrument(res.Module, Config{}); !errors.Is(err, ErrReserved) {
				t.Fatalf("re-instrumenting: %v", err)
			}
			return
		case errors.Is(err, ErrUnsupported), errors.Is(err, ErrReserved), errors.Is(err, ErrLimit):
			return // refusals are allowed
		case !errors.Is(err, ErrInvalid):
			t.Fatalf("error not marked: %v", err)
		}
		if !safeForWazero(wasm) {
			return
		}
		if werr := validate(wasm); werr == nil {
			t.Fatalf("wazero accepts the module, Instrument says: %v", err)
		}
	})
}

// safeForWazero reports whether wazero can be shown wasm without risk:
// wazero allocates whatever counts and lengths claim (2^32 items) before it
// finds the bytes missing, and Instrument only shields it from modules it
// has decoded entirely. So: the module decodes, and every function body
// decodes instruction by instruction, ignoring indices out of range (decode
// reads all immediates before it reports one).
func safeForWazero(wasm []byte) bool {
	lim := DefaultLimits()
	m, err := decodeModule(wasm, &lim)
	if err != nil {
		return false
	}
	rw := &rewriter{m: m}
	for _, fb := range m.code {
		r := &reader{b: fb.code, base: fb.offset}
		for !r.eof() {
			if _, err := rw.decode(r, 1<<32); err != nil && (errors.Is(err, errMalformed) || !errors.Is(err, ErrInvalid)) {
				return false
			}
		}
	}
	return true
}

// FuzzGenerated drives genModule, which builds only valid, terminating
// modules, and checks that instrumentation preserves behaviour and meters
// it (see checkGenerated).
//
//	go test -run '^$' -fuzz '^FuzzGenerated$' -fuzztime 60s ./runner/internal/fuel/
func FuzzGenerated(f *testing.F) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 16 {
		seed := make([]byte, 64+r.IntN(512))
		for i := range seed {
			seed[i] = byte(r.Uint32())
		}
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkGenerated(t, data, false)
	})
}

// TestGenerated_compiler runs generated modules on the compiler engine.
func TestGenerated_compiler(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	n := 60
	if testing.Short() {
		n = 15
	}
	for range n {
		data := make([]byte, 64+r.IntN(1024))
		for i := range data {
			data[i] = byte(r.Uint32())
		}
		checkGenerated(t, data, true)
	}
}

// checkGenerated builds a module from data and checks:
//   - the original validates and the instrumented module validates;
//   - both compute the same result (or trap the same way), leave the same
//     counter and memory;
//   - fuel ≥ 4 per executed counter increment (each costs 4 operators, and
//     the generator puts one in every loop iteration and function call);
//   - fuel does not depend on the slice size;
//   - a budget one short of the fuel used, or of a fraction of it, stops
//     the guest with the typed error once the budget is handed out, owing
//     at most Info.MaxDebt plus one bulk charge (MaxDebt leaves dynamic
//     charges aside: a bulk charge is checked at once, but can itself be
//     larger), the same for any slice size;
//   - no host call finds the fuel global negative;
//   - the call-depth global is back at its initial value.
func checkGenerated(t *testing.T, data []byte, compiler bool) {
	wasm, arg := genModule(data)
	if err := validate(wasm); err != nil {
		t.Fatalf("generator made an invalid module: %v", err)
	}
	res, err := Instrument(wasm, Config{})
	if err != nil {
		t.Fatalf("Instrument: %v", err)
	}
	e := getEngine(t, compiler)
	want := e.run(t, wasm, "", "run", nil, arg)
	have := e.run(t, res.Module, "", "run", nil, arg)
	if want.trap != have.trap || want.exit != have.exit {
		t.Fatalf("trap %q exit %d, instrumented %q exit %d", want.trap, want.exit, have.trap, have.exit)
	}
	if want.trap == "" && want.results[0] != have.results[0] {
		t.Fatalf("result %d, instrumented %d", want.results[0], have.results[0])
	}
	if want.counter != have.counter || want.memHash != have.memHash {
		t.Fatalf("counter %d mem %x, instrumented %d mem %x", want.counter, want.memHash, have.counter, have.memHash)
	}
	if have.fuel < 4*int64(have.counter) {
		t.Fatalf("fuel %d < 4 × %d counter increments", have.fuel, have.counter)
	}
	if have.trap == "" && have.stack != DefaultMaxStackBytes {
		t.Fatalf("stack global %d after return", have.stack)
	}
	me := newMeter(1 << 40)
	me.slice = 3
	if o := e.run(t, res.Module, "", "run", me, arg); o.fuel != have.fuel || o.trap != have.trap {
		t.Fatalf("slice 3: fuel %d trap %q, slice 2^20: fuel %d trap %q", o.fuel, o.trap, have.fuel, have.trap)
	}
	if have.me.negativeAtHost != 0 {
		t.Fatalf("%d of %d host calls found the fuel negative", have.me.negativeAtHost, have.me.hostCalls)
	}
	for _, budget := range []int64{have.fuel - 1, have.fuel / 2, have.fuel / 3} {
		if budget < 1 {
			continue
		}
		var used int64
		for i, slice := range []int64{1 << 20, 3} {
			me := newMeter(budget)
			me.slice = slice
			o := e.run(t, res.Module, "", "run", me, arg)
			if i == 0 {
				used = o.fuel
			}
			owing := int64(res.Info.MaxDebt) + genMaxBulkCharge
			if !errors.Is(o.err, errFuelExhausted) || me.left != 0 || o.fuel <= budget || o.fuel > budget+owing || o.fuel != used {
				t.Fatalf("budget %d slice %d: %v, used %d (left %d), want exhausted owing (0, %d], the same for every slice (%d)",
					budget, slice, o.err, o.fuel, me.left, owing, used)
			}
			if me.negativeAtHost != 0 {
				t.Fatalf("budget %d: %d of %d host calls found the fuel negative", budget, me.negativeAtHost, me.hostCalls)
			}
		}
	}
}

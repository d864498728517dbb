package fuel

import (
	"bytes"
	"reflect"
	"slices"
	"sync"
	"testing"

	"github.com/latent-node/latent-node/internal/testwasm"
	"github.com/tetratelabs/wazero/api"
)

func TestInstrument_fixtures(t *testing.T) {
	for _, name := range testwasm.Names() {
		t.Run(name, func(t *testing.T) {
			res := mustInstrument(t, testwasm.Bytes(t, name), Config{})
			if name == "bad_import" {
				want := Import{Module: "env", Name: "host_log", Kind: ExternFunc, Params: []byte{api.ValueTypeI32, api.ValueTypeI32}, Results: []byte{}}
				if !slices.ContainsFunc(res.Info.Imports, func(i Import) bool { return reflect.DeepEqual(i, want) }) {
					t.Errorf("Info.Imports = %v, want it to list %v", res.Info.Imports, want)
				}
			}
			if !res.Info.HasMemory || res.Info.MemoryMinPages < 1 || res.Info.HasMemoryMax {
				t.Errorf("memory info = %+v", res.Info)
			}
			entry := "_start"
			if name == "state" || name == "tablestate" { // the reactors among the fixtures
				entry = "_initialize"
			}
			if !slices.Contains(res.Info.Exports, Export{Name: entry, Kind: ExternFunc}) {
				t.Errorf("Info.Exports = %v, want %s", res.Info.Exports, entry)
			}
			if _, err := getEngine(t, true).rt.CompileModule(t.Context(), res.Module); err != nil {
				t.Fatalf("compiler: %v", err)
			}
		})
	}
}

func TestInstrument_sameBehaviour(t *testing.T) {
	tests := []struct {
		name, stdin string
	}{
		{"echo", "hello\nworld\n"},
		{"compute", "1000"},
		{"compute", "x"},
		{"fib", "20"},
		{"exit", "42"},
		{"exit", ""},
		{"hello", "bob\n"},
		{"hello", ""},
		{"trap_unreachable", ""},
		{"trap_divzero", ""},
		{"trap_oob", ""},
		{"trivial", ""},
		{"bad_import", ""},
	}
	e := getEngine(t, true)
	for _, tc := range tests {
		t.Run(tc.name+"/"+tc.stdin, func(t *testing.T) {
			orig := testwasm.Bytes(t, tc.name)
			res := mustInstrument(t, orig, Config{})
			want := e.run(t, orig, tc.stdin, "", nil)
			have := e.run(t, res.Module, tc.stdin, "", nil)
			if want.behaviour() != have.behaviour() {
				t.Errorf("behaviour differs:\nwant %s\nhave %s", want.behaviour(), have.behaviour())
			}
			if have.fuel <= 0 && tc.name != "trivial" {
				t.Errorf("fuel = %d, want > 0", have.fuel)
			}
			if have.trap == "" && have.exit < 0 && have.stack != DefaultMaxStackBytes {
				t.Errorf("stack global after return = %d, want %d", have.stack, DefaultMaxStackBytes)
			}
			t.Logf("%s: fuel %d, %s", tc.name, have.fuel, have.behaviour())
		})
	}
}

// TestInstrument_concurrent instruments the fixtures from several
// goroutines: the output is the same bytes every time.
func TestInstrument_concurrent(t *testing.T) {
	names := testwasm.Names()
	want := map[string][]byte{}
	for _, name := range names {
		want[name] = mustInstrument(t, testwasm.Bytes(t, name), Config{}).Module
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for _, name := range names {
				res, err := Instrument(testwasm.Bytes(t, name), Config{})
				if err != nil || !bytes.Equal(res.Module, want[name]) {
					t.Errorf("%s: output differs (%v)", name, err)
				}
			}
		})
	}
	wg.Wait()
}

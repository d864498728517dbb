package coremerge

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/cockroachdb/errors"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
)

func load(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name+".wasm"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func host() Ref { return Ref{Host: true, HostModule: "env", HostName: "log"} }

func from(m int, name string) Ref { return Ref{Module: m, Name: name} }

// plan is a + b linked as wazero would link them by name; b's imports in
// its import-section order: env.log, add, memory, g, table, base.
func plan(t testing.TB) Plan {
	return Plan{
		Modules: [][]byte{load(t, "a"), load(t, "b")},
		Imports: [][]Ref{
			{host()},
			{host(), from(0, "add"), from(0, "memory"), from(0, "g"), from(0, "table"), from(0, "base")},
		},
		Exports: []Export{{Name: "run", Module: 1, Item: "run"}, {Name: "memory", Module: 0, Item: "memory"}},
	}
}

// run instantiates modules in order (the last exports run and memory),
// with env.log recording its arguments, and returns run's result, the
// log and the first 64 bytes of memory.
func run(t *testing.T, names []string, modules ...[]byte) (uint32, []uint32, []byte) {
	t.Helper()
	ctx := context.Background()
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter())
	defer rt.Close(ctx)
	var log []uint32
	_, err := rt.NewHostModuleBuilder("env").NewFunctionBuilder().
		WithFunc(func(_ context.Context, v uint32) { log = append(log, v) }).Export("log").
		Instantiate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var last api.Module
	for i, b := range modules {
		if last, err = rt.InstantiateWithConfig(ctx, b, wazero.NewModuleConfig().WithName(names[i])); err != nil {
			t.Fatalf("instantiate %s: %v", names[i], err)
		}
	}
	res, err := last.ExportedFunction("run").Call(ctx)
	if err != nil {
		t.Fatal(err)
	}
	mem := last.ExportedMemory("memory")
	if mem == nil {
		mem = last.Memory()
	}
	b, _ := mem.Read(0, 64)
	return uint32(res[0]), log, slices.Clone(b)
}

// TestMerge_likeLinking is a differential test: the merged module behaves
// as wazero's own linking of the two modules by name (the oracle): the
// same result, the same host calls in the same order (both start
// functions, in instantiation order, then run's), the same memory.
func TestMerge_likeLinking(t *testing.T) {
	merged, err := Merge(plan(t))
	if err != nil {
		t.Fatal(err)
	}
	want, wantLog, wantMem := run(t, []string{"a", "b"}, load(t, "a"), load(t, "b"))
	got, gotLog, gotMem := run(t, []string{"merged"}, merged)
	// 5 + 104 + 5 + 43 + 14 + 21 + 14 + 1000, worked out from b.wat.
	if want != 1206 {
		t.Fatalf("the oracle computes %d, want 1206: the fixture changed", want)
	}
	if got != want || !slices.Equal(gotLog, wantLog) || !slices.Equal(gotMem, wantMem) {
		t.Errorf("merged: %d, log %v, memory %x\nlinked: %d, log %v, memory %x", got, gotLog, gotMem, want, wantLog, wantMem)
	}
}

// TestMerge_refusals: each wrong plan is ErrInvalid or ErrUnsupported,
// with the right plan merging (TestMerge_likeLinking) as the control.
func TestMerge_refusals(t *testing.T) {
	tests := []struct {
		name   string
		change func(p *Plan)
		want   error
	}{
		{"missing export", func(p *Plan) { p.Imports[1][1] = from(0, "sub") }, ErrInvalid},
		{"wrong kind", func(p *Plan) { p.Imports[1][1] = from(0, "memory") }, ErrInvalid},
		{"wrong function type", func(p *Plan) { p.Imports[0][0] = from(1, "run") }, ErrInvalid},
		{"module out of range", func(p *Plan) { p.Imports[1][1] = from(5, "add") }, ErrInvalid},
		{"a module bound to itself", func(p *Plan) { p.Imports[1][1] = from(1, "run") }, ErrInvalid},
		{"too few bindings", func(p *Plan) { p.Imports[1] = p.Imports[1][:3] }, ErrInvalid},
		{"memory as a host import", func(p *Plan) { p.Imports[1][2] = host() }, ErrUnsupported},
		{"export of a missing item", func(p *Plan) { p.Exports[0].Item = "walk" }, ErrInvalid},
		{"export twice", func(p *Plan) { p.Exports[1].Name = "run" }, ErrInvalid},
		{"two memories", func(p *Plan) {
			p.Modules = append(p.Modules, load(t, "a"))
			p.Imports = append(p.Imports, []Ref{host()})
		}, ErrUnsupported},
		{"truncated module", func(p *Plan) { p.Modules[1] = p.Modules[1][:len(p.Modules[1])-3] }, ErrInvalid},
		{"not a module", func(p *Plan) { p.Modules[0] = []byte("\x00asm\x0d\x00\x01\x00") }, ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := plan(t)
			tt.change(&p)
			if _, err := Merge(p); !errors.Is(err, tt.want) {
				t.Fatalf("Merge = %v, want %v", err, tt.want)
			}
		})
	}
}

// FuzzMerge merges hostile module bytes in a's and b's places: Merge
// refuses with its errors or returns a module; nothing panics.
func FuzzMerge(f *testing.F) {
	f.Add(load(f, "a"), load(f, "b"))
	f.Fuzz(func(t *testing.T, a, b []byte) {
		p := plan(t)
		p.Modules = [][]byte{a, b}
		if _, err := Merge(p); err != nil && !errors.Is(err, ErrInvalid) && !errors.Is(err, ErrUnsupported) {
			t.Fatalf("Merge: %v is neither ErrInvalid nor ErrUnsupported", err)
		}
	})
}

// TestFixturesMatchSources rebuilds testdata's .wat files with wat2wasm
// (when present) and compares them with the committed .wasm.
func TestFixturesMatchSources(t *testing.T) {
	wat2wasm, err := exec.LookPath("wat2wasm")
	if err != nil {
		t.Skipf("wat2wasm not on PATH: %v", err)
	}
	for _, n := range []string{"a", "b"} {
		out := filepath.Join(t.TempDir(), n+".wasm")
		if b, err := exec.Command(wat2wasm, filepath.Join("testdata", n+".wat"), "-o", out).CombinedOutput(); err != nil {
			t.Fatalf("wat2wasm %s.wat: %v\n%s", n, err, b)
		}
		built, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(built, load(t, n)) {
			t.Errorf("testdata/%s.wasm is stale: wat2wasm testdata/%s.wat -o testdata/%s.wasm", n, n, n)
		}
	}
}

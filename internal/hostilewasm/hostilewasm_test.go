package hostilewasm

import (
	"context"
	"strings"
	"testing"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
)

func newRuntime(t *testing.T) wazero.Runtime {
	t.Helper()
	ctx := context.Background()
	r := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter())
	t.Cleanup(func() { _ = r.Close(ctx) })
	return r
}

// compile validates module with wazero's interpreter.
func compile(t *testing.T, r wazero.Runtime, module []byte) wazero.CompiledModule {
	t.Helper()
	cm, err := r.CompileModule(context.Background(), module)
	if err != nil {
		t.Fatalf("module of %d bytes does not validate: %v", len(module), err)
	}
	return cm
}

// run instantiates module (with WASI) without running _start on
// instantiation, then calls _start.
func run(t *testing.T, module []byte) (instErr, callErr error) {
	t.Helper()
	ctx := context.Background()
	r := newRuntime(t)
	wasi_snapshot_preview1.MustInstantiate(ctx, r)
	cm := compile(t, r, module)
	mod, err := r.InstantiateModule(ctx, cm, wazero.NewModuleConfig().WithStartFunctions())
	if err != nil {
		return err, nil
	}
	defer func() { _ = mod.Close(ctx) }()
	_, err = mod.ExportedFunction("_start").Call(ctx)
	return nil, err
}

func TestGenerators_validate(t *testing.T) {
	t.Parallel()
	// The sizes the hostile suite deploys; -short validates the same
	// generators at smaller sizes.
	long, locals, nested, code := 10_000_000, 50_000, 100_000, 6<<20
	if testing.Short() {
		long, locals, nested, code = 1_000_000, 5_000, 20_000, 1<<20
	}
	tests := []struct {
		name    string
		module  []byte
		minSize int
	}{
		{"trivial", Trivial(), 0},
		{"wrong signature", WrongSignatureImport(), 0},
		{"unknown import", UnknownImport("no_such_fn"), 0},
		{"data out of bounds", DataOutOfBounds(), 0},
		{"start trap", StartTrap(), 0},
		{"nested blocks", NestedBlocks(nested), 3 * nested},
		{"long function", LongFunction(long), long},
		{"many locals", ManyLocals(100, locals), 0},
		{"big code", BigCode(code, 1), code},
		{"big data", BigData(1 << 20), 1 << 20},
		{"stack bomb", StackBomb(10_000, 200), 0},
		{"many signatures", ManySignatures(500, 7), 500 * 40},
		{"table grow", TableGrow(0x7fffffff), 0},
		{"memory fill", MemoryFill(0xffffffff), 0},
		{"iovec calls", IovecCalls("fd_read", 0, 4096, 3), 0},
		{"positioned iovec calls", IovecCalls("fd_pwrite", 1, 4096, 3), 0},
		{"sizes calls", SizesCalls("environ_sizes_get", 3), 0},
		{"poll calls", PollCalls(512, 3), 0},
		{"salted", Salted(Trivial(), 42), 0},
	}
	r := newRuntime(t)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if len(tc.module) < tc.minSize {
				t.Fatalf("%d bytes, want at least %d", len(tc.module), tc.minSize)
			}
			cm := compile(t, r, tc.module)
			defer func() { _ = cm.Close(context.Background()) }()
			exp := cm.ExportedFunctions()
			if _, ok := exp["_start"]; !ok {
				t.Fatalf("no _start export: %v", exp)
			}
			if _, ok := cm.ExportedMemories()["memory"]; !ok {
				t.Fatal("no memory export")
			}
		})
	}
}

// TestGenerators_invalid is the negative control: the validator does refuse
// a broken encoding.
func TestGenerators_invalid(t *testing.T) {
	t.Parallel()
	r := newRuntime(t)
	broken := Trivial()
	broken = broken[:len(broken)-1] // drop the body's end opcode
	if _, err := r.CompileModule(context.Background(), broken); err == nil {
		t.Fatal("a truncated module validated")
	}
	// A body that leaves a value on the stack of a () -> () function.
	m := command(Module{Funcs: []Func{{Type: 0, Body: []byte{opI32Const, 1}}}}, 0)
	if _, err := r.CompileModule(context.Background(), m.Encode()); err == nil {
		t.Fatal("an ill-typed body validated")
	}
}

func TestGenerators_behaviour(t *testing.T) {
	t.Parallel()
	t.Run("trivial runs", func(t *testing.T) {
		if ie, ce := run(t, Trivial()); ie != nil || ce != nil {
			t.Fatalf("%v %v", ie, ce)
		}
	})
	t.Run("wrong signature fails to link", func(t *testing.T) {
		ie, _ := run(t, WrongSignatureImport())
		if ie == nil || !strings.Contains(ie.Error(), "fd_write") {
			t.Fatalf("instantiation error %v", ie)
		}
	})
	t.Run("unknown import fails to link", func(t *testing.T) {
		ie, _ := run(t, UnknownImport("no_such_fn"))
		if ie == nil || !strings.Contains(ie.Error(), "no_such_fn") {
			t.Fatalf("instantiation error %v", ie)
		}
	})
	t.Run("data out of bounds fails to instantiate", func(t *testing.T) {
		if ie, _ := run(t, DataOutOfBounds()); ie == nil {
			t.Fatal("instantiated")
		}
	})
	t.Run("start function traps", func(t *testing.T) {
		ctx := context.Background()
		r := newRuntime(t)
		_, err := r.Instantiate(ctx, StartTrap())
		if err == nil || !strings.Contains(err.Error(), "unreachable") {
			t.Fatalf("instantiation error %v", err)
		}
	})
	t.Run("stack bomb returns at a small depth", func(t *testing.T) {
		if ie, ce := run(t, StackBomb(100, 20)); ie != nil || ce != nil {
			t.Fatalf("%v %v", ie, ce)
		}
	})
	t.Run("table grow by 2^32-1 returns -1", func(t *testing.T) {
		// wazero refuses a grow past 2^32-1 entries itself; 0x7fffffff would
		// try to allocate, which is what the node must bound.
		if ie, ce := run(t, TableGrow(0xffffffff)); ie != nil || ce != nil {
			t.Fatalf("%v %v", ie, ce)
		}
	})
	t.Run("table grow by 1 traps", func(t *testing.T) {
		// The negative control of the -1 check.
		_, ce := run(t, TableGrow(1))
		if ce == nil || !strings.Contains(ce.Error(), "unreachable") {
			t.Fatalf("call error %v", ce)
		}
	})
	t.Run("memory fill out of bounds traps", func(t *testing.T) {
		_, ce := run(t, MemoryFill(0xffffffff))
		if ce == nil || !strings.Contains(ce.Error(), "out of bounds") {
			t.Fatalf("call error %v", ce)
		}
	})
	t.Run("memory fill in bounds runs", func(t *testing.T) {
		if _, ce := run(t, MemoryFill(PageSize)); ce != nil {
			t.Fatal(ce)
		}
	})
	t.Run("big data lands in memory", func(t *testing.T) {
		ctx := context.Background()
		r := newRuntime(t)
		mod, err := r.InstantiateWithConfig(ctx, BigData(3*PageSize+8), wazero.NewModuleConfig().WithStartFunctions())
		if err != nil {
			t.Fatal(err)
		}
		if got := mod.Memory().Size(); got != 4*PageSize {
			t.Fatalf("memory %d bytes", got)
		}
		v, _ := mod.Memory().ReadUint64Le(8)
		if mult := uint64(0x9e3779b97f4a7c15); v != 8*mult {
			t.Fatalf("data word %#x", v)
		}
	})
	t.Run("salted modules differ only in digest", func(t *testing.T) {
		a, b := Salted(Trivial(), 1), Salted(Trivial(), 2)
		if string(a) == string(b) {
			t.Fatal("same bytes")
		}
		if ie, ce := run(t, b); ie != nil || ce != nil {
			t.Fatalf("%v %v", ie, ce)
		}
	})
	t.Run("big code differs by seed", func(t *testing.T) {
		if string(BigCode(1<<16, 1)) == string(BigCode(1<<16, 2)) {
			t.Fatal("same bytes for different seeds")
		}
	})
}

func TestLEB128(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		got  []byte
		want []byte
	}{
		{"u32 0", AppendU32(nil, 0), []byte{0}},
		{"u32 624485", AppendU32(nil, 624485), []byte{0xe5, 0x8e, 0x26}},
		{"u32 max", AppendU32(nil, 0xffffffff), []byte{0xff, 0xff, 0xff, 0xff, 0x0f}},
		{"i32 -1", AppendI32(nil, -1), []byte{0x7f}},
		{"i32 63", AppendI32(nil, 63), []byte{0x3f}},
		{"i32 64", AppendI32(nil, 64), []byte{0xc0, 0x00}},
		{"i32 -123456", AppendI32(nil, -123456), []byte{0xc0, 0xbb, 0x78}},
		{"i64 min", AppendI64(nil, -1<<63), []byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x7f}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if string(tc.got) != string(tc.want) {
				t.Fatalf("% x, want % x", tc.got, tc.want)
			}
		})
	}
}

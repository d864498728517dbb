package cellpool_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/cockroachdb/errors"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/latent-node/latent-node/cellpool"
	"github.com/latent-node/latent-node/internal/testutil"
	"github.com/latent-node/latent-node/internal/testwasm"
	"github.com/latent-node/latent-node/vocab"
)

const page = cellpool.PageSize

// newRuntime returns a compiler-engine runtime with WASI, closed at the end
// of the test. WithCloseOnContextDone stays off, as in the runner.
func newRuntime(t testing.TB) wazero.Runtime {
	t.Helper()
	ctx := context.Background()
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigCompiler())
	wasi_snapshot_preview1.MustInstantiate(ctx, rt)
	t.Cleanup(func() { _ = rt.Close(ctx) })
	return rt
}

func compile(t testing.TB, rt wazero.Runtime, wasm []byte) wazero.CompiledModule {
	t.Helper()
	cm, err := rt.CompileModule(context.Background(), wasm)
	if err != nil {
		t.Fatalf("compile: %v", err)
	}
	return cm
}

func newPool(t testing.TB, parallelism int, memoryBytes uint64) *cellpool.Pool {
	t.Helper()
	p, err := cellpool.New(cellpool.Config{Classes: map[vocab.CellClass]cellpool.ClassConfig{
		vocab.CellTiny: {Parallelism: parallelism, MemoryBytes: memoryBytes},
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// ---- hand-assembled modules -------------------------------------------------

func uleb(v uint64) []byte {
	var b []byte
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if v != 0 {
			b = append(b, c|0x80)
			continue
		}
		return append(b, c)
	}
}

func section(id byte, payload ...byte) []byte {
	return append(append([]byte{id}, uleb(uint64(len(payload)))...), payload...)
}

func module(sections ...[]byte) []byte {
	m := []byte{0x00, 'a', 's', 'm', 0x01, 0x00, 0x00, 0x00}
	for _, s := range sections {
		m = append(m, s...)
	}
	return m
}

func name(s string) []byte { return append(uleb(uint64(len(s))), s...) }

// markerWasm is
//
//	(module
//	  (memory (export "memory") 1)
//	  (func (export "write") (param i32) (i32.store (i32.const 1024) (local.get 0)))
//	  (func (export "read") (result i32) (i32.load (i32.const 1024))))
func markerWasm() []byte {
	var exports []byte
	exports = append(exports, 3)
	exports = append(append(exports, name("memory")...), 0x02, 0)
	exports = append(append(exports, name("write")...), 0x00, 0)
	exports = append(append(exports, name("read")...), 0x00, 1)
	write := []byte{0x00, 0x41, 0x80, 0x08, 0x20, 0x00, 0x36, 0x02, 0x00, 0x0b} // i32.const 1024; local.get 0; i32.store
	read := []byte{0x00, 0x41, 0x80, 0x08, 0x28, 0x02, 0x00, 0x0b}              // i32.const 1024; i32.load
	code := []byte{2}
	code = append(append(append(code, uleb(uint64(len(write)))...), write...), uleb(uint64(len(read)))...)
	code = append(code, read...)
	return module(
		section(1, 2, 0x60, 1, 0x7f, 0, 0x60, 0, 1, 0x7f), // types: (i32)->(), ()->(i32)
		section(3, 2, 0, 1),    // functions
		section(5, 1, 0x00, 1), // memory min 1
		section(7, exports...),
		section(10, code...),
	)
}

// minPagesWasm is (module (memory min)) with no exports.
func minPagesWasm(min uint64) []byte {
	return module(section(5, append([]byte{1, 0x00}, uleb(min)...)...))
}

// oobDataWasm is (module (memory 1) (data (i32.const 65536) "x")): its data
// segment is out of bounds, so instantiation fails after the memory is built.
func oobDataWasm() []byte {
	return module(
		section(5, 1, 0x00, 1),
		section(11, 1, 0x00, 0x41, 0x80, 0x80, 0x04, 0x0b, 1, 'x'),
	)
}

func TestMarkerWasm_validates(t *testing.T) {
	rt := newRuntime(t)
	for name, wasm := range map[string][]byte{"marker": markerWasm(), "min": minPagesWasm(2), "oob": oobDataWasm()} {
		if _, err := rt.CompileModule(context.Background(), wasm); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// ---- real activations -------------------------------------------------------

// TestWazero_grow runs testdata/wasm/grow.wasm (memory min 1, no max; grows
// one page at a time until memory.grow returns -1) on a pooled memory. The
// cap is min(limit, class MemoryBytes); a refused Reallocate makes
// memory.grow return -1 (no trap).
func TestWazero_grow(t *testing.T) {
	tests := []struct {
		name        string
		classBytes  uint64
		limitBytes  uint64
		wantGrows   string
		wantPeak    uint64
		wantRefused int
	}{
		{"limit 16 pages", 64 * page, 16 * page, "15\n", 16 * page, 1},
		{"class caps the limit", 8 * page, 1 << 30, "7\n", 8 * page, 1},
		{"unaligned limit rounds down", 64 * page, 4*page + 100, "3\n", 4 * page, 1},
	}
	rt := newRuntime(t)
	cm := compile(t, rt, testwasm.Bytes(t, "grow"))
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := newPool(t, 1, tc.classBytes)
			l, err := p.TryLease(vocab.CellTiny)
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			ctx := l.WithMemory(context.Background(), tc.limitBytes)
			mod, err := rt.InstantiateModule(ctx, cm, wazero.NewModuleConfig().WithName("").WithStdout(&out))
			if err != nil {
				t.Fatalf("instantiate: %v", err)
			}
			if have := out.String(); have != tc.wantGrows {
				t.Fatalf("grow printed %q, want %q", have, tc.wantGrows)
			}
			if have := uint64(mod.Memory().Size()); have != tc.wantPeak {
				t.Fatalf("memory size %d, want %d", have, tc.wantPeak)
			}
			if err := mod.Close(ctx); err != nil {
				t.Fatal(err)
			}
			u := l.Memory()
			if !u.Allocated || !u.Freed || u.Peak != tc.wantPeak || u.Refusals != tc.wantRefused || l.MemoryPeak() != tc.wantPeak {
				t.Fatalf("Memory: %+v", u)
			}
			if err := l.Release(cellpool.Reuse); err != nil {
				t.Fatalf("Release: %v", err)
			}
		})
	}
}

// TestWazero_noLeakBetweenTenants: a guest writes a marker, the cell is
// reused, and the next guest on the same cell reads zero.
func TestWazero_noLeakBetweenTenants(t *testing.T) {
	rt := newRuntime(t)
	cm := compile(t, rt, markerWasm())
	p := newPool(t, 1, 4*page)
	const marker = 0x5eC12e7

	run := func(write bool) uint32 {
		l, err := p.TryLease(vocab.CellTiny)
		if err != nil {
			t.Fatal(err)
		}
		if l.Cell() != 0 {
			t.Fatalf("cell %d, want 0", l.Cell())
		}
		ctx := l.WithMemory(context.Background(), page)
		mod, err := rt.InstantiateModule(ctx, cm, wazero.NewModuleConfig().WithName(""))
		if err != nil {
			t.Fatal(err)
		}
		res, err := mod.ExportedFunction("read").Call(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if write {
			if _, err := mod.ExportedFunction("write").Call(ctx, marker); err != nil {
				t.Fatal(err)
			}
			if v, _ := mod.Memory().ReadUint32Le(1024); v != marker {
				t.Fatalf("marker not written: %#x", v)
			}
		}
		if err := mod.Close(ctx); err != nil {
			t.Fatal(err)
		}
		if err := l.Release(cellpool.Reuse); err != nil {
			t.Fatalf("Release: %v", err)
		}
		return uint32(res[0])
	}
	if v := run(true); v != 0 {
		t.Fatalf("first tenant read %#x, want 0", v)
	}
	if v := run(false); v != 0 {
		t.Fatalf("second tenant read %#x from the reused cell, want 0: data leaked between tenants", v)
	}
}

// TestWazero_instantiationFailure documents that wazero v1.12.0 drops a
// module whose instantiation fails after its memory was built without
// calling Free, which quarantines the cell unless the holder asserts it with
// AbandonMemory.
func TestWazero_instantiationFailure(t *testing.T) {
	rt := newRuntime(t)
	cm := compile(t, rt, oobDataWasm())
	for _, abandon := range []bool{false, true} {
		p := newPool(t, 1, 4*page)
		l, err := p.TryLease(vocab.CellTiny)
		if err != nil {
			t.Fatal(err)
		}
		_, err = rt.InstantiateModule(l.WithMemory(context.Background(), page), cm, wazero.NewModuleConfig().WithName(""))
		if err == nil || !strings.Contains(err.Error(), "out of bounds") {
			t.Fatalf("want an out-of-bounds data segment error, have %v", err)
		}
		if u := l.Memory(); !u.Allocated || u.Freed || u.Peak != page {
			t.Fatalf("Memory: %+v (want allocated, not freed)", u)
		}
		if abandon {
			l.AbandonMemory()
		}
		err = l.Release(cellpool.Reuse)
		if abandon != (err == nil) || !abandon && !errors.Is(err, cellpool.ErrQuarantined) {
			t.Fatalf("abandon=%v: Release: %v", abandon, err)
		}
	}
}

// TestWazero_minimumOverLimit documents that wazero v1.12.0 panics inside
// InstantiateModule when the allocator refuses the module's minimum memory
// (it slices the nil result). The cell stays reusable: nothing was handed out.
func TestWazero_minimumOverLimit(t *testing.T) {
	rt := newRuntime(t)
	cm := compile(t, rt, minPagesWasm(2))
	p := newPool(t, 1, 4*page)
	l, err := p.TryLease(vocab.CellTiny)
	if err != nil {
		t.Fatal(err)
	}
	func() {
		defer func() {
			r := recover()
			if r == nil || !strings.Contains(fmt.Sprint(r), "slice bounds out of range") {
				t.Fatalf("want a slice-bounds panic from wazero, have %v", r)
			}
		}()
		_, _ = rt.InstantiateModule(l.WithMemory(context.Background(), page), cm, wazero.NewModuleConfig().WithName(""))
	}()
	if u := l.Memory(); !u.Allocated || u.Peak != 0 || u.Refusals != 1 {
		t.Fatalf("Memory: %+v", u)
	}
	if err := l.Release(cellpool.Reuse); err != nil {
		t.Fatalf("Release: %v", err)
	}
}

// TestWazero_procExitFrees: a start function that exits (WASI proc_exit)
// makes wazero close the module itself, which frees the memory.
func TestWazero_procExitFrees(t *testing.T) {
	rt := newRuntime(t)
	cm := compile(t, rt, testwasm.Bytes(t, "exit"))
	p := newPool(t, 1, 4*page)
	l, err := p.TryLease(vocab.CellTiny)
	if err != nil {
		t.Fatal(err)
	}
	_, err = rt.InstantiateModule(l.WithMemory(context.Background(), 4*page), cm,
		wazero.NewModuleConfig().WithName("").WithStdin(strings.NewReader("7")))
	t.Logf("exit guest: %v", err)
	if u := l.Memory(); !u.Allocated || !u.Freed {
		t.Fatalf("Memory: %+v (want freed)", u)
	}
	if err := l.Release(cellpool.Reuse); err != nil {
		t.Fatalf("Release: %v", err)
	}
}

// TestPool_hammer leases and releases from 2×Parallelism goroutines, running
// real activations on the pooled memory: trivial.wasm, and the marker guest,
// which checks that it starts from zeroed memory and then dirties it.
func TestPool_hammer(t *testing.T) {
	const parallelism = 3
	iterations := 60
	if testing.Short() {
		iterations = 15
	}
	rt := newRuntime(t)
	trivial := compile(t, rt, testwasm.Bytes(t, "trivial"))
	marker := compile(t, rt, markerWasm())
	p := newPool(t, parallelism, 4*page)

	err := testutil.Hammer(2*parallelism, iterations, func(g, i int) error {
		return activate(p, rt, trivial, marker, i%2 == 1, uint32(g<<16|i)+1)
	})
	if err != nil {
		t.Fatal(err)
	}
	want := cellpool.ClassStats{Parallelism: parallelism, Usable: parallelism}
	if have := p.Stats()[vocab.CellTiny]; have != want {
		t.Fatalf("Stats: want %+v, have %+v", want, have)
	}
}

func activate(p *cellpool.Pool, rt wazero.Runtime, trivial, marker wazero.CompiledModule, useMarker bool, value uint32) error {
	ctx := context.Background()
	l, err := p.Lease(ctx, vocab.CellTiny)
	if err != nil {
		return err
	}
	cm := trivial
	if useMarker {
		cm = marker
	}
	mctx := l.WithMemory(ctx, page)
	mod, err := rt.InstantiateModule(mctx, cm, wazero.NewModuleConfig().WithName("").WithStartFunctions())
	if err != nil {
		return errors.CombineErrors(err, l.Release(cellpool.Quarantine))
	}
	if useMarker {
		res, err := mod.ExportedFunction("read").Call(mctx)
		switch {
		case err != nil:
		case res[0] != 0:
			err = errors.Newf("cell %d: read %#x from a reused cell, want 0", l.Cell(), res[0])
		default:
			_, err = mod.ExportedFunction("write").Call(mctx, uint64(value))
		}
		if err != nil {
			_ = mod.Close(mctx)
			return errors.CombineErrors(err, l.Release(cellpool.Quarantine))
		}
	} else if _, err := mod.ExportedFunction("_start").Call(mctx); err != nil {
		_ = mod.Close(mctx)
		return errors.CombineErrors(err, l.Release(cellpool.Quarantine))
	}
	if err := mod.Close(mctx); err != nil {
		return errors.CombineErrors(err, l.Release(cellpool.Quarantine))
	}
	return l.Release(cellpool.Reuse)
}

// BenchmarkActivation: lease, instantiate trivial.wasm (compiled once),
// call _start, close, release; pooled memory vs wazero's default allocator
// (a Go byte slice per instance).
func BenchmarkActivation(b *testing.B) {
	rt := newRuntime(b)
	cm := compile(b, rt, testwasm.Bytes(b, "trivial"))
	p := newPool(b, 1, 16*page)
	cfg := wazero.NewModuleConfig().WithName("").WithStartFunctions()
	for _, pooled := range []bool{true, false} {
		b.Run(map[bool]string{true: "pooled", false: "default"}[pooled], func(b *testing.B) {
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				l, err := p.TryLease(vocab.CellTiny)
				if err != nil {
					b.Fatal(err)
				}
				mctx := ctx
				if pooled {
					mctx = l.WithMemory(ctx, 16*page)
				}
				mod, err := rt.InstantiateModule(mctx, cm, cfg)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := mod.ExportedFunction("_start").Call(mctx); err != nil {
					b.Fatal(err)
				}
				if err := mod.Close(mctx); err != nil {
					b.Fatal(err)
				}
				if err := l.Release(cellpool.Reuse); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

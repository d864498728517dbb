// wazero end to end: a module instantiated on a Memory reads the image.

package image

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/cockroachdb/errors"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
)

// peekWasm returns testdata/peek.wasm: memory 1 page, data "fresh" at 0,
// exports load, store, grow, pages.
func peekWasm(t testing.TB) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "peek.wasm"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestFixturesMatchSources rebuilds testdata/*.wat with wat2wasm and compares
// the result with the committed .wasm.
func TestFixturesMatchSources(t *testing.T) {
	wat2wasm, err := exec.LookPath("wat2wasm")
	if err != nil {
		t.Skipf("wat2wasm not on PATH: %v", err)
	}
	out := filepath.Join(t.TempDir(), "peek.wasm")
	if b, err := exec.Command(wat2wasm, filepath.Join("testdata", "peek.wat"), "-o", out).CombinedOutput(); err != nil {
		t.Fatalf("wat2wasm: %v\n%s", err, b)
	}
	have, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(have, peekWasm(t)) {
		t.Fatal("testdata/peek.wasm is stale: wat2wasm testdata/peek.wat -o testdata/peek.wasm")
	}
}

type peek struct {
	t   testing.TB
	mod api.Module
}

func (p peek) call(name string, args ...uint64) uint64 {
	p.t.Helper()
	res, err := p.mod.ExportedFunction(name).Call(context.Background(), args...)
	if err != nil {
		p.t.Fatalf("%s%v: %v", name, args, err)
	}
	if len(res) == 0 {
		return 0
	}
	return res[0]
}

func (p peek) load(addr uint32) byte { return byte(p.call("load", uint64(addr))) }

func (p peek) store(addr uint32, v byte) { p.call("store", uint64(addr), uint64(v)) }

// TestWazero_snapshot runs the life cycle the runner follows: an image of a
// two-page memory ("snapshot" at 0, a marker in the second page, which the
// module's one-page minimum does not reach); instantiate peek on a Memory
// with no start function; Attach; activations that write, then Reset or
// Restore; growth
// that makes Reset say ErrGrown; a second instance of the same image that
// never sees the first one's writes; Close after the module closed.
//
// Negative control: the same module instantiated without the allocator
// reads its data segment ("fresh") and has one page; and on the Memory,
// before Attach, wazero's data segment is what the guest reads.
func TestWazero_snapshot(t *testing.T) {
	ctx := context.Background()
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigCompiler())
	t.Cleanup(func() { _ = rt.Close(ctx) })
	cm, err := rt.CompileModule(ctx, peekWasm(t))
	if err != nil {
		t.Fatal(err)
	}
	const marker, at = 0x7e, PageSize + 4464
	data := make([]byte, 2*PageSize)
	copy(data, "snapshot")
	data[at] = marker
	img := mustImage(t, data)
	cfg := wazero.NewModuleConfig().WithName("").WithStartFunctions()

	// Negative control: no allocator.
	plain, err := rt.InstantiateModule(ctx, cm, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if p := (peek{t, plain}); p.load(0) != 'f' || p.call("pages") != 1 {
		t.Fatalf("plain instance: byte 0 %q, %d pages", p.load(0), p.call("pages"))
	}
	_ = plain.Close(ctx)

	instantiate := func() (*Memory, peek) {
		m, err := img.NewMemory(3 * PageSize)
		if err != nil {
			t.Fatal(err)
		}
		mod, err := rt.InstantiateModule(experimental.WithMemoryAllocator(ctx, m), cm, cfg)
		if err != nil {
			t.Fatal(err)
		}
		p := peek{t, mod}
		if p.load(0) != 'f' || p.call("pages") != 1 {
			t.Fatalf("before Attach: byte 0 %q, %d pages; want wazero's data segment and 1 page", p.load(0), p.call("pages"))
		}
		if err := m.Attach(mod.Memory()); err != nil {
			t.Fatalf("Attach: %v", err)
		}
		return m, p
	}
	m, p := instantiate()
	m2, p2 := instantiate()

	for activation := range 4 {
		if have := p.call("pages"); have != 2 {
			t.Fatalf("activation %d: %d pages, want 2", activation, have)
		}
		if p.load(0) != 's' || p.load(at) != marker || p.load(at+1) != 0 {
			t.Fatalf("activation %d: reads %q %#x %#x, want the image", activation, p.load(0), p.load(at), p.load(at+1))
		}
		p.store(0, 'X')
		p.store(at, 0)
		p.store(2*PageSize-1, 9)
		if p.load(0) != 'X' || p2.load(0) != 's' || p2.load(at) != marker || p2.load(2*PageSize-1) != 0 {
			t.Fatal("a write reached the other instance of the same image")
		}
		s := strategies[activation%len(strategies)]
		if err := s.reset(m); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
	}

	// Growth: the module grows to three pages (the cap); a fourth is refused.
	if have := int32(p.call("grow", 1)); have != 2 {
		t.Fatalf("grow(1) = %d, want 2", have)
	}
	p.store(2*PageSize+3, 1)
	if have := int32(p.call("grow", 1)); have != -1 {
		t.Fatalf("grow beyond the cap = %d, want -1", have)
	}
	if err := m.Reset(); !errors.Is(err, ErrGrown) {
		t.Fatalf("Reset after growth: %v, want ErrGrown", err)
	}
	if p.load(0) != 's' || p.load(2*PageSize+3) != 0 {
		t.Fatal("Reset after growth left the guest's writes")
	}

	for _, x := range []struct {
		m *Memory
		p peek
	}{{m, p}, {m2, p2}} {
		if err := x.m.Close(); !errors.Is(err, ErrInUse) {
			t.Fatalf("Close before the module closed: %v, want ErrInUse", err)
		}
		if err := x.p.mod.Close(ctx); err != nil {
			t.Fatal(err)
		}
		if err := x.m.Close(); err != nil {
			t.Fatalf("Close after the module closed: %v", err)
		}
	}
}

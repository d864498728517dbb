// Benchmarks: Reset after an activation dirtied some pages, the faults the
// next activation pays, NewMemory, a whole instance, and the memcpy a
// copying reset would cost instead.
//
//	go test -run '^$' -bench . -benchtime 2000x ./runner/internal/image/

package image

import (
	"context"
	"fmt"
	"testing"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/experimental"
)

const benchImage = 4 << 20 // bytes, the size of a Go reactor's memory after init

func benchData() []byte {
	data := make([]byte, benchImage)
	for i := range data {
		data[i] = byte(i*7 + 1)
	}
	return data
}

// BenchmarkReset: an activation writes one byte in each of n OS pages spread
// over a 4 MiB image (each a copy-on-write fault), then Reset. n=0 is Reset
// alone.
func BenchmarkReset(b *testing.B) { benchDirtyThen(b, (*Memory).Reset) }

// BenchmarkRestore: BenchmarkReset with Restore. In the steady state the
// pages written stay private and mapped: no faults, a pread each.
func BenchmarkRestore(b *testing.B) {
	benchDirtyThen(b, func(m *Memory) error { _, err := m.Restore(); return err })
}

// benchDirtyThen writes one byte in each of n OS pages spread over a 4 MiB
// image and then puts the memory back with back, for n = 0, 16 and 256.
func benchDirtyThen(b *testing.B, back func(*Memory) error) {
	img := mustImage(b, benchData())
	for _, n := range []int{0, 16, 256} {
		b.Run(fmt.Sprintf("dirty=%d", n), func(b *testing.B) {
			m, mem := mustMemory(b, img, img.Len())
			pages := len(mem) / int(osPageSize)
			stride := 1
			if n > 0 {
				stride = pages / n
			}
			for b.Loop() {
				for i := range n {
					mem[i*stride*int(osPageSize)]++
				}
				if err := back(m); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkTouchAfterReset: what the next activation pays in minor faults
// to read n pages again after Reset dropped their mappings (compare with
// dirty=0 of BenchmarkReset, which is the Reset part).
func BenchmarkTouchAfterReset(b *testing.B) {
	img := mustImage(b, benchData())
	for _, n := range []int{16, 256} {
		b.Run(fmt.Sprintf("read=%d", n), func(b *testing.B) {
			m, mem := mustMemory(b, img, img.Len())
			stride := len(mem) / int(osPageSize) / n
			var sink byte
			for b.Loop() {
				for i := range n {
					sink += mem[i*stride*int(osPageSize)]
				}
				if err := m.Reset(); err != nil {
					b.Fatal(err)
				}
			}
			_ = sink
		})
	}
}

// BenchmarkNewMemory: a memory of a 4 MiB image with a 64 MiB cap, handed to
// and freed by a would-be wazero, closed.
func BenchmarkNewMemory(b *testing.B) {
	img := mustImage(b, benchData())
	for b.Loop() {
		m, err := img.NewMemory(64 << 20)
		if err != nil {
			b.Fatal(err)
		}
		m.Allocate(0, 0)
		if m.Reallocate(img.Len()) == nil {
			b.Fatal("Reallocate")
		}
		m.Free()
		if err := m.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkInstance: the recreate path with wazero: NewMemory,
// InstantiateModule of testdata/peek.wasm (one page, one data segment),
// Attach to the 4 MiB image, Close.
func BenchmarkInstance(b *testing.B) {
	ctx := context.Background()
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigCompiler())
	b.Cleanup(func() { _ = rt.Close(ctx) })
	cm, err := rt.CompileModule(ctx, peekWasm(b))
	if err != nil {
		b.Fatal(err)
	}
	img := mustImage(b, benchData())
	cfg := wazero.NewModuleConfig().WithName("").WithStartFunctions()
	for b.Loop() {
		m, err := img.NewMemory(64 << 20)
		if err != nil {
			b.Fatal(err)
		}
		mod, err := rt.InstantiateModule(experimental.WithMemoryAllocator(ctx, m), cm, cfg)
		if err != nil {
			b.Fatal(err)
		}
		if err := m.Attach(mod.Memory()); err != nil {
			b.Fatal(err)
		}
		_ = mod.Close(ctx)
		if err := m.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkMemcpy: the alternative to copy-on-write, copying the 4 MiB image
// back into a memory of the Go heap.
func BenchmarkMemcpy(b *testing.B) {
	src := benchData()
	dst := make([]byte, len(src))
	b.SetBytes(int64(len(src)))
	for b.Loop() {
		copy(dst, src)
	}
}

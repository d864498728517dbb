package wasiio

import (
	"bytes"
	"context"
	"encoding/binary"
	"testing"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/latent-node/latent-node/vocab"
)

// oneMemoryPage is (module (memory (export "memory") 1)).
var oneMemoryPage = []byte{0, 'a', 's', 'm', 1, 0, 0, 0,
	5, 3, 1, 0, 1, // memory section: one memory, min 1 page
	7, 10, 1, 6, 'm', 'e', 'm', 'o', 'r', 'y', 2, 0} // export "memory"

func testMemory(t *testing.T) api.Memory {
	t.Helper()
	ctx := context.Background()
	rt := wazero.NewRuntime(ctx)
	t.Cleanup(func() { _ = rt.Close(ctx) })
	mod, err := rt.Instantiate(ctx, oneMemoryPage)
	if err != nil {
		t.Fatal(err)
	}
	return mod.Memory()
}

// TestList checks the args/environ layout WASI defines (addresses at one
// place, NUL-terminated strings at another) and EFAULT without a partial
// write for every range that does not fit.
func TestList(t *testing.T) {
	l := List{N: 2, Parts: [2][2]string{{"A=", "xy"}, {"LONGER=", ""}}}
	const size = uint32(len("A=xy") + 1 + len("LONGER=") + 1)
	if l.Size() != size {
		t.Fatalf("size %d, want %d", l.Size(), size)
	}
	mem := testMemory(t)
	if got := l.WriteSizes(mem, 100, 200); got != 0 {
		t.Fatalf("writeSizes: errno %d", got)
	}
	if n, _ := mem.ReadUint32Le(100); n != 2 {
		t.Fatalf("count %d", n)
	}
	if n, _ := mem.ReadUint32Le(200); n != size {
		t.Fatalf("size %d", n)
	}
	if got := l.Write(mem, 300, 1000); got != 0 {
		t.Fatalf("write: errno %d", got)
	}
	ptrs, _ := mem.Read(300, 8)
	if a, b := binary.LittleEndian.Uint32(ptrs), binary.LittleEndian.Uint32(ptrs[4:]); a != 1000 || b != 1005 {
		t.Fatalf("addresses %d, %d; want 1000, 1005", a, b)
	}
	if buf, _ := mem.Read(1000, size+1); !bytes.Equal(buf, []byte("A=xy\x00LONGER=\x00\x00")) {
		t.Fatalf("strings %q", buf)
	}

	const end = vocab.WasmPageBytes // oneMemoryPage's size
	for _, tc := range []struct {
		name             string
		offsets, strings uint32
		sizes            bool
	}{
		{"addresses past the end", end - 7, 0, false},
		{"strings past the end", 0, end - size + 1, false},
		{"addresses wrap around", 1<<32 - 4, 0, false},
		{"count past the end", end - 3, 0, true},
		{"size past the end", 0, end - 3, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := testMemory(t)
			var got uint32
			if tc.sizes {
				got = l.WriteSizes(mem, tc.offsets, tc.strings)
			} else {
				got = l.Write(mem, tc.offsets, tc.strings)
			}
			if got != errnoFault {
				t.Fatalf("errno %d, want EFAULT", got)
			}
			if !tc.sizes {
				if all, _ := mem.Read(0, end); !bytes.Equal(all, make([]byte, end)) {
					t.Fatal("memory written before the fault")
				}
			}
		})
	}
	if l.Write(nil, 0, 0) != errnoFault || l.WriteSizes(nil, 0, 0) != errnoFault {
		t.Fatal("no memory: want EFAULT")
	}
}

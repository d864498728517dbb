package cellpool

import (
	"testing"
	"unsafe"

	"github.com/latent-node/latent-node/internal/testutil"
)

// TestRegion_protection checks the page protections of a real cell through
// its lifecycle: reserved inaccessible, granted exactly up to the size handed
// out, zeroed (still accessible up to the high-water mark, inaccessible
// above it) after reset, gone after quarantine.
func TestRegion_protection(t *testing.T) {
	p := onePool(t, 1, 16*PageSize)
	base := uintptr(unsafe.Pointer(unsafe.SliceData(p.classes[tiny].mu.cells[0].region.bytes())))
	at := func(page uintptr) string { return testutil.Protection(t, base+page*PageSize) }

	if have := at(0); have != "---p" {
		t.Fatalf("reserved region: want ---p, have %q", have)
	}
	l := mustLease(t, p, tiny)
	mem := l.MemoryAllocator(16*PageSize).Allocate(0, 0)
	b := mem.Reallocate(3 * PageSize)
	for i := range b {
		b[i] = 0xA5
	}
	for page, want := range map[uintptr]string{0: "rw-p", 2: "rw-p", 3: "---p", 15: "---p"} {
		if have := at(page); have != want {
			t.Fatalf("page %d after growing to 3 pages: want %s, have %q", page, want, have)
		}
	}
	mem.Free()
	if err := l.Release(Reuse); err != nil {
		t.Fatal(err)
	}
	for page, want := range map[uintptr]string{0: "rw-p", 2: "rw-p", 3: "---p"} {
		if have := at(page); have != want {
			t.Fatalf("page %d after reset: want %s, have %q", page, want, have)
		}
	}

	// Reused: zeroed (in place for small memories, MADV_DONTNEED for large).
	l = mustLease(t, p, tiny)
	mem = l.MemoryAllocator(16*PageSize).Allocate(0, 0)
	b = mem.Reallocate(3 * PageSize)
	for i, v := range b {
		if v != 0 {
			t.Fatalf("byte %d after reset is %#x, want 0", i, v)
		}
	}
	mem.Free()
	if err := l.Release(Quarantine); err != nil {
		t.Fatal(err)
	}
	// Unmapped. The range may since hold an unrelated mapping, so only our
	// exact layout (3 writable pages, then inaccessible ones) is an error.
	if at(0) == "rw-p" && at(3) == "---p" {
		t.Fatal("the quarantined region is still mapped")
	}
}

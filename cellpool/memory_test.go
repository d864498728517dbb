package cellpool

import (
	"strings"
	"testing"
	"unsafe"

	"github.com/cockroachdb/errors"
	"github.com/tetratelabs/wazero/experimental"

	"github.com/latent-node/latent-node/vocab"
)

// fakePool returns a pool whose regions are fakeRegions, and those regions.
func fakePool(t *testing.T, parallelism int, memoryBytes uint64) (*Pool, []*fakeRegion) {
	t.Helper()
	var regions []*fakeRegion
	p, err := newPool(Config{Classes: map[vocab.CellClass]ClassConfig{tiny: {parallelism, memoryBytes}}},
		func(size uint64) (region, error) {
			r := &fakeRegion{mem: make([]byte, size)}
			regions = append(regions, r)
			return r, nil
		})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p, regions
}

func TestMemory_reallocate(t *testing.T) {
	p := onePool(t, 1, 8*PageSize)
	l := mustLease(t, p, tiny)
	mem := l.MemoryAllocator(4*PageSize).Allocate(PageSize, 1<<32)

	// Grow page by page: same base address, capacity == length (nothing
	// beyond the granted size is reachable through the slice).
	var base *byte
	for pages := uint64(0); pages <= 4; pages++ {
		b := mem.Reallocate(pages * PageSize)
		if b == nil || uint64(len(b)) != pages*PageSize || cap(b) != len(b) {
			t.Fatalf("Reallocate(%d pages): len %d cap %d", pages, len(b), cap(b))
		}
		if pages == 0 {
			continue
		}
		if base == nil {
			base = unsafe.SliceData(b)
		} else if unsafe.SliceData(b) != base {
			t.Fatalf("Reallocate(%d pages) moved the memory", pages)
		}
		b[len(b)-1] = byte(pages) // the new page is writable
		if pages > 1 && b[(pages-1)*PageSize-1] != byte(pages-1) {
			t.Fatalf("Reallocate(%d pages) lost the previous page's content", pages)
		}
	}
	// Beyond the limit (4 pages, below the class's 8): refused, counted.
	if b := mem.Reallocate(5 * PageSize); b != nil {
		t.Fatalf("Reallocate beyond the limit: want nil, have %d bytes", len(b))
	}
	// Shrinking requests (wazero never makes them) keep the base.
	if b := mem.Reallocate(2 * PageSize); unsafe.SliceData(b) != base || len(b) != 2*PageSize {
		t.Fatal("Reallocate(smaller) did not return the same memory")
	}
	mem.Free()
	want := MemoryUsage{Allocated: true, Limit: 4 * PageSize, Peak: 4 * PageSize, Refusals: 1, Freed: true}
	if have := l.Memory(); have != want {
		t.Fatalf("Memory: want %+v, have %+v", want, have)
	}
	if l.MemoryPeak() != 4*PageSize {
		t.Fatalf("MemoryPeak: %d", l.MemoryPeak())
	}
	if err := l.Release(Reuse); err != nil {
		t.Fatalf("Release: %v", err)
	}
	// After Release the memory is detached: it hands out nothing and its
	// Free is ignored.
	if b := mem.Reallocate(PageSize); b != nil {
		t.Fatal("Reallocate after Release returned memory")
	}
	mem.Free()
	wantStats(t, p, tiny, ClassStats{Parallelism: 1, Usable: 1})

	// The next lease of the cell sees zeroed memory at the same address.
	l2 := mustLease(t, p, tiny)
	b := l2.MemoryAllocator(PageSize*8).Allocate(0, 0).Reallocate(4 * PageSize)
	if unsafe.SliceData(b) != base {
		t.Fatal("the cell's memory moved between leases")
	}
	for i, v := range b {
		if v != 0 {
			t.Fatalf("byte %d of the reused cell is %d, want 0", i, v)
		}
	}
	l2.AbandonMemory() // no module: nothing will Free it
	if err := l2.Release(Reuse); err != nil {
		t.Fatalf("Release: %v", err)
	}
}

func TestMemory_limitIsClassCapped(t *testing.T) {
	p := onePool(t, 1, 2*PageSize)
	l := mustLease(t, p, tiny)
	defer func() { _ = l.Release(Quarantine) }()
	mem := l.MemoryAllocator(1<<40).Allocate(0, 0)
	if mem.Reallocate(2*PageSize) == nil || mem.Reallocate(3*PageSize) != nil {
		t.Fatal("want the class's MemoryBytes (2 pages) as the cap")
	}
	if have := l.Memory().Limit; have != 2*PageSize {
		t.Fatalf("Limit: want %d, have %d", 2*PageSize, have)
	}
}

func TestMemory_oneMemoryPerLease(t *testing.T) {
	p := onePool(t, 1, 2*PageSize)
	l := mustLease(t, p, tiny)
	a := l.MemoryAllocator(PageSize)
	first := a.Allocate(0, 0)
	for name, second := range map[string]experimental.LinearMemory{
		"same allocator":    a.Allocate(0, 0),
		"another allocator": l.MemoryAllocator(PageSize).Allocate(0, 0),
	} {
		if b := second.Reallocate(PageSize); b != nil {
			t.Fatalf("%s: a second memory got %d bytes", name, len(b))
		}
		second.Free() // harmless
	}
	if first.Reallocate(PageSize) == nil {
		t.Fatal("the first memory was refused")
	}
	first.Free()
	if err := l.Release(Reuse); err != nil {
		t.Fatalf("Release: %v", err)
	}
	// After Release, a lease's allocator hands out nothing.
	if b := l.MemoryAllocator(PageSize).Allocate(0, 0).Reallocate(PageSize); b != nil {
		t.Fatal("an allocation after Release got memory")
	}
}

// TestMemory_uncertainQuarantines: every uncertain cleanup quarantines the
// cell on Release(Reuse), and Release says why.
func TestMemory_uncertainQuarantines(t *testing.T) {
	tests := []struct {
		name    string
		setup   func(r *fakeRegion)
		run     func(t *testing.T, l *Lease, mem experimental.LinearMemory)
		want    string // substring of the Release error; "": reused
		resetTo uint64 // the reset length when reused
	}{
		{"clean", nil, func(t *testing.T, _ *Lease, mem experimental.LinearMemory) {
			mem.Reallocate(2 * PageSize)
			mem.Free()
		}, "", 2 * PageSize},
		{"no allocation", nil, func(*testing.T, *Lease, experimental.LinearMemory) {}, "", 0},
		{"free not called", nil, func(t *testing.T, _ *Lease, mem experimental.LinearMemory) {
			mem.Reallocate(PageSize)
		}, "did not free", 0},
		{"free not called, abandoned", nil, func(t *testing.T, l *Lease, mem experimental.LinearMemory) {
			mem.Reallocate(PageSize)
			l.AbandonMemory()
		}, "", PageSize},
		{"free not called, nothing handed out", nil, func(t *testing.T, _ *Lease, mem experimental.LinearMemory) {
			mem.Reallocate(0)
			mem.Reallocate(PageSize * 100) // refused: over the limit
		}, "", 0},
		{"reallocate after free", nil, func(t *testing.T, _ *Lease, mem experimental.LinearMemory) {
			mem.Reallocate(PageSize)
			mem.Free()
			if mem.Reallocate(2*PageSize) != nil {
				t.Error("Reallocate after Free returned memory")
			}
		}, "after Free", 0},
		{"double free", nil, func(t *testing.T, _ *Lease, mem experimental.LinearMemory) {
			mem.Reallocate(PageSize)
			mem.Free()
			mem.Free()
		}, "freed the memory twice", 0},
		{"mprotect fails", func(r *fakeRegion) { r.grantErr = errors.New("EPERM") }, func(t *testing.T, _ *Lease, mem experimental.LinearMemory) {
			if mem.Reallocate(PageSize) != nil {
				t.Error("a failed grant returned memory")
			}
			mem.Free()
		}, "EPERM", 0},
		{"reset fails", func(r *fakeRegion) { r.resetErr = errors.New("EINVAL") }, func(t *testing.T, _ *Lease, mem experimental.LinearMemory) {
			mem.Reallocate(PageSize)
			mem.Free()
		}, "reset memory: EINVAL", 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, regions := fakePool(t, 1, 4*PageSize)
			if tc.setup != nil {
				tc.setup(regions[0])
			}
			l := mustLease(t, p, tiny)
			tc.run(t, l, l.MemoryAllocator(2*PageSize).Allocate(0, 0))
			err := l.Release(Reuse)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Release: %v", err)
				}
				wantStats(t, p, tiny, ClassStats{Parallelism: 1, Usable: 1})
				if tc.resetTo > 0 && (len(regions[0].resets) != 1 || regions[0].resets[0] != tc.resetTo) {
					t.Fatalf("resets: want [%d], have %v", tc.resetTo, regions[0].resets)
				}
				return
			}
			if !errors.Is(err, ErrQuarantined) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Release: want ErrQuarantined with %q, have %v", tc.want, err)
			}
			wantStats(t, p, tiny, ClassStats{Parallelism: 1, Quarantined: 1})
			if !regions[0].released {
				t.Fatal("the quarantined cell's region is still mapped")
			}
		})
	}
}

func TestMemory_grantsOnlyNewPages(t *testing.T) {
	p, regions := fakePool(t, 1, 8*PageSize)
	l := mustLease(t, p, tiny)
	mem := l.MemoryAllocator(8*PageSize).Allocate(0, 0)
	for _, pages := range []uint64{1, 1, 3, 2, 8} {
		mem.Reallocate(pages * PageSize)
	}
	mem.Free()
	want := [][2]uint64{{0, PageSize}, {PageSize, 3 * PageSize}, {3 * PageSize, 8 * PageSize}}
	if have := regions[0].grants; len(have) != len(want) || have[0] != want[0] || have[1] != want[1] || have[2] != want[2] {
		t.Fatalf("grants: want %v, have %v", want, have)
	}
	if err := l.Release(Reuse); err != nil || regions[0].resets[0] != 8*PageSize {
		t.Fatalf("Release: %v, resets %v", err, regions[0].resets)
	}
}

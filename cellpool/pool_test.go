package cellpool

import (
	"context"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/cockroachdb/errors"
	"github.com/tetratelabs/wazero/experimental"

	"github.com/latent-node/latent-node/vocab"
)

const (
	tiny  = vocab.CellTiny
	small = vocab.CellSmall
)

// newTestPool returns a pool closed at the end of the test.
func newTestPool(t testing.TB, classes map[vocab.CellClass]ClassConfig) *Pool {
	t.Helper()
	p, err := New(Config{Classes: classes})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

func onePool(t testing.TB, parallelism int, memoryBytes uint64) *Pool {
	return newTestPool(t, map[vocab.CellClass]ClassConfig{tiny: {Parallelism: parallelism, MemoryBytes: memoryBytes}})
}

func mustLease(t testing.TB, p *Pool, class vocab.CellClass) *Lease {
	t.Helper()
	l, err := p.TryLease(class)
	if err != nil {
		t.Fatalf("TryLease(%s): %v", class, err)
	}
	return l
}

func wantStats(t testing.TB, p *Pool, class vocab.CellClass, want ClassStats) {
	t.Helper()
	if have := p.Stats()[class]; have != want {
		t.Fatalf("Stats()[%s]: want %+v, have %+v", class, want, have)
	}
}

func TestNew_validation(t *testing.T) {
	tests := []struct {
		name    string
		classes map[vocab.CellClass]ClassConfig
		want    []string // substrings of the error; none: valid
	}{
		{"valid", map[vocab.CellClass]ClassConfig{tiny: {2, 1 << 20}, vocab.CellXLarge: {1, MaxMemoryBytes}}, nil},
		{"one page", map[vocab.CellClass]ClassConfig{tiny: {1, PageSize}}, nil},
		{"no classes", nil, []string{"no cell class"}},
		{"zero class", map[vocab.CellClass]ClassConfig{0: {1, PageSize}}, []string{`Classes["cell-class(0)"]: not a cell class`}},
		{"unknown class", map[vocab.CellClass]ClassConfig{9: {1, PageSize}}, []string{"cell-class(9)"}},
		{"zero parallelism", map[vocab.CellClass]ClassConfig{tiny: {0, PageSize}}, []string{`Classes["tiny"].Parallelism: must be from 1 to`}},
		{"negative parallelism", map[vocab.CellClass]ClassConfig{tiny: {-1, PageSize}}, []string{`Classes["tiny"].Parallelism`}},
		{"huge parallelism", map[vocab.CellClass]ClassConfig{tiny: {MaxParallelism + 1, PageSize}}, []string{"must be from 1 to"}},
		{"zero memory", map[vocab.CellClass]ClassConfig{tiny: {1, 0}}, []string{`Classes["tiny"].MemoryBytes: must be positive`}},
		{"unaligned memory", map[vocab.CellClass]ClassConfig{tiny: {1, PageSize + 1}}, []string{"must be a multiple of 64KiB"}},
		{"memory over 4 GiB", map[vocab.CellClass]ClassConfig{tiny: {1, MaxMemoryBytes + PageSize}}, []string{"must be at most 4GiB"}},
		{"every problem reported", map[vocab.CellClass]ClassConfig{tiny: {0, 1}, small: {1, 0}},
			[]string{`Classes["tiny"].Parallelism`, `Classes["tiny"].MemoryBytes: must be a multiple`, `Classes["small"].MemoryBytes: must be positive`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := New(Config{Classes: tc.classes})
			if tc.want == nil {
				if err != nil {
					t.Fatalf("want valid, have %v", err)
				}
				if err := p.Close(); err != nil {
					t.Fatalf("Close: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("want ErrInvalidConfig, have %v", err)
			}
			if p != nil {
				t.Fatalf("want no pool on error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

func TestNew_reserveFailure(t *testing.T) {
	var reserved []*fakeRegion
	fail := errors.New("no address space")
	reserveFn := func(size uint64) (region, error) {
		if len(reserved) == 3 {
			return nil, fail
		}
		r := &fakeRegion{mem: make([]byte, size)}
		reserved = append(reserved, r)
		return r, nil
	}
	_, err := newPool(Config{Classes: map[vocab.CellClass]ClassConfig{tiny: {2, PageSize}, small: {2, PageSize}}}, reserveFn)
	if !errors.Is(err, fail) || !strings.Contains(err.Error(), "small cell 1") {
		t.Fatalf("want the reserve error naming small cell 1, have %v", err)
	}
	for i, r := range reserved {
		if !r.released {
			t.Errorf("region %d not released after the failed New", i)
		}
	}
}

func TestPool_TryLease(t *testing.T) {
	p := newTestPool(t, map[vocab.CellClass]ClassConfig{tiny: {3, PageSize}, small: {1, PageSize}})
	seen := map[int]bool{}
	var leases []*Lease
	for i := 0; i < 3; i++ {
		l := mustLease(t, p, tiny)
		if l.Class() != tiny || seen[l.Cell()] || l.Cell() < 0 || l.Cell() >= 3 {
			t.Fatalf("lease %d: class %s cell %d (seen %v)", i, l.Class(), l.Cell(), seen)
		}
		seen[l.Cell()] = true
		leases = append(leases, l)
	}
	if _, err := p.TryLease(tiny); !errors.Is(err, ErrNoCell) {
		t.Fatalf("4th tiny lease: want ErrNoCell, have %v", err)
	}
	wantStats(t, p, tiny, ClassStats{Parallelism: 3, Usable: 3, Leased: 3})
	// Other classes are independent.
	ls := mustLease(t, p, small)
	if _, err := p.TryLease(vocab.CellStandard); !errors.Is(err, ErrUnknownClass) {
		t.Fatalf("unconfigured class: want ErrUnknownClass, have %v", err)
	}
	if _, err := p.TryLease(0); !errors.Is(err, ErrUnknownClass) {
		t.Fatalf("zero class: want ErrUnknownClass, have %v", err)
	}
	if err := leases[1].Release(Reuse); err != nil {
		t.Fatalf("Release: %v", err)
	}
	l := mustLease(t, p, tiny)
	if l.Cell() != leases[1].Cell() {
		t.Fatalf("want the released cell %d again, have %d", leases[1].Cell(), l.Cell())
	}
	for _, l := range []*Lease{leases[0], leases[2], l, ls} {
		if err := l.Release(Reuse); err != nil {
			t.Fatalf("Release: %v", err)
		}
	}
	wantStats(t, p, tiny, ClassStats{Parallelism: 3, Usable: 3})
	if have := p.Capacity(tiny); have != 3 {
		t.Fatalf("Capacity: want 3, have %d", have)
	}
	if have := p.Capacity(vocab.CellLarge); have != 0 {
		t.Fatalf("Capacity of an unconfigured class: want 0, have %d", have)
	}
}

func TestLease_Release(t *testing.T) {
	tests := []struct {
		name     string
		first    Disposition
		wantErr  error // of the first Release
		wantCap  int
		wantStat ClassStats
	}{
		{"reuse", Reuse, nil, 2, ClassStats{Parallelism: 2, Usable: 2}},
		{"quarantine", Quarantine, nil, 1, ClassStats{Parallelism: 2, Usable: 1, Quarantined: 1}},
		{"zero disposition quarantines", 0, ErrQuarantined, 1, ClassStats{Parallelism: 2, Usable: 1, Quarantined: 1}},
		{"unknown disposition quarantines", 7, ErrQuarantined, 1, ClassStats{Parallelism: 2, Usable: 1, Quarantined: 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := onePool(t, 2, PageSize)
			l := mustLease(t, p, tiny)
			if err := l.Release(tc.first); !errors.Is(err, tc.wantErr) || (tc.wantErr == nil) != (err == nil) {
				t.Fatalf("first Release(%s): want %v, have %v", tc.first, tc.wantErr, err)
			}
			for _, d := range []Disposition{Reuse, Quarantine} {
				if err := l.Release(d); !errors.Is(err, ErrLeaseReleased) {
					t.Fatalf("second Release(%s): want ErrLeaseReleased, have %v", d, err)
				}
			}
			if have := p.Capacity(tiny); have != tc.wantCap {
				t.Fatalf("Capacity: want %d, have %d", tc.wantCap, have)
			}
			wantStats(t, p, tiny, tc.wantStat)
		})
	}
}

func TestLease_zeroValue(t *testing.T) {
	var zero Lease
	var nilLease *Lease
	for name, l := range map[string]*Lease{"zero": &zero, "nil": nilLease} {
		t.Run(name, func(t *testing.T) {
			if err := l.Release(Reuse); !errors.Is(err, ErrLeaseInvalid) {
				t.Fatalf("Release: want ErrLeaseInvalid, have %v", err)
			}
			if l.Class() != 0 || l.Cell() != -1 || l.MemoryBytes() != 0 || l.MemoryPeak() != 0 || l.Memory() != (MemoryUsage{}) {
				t.Fatalf("accessors of an invalid lease are not zero")
			}
			l.AbandonMemory()
			// The allocator of an invalid lease hands out nothing.
			mem := l.MemoryAllocator(PageSize).Allocate(PageSize, PageSize)
			if b := mem.Reallocate(PageSize); b != nil {
				t.Fatalf("Reallocate on an invalid lease: want nil, have %d bytes", len(b))
			}
			mem.Free()
		})
	}
}

func TestPool_quarantineShrinks(t *testing.T) {
	p := onePool(t, 3, PageSize)
	for want := 2; want >= 0; want-- {
		l := mustLease(t, p, tiny)
		if err := l.Release(Quarantine); err != nil {
			t.Fatalf("Release(Quarantine): %v", err)
		}
		if have := p.Capacity(tiny); have != want {
			t.Fatalf("Capacity: want %d, have %d", want, have)
		}
		if have := p.Stats()[tiny]; have.Usable != want || have.Quarantined != 3-want {
			t.Fatalf("Stats: %+v", have)
		}
	}
	if _, err := p.TryLease(tiny); !errors.Is(err, ErrDepleted) || errors.Is(err, ErrNoCell) {
		t.Fatalf("depleted class: want ErrDepleted (not ErrNoCell), have %v", err)
	}
	if _, err := p.Lease(context.Background(), tiny); !errors.Is(err, ErrDepleted) {
		t.Fatalf("Lease of a depleted class: want ErrDepleted, have %v", err)
	}
}

func TestPool_Lease(t *testing.T) {
	t.Run("immediate", func(t *testing.T) {
		p := onePool(t, 1, PageSize)
		l, err := p.Lease(context.Background(), tiny)
		if err != nil {
			t.Fatal(err)
		}
		_ = l.Release(Reuse)
	})
	t.Run("unknown class", func(t *testing.T) {
		p := onePool(t, 1, PageSize)
		if _, err := p.Lease(context.Background(), small); !errors.Is(err, ErrUnknownClass) {
			t.Fatalf("want ErrUnknownClass, have %v", err)
		}
	})
	t.Run("cancelled before", func(t *testing.T) {
		p := onePool(t, 1, PageSize)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := p.Lease(ctx, tiny); !errors.Is(err, context.Canceled) {
			t.Fatalf("want context.Canceled, have %v", err)
		}
		wantStats(t, p, tiny, ClassStats{Parallelism: 1, Usable: 1})
	})
	// The waiting cases: the cell is leased; a waiter blocks until an event.
	events := []struct {
		name string
		act  func(p *Pool, held *Lease, cancel context.CancelFunc)
		want error // nil: the waiter gets the cell
	}{
		{"release wakes", func(_ *Pool, held *Lease, _ context.CancelFunc) { _ = held.Release(Reuse) }, nil},
		{"cancel wakes", func(_ *Pool, _ *Lease, cancel context.CancelFunc) { cancel() }, context.Canceled},
		{"depletion wakes", func(_ *Pool, held *Lease, _ context.CancelFunc) { _ = held.Release(Quarantine) }, ErrDepleted},
		{"close wakes", func(p *Pool, _ *Lease, _ context.CancelFunc) { _ = p.Close() }, ErrClosed},
	}
	for _, ev := range events {
		t.Run(ev.name, func(t *testing.T) {
			p := onePool(t, 1, PageSize)
			held := mustLease(t, p, tiny)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			type result struct {
				l   *Lease
				err error
			}
			done := make(chan result, 1)
			go func() {
				l, err := p.Lease(ctx, tiny)
				done <- result{l, err}
			}()
			// The waiter cannot proceed before the event: the only cell is held.
			ev.act(p, held, cancel)
			r := <-done
			if ev.want == nil {
				if r.err != nil || r.l.Cell() != held.Cell() {
					t.Fatalf("want the released cell, have %v, %v", r.l, r.err)
				}
				_ = r.l.Release(Reuse)
				return
			}
			if !errors.Is(r.err, ev.want) {
				t.Fatalf("want %v, have %v", ev.want, r.err)
			}
			_ = held.Release(Reuse)
		})
	}
}

func TestPool_Close(t *testing.T) {
	reserved := map[*fakeRegion]bool{}
	var mu sync.Mutex
	reserveFn := func(size uint64) (region, error) {
		r := &fakeRegion{mem: make([]byte, size)}
		mu.Lock()
		reserved[r] = true
		mu.Unlock()
		return r, nil
	}
	p, err := newPool(Config{Classes: map[vocab.CellClass]ClassConfig{tiny: {3, PageSize}}}, reserveFn)
	if err != nil {
		t.Fatal(err)
	}
	held := mustLease(t, p, tiny)
	quarantined := mustLease(t, p, tiny)
	if err := p.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := p.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	wantStats(t, p, tiny, ClassStats{Parallelism: 3, Usable: 2, Leased: 2, Retired: 1})
	if _, err := p.TryLease(tiny); !errors.Is(err, ErrClosed) {
		t.Fatalf("TryLease after Close: want ErrClosed, have %v", err)
	}
	if _, err := p.Lease(context.Background(), tiny); !errors.Is(err, ErrClosed) {
		t.Fatalf("Lease after Close: want ErrClosed, have %v", err)
	}
	// Outstanding leases stay valid; their cells are unmapped on release.
	if err := held.Release(Reuse); err != nil {
		t.Fatalf("Release after Close: %v", err)
	}
	if err := quarantined.Release(Quarantine); err != nil {
		t.Fatalf("Release after Close: %v", err)
	}
	wantStats(t, p, tiny, ClassStats{Parallelism: 3, Retired: 2, Quarantined: 1})
	for r := range reserved {
		if !r.released {
			t.Errorf("a region is still mapped after Close and the releases")
		}
	}
}

func TestPool_unmapErrors(t *testing.T) {
	fail := errors.New("munmap failed")
	reserveFn := func(size uint64) (region, error) {
		return &fakeRegion{mem: make([]byte, size), releaseErr: fail}, nil
	}
	p, err := newPool(Config{Classes: map[vocab.CellClass]ClassConfig{tiny: {2, PageSize}}}, reserveFn)
	if err != nil {
		t.Fatal(err)
	}
	l := mustLease(t, p, tiny)
	if err := l.Release(Quarantine); !errors.Is(err, fail) {
		t.Fatalf("Release(Quarantine): want the unmap error, have %v", err)
	}
	if err := p.Close(); !errors.Is(err, fail) {
		t.Fatalf("Close: want the unmap error, have %v", err)
	}
	wantStats(t, p, tiny, ClassStats{Parallelism: 2, Quarantined: 1, Retired: 1})
}

// leakLease leases a cell and drops the lease.
//
//go:noinline
func leakLease(t *testing.T, p *Pool, withMemory bool) int {
	l := mustLease(t, p, tiny)
	if withMemory {
		mem := l.MemoryAllocator(PageSize).Allocate(PageSize, PageSize)
		if mem.Reallocate(PageSize) == nil {
			t.Fatal("Reallocate failed")
		}
	}
	return l.Cell()
}

func TestLease_leakSafetyNet(t *testing.T) {
	for _, withMemory := range []bool{false, true} {
		t.Run(map[bool]string{false: "idle", true: "with memory"}[withMemory], func(t *testing.T) {
			p := onePool(t, 2, PageSize)
			leakLease(t, p, withMemory)
			for i := 0; i < 1000 && p.Stats()[tiny].LeakedLeases == 0; i++ {
				runtime.GC()
				runtime.Gosched()
			}
			wantStats(t, p, tiny, ClassStats{Parallelism: 2, Usable: 1, Quarantined: 1, LeakedLeases: 1})
		})
	}
}

// leakLeaseKeepMemory leases a cell, allocates its memory as wazero would,
// and drops the lease but returns the memory.
//
//go:noinline
func leakLeaseKeepMemory(t *testing.T, p *Pool) experimental.LinearMemory {
	l := mustLease(t, p, tiny)
	if l.MemoryBytes() != PageSize {
		t.Fatalf("MemoryBytes: %d", l.MemoryBytes())
	}
	mem := l.MemoryAllocator(PageSize).Allocate(PageSize, PageSize)
	if mem.Reallocate(PageSize) == nil {
		t.Fatal("Reallocate failed")
	}
	return mem
}

// TestLease_leakWaitsForMemory: a dropped lease whose memory wazero still
// holds (a live module) is not reclaimed, so its memory is not unmapped
// under the module; it is once the memory is dropped too.
func TestLease_leakWaitsForMemory(t *testing.T) {
	p := onePool(t, 1, PageSize)
	mem := leakLeaseKeepMemory(t, p)
	for i := 0; i < 5; i++ {
		runtime.GC()
		runtime.Gosched()
	}
	wantStats(t, p, tiny, ClassStats{Parallelism: 1, Usable: 1, Leased: 1})
	if b := mem.Reallocate(PageSize); b == nil || b[0] != 0 {
		t.Fatal("the held memory is no longer usable")
	}
	runtime.KeepAlive(mem)
	for i := 0; i < 1000 && p.Stats()[tiny].LeakedLeases == 0; i++ {
		runtime.GC()
		runtime.Gosched()
	}
	wantStats(t, p, tiny, ClassStats{Parallelism: 1, Quarantined: 1, LeakedLeases: 1})
}

func TestLease_releasedLeaseIsNotReclaimed(t *testing.T) {
	p := onePool(t, 1, PageSize)
	func() {
		l := mustLease(t, p, tiny)
		if err := l.Release(Reuse); err != nil {
			t.Fatal(err)
		}
	}()
	for i := 0; i < 5; i++ {
		runtime.GC()
	}
	wantStats(t, p, tiny, ClassStats{Parallelism: 1, Usable: 1})
}

func TestDisposition_String(t *testing.T) {
	for d, want := range map[Disposition]string{Reuse: "reuse", Quarantine: "quarantine", 0: "disposition(0)", 9: "disposition(9)"} {
		if have := d.String(); have != want {
			t.Errorf("want %q, have %q", want, have)
		}
	}
}

// fakeRegion is a heap region with injectable failures.
type fakeRegion struct {
	mem                []byte
	grantErr, resetErr error
	releaseErr         error
	released           bool
	grants             [][2]uint64
	resets             []uint64
	accessible         uint64
	mu                 sync.Mutex
}

func (r *fakeRegion) bytes() []byte { return r.mem }

func (r *fakeRegion) grant(from, to uint64) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.grantErr != nil {
		return r.grantErr
	}
	r.grants = append(r.grants, [2]uint64{from, to})
	r.accessible = to
	return nil
}

func (r *fakeRegion) reset(n uint64) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.resetErr != nil {
		return r.resetErr
	}
	clear(r.mem[:n])
	r.resets = append(r.resets, n)
	r.accessible = 0
	return nil
}

func (r *fakeRegion) release() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.released = true
	return r.releaseErr
}

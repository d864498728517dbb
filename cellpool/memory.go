package cellpool

// A cell's linear memory: the region interface and memory, the wazero
// allocator a lease hands out over it (and the refusing one of an invalid
// lease).

import (
	"os"

	"github.com/cockroachdb/errors"
	"github.com/tetratelabs/wazero/experimental"
)

// region is one cell's reserved linear memory. Implementations:
// mmapRegion (Linux: mmap/mprotect/madvise) and heapRegion (elsewhere).
type region interface {
	// bytes returns the whole reservation; len is the class's MemoryBytes.
	// Its address never changes.
	bytes() []byte
	// grant makes [from, to) readable and writable. from and to are
	// multiples of the OS page size.
	grant(from, to uint64) error
	// reset zeroes [0, n); the pages stay readable and writable.
	reset(n uint64) error
	// release gives the reservation back to the OS. The region is unusable
	// afterwards.
	release() error
}

// osPageSize is the granularity of grant.
var osPageSize = uint64(os.Getpagesize())

// memory is the experimental.MemoryAllocator handed out by a lease and, once
// its Allocate wins the lease's memory, also the activation's
// experimental.LinearMemory. It points to the lease (never the reverse), so a
// module that holds it keeps the lease alive.
type memory struct {
	l     *Lease
	id    uint64 // 1, 2, … per lease
	limit uint64 // bytes; min(the caller's limit, the class's MemoryBytes)
}

var (
	_ experimental.MemoryAllocator = (*memory)(nil)
	_ experimental.LinearMemory    = (*memory)(nil)
)

// Allocate implements experimental.MemoryAllocator. The first call on any
// allocator of the lease gets the cell's region; later calls (a second
// module, or a call after Release) get a memory that refuses every size. The
// capacity hint and the module's maximum are ignored: the region is reserved
// at its full size, and the cap is m.limit (wazero itself refuses growth
// beyond the module's maximum before asking).
func (m *memory) Allocate(_, _ uint64) experimental.LinearMemory {
	l := m.l
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.mu.owner != 0 || l.mu.detached {
		return refusing{}
	}
	l.mu.owner, l.mu.limit = m.id, m.limit
	return m
}

// Reallocate implements experimental.LinearMemory: it returns the region's
// first size bytes (capacity size), after making any newly needed pages
// accessible. The base address never changes and nothing is copied. It
// returns nil (wazero: memory.grow returns -1) when size exceeds the limit,
// after Release, after Free (which marks the cell uncertain) or if mprotect
// fails (likewise).
func (m *memory) Reallocate(size uint64) []byte {
	l := m.l
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.mu.owner != m.id || l.mu.detached:
		return nil
	case l.mu.freed:
		l.faultLocked(errors.New("wazero reallocated the memory after Free"))
		return nil
	case size > m.limit:
		l.mu.refusals++
		return nil
	}
	r := l.cell.region
	if size > l.mu.granted {
		to := min(roundUp(size, osPageSize), uint64(len(r.bytes())))
		if err := r.grant(l.mu.granted, to); err != nil {
			l.faultLocked(errors.Wrapf(err, "grant memory [%d, %d)", l.mu.granted, to))
			return nil
		}
		l.mu.granted = to
	}
	l.mu.peak = max(l.mu.peak, size)
	return r.bytes()[:size:size]
}

// Free implements experimental.LinearMemory. wazero calls it when it closes
// the module, possibly while a guest call is still running on another
// goroutine (a close from outside), so it does not touch the region: the
// reset happens at Release. A second Free marks the cell uncertain.
func (m *memory) Free() {
	l := m.l
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.mu.owner != m.id || l.mu.detached:
	case l.mu.freed:
		l.faultLocked(errors.New("wazero freed the memory twice"))
	default:
		l.mu.freed = true
	}
}

// faultLocked records the first reason the cell's state is uncertain.
// REQUIRES: l.mu held.
func (l *Lease) faultLocked(err error) {
	if l.mu.fault == nil {
		l.mu.fault = err
	}
}

// refusing is the allocator and memory of an invalid lease and of every
// allocation after a lease's first: it never hands out memory.
type refusing struct{}

func (refusing) Allocate(_, _ uint64) experimental.LinearMemory { return refusing{} }
func (refusing) Reallocate(uint64) []byte                       { return nil }
func (refusing) Free()                                          {}

func roundUp(n, to uint64) uint64 { return (n + to - 1) / to * to }

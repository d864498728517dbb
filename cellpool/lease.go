package cellpool

// Lease, one leased cell: its Disposition on Release, its memory allocator
// and usage, and the safety net that reclaims leaked leases.

import (
	"context"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/errors"
	"github.com/tetratelabs/wazero/experimental"

	"github.com/latent-node/latent-node/vocab"
)

// Disposition says what Release should do with the cell.
type Disposition uint8

// Dispositions. The zero value is not one: Release quarantines on it.
const (
	// Reuse resets the cell's memory and returns the cell to service, unless
	// its state is uncertain (then it is quarantined and Release returns
	// ErrQuarantined).
	Reuse Disposition = iota + 1
	// Quarantine removes the cell from service and unmaps its memory.
	Quarantine
)

// String returns "reuse", "quarantine" or "disposition(N)".
func (d Disposition) String() string {
	switch d {
	case Reuse:
		return "reuse"
	case Quarantine:
		return "quarantine"
	}
	return "disposition(" + strconv.Itoa(int(d)) + ")"
}

// Lease is the exclusive, affine right to one cell for one activation. Only a
// Pool issues leases; the zero value is inert (its methods report
// ErrLeaseInvalid or zero). Release it exactly once, after the guest stopped
// and its module was closed; a second Release returns ErrLeaseReleased. A
// lease dropped without Release is reclaimed by a garbage-collection safety
// net as Quarantine and counted in ClassStats.LeakedLeases: that is a bug in
// its holder, never the intended path.
//
// The methods are safe for concurrent use, but a lease has one owner: the
// activation that runs on its cell.
type Lease struct {
	cp       *classPool
	cell     *cell
	released atomic.Bool

	// mu guards the activation's memory state. wazero calls Reallocate and
	// Free on the goroutine that runs (or closes) the module; Release and the
	// accessors may run elsewhere.
	mu struct {
		sync.Mutex
		allocators uint64 // allocators handed out; numbers them
		owner      uint64 // number of the allocator whose Allocate got the memory; 0: none
		limit      uint64 // that allocator's limit
		detached   bool   // released: the memory no longer belongs to the lease
		granted    uint64 // bytes of the region made accessible (page-rounded)
		peak       uint64 // largest size handed to wazero
		refusals   int    // Reallocate calls refused for the limit
		freed      bool   // wazero called Free
		abandoned  bool   // the holder asserted the module instance is unreachable
		fault      error  // first reason the cell's state is uncertain
	}
}

// The safety net uses runtime.SetFinalizer (as admission's permits do): no
// allocation per lease. It can run because nothing reachable from a Lease
// points back to it: the allocator handed to wazero points to the lease (so a
// live module keeps its lease alive, and a leaked lease is never reclaimed
// while wazero can still use its memory), but the lease knows its allocators
// only by number. A pointer back would form a cycle, and the runtime never
// finalizes an object reachable from itself.
func (l *Lease) track() { runtime.SetFinalizer(l, reclaimLeaked) }

func reclaimLeaked(l *Lease) {
	if !l.released.CompareAndSwap(false, true) {
		return
	}
	l.detach()
	_ = l.cp.settle(l.cell, true, true)
}

// Class returns the class of the leased cell (0 for an invalid lease).
func (l *Lease) Class() vocab.CellClass {
	if l == nil || l.cp == nil {
		return 0
	}
	return l.cp.class
}

// Cell returns the index of the leased cell within its class, 0 ≤ i <
// Parallelism (-1 for an invalid lease). For logs and tests.
func (l *Lease) Cell() int {
	if l == nil || l.cell == nil {
		return -1
	}
	return l.cell.index
}

// MemoryBytes returns the class's maximum linear memory (0 for an invalid
// lease). The memory of an activation is capped at min(its limit, this).
func (l *Lease) MemoryBytes() uint64 {
	if l == nil || l.cp == nil {
		return 0
	}
	return l.cp.cfg.MemoryBytes
}

// Release ends the lease with disposition d. Call it once, after the guest
// stopped and its module was closed (so wazero called Free). With Reuse the
// used part of the cell's memory is zeroed (its pages stay readable and
// writable up to the cell's high-water mark; see the package documentation)
// and the cell returns to service, unless its state is uncertain: an allocator
// failure, a Reallocate after Free, or memory handed to wazero that wazero
// never freed (a module instance may still reference it). Then the cell is
// quarantined and Release returns an error marked ErrQuarantined. With
// Quarantine (or an invalid disposition, which also returns ErrQuarantined)
// the cell leaves service and its memory is unmapped. After Pool.Close, a
// released cell is unmapped whatever d says.
//
// REQUIRES: no guest is executing on the cell and nothing touches the
// module's memory (api.Memory, slices from it) afterwards: Release revokes
// access to the pages, so a later access faults the process.
func (l *Lease) Release(d Disposition) error {
	if l == nil || l.cp == nil {
		return ErrLeaseInvalid
	}
	if !l.released.CompareAndSwap(false, true) {
		return errors.Wrapf(ErrLeaseReleased, "cellpool: %s cell %d", l.cp.class, l.cell.index)
	}
	runtime.SetFinalizer(l, nil)
	granted, cause := l.detach()
	if d != Reuse && d != Quarantine {
		cause = errors.CombineErrors(errors.Newf("invalid disposition %d", errors.Safe(uint8(d))), cause)
	}
	if d == Reuse && cause == nil {
		if err := l.cell.region.reset(granted); err != nil {
			cause = errors.Wrap(err, "reset memory")
		}
	}
	err := l.cp.settle(l.cell, d != Reuse || cause != nil, false)
	if cause != nil {
		return errors.CombineErrors(
			errors.Mark(errors.Wrapf(cause, "cellpool: %s cell %d quarantined", l.cp.class, l.cell.index), ErrQuarantined),
			err)
	}
	return err
}

// detach ends the lease's claim on the cell's memory: later Reallocate calls
// return nil without touching the region. It returns how many bytes were
// made accessible and why the cell's state is uncertain (nil if it is not).
func (l *Lease) detach() (granted uint64, cause error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.mu.detached = true
	cause = l.mu.fault
	if cause == nil && l.mu.peak > 0 && !l.mu.freed && !l.mu.abandoned {
		cause = errors.New("wazero did not free the memory: a module instance may still reference it (close the module before Release)")
	}
	return l.mu.granted, cause
}

// AbandonMemory records that the module instance that allocated this
// lease's memory is unreachable although wazero never called Free. wazero
// v1.12.0 does that when InstantiateModule fails after building the memory
// (an out-of-bounds data segment, a trapping wasm start function): it drops
// the instance without closing it. Without AbandonMemory, Release(Reuse)
// quarantines the cell, since it cannot tell that case from an unclosed,
// live module.
//
// REQUIRES: InstantiateModule with this lease's allocator returned an error
// (and no module instance from it exists). Not needed when the error came
// from a start function such as _start: wazero closes that module itself.
func (l *Lease) AbandonMemory() {
	if l == nil || l.cp == nil {
		return
	}
	l.mu.Lock()
	l.mu.abandoned = true
	l.mu.Unlock()
}

// MemoryUsage describes the linear memory of the lease's activation.
type MemoryUsage struct {
	// Allocated reports whether wazero allocated the memory (instantiated a
	// module with a memory using the lease's allocator).
	Allocated bool
	// Limit is the cap of the allocated memory in bytes: min(the limit given
	// to MemoryAllocator, the class's MemoryBytes). 0 until Allocated.
	Limit uint64
	// Peak is the largest size in bytes handed to wazero (wasm memory never
	// shrinks, so it is the final size).
	Peak uint64
	// Refusals counts growths refused because they exceeded Limit.
	Refusals int
	// Freed reports whether wazero called Free (it does when the module is
	// closed).
	Freed bool
}

// Memory returns the memory usage of the lease's activation so far.
func (l *Lease) Memory() MemoryUsage {
	if l == nil || l.cp == nil {
		return MemoryUsage{}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	u := MemoryUsage{Peak: l.mu.peak, Refusals: l.mu.refusals, Freed: l.mu.freed}
	if l.mu.owner != 0 {
		u.Allocated, u.Limit = true, l.mu.limit
	}
	return u
}

// MemoryPeak returns the largest linear memory size in bytes handed to the
// lease's activation (0 if none).
func (l *Lease) MemoryPeak() uint64 { return l.Memory().Peak }

// MemoryAllocator returns the wazero memory allocator of the lease's
// activation: the first module instantiated with it (with a memory) gets
// the cell's reserved region as its linear memory, capped at
// min(limitBytes, MemoryBytes()). A growth beyond the cap is refused (see
// the package documentation for what wazero then does). The lease has one
// memory: every later allocation through any allocator of the lease is
// refused.
//
// REQUIRES: the module's minimum memory is within the cap. wazero v1.12.0
// does not handle a refused initial allocation: InstantiateModule panics
// (slice bounds out of range). Check the compiled module's memory
// definitions against the cap first.
func (l *Lease) MemoryAllocator(limitBytes uint64) experimental.MemoryAllocator {
	if l == nil || l.cp == nil {
		return refusing{}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.mu.allocators++
	return &memory{l: l, id: l.mu.allocators, limit: min(limitBytes, l.cp.cfg.MemoryBytes)}
}

// WithMemory returns ctx carrying l.MemoryAllocator(limitBytes) for
// wazero's InstantiateModule.
func (l *Lease) WithMemory(ctx context.Context, limitBytes uint64) context.Context {
	return experimental.WithMemoryAllocator(ctx, l.MemoryAllocator(limitBytes))
}

// Package cellpool owns the node's execution cells: per cell class a fixed
// number of cells created up front and kept at that number by replacing
// quarantined ones, affine leases that hand one cell to one activation, and
// pooled linear memory that wazero uses as the guest's memory and that is
// reset between tenants.
//
// # Leases
//
// Pool.TryLease never waits: ErrNoCell means every usable cell of the class
// is leased (transient; the scheduler decides whether to wait), ErrDepleted
// that every cell is quarantined, ErrClosed that the pool was closed.
// Pool.Lease waits on the same channel of idle cells, which is the class's
// semaphore, until a cell is released or replaced, ctx is done, or the class
// can no longer serve (closed, or depleted while Run is not running); it has
// no fairness of its own.
//
// A *Lease is affine: Release(Reuse or Quarantine) consumes it once; a
// second Release returns ErrLeaseReleased, a zero Lease ErrLeaseInvalid. A
// lease dropped without Release is reclaimed by a runtime.SetFinalizer
// safety net as Quarantine (its cell's state is unknown) and counted in
// ClassStats.LeakedLeases. The allocator handed to wazero points to its
// lease, so a lease whose memory a live module still holds is never
// reclaimed under it.
//
// # Memory lifecycle
//
// Reserve: New maps, per cell, the class's MemoryBytes of address space with
// mmap(PROT_NONE, MAP_PRIVATE|MAP_ANONYMOUS|MAP_NORESERVE): no physical
// memory and no commit charge.
//
// Grow: Lease.MemoryAllocator(limit) (or Lease.WithMemory) is wazero's
// experimental.MemoryAllocator for one activation; the memory's cap is
// min(limit, MemoryBytes). wazero calls Allocate when it instantiates a
// module with a memory, then Reallocate(min) and Reallocate(new size) on each
// memory.grow. Reallocate mprotects only the newly needed pages
// PROT_READ|PROT_WRITE and returns region[:size:size]: the base address never
// changes, nothing is copied, and the slice cannot reach ungranted pages,
// which stay PROT_NONE. The lease records the peak size (MemoryPeak), the
// refusals, and whether wazero called Free.
//
// What wazero v1.12.0 does with the allocator (read in its source, pinned
// by tests):
//   - A nil Reallocate on memory.grow makes MemoryInstance.Grow fail:
//     memory.grow returns -1, there is no trap and no hook. (wazero checks
//     the module's declared maximum before asking, so a refusal from here
//     always means the cap.) Intercept memory.grow to report
//     memory-exhausted precisely; Refusals only tells that it happened.
//   - A nil Reallocate for the initial minimum is not handled:
//     NewMemoryInstance slices the nil result and InstantiateModule panics
//     (slice bounds out of range). Callers check the module's minimum against
//     the cap before instantiating.
//   - Free is called once, when the module instance is closed:
//     api.Module.Close or CloseWithExitCode, Runtime.Close, WASI proc_exit
//     (any code), a failing start function in InstantiateModule (wazero closes
//     the module before returning the error). It is not called when
//     InstantiateModule fails after building the memory but before start
//     functions (an out-of-bounds data segment, a trapping wasm start
//     section): the instance is dropped unclosed; see Lease.AbandonMemory.
//     Free may run while a guest call is still executing on another
//     goroutine, so Free touches nothing; the reset waits for Release.
//
// Reset: Release(Reuse) runs madvise(MADV_DONTNEED) over the granted range,
// which drops the pages of a private anonymous mapping so that they read as
// zero next time; a granted memory of at most 4 pages is zeroed in place
// instead (no syscall, and no page faults when the next guest touches it).
// The pages stay readable and writable up to the highest size the cell ever
// granted (above it they stay PROT_NONE), so a reused cell pays at most one
// madvise per activation and no mprotect until a guest grows past that mark
// (RATIONALE.md says why).
// The next activation starts from zeroed memory at the same address and
// cannot read the previous guest's data: wazero only holds a slice of its
// current size. The cost is proportional to the pages touched, not to
// MemoryBytes.
//
// # Quarantine
//
// A cell leaves service (Stats and Capacity shrink at once; its region is
// unmapped) when its holder asks (Release(Quarantine)), when its lease
// leaked, or when Release(Reuse) finds its state uncertain, which it reports
// as an error marked ErrQuarantined:
//   - mprotect or madvise failed;
//   - wazero reallocated after Free, or freed twice;
//   - memory was handed to wazero (a non-empty slice) and Free was not
//     called: a module instance may still reference the cell. A memory that
//     never got a page, or that the holder declared abandoned after a failed
//     InstantiateModule (Lease.AbandonMemory), does not count;
//   - the disposition was invalid.
//
// Close unmaps idle cells at once and leased ones when they are released; it
// does not wait and does not fail because of outstanding leases.
//
// # Replacement
//
// Don't forget to Run it: New starts nothing, and without Pool.Run a
// quarantined cell stays out of service for good. Run is the pool's driver.
// A quarantine wakes it through a channel (with nothing quarantined it waits
// without a timer); each round it reserves one fresh region per class that
// has a quarantined cell and puts it into service under that cell's index,
// then pauses Config.ReplaceInterval (default 100 ms) before the next round.
// A class thus regains at most one cell per interval, however fast a guest
// gets cells quarantined. A failed reservation (mmap refused) is counted in
// ClassStats.ReplaceFailures and retried after the same pause, never in a
// loop. While Run runs a depleted class is only waiting for its
// replacement: Lease waits for it; when Run returns, waiters on a depleted
// class get ErrDepleted. ClassStats.Replaced counts replacements,
// ClassStats.Quarantined the cells still waiting for one, and Pool.Degraded
// reports a class below its Parallelism (for readiness). The pause is timed
// through Config.Clock, which tests replace.
//
// # Not isolated
//
// Only the linear memory is pooled and reset. wazero's other per-instance
// state (globals, tables, the module instance, the compiler's call stack,
// which can reach ~160 MiB outside the memory cap) lives on the Go heap,
// and host-function state lives wherever the runner keeps it; none of it is
// bounded or reset by this package. Compiled code is shared between cells.
// CPU caches and timing are shared, as in any process.
//
// # Non-goals
//
// Waiting fairness (the scheduler's), growing a class beyond its
// Parallelism, shrinking a memory, memory64 and multiple memories, and crash
// safety for callers that touch a module's memory after Release: below the
// high-water mark that memory is zeroed and may be the next guest's, above
// it PROT_NONE or unmapped; such a caller is a bug the package cannot catch.
// Off Linux a heap-backed fallback keeps the package building, without
// guard pages.
//
// # Internal organization
//
//   - pool.go: Pool, one classPool per configured class, indexed by class;
//     the driver's wake-up channel and clock.
//   - classPool: a buffered channel of idle cells (idle list and semaphore)
//     and, under one mutex, the cells by index, the indices waiting for
//     replacement, a channel closed when the class can no longer serve, and
//     counters. settle takes a cell back.
//   - driver.go: Run, one replacement round, replaceOne.
//   - cell: immutable identity and region.
//   - lease.go: Lease, the affine handle; its mutex guards the activation's
//     memory state (granted bytes, peak, refusals, Free seen, first fault).
//   - memory.go: the allocator handed to wazero and, once its Allocate wins,
//     the activation's LinearMemory. refusing is the allocator of
//     everything else.
//   - region: mmapRegion (region_linux.go: mmap, mprotect, madvise, munmap)
//     or heapRegion (region_other.go).
//
// Locks: a Lease's mutex and a classPool's mutex are never held together
// (Release and the finalizer take one, drop it, then take the other); no
// lock is held across a channel wait.
//
// # Usage
//
//	pool, err := cellpool.New(cellpool.Config{Classes: map[vocab.CellClass]cellpool.ClassConfig{
//		vocab.CellTiny: {Parallelism: 2, MemoryBytes: 16 << 20},
//	}})
//	go func() { errc <- pool.Run(ctx) }() // the node's driver; returns when ctx is done or pool.Close
//	...
//	lease, err := pool.TryLease(vocab.CellTiny) // ErrNoCell: queue and retry
//	...
//	ctx = lease.WithMemory(ctx, grantedBytes)
//	mod, err := rt.InstantiateModule(ctx, compiled, moduleConfig)
//	if err != nil {
//		lease.AbandonMemory() // no instance exists; wazero may not have freed it
//		return lease.Release(cellpool.Reuse)
//	}
//	... call the entry point ...
//	_ = mod.Close(ctx)                   // wazero calls Free
//	peak := lease.MemoryPeak()
//	err = lease.Release(cellpool.Reuse) // ErrQuarantined: the cell was retired
package cellpool

// Package image holds a guest's initialised linear memory as a shared,
// immutable image and gives each module instance a copy-on-write memory over
// it that can be returned to the image between activations. It is the memory
// half of the runner's snapshot instance mode: instantiate and initialise a
// revision once, then start every activation from that state.
//
// # Image
//
// New(data) takes the bytes of a linear memory after the guest's
// initialisation export ran (a multiple of 64 KiB) and copies them into a
// memfd (memfd_create, MFD_CLOEXEC|MFD_ALLOW_SEALING), writing only the OS
// pages that are not all zero (the others stay holes that read as zero), and
// seals it: F_SEAL_SHRINK|F_SEAL_GROW|F_SEAL_WRITE|F_SEAL_SEAL. Nothing can
// change an image afterwards, not even a shared writable mapping of it. The
// image's resident memory is the memfd's page cache, which every memory of
// the image shares: Size reports it (st_blocks of the memfd).
//
// Ownership: the caller of New owns the Image (the runner, per revision) and
// closes it when the revision goes. Close only stops NewMemory: each Memory
// maps the memfd, the kernel keeps the file for as long as a mapping exists,
// and the page cache is freed when the last Memory is closed. So an Image
// may be closed while activations still run on its memories.
//
// # Memory
//
// NewMemory(max) reserves max bytes of address space (PROT_NONE,
// MAP_PRIVATE|MAP_ANONYMOUS|MAP_NORESERVE: no physical memory, no commit
// charge) and maps the memfd over its first Len() bytes MAP_PRIVATE|
// MAP_FIXED, PROT_READ|PROT_WRITE: reads see the image, the first write to
// a page makes a private copy. A *Memory is wazero's allocator for one
// module instance (experimental.WithMemoryAllocator(ctx, m)): the first
// Allocate returns it, later ones a memory that refuses every size.
// Reallocate makes pages beyond the image readable and writable as wazero
// grows the memory (anonymous, zero) and returns the reservation's first
// size bytes; the base address never changes and nothing is copied; beyond
// max it returns nil (memory.grow returns -1).
//
// Attach(mod.Memory()) is called once after InstantiateModule: it grows the
// instance's memory from the module's minimum to the image's length and
// resets it. The reset also undoes the module's data segments, which wazero
// writes at every instantiation and which would otherwise overwrite what
// the initialisation changed in them.
//
// Reset() returns the memory to the image after an activation:
// madvise(MADV_DONTNEED) over the whole reservation handed out drops the
// private pages, so [0, Len()) reads as the image again and any pages beyond
// it as zero. It costs a page-table walk over the range plus a little per
// dirtied page; the next activation takes a minor fault on each page it
// touches (reads map the shared page cache, writes copy). When the guest
// grew the memory beyond the image, Reset still resets everything but
// returns ErrGrown: wazero's length cannot shrink, so the caller replaces the
// instance (a new Memory, a new InstantiateModule, Attach).
//
// Restore() reaches the same state without unmapping: it reads
// /proc/self/pagemap for the image's range, finds the pages the memory
// holds privately (every page any activation wrote) and preads the image's
// bytes back over them from the memfd. Those pages stay mapped and
// writable, so the next activation takes no fault on them; the cost is a
// copy per page ever written (not only since the last reset) and those pages
// stay resident with the instance. Page faults are expensive in the VMs the
// node runs in (6–20 µs each measured on the development machine, against
// about 1 µs to pread a page), so Restore wins as soon as a guest writes
// more than a handful of pages per activation; Reset returns the memory to
// the OS. bench_test.go measures both.
//
// Close unmaps the reservation; while wazero holds the memory (Allocate
// without Free) it refuses with ErrInUse and keeps the mapping, so a live
// module instance can never fault on unmapped memory. After an
// InstantiateModule that failed without closing the instance (wazero then
// never calls Free), the caller calls Free itself and then Close.
//
// # Not restored here
//
// Only linear memory. Reset and Restore must not run while a guest call
// executes on the memory (the caller serialises them with activations).
// Mutable globals (which the fuel rewriter exports as
// __latent_global_<index>), tables, and dropped data or element segments are
// instance state on wazero's side; restoring them, or recreating an instance
// that mutates them, is the runner's job. So are the image's accounting (the
// tenant's snapshot bytes: Size) and charging dirtied pages to activations.
//
// # Non-goals
//
// Exact dirty-page tracking (which pages this activation wrote: soft-dirty
// bits are process-wide, userfaultfd write protection costs a fault per
// page), shrinking a memory, memory64,
// shared memories. Off Linux a heap fallback keeps the package building: each
// memory is a full copy of the image (max bytes allocated), Reset copies the
// image back; no sharing, for development only.
//
// # Internal organization
//
//   - Image (image.go): length, and under a read-write mutex the closed flag
//     and the backing. NewMemory holds it shared, Close exclusively.
//   - Memory (image.go): the allocator contract and, under its mutex, the
//     region, the readable-and-writable prefix, wazero's length, and the
//     Allocate/Free/Close flags.
//   - backing and region: memfdBacking and mmapRegion (image_linux.go:
//     memfd_create, pwrite, fcntl seals, mmap, mprotect, madvise, munmap,
//     pagemap and pread for Restore; each region has its own duplicate of
//     the memfd so the Image can close first), or
//     heapBacking and heapRegion (image_other.go).
//
// # Usage
//
//	// Once per revision, after running the initialisation export on an
//	// ordinary instance:
//	data, _ := initialised.Memory().Read(0, initialised.Memory().Size())
//	img, err := image.New(data) // owner: the revision; copies data
//	...
//	// Per warm instance:
//	mem, err := img.NewMemory(capBytes)
//	mod, err := rt.InstantiateModule(experimental.WithMemoryAllocator(ctx, mem),
//		compiled, cfg.WithStartFunctions()) // no _start, no _initialize
//	if err != nil {
//		mem.Free() // wazero may not have
//		_ = mem.Close()
//	}
//	err = mem.Attach(mod.Memory()) // + restore globals
//	for each activation {
//		... call the entry export ...
//		if _, err := mem.Restore(); err != nil { // or Reset; ErrGrown, or a failed syscall
//			_ = mod.Close(ctx) // wazero calls Free
//			_ = mem.Close()
//			... replace the instance ...
//		}
//		// + restore globals
//	}
package image

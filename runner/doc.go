// Package runner executes one admitted activation in a wazero sandbox,
// metered exactly, and reports a precise outcome.
//
// # Deploy time
//
// Runner implements catalog.ModuleInspector. Inspect validates the original
// module against the deploy limits (Config.Limits, the [deploy_limits]
// keys; a refusal names the key and is marked ErrLimit), instruments it
// for fuel (runner/internal/fuel: an exported i64 fuel global, a slow-path
// `tick` import, a `grow` import replacing memory.grow, a call stack
// budget in bytes, the start function moved to an export), and accepts
// only imports that are functions of its own wasi_snapshot_preview1 host
// module with exactly that function's type, read from the runtime (any
// other import, a non-function one included, is refused with an error
// naming it and, for a type mismatch, both types). It requires the
// wasi-stdio exports (`_start`, `memory`) and reads the memory limits and
// the features used.
//
// Compiles run on a bounded worker: at most Config.CompileConcurrency at a
// time (waiting respects the context), each on a goroutine Inspect waits
// for, which locks its OS thread, lowers the thread's priority (nice 10 on
// Linux) and exits without unlocking, so the thread is discarded; wazero
// compiles with one worker, using the compiler engine and wazero's
// compilation cache (on disk under the node's data directory, so a
// restart loads instead of recompiling). Nothing is compiled at admission
// or execution. CollectCompileCache removes the disk entries of modules the
// runner no longer holds (latent-node gc runs it on a stopped node).
//
// A compile failure is the host's (the instrumenter validated the module):
// a full disk or quota returns ErrStorageFull (wrapping the errno); an
// entry of the disk cache that fails to load is found by checking every
// entry's layout and checksum and removed (all entries, if none can be
// singled out: the cache is disposable), reported to
// Config.OnCacheDiscard, and the module compiled once more; anything else
// is ErrCompileFailed. Error texts never contain host paths.
//
// # Compiled code ownership
//
// A compiled module is kept per digest while it is referenced: each
// successful Inspect hands out one reference, given back with
// ReleaseModule (catalog.ModuleReleaser); Acquire takes one for an
// activation, and Run holds one while it runs. The last release closes the
// module; Inspecting the digest again compiles again, from the cache.
// Inspecting a digest whose module is compiled and referenced takes one
// more reference and returns what the first inspection found, without a
// worker: services sharing a module, inspected one after another at a
// restart, decode, validate and instrument it once. A compile that fails
// or panics (a host fault, catalog.ErrHostFault) keeps nothing, and the
// next Inspect of the digest compiles again. The compiled modules'
// estimated size (CompiledBytesEstimate: 6 × the instrumented bytes +
// 64 KiB, measured) is bounded by Config.MaxCompiledBytes; an Inspect past
// it fails with ErrCompiledCacheFull and keeps nothing.
//
// # Execution
//
// Run first checks that the memory grant holds the initial memory and the
// tables at their largest size (fuel.Info.TableBytes); a smaller grant is
// memory-exhausted without instantiating. It then charges instantiation to
// the fuel budget: one unit per 64 bytes of data segments, one per element
// segment entry, one per table element allocated (the tables' minimums)
// and 1024 per page of initial memory. A budget below that is
// fuel-exhausted without instantiating. Run then instantiates the compiled module on a leased
// cell (whose pooled linear memory wazero uses through
// experimental.WithMemoryAllocator), with stdin = the input, stdout capped
// at MaxOutputBytes, the last 4 KiB of stderr kept, the environment
// LATENT_ACTIVATION_ID and LATENT_REVISION (then, for a WAGI revision, the
// request's CGI environment from Input.Environ), the entrypoint's name as
// the only argument, no preopened directories and no sockets; it sets the
// stack budget, calls the module's start function if it has one, and calls
// the entrypoint. The module configuration is not built per activation
// (each wazero With… call copies it): a pooled binding's configuration
// forwards stdio, sleeps and random_get to the activation bound to it, and
// the runner's own args and environ functions read the activation from the
// call's context.
//
// Fuel: the guest spends its fuel global as it runs and checks it at
// function entries, loop back edges, host calls and the exits of
// functions that ran unchecked code; a check that finds it negative calls
// tick, which checks the run context (the permit's deadline, bound at
// admission, and the caller's cancellation), hands out the next slice of the
// granted budget, and traps with a typed error once the budget cannot cover
// the debt. So fuel, the deadline and Go's GC safe points all come from one
// cheap check, and WithCloseOnContextDone stays off (it costs 3–40× on
// loops). Between two checks the guest runs at most the unchecked code of
// one function body (fuel.Info.MaxDebt), so it may stop owing fuel: after
// every activation, settle hands out slices to cover the debt as tick
// would, and a debt the budget cannot cover makes the outcome
// fuel-exhausted (billed at the budget), as if a check had stopped it. A
// warm instance's global is reset before each activation, so no debt
// reaches the next. Host work is charged too: stdin, stdout, stderr and
// random_get by size (one unit per 64 bytes), each iovec and poll
// subscription a guest names (runner/internal/wasiio, before it is looked
// at), memory growth per
// page, and one unit for each clock read, sleep and yield; sleeps (poll_oneoff) wake when the run
// context is done. Fuel used is exact and deterministic for the same module,
// input, grant and random bytes.
//
// Clocks: realtime is the host's wall clock, monotonic the activation's
// own (MonotonicStart when the runner takes it, then time since), both at
// microsecond resolution: a guest learns neither the node's uptime nor a
// nanosecond timer.
//
// Randomness: random_get reads a ChaCha8 stream seeded on the activation's
// first call. By default the seed is 32 bytes from crypto/rand, so every
// activation reads different bytes (and a guest whose runtime branches on
// them, Go's for one, may use slightly different fuel each time). A
// revision whose manifest says random = "deterministic" (admission passes
// it on in Obligations.Random) is seeded from a hash of its revision id:
// every activation of it reads the same stream, and the same input replays
// exactly, output and fuel.
//
// Memory: the grant covers linear memory, the tables and the call stack
// together. The tables and the compiler's call stack live on the Go heap,
// outside linear memory. wazero allocates 8 bytes per table element (at
// instantiation, and on table.grow); the instrumenter reports the tables'
// largest size (each table's maximum, clamped to
// deploy_limits.table_elements, or that limit when it has none), and the
// runner takes it out of the grant up front. The instrumenter charges each
// call a bound of what its frame costs on the call stack, against the
// module's stack global, which the runner sets after instantiation to the
// grant minus the linear memory minus the tables. A call that finds it
// spent traps (call-depth-exceeded). grow succeeds only if the new pages
// fit in what the stack global has left less a reserve for the stack (an
// eighth of the grant, at most 1 MiB, so a guest that fills its memory
// still has stack to handle the -1), and takes them from it (and from its
// low-water mark); a refusal is recorded, so the outcome says
// memory-exhausted instead of a silent -1. The memory peak reported is the
// grant minus the low-water mark, so it includes the tables. The cell's
// allocator caps the linear memory as well.
//
// # Instance modes
//
// A revision's instance mode (admission.Obligations.Instance) decides what
// an activation runs on. Fresh: the above, a new instance each time (a
// reactor's _initialize, or the revision's init, runs before the route's
// function). Snapshot and reuse run on warm instances kept per tenant and
// revision (warm.go): a snapshot is the module initialised once (at deploy,
// PrepareSnapshot, under Config.InitFuel, InitTimeout and the revision's
// memory ceiling), its memory a sealed copy-on-write image
// (runner/internal/image) and its mutable globals (exported by the
// rewriter) kept; a snapshot instance is put back to it after every
// activation, or recreated from it when it cannot be. A reuse instance
// keeps its state between activations of its revision until it is
// recycled. On Linux its memory is an image.Memory over an empty image:
// address space for the activation's grant reserved once and grown in
// place, off the Go heap, where wazero's own allocator (kept elsewhere)
// copies it at every memory.grow. An instance taken for a larger grant
// than it reserved is replaced.
// DropSnapshots drops the snapshots the catalog says no deployed
// revision uses any more; Close
// closes the idle instances and the images.
//
// # Outcomes
//
// classify orders what the host observed before how the guest stopped:
// deadline-exceeded and cancelled (also when the guest finished, but after
// its deadline), fuel-exhausted, output-exceeded, memory-exhausted, the
// call-depth trap; then success (returning from _start or proc_exit(0)),
// declared-error (proc_exit(n≠0)), a trap by kind (wazero's trap types are
// internal, so they are matched by message; the version is pinned and each
// kind has a fixture). Every error of instantiation is the module's (a
// segment out of bounds): a trap of its kind, or "instantiation". An error
// out of a call that is not a trap (a host function's assertion or Go
// runtime error) is a platform failure, as is a panic anywhere in Run, and
// a platform failure asks the caller to quarantine the cell; Run itself
// never panics. No guest input leads to a platform failure. A WAGI
// revision's success is parsed as a CGI answer (wagi.ParseResponse):
// Outcome.Response, or malformed-response with the reason in
// Outcome.Malformed.
//
// # Non-goals
//
// Run does not lease or release cells, or release permits: the scheduler
// owns both, and keeps the execution permit until the guest stopped and the
// cell was released.
//
// # Internal organization
//
// Runner holds the runtime and the parts below, each a type owning its
// state; its exported methods delegate to them.
//
//   - runner.go: Runner (New, Inspect, Run), Config, Cell, errors; Run's
//     fresh instance mode (the signature ledger: internal/sigledger).
//   - modules.go: moduleTable, the compiled modules by digest and their
//     references (Acquire, ReleaseModule, Prepared), the compiled-bytes
//     bound; acquire.go: AcquireModule, another reference for the catalog
//     without the bytes.
//   - compile.go: compiler, the bounded compile worker, and compile
//     failures (disk cache entries are checked, and corrupt ones
//     discarded, by runner/internal/wazcache);
//     cachegc.go: CollectCompileCache, removing the disk cache entries of
//     modules no longer held (runner/internal/wazcache.Collect: their
//     names derived from each module's instrumented bytes, the naming
//     learned once from a probe compile);
//     prio_*.go: the worker thread's priority.
//   - host.go: the activation state, the fuel host module (tick, grow,
//     depth_exceeded), stdin.
//   - wasi.go: wasi_snapshot_preview1 (wazero's, with args_* and environ_*
//     reading the activation from the call's context and the iovec
//     functions of internal/wasiio on wasiStdio), the import check,
//     and bindingPool: module configurations built once, lent to one
//     activation at a time, whose stdio, sleep and random source forward
//     to it.
//   - warm.go: the snapshot and reuse instance modes: warmPool, which
//     holds the snapshots and the idle warm instances and makes, runs and
//     closes them; PrepareSnapshot, DropSnapshots, WarmStats.
//   - warmidle.go: idleSet, the idle warm instances by revision and in one
//     list by idle time, and their revisions by module, so that an
//     activation's take and put, expiry, eviction and a module's release
//     cost the same however many instances are idle (the pool keeps its
//     snapshots by module as well).
//   - outcome.go: Outcome, Kind, trap kinds, classification.
//   - component.go: the deploy path of a WebAssembly component (the
//     wasi-http ABI): planned, merged into one core module, its imports
//     checked against the wasi-http host; httpguest.go: the seam of the
//     HTTP ABIs (httpGuest: WAGI and wasi-http enter a guest and read its
//     answer) and wasi-http's host environment.
//   - wagi (a package of its own): the WAGI ABI: the CGI environment of a
//     request (wagi.Request.Environ) and the parser of a guest's header
//     block (wagi.ParseResponse), which the node uses too.
//   - internal/fuel: the module rewriter.
//   - internal/image: linear memory over a copy-on-write snapshot image.
//   - internal/wasiio: fd_read, fd_write, fd_pread, fd_pwrite and
//     poll_oneoff over the guest's stdio, every iovec and subscription
//     charged (wasi.go defines them), and the capped stdout and the
//     stderr tail.
//
// Locks: moduleTable.mu, warmPool.mu and sigledger.Ledger's mutex are never
// held together, and none is held while waiting for a compile slot (an
// Inspect holds its slot while it takes the ledger's lock and then the
// table's). The module table closes a module's warm instances, when its
// last reference goes, after releasing its lock; DropSnapshots resolves
// the modules it drops before it takes the pool's; a snapshot's
// initialisation waits for a slot with the pool's lock released.
//
// # Usage
//
//	r, err := runner.New(ctx, runner.Config{CacheDir: filepath.Join(dataDir, "cache")})
//	cat, err := catalog.Open(ctx, catalog.Config{Dir: dataDir, Inspector: r})
//	// per activation, after resolving the revision:
//	hold, ok := r.Acquire(rev.Artifact) // !ok: revision not available
//	defer hold.Release()
//	// after admission and leasing:
//	out := r.Run(ctx, execPermit, lease, input)
//	lease.Release(disposition(out.Quarantine))
//	execPermit.Release()
package runner

// Package runner executes one admitted activation in a wazero sandbox,
// metered exactly, and reports a precise outcome.
//
// # Deploy time
//
// Runner implements catalog.ModuleInspector. Inspect validates the original
// module, instruments it for fuel (runner/internal/fuel: an exported i64
// fuel global, a slow-path `tick` import, a `grow` import replacing
// memory.grow, a call-depth bound), refuses any import outside
// wasi_snapshot_preview1 with an error naming it, requires the wasi-stdio
// exports (`_start`, `memory`), reads the memory limits and the features
// used, and compiles the instrumented module once per artifact with the
// compiler engine and wazero's compilation cache (on disk under the node's
// data directory, so a restart loads instead of recompiling). Nothing is
// compiled at admission or execution.
//
// # Execution
//
// Run instantiates the compiled module on a leased cell (whose pooled linear
// memory wazero uses through experimental.WithMemoryAllocator), with stdin =
// the input, stdout capped at MaxOutputBytes, the last 4 KiB of stderr kept,
// the environment LATENT_ACTIVATION_ID and LATENT_REVISION only, the
// entrypoint's name as the only argument, no preopened directories and no
// sockets, and calls the entrypoint. The module configuration is not built
// per activation (each wazero With… call copies it): a pooled binding's
// configuration forwards stdio, sleeps and random_get to the activation
// bound to it, and the runner's own args and environ functions read the
// activation from the call's context.
//
// Fuel: the guest spends its fuel global; when it goes negative it calls
// tick, which checks the run context (the permit's deadline, bound at
// admission, and the caller's cancellation), hands out the next slice of the
// granted budget, and traps with a typed error once the budget cannot cover
// the debt. So fuel, the deadline and Go's GC safe points all come from one
// cheap check, and WithCloseOnContextDone stays off (it costs 3–40× on
// loops). Host work is charged too: stdin, stdout and random_get by size
// (one unit per 64 bytes), memory growth per page, and one unit for each
// clock read, sleep and yield; sleeps (poll_oneoff) wake when the run
// context is done. Fuel used is exact and deterministic for the same module,
// input and grant.
//
// Memory: grow enforces the granted pages and records a refusal, so the
// outcome says memory-exhausted instead of a silent -1; the cell's allocator
// caps the memory as well.
//
// # Outcomes
//
// classify orders what the host observed before how the guest stopped:
// deadline-exceeded and cancelled (also when the guest finished, but after
// its deadline), fuel-exhausted, output-exceeded, memory-exhausted, the
// call-depth trap; then success (returning from _start or proc_exit(0)),
// declared-error (proc_exit(n≠0)), a trap by kind (wazero's trap types are
// internal, so they are matched by message; the version is pinned and each
// kind has a fixture), and anything else is a platform failure. A panic
// anywhere in Run is a platform failure, and a platform failure asks the
// caller to quarantine the cell; Run itself never panics.
//
// # Non-goals
//
// Run does not lease or release cells, or release permits: the scheduler
// owns both, and keeps the execution permit until the guest stopped and the
// cell was released. The compiler's native stack is outside linear memory;
// the call-depth bound and fuel keep it finite.
//
// # Internal organization
//
//   - runner.go: Runner (New, Inspect, Run), Config, Cell.
//   - host.go: the activation state, the fuel host module (tick, grow,
//     depth_exceeded), the capped and tail writers, stdin.
//   - wasi.go: wasi_snapshot_preview1 (wazero's, with args_* and environ_*
//     reading the activation from the call's context) and bindings: module
//     configurations built once, lent to one activation at a time, whose
//     stdio, sleep and random source forward to it.
//   - outcome.go: Outcome, Kind, trap kinds, classification.
//   - internal/fuel: the module rewriter.
//
// # Usage
//
//	r, err := runner.New(ctx, runner.Config{CacheDir: filepath.Join(dataDir, "cache")})
//	cat, err := catalog.Open(ctx, catalog.Options{Dir: dataDir, Inspector: r})
//	// per activation, after admission and leasing:
//	out := r.Run(ctx, execPermit, lease, input)
//	lease.Release(disposition(out.Quarantine))
//	execPermit.Release()
package runner

// Package loadsource owns the node's pressure observations: a Sampler actor
// that measures CPU and memory pressure and the shared State that admission
// reads on its hot path to refuse work with `node-overloaded` before the node
// drowns. No sample ever comes from request metadata.
//
// # What pressure means
//
// Preferably, pressure is Linux pressure stall information (PSI): the share
// of wall time in which runnable work waited for a CPU, or stalled on memory
// (PSISource, from the node's cgroup v2 cpu.pressure and memory.pressure, or
// host-wide from /proc/pressure). A node that keeps every CPU busy with its own
// guests, with no queue, reads near 0: it is working, not overloaded. It reads
// high only when work queues for CPUs, whoever queued it. Host-wide CPU "some"
// is the kernel's average over CPUs, so on 2 CPUs one task waiting on one CPU
// while the other has none reads about 0.5.
//
// Without PSI (an older kernel, or PSI disabled at boot) pressure is
// utilization: the busy share of CPU time and the used share of memory, of the
// whole host (HostSource) or relative to the cgroup's limits (CgroupSource).
// Utilization reads 1.0 on a node saturated by its own guests, so its CPU
// threshold refuses work a PSI threshold would accept. Detect picks the source;
// Describe says which one it picked (for readiness, metrics and the startup
// log), because thresholds mean different things for the two.
//
// PSI memory pressure measures stalls, not occupancy: it stays near 0 while
// memory fills and rises once the kernel has to reclaim. Running out of memory
// before that is the memory grants' concern, not this package's.
//
// # Fail closed
//
// State.Read(now) returns a sample only when it can be trusted at now. It
// returns an error that matches ErrUnavailable under errors.Is and carries
// a stable reason (Reason), when the sample is
//
//   - missing: nothing was ever published (load-sample-missing);
//   - malformed: the latest publish had a NaN, infinite or out-of-[0,1]
//     pressure or a zero time (load-sample-malformed);
//   - out of order: the latest publish was not strictly later than the last
//     accepted sample; equal times count (load-sample-out-of-order);
//   - future-dated: TakenAt > now + FutureTolerance (5ms); TakenAt equal to
//     now + FutureTolerance is read (load-sample-future);
//   - stale: now − TakenAt > maxAge; an age of exactly maxAge is fresh, as
//     "older than max_observation_age" reads (load-sample-stale).
//
// Error messages and reasons never contain load numbers, times or paths:
// admission forwards the reason to callers. Read is an atomic pointer load
// and two comparisons; it takes now from the caller (admission's injected
// clock) and never allocates.
//
// A refused publish poisons the State: reads fail until a later valid sample
// is accepted. Merely ignoring it would keep serving the previous sample, and
// hide the fault until that sample went stale. A malformed sample means the
// producer is broken; an out-of-order one means two producers or a clock that
// went backwards, and then no sample of that producer can be trusted either.
// Failing at once makes the fault visible (readiness, metrics, `unavailable`
// rejections) while a single, healthy sampler recovers at its next tick. A
// refused sample never moves the ordering watermark, so a refused bogus
// timestamp cannot lock out the honest producer. (An accepted sample dated far
// ahead does: reads fail as future-dated and later honest samples are out of
// order until time passes it. That is still fail-closed, and a sampler
// stamping with time.Now cannot produce it.)
//
// # Non-goals
//
// This is not a monitoring system: no history, no percentiles, no export
// beyond Snapshot and SamplerStats. Sampling is not an atomic transaction
// with hardware pressure: pressure that rises after a sample is the
// scheduler's and the runner's concern (adaptive concurrency, fuel, deadlines).
// Detect reads the cgroup directory it is given; it does not resolve the
// process's own cgroup from /proc/self/cgroup, so outside a container with a
// private cgroup namespace it falls back to host-wide pressure.
//
// # Internal organization
//
//   - Sample: one observation (CPU and memory pressure in [0,1], TakenAt).
//   - State (state.go): an atomic.Pointer to an immutable record (the last
//     accepted sample and the poison, if any). Publish replaces it with a
//     compare-and-swap loop, so concurrent publishers are judged against
//     each other's results; counters are atomics. Snapshot reads it for
//     metrics.
//   - Errors (errors.go): ErrUnavailable, one sentinel per case, Reason;
//     ErrSourceMalformed for a Source that read a malformed file.
//   - Source (source.go): the measuring interface, Describer and the Kind
//     constants, FixedSource, and Detect, which tries in order the cgroup's
//     PSI, the host's PSI, the cgroup's limits and the host's utilization.
//     PSISource (psi.go) parses the PSI files strictly and divides the growth
//     of the cumulative "some" stall time by the wall time between two calls;
//     its first call returns the kernel's 10-second averages. HostSource
//     (host.go) uses gopsutil's cumulative CPU times and 1 − Available/Total
//     for memory; CgroupSource (cgroup.go) divides usage by the cgroup's
//     limits. The two utilization sources need two CPU readings: their first
//     call waits a short baseline.
//   - Sampler (sampler.go): the actor. Run samples at once and then on a
//     time.Ticker, stamps TakenAt with its Clock when the Source returns,
//     and publishes. A Source error or panic publishes nothing (the State
//     then fails closed by age) and is counted.
//
// Real time enters only on the sampling side: the Sampler's ticker, the
// utilization sources' baseline timer, and systemClock (sampler.go), the
// default Clock of the Sampler, PSISource and CgroupSource and the package's
// one call to time.Now. State never reads a clock.
//
// # Usage
//
//	src := loadsource.Detect(loadsource.DetectConfig{})
//	log.Info("load source", "kind", loadsource.Describe(src))
//	state := loadsource.NewState(cfg.Overload.MaxObservationAge)
//	sampler, err := loadsource.NewSampler(loadsource.SamplerConfig{
//		State:    state,
//		Source:   src,
//		Interval: cfg.Overload.SampleInterval,
//	})
//	if err != nil {
//		return err
//	}
//	// Don't forget to Run it (cmd/latent-node: one g.Add per actor).
//	ctx, cancel := context.WithCancel(context.Background())
//	g.Add(func() error { return sampler.Run(ctx) }, func(error) { cancel() })
//
//	// In admission, with its own clock:
//	sample, err := state.Read(clock.Now())
//	if err != nil {
//		return unavailable(loadsource.Reason(err)) // fail closed
//	}
//	if sample.CPU >= cpuThreshold || sample.Memory >= memoryThreshold {
//		return nodeOverloaded()
//	}
package loadsource

// Package loadsource owns the node's pressure observations: a Sampler actor
// that measures CPU and memory pressure (host-wide with gopsutil, or relative
// to the cgroup v2 limits memory.max and cpu.max in a container) and the
// shared State that admission reads on its hot path to refuse work with
// `node-overloaded` before the node drowns. No sample ever comes from request
// metadata.
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
// CgroupSource reads the directory it is given; it does not resolve the
// process's own cgroup from /proc/self/cgroup, so outside a container with a
// private cgroup namespace DetectSource falls back to host-wide pressure.
//
// # Internal organization
//
//   - Sample: one observation (CPU and memory pressure in [0,1], TakenAt).
//   - State (state.go): an atomic.Pointer to an immutable record (the last
//     accepted sample and the poison, if any). Publish replaces it with a
//     compare-and-swap loop, so concurrent publishers are judged against
//     each other's results; counters are atomics. Snapshot reads it for
//     metrics.
//   - Errors (errors.go): ErrUnavailable, one sentinel per case, Reason.
//   - Source (source.go): the measuring interface. HostSource (host.go) uses
//     gopsutil's cumulative CPU times and 1 − Available/Total for memory;
//     CgroupSource (cgroup.go) divides usage by the cgroup's limits.
//     DetectSource picks CgroupSource when the cgroup v2 files are there.
//     A CPU source needs two readings: its first call waits a short baseline.
//   - Sampler (sampler.go): the actor. Run samples at once and then on a
//     time.Ticker, stamps TakenAt with its Clock when the Source returns,
//     and publishes. A Source error or panic publishes nothing (the State
//     then fails closed by age) and is counted.
//
// Real time enters only on the sampling side: the Sampler's ticker, the
// sources' baseline timer, and systemClock (sampler.go), the default Clock of
// the Sampler and CgroupSource and the package's one call to time.Now. State
// never reads a clock.
//
// # Usage
//
//	state := loadsource.NewState(cfg.Overload.MaxObservationAge)
//	sampler, err := loadsource.NewSampler(loadsource.SamplerConfig{
//		State:    state,
//		Source:   loadsource.DetectSource(""),
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

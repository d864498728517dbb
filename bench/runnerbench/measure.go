package main

// Timing: the rounds of a series of activations, their percentiles, and
// throughput from several goroutines.

import (
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/latent-node/latent-node/bench/internal/stats"
)

// op is one activation; it fails on a wrong outcome.
type op func() error

// series is one engine's measurements of one case: each round runs Iters
// activations back to back after a GC; ns/op and Go heap allocation per op
// are recorded per round.
type series struct {
	Iters         int       `json:"iters_per_round"`
	RoundsNsPerOp []float64 `json:"rounds_ns_per_op"`
	MedianNsPerOp float64   `json:"median_ns_per_op"`
	// MinNsPerOp is the fastest round: background load only ever adds time.
	MinNsPerOp float64 `json:"min_ns_per_op"`
	// CPU time of the whole process (GC workers included) per activation:
	// unlike wall time, it does not count time other processes took the CPU.
	RoundsCPUNsPerOp []float64 `json:"rounds_cpu_ns_per_op,omitempty"`
	MedianCPUNsPerOp float64   `json:"median_cpu_ns_per_op,omitempty"`
	RoundsBytes      []float64 `json:"-"`
	RoundsAllocs     []float64 `json:"-"`
	AllocBytesOp     float64   `json:"alloc_bytes_per_op,omitempty"`
	AllocsPerOp      float64   `json:"allocs_per_op,omitempty"`
	// Per activation (each timed on its own): the 50th and 90th
	// percentile of each round, and their medians over rounds.
	RoundsP50Ns []float64 `json:"rounds_p50_ns,omitempty"`
	RoundsP90Ns []float64 `json:"rounds_p90_ns,omitempty"`
	MedianP50Ns float64   `json:"median_p50_ns,omitempty"`
	MedianP90Ns float64   `json:"median_p90_ns,omitempty"`
	// Minor page faults of the whole process per activation (getrusage):
	// a warm path that touches fresh pages pays for each (about 11 µs on
	// a VM whose faults are slow).
	RoundsMinorFaults []float64 `json:"rounds_minor_faults_per_op,omitempty"`
	MinorFaultsPerOp  float64   `json:"minor_faults_per_op"`

	activationFunc op
	samples        []time.Duration // one round's activations, reused
}

// calibrate runs f for warmup (at least three times) and sizes a round to
// last about round.
func calibrate(f op, warmup, round time.Duration) (*series, error) {
	n, t0 := 0, time.Now()
	for time.Since(t0) < warmup || n < 3 {
		if err := f(); err != nil {
			return nil, err
		}
		n++
	}
	perOp := max(time.Since(t0)/time.Duration(n), 1)
	return &series{Iters: max(1, int(round/perOp)), activationFunc: f}, nil
}

// round times one round.
func (s *series) round() error {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	if cap(s.samples) < s.Iters {
		s.samples = make([]time.Duration, s.Iters)
	}
	samples := s.samples[:s.Iters]
	flt0, cpu0, t0 := minorFaults(), cpuTime(), time.Now()
	last := t0
	for i := range samples {
		if err := s.activationFunc(); err != nil {
			return err
		}
		now := time.Now()
		samples[i], last = now.Sub(last), now
	}
	elapsed, cpu, faults := last.Sub(t0), cpuTime()-cpu0, minorFaults()-flt0
	runtime.ReadMemStats(&after)
	n := float64(s.Iters)
	s.RoundsNsPerOp = append(s.RoundsNsPerOp, float64(elapsed.Nanoseconds())/n)
	if cpu > 0 {
		s.RoundsCPUNsPerOp = append(s.RoundsCPUNsPerOp, float64(cpu.Nanoseconds())/n)
	}
	s.RoundsMinorFaults = append(s.RoundsMinorFaults, float64(faults)/n)
	s.RoundsBytes = append(s.RoundsBytes, float64(after.TotalAlloc-before.TotalAlloc)/n)
	s.RoundsAllocs = append(s.RoundsAllocs, float64(after.Mallocs-before.Mallocs)/n)
	slices.Sort(samples)
	s.RoundsP50Ns = append(s.RoundsP50Ns, float64(percentile(samples, 50)))
	s.RoundsP90Ns = append(s.RoundsP90Ns, float64(percentile(samples, 90)))
	return nil
}

// percentile is the p-th percentile (nearest rank) of sorted, not empty.
func percentile(sorted []time.Duration, p int) time.Duration {
	i := (len(sorted)*p + 99) / 100 // the rank, 1-based
	return sorted[max(i, 1)-1]
}

func (s *series) finish() {
	s.MedianNsPerOp = median(s.RoundsNsPerOp)
	s.MedianCPUNsPerOp = median(s.RoundsCPUNsPerOp)
	if len(s.RoundsNsPerOp) > 0 {
		s.MinNsPerOp = slices.Min(s.RoundsNsPerOp)
	}
	s.AllocBytesOp = median(s.RoundsBytes)
	s.AllocsPerOp = median(s.RoundsAllocs)
	s.MedianP50Ns = median(s.RoundsP50Ns)
	s.MedianP90Ns = median(s.RoundsP90Ns)
	s.MinorFaultsPerOp = median(s.RoundsMinorFaults)
	s.samples = nil
}

// median is the benchmarks' shared one.
var median = stats.Median

// throughput is activations per second from Workers goroutines under
// GOMAXPROCS, one figure per round.
type throughput struct {
	Workers          int       `json:"workers"`
	GOMAXPROCS       int       `json:"gomaxprocs"`
	RoundsPerSecond  []float64 `json:"rounds_activations_per_second"`
	MedianPerSecond  float64   `json:"median_activations_per_second"`
	RoundsBytesPerOp []float64 `json:"-"`
	AllocBytesPerOp  float64   `json:"alloc_bytes_per_op,omitempty"`
}

func (t *throughput) finish() {
	t.MedianPerSecond = median(t.RoundsPerSecond)
	t.AllocBytesPerOp = median(t.RoundsBytesPerOp)
}

// parallel runs f from t.Workers goroutines under GOMAXPROCS=t.GOMAXPROCS
// for d and records one round.
func (t *throughput) round(d time.Duration, f op) error {
	prev := runtime.GOMAXPROCS(t.GOMAXPROCS)
	defer runtime.GOMAXPROCS(prev)
	var (
		count         atomic.Int64
		stop          atomic.Bool
		wg            sync.WaitGroup
		errOnce       sync.Once
		firstErr      error
		before, after runtime.MemStats
	)
	runtime.GC()
	runtime.ReadMemStats(&before)
	t0 := time.Now()
	for w := 0; w < t.Workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				if err := f(); err != nil {
					errOnce.Do(func() { firstErr = err })
					return
				}
				count.Add(1)
			}
		}()
	}
	time.Sleep(d)
	stop.Store(true)
	wg.Wait()
	secs := time.Since(t0).Seconds()
	runtime.ReadMemStats(&after)
	if firstErr != nil {
		return firstErr
	}
	n := max(count.Load(), 1)
	t.RoundsPerSecond = append(t.RoundsPerSecond, float64(n)/secs)
	t.RoundsBytesPerOp = append(t.RoundsBytesPerOp, float64(after.TotalAlloc-before.TotalAlloc)/float64(n))
	return nil
}

// pairs times two activations back to back, pair after pair, in alternating
// order, and keeps each pair's ratio a ÷ b. The two halves of a pair run
// milliseconds apart, so background load that lasts longer than a pair
// slows both alike; a series' rounds run hundreds of milliseconds apart, so
// a burst of load can slow one engine's round and not the other's, which
// moves a ratio of round medians by ±10 % here.
type pairs struct {
	Numerator   string    `json:"numerator"`
	Denominator string    `json:"denominator"`
	PerRound    int       `json:"pairs_per_round"`
	Ratios      []float64 `json:"ratios"`
	Median      float64   `json:"median_ratio"`
	a, b        op
}

// newPairs sizes a round of pairs of a and b to last about round.
func newPairs(num, den string, a, b op, aNs, bNs float64, round time.Duration) *pairs {
	n := int(float64(round.Nanoseconds()) / max(aNs+bNs, 1))
	return &pairs{Numerator: num, Denominator: den, PerRound: max(2, n), a: a, b: b}
}

// round times one round of pairs.
func (p *pairs) round() error {
	for i := range p.PerRound {
		first, second := p.a, p.b
		if i%2 == 1 {
			first, second = p.b, p.a
		}
		t0 := time.Now()
		if err := first(); err != nil {
			return err
		}
		t1 := time.Now()
		if err := second(); err != nil {
			return err
		}
		da, db := t1.Sub(t0), time.Since(t1)
		if i%2 == 1 {
			da, db = db, da
		}
		p.Ratios = append(p.Ratios, float64(da)/float64(max(db, 1)))
	}
	return nil
}

func (p *pairs) finish() { p.Median = median(p.Ratios) }

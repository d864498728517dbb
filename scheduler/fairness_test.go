package scheduler

import (
	"math"
	"strconv"
	"testing"
	"time"

	"github.com/latent-node/latent-node/vocab"
)

// The fairness bars the scheduler must meet (equal tenants, the max-min
// oracle, cost awareness, the noisy neighbour), each against a negative
// control that must fail them: the FIFO scheduler of sim_test.go and, for
// cost, round-robin.

const simP = 8 // cells

const noisyExec = 50 * time.Millisecond // mean service time in the noisy-neighbour runs

func tenantName(i int) vocab.TenantID { return vocab.TenantID("t" + strconv.Itoa(i)) }

// equalFigures runs 8 equal-weight tenants with outstanding[i] activations
// each and returns the run's Jain index and the smallest 1s-window Jain
// index, both over CPU time (every tenant's max-min fair share is 1/8).
func equalFigures(t *testing.T, sched simSched, outstanding []int) (run, worstWindow float64) {
	var loads []workload
	for i, n := range outstanding {
		loads = append(loads, workload{tenant: tenantName(i), principals: 2, closed: n,
			exec: 20 * time.Millisecond, jitter: 0.5})
	}
	res := runSim(simSpec{sched: sched, limits: []int{1 << 20}, loads: loads,
		warmup: 2 * time.Second, duration: scale(60 * time.Second), seed: 1})
	run = jain(durations(res.cpu))
	worstWindow = 1
	for _, w := range res.windowCPU {
		worstWindow = math.Min(worstWindow, jain(durations(w)))
	}
	return run, worstWindow
}

func durations(ds []time.Duration) []float64 {
	xs := make([]float64, len(ds))
	for i, d := range ds {
		xs[i] = float64(d)
	}
	return xs
}

func fifo(p int) *fifoSched { return &fifoSched{p: p, maxWait: 10 * time.Second} }

// TestSim_equalTenants: 8 equal tenants, each at 4× its share (closed loop,
// 4 outstanding on 8 cells; 20 ms ± 50 % activations), must get Jain ≥ 0.999 over the run and ≥ 0.99
// in every 1s window. With unequal demands (4×…32× the share) the bar is the
// same; FIFO, which serves in proportion to outstanding work, fails that one.
func TestSim_equalTenants(t *testing.T) {
	t.Parallel() // a simulation: no goroutines, runs beside the others
	equal := []int{4, 4, 4, 4, 4, 4, 4, 4}
	unequal := []int{4, 8, 12, 16, 20, 24, 28, 32}
	for _, tc := range []struct {
		name        string
		outstanding []int
	}{{"4x", equal}, {"4x-32x", unequal}} {
		t.Run(tc.name, func(t *testing.T) {
			run, win := equalFigures(t, newSimCore(t, simConfig(simP, FairnessFuel, 1<<20)), tc.outstanding)
			t.Logf("fuel: Jain run %.6f, worst window %.6f", run, win)
			if run < 0.999 || win < 0.99 {
				t.Errorf("fair scheduler: Jain run %.5f (want ≥ 0.999), worst window %.5f (want ≥ 0.99)", run, win)
			}
			frun, fwin := equalFigures(t, fifo(simP), tc.outstanding)
			t.Logf("FIFO: Jain run %.6f, worst window %.6f", frun, fwin)
			if tc.name == "4x-32x" && frun >= 0.999 && fwin >= 0.99 {
				t.Errorf("negative control: FIFO passed (Jain run %.5f, worst window %.5f)", frun, fwin)
			}
		})
	}
}

// oracleErrors runs three tenants demanding 10 %, 30 % and 200 % of capacity
// (open loop, Poisson) and returns each one's relative error against the
// max-min fair allocation of the offered work.
func oracleErrors(t *testing.T, sched simSched) (errs, achieved, oracle []float64) {
	const exec = 50 * time.Millisecond
	perSec := float64(simP) / exec.Seconds() // capacity in activations per second
	demand := []float64{0.1, 0.3, 2.0}
	var loads []workload
	for i, d := range demand {
		loads = append(loads, workload{tenant: tenantName(i), rate: d * perSec, exec: exec, jitter: 0.5})
	}
	span := scale(120 * time.Second)
	res := runSim(simSpec{sched: sched, limits: []int{64}, loads: loads, warmup: 2 * time.Second, duration: span, seed: 2})
	capacity := float64(simP) * float64(span)
	offered := make([]float64, len(demand))
	achieved = make([]float64, len(demand))
	for i := range demand {
		offered[i] = float64(res.offered[i]) / capacity
		achieved[i] = float64(res.cpu[i]) / capacity
	}
	oracle = fairAlloc(offered, 1)
	for i := range demand {
		errs = append(errs, (achieved[i]-oracle[i])/oracle[i])
	}
	return errs, achieved, oracle
}

// TestSim_maxMinOracle: demands of 10 %, 30 % and 200 % of capacity each get
// their max-min fair allocation within ±3 %; FIFO must not.
func TestSim_maxMinOracle(t *testing.T) {
	t.Parallel() // a simulation: no goroutines, runs beside the others
	check := func(name string, sched simSched) bool {
		errs, achieved, oracle := oracleErrors(t, sched)
		ok := true
		for i, e := range errs {
			t.Logf("%s: tenant %d achieved %.4f oracle %.4f error %+.2f%%", name, i, achieved[i], oracle[i], 100*e)
			ok = ok && math.Abs(e) <= 0.03
		}
		return ok
	}
	if !check("fuel", newSimCore(t, simConfig(simP, FairnessFuel, 64))) {
		t.Error("fair scheduler: an allocation is off the max-min fair oracle by more than 3%")
	}
	if check("FIFO", fifo(simP)) {
		t.Error("negative control: FIFO met the max-min fair oracle")
	}
}

// costJain runs two backlogged tenants whose activations take 1 ms and 10 ms
// (fuel in proportion) and returns the Jain index of their CPU shares.
func costJain(t *testing.T, sched simSched) (float64, []time.Duration) {
	loads := []workload{
		{tenant: "cheap", closed: 8, exec: time.Millisecond, jitter: 0.2},
		{tenant: "costly", closed: 8, exec: 10 * time.Millisecond, jitter: 0.2},
	}
	res := runSim(simSpec{sched: sched, limits: []int{1 << 20}, loads: loads, warmup: time.Second,
		duration: scale(30 * time.Second), seed: 3})
	return jain(durations(res.cpu)), res.cpu
}

// TestSim_costAware: with 1 ms and 10 ms activations, fuel mode gives CPU
// shares with Jain ≥ 0.98; round-robin (by count) and FIFO must not.
func TestSim_costAware(t *testing.T) {
	t.Parallel() // a simulation: no goroutines, runs beside the others
	const p = 4
	fuel, cpu := costJain(t, newSimCore(t, simConfig(p, FairnessFuel, 1<<20)))
	t.Logf("fuel: CPU-share Jain %.6f (cpu %v)", fuel, cpu)
	if fuel < 0.98 {
		t.Errorf("fuel mode: CPU-share Jain %.5f, want ≥ 0.98", fuel)
	}
	rr, cpu := costJain(t, newSimCore(t, simConfig(p, FairnessRoundRobin, 1<<20)))
	t.Logf("round-robin: CPU-share Jain %.5f (cpu %v)", rr, cpu)
	if rr >= 0.98 {
		t.Errorf("negative control: round-robin reached CPU-share Jain %.5f", rr)
	}
	ff, cpu := costJain(t, fifo(p))
	t.Logf("FIFO: CPU-share Jain %.5f (cpu %v)", ff, cpu)
	if ff >= 0.98 {
		t.Errorf("negative control: FIFO reached CPU-share Jain %.5f", ff)
	}
}

// noisyFigures runs a quiet tenant (Poisson, 10 % of capacity) alone and
// beside a noisy one (Poisson, 10× capacity) and returns the quiet tenant's
// refusals (refused, evicted or expired), its goodput relative to solo and
// its queue-wait p99.
func noisyFigures(t *testing.T, mk func() simSched) (rejected int, goodput float64, p99 time.Duration) {
	const exec = noisyExec
	perSec := float64(simP) / exec.Seconds()
	quiet := workload{tenant: "quiet", rate: 0.1 * perSec, exec: exec, jitter: 0.2}
	noisy := workload{tenant: "noisy", rate: 10 * perSec, exec: exec, jitter: 0.2}
	span := scale(60 * time.Second)
	// Each load draws from its own generator: the quiet arrivals are the same
	// in both runs.
	solo := runSim(simSpec{sched: mk(), limits: []int{64}, loads: []workload{quiet}, warmup: time.Second, duration: span, seed: 4})
	both := runSim(simSpec{sched: mk(), limits: []int{64}, loads: []workload{quiet, noisy}, warmup: time.Second, duration: span, seed: 4})
	rejected = both.refused[0] + both.evicted[0] + both.expired[0]
	goodput = float64(both.done[0]) / float64(solo.done[0])
	return rejected, goodput, percentile(both.waits[0], 0.99)
}

// TestSim_noisyNeighbour: beside a tenant at 10× capacity, a quiet tenant at
// 10 % has no refusals, ≥ 99 % of its solo goodput and a queue-wait p99 of
// at most 1.5 service times. FIFO must fail.
func TestSim_noisyNeighbour(t *testing.T) {
	t.Parallel() // a simulation: no goroutines, runs beside the others
	const exec = noisyExec
	check := func(name string, mk func() simSched) bool {
		rej, good, p99 := noisyFigures(t, mk)
		t.Logf("%s: quiet refusals %d, goodput %.4f of solo, queue-wait p99 %v (%.2f service times)",
			name, rej, good, p99, float64(p99)/float64(exec))
		return rej == 0 && good >= 0.99 && p99 <= exec*3/2
	}
	if !check("fuel", func() simSched { return newSimCore(t, simConfig(simP, FairnessFuel, 64)) }) {
		t.Error("fair scheduler failed the noisy-neighbour bar")
	}
	if check("FIFO", func() simSched { return fifo(simP) }) {
		t.Error("negative control: FIFO passed the noisy-neighbour bar")
	}
}

package scheduler

import (
	"testing"
	"time"
)

// The adaptive window in the simulation: 8 cells, a closed-loop tenant with
// 64 activations outstanding (always saturated), activations of 40 ms and
// 40·10⁶ fuel, so the service time is 1 ms per 1M fuel; the target is 2 ms
// per 1M fuel; intervals of 1 s, ticks of 10 ms. Host contention, where
// modelled, has 3.3 cores for 8 cells: service per fuel is multiplied by
// max(1, running/3.3), so windows above 6 miss the target.

const (
	adaptExec     = 40 * time.Millisecond
	adaptInterval = time.Second
	adaptTarget   = 2 * time.Millisecond
)

type windowTrace struct {
	at     []time.Duration
	window []int
	perMF  []float64 // ns per 1M fuel
}

func adaptiveRun(t *testing.T, span, tick time.Duration, jitter float64, plain bool,
	slowdown func(time.Duration, int) float64) (*Core, windowTrace) {
	t.Helper()
	cfg := simConfig(simP, FairnessFuel, 1<<20)
	cfg.CellClasses[simCell] = CellConfig{Parallelism: simP, TargetServiceTime: adaptTarget}
	cfg.AdjustInterval = adaptInterval
	c := newSimCore(t, cfg)
	c.plainAIMD = plain
	var tr windowTrace
	cs := c.cells[simCell]
	runSim(simSpec{sched: c, limits: []int{1 << 20}, seed: 5, duration: span, tick: tick,
		loads:    []workload{{tenant: "t", closed: 64, exec: adaptExec, jitter: jitter}},
		slowdown: slowdown,
		onTick: func(now time.Duration) {
			tr.at = append(tr.at, now)
			tr.window = append(tr.window, cs.window)
			tr.perMF = append(tr.perMF, cs.perMFuel())
		}})
	return c, tr
}

// step slows service 4× in [from, to).
func step(from, to time.Duration) func(time.Duration, int) float64 {
	return func(now time.Duration, _ int) float64 {
		if now >= from && now < to {
			return 4
		}
		return 1
	}
}

// stepFigures returns, for a step in [from, to): the delay from the first
// tick whose average is above target to the first cut, and the number of
// adjustment intervals after the step until the window is back within 1 of,
// and at, its pre-step value.
func stepFigures(t *testing.T, tr windowTrace, from, to time.Duration) (cutDelay time.Duration, within1, full int) {
	t.Helper()
	pre, cross, cut := -1, time.Duration(-1), time.Duration(-1)
	within1, full = -1, -1
	for i, at := range tr.at {
		if at < from {
			pre = tr.window[i]
			continue
		}
		if cross < 0 && tr.perMF[i] > float64(adaptTarget) {
			cross = at
		}
		if cut < 0 && tr.window[i] < pre {
			cut = at
		}
		if at >= to {
			n := int((at - to + adaptInterval - 1) / adaptInterval)
			if within1 < 0 && tr.window[i] >= pre-1 {
				within1 = n
			}
			if full < 0 && tr.window[i] >= pre {
				full = n
			}
		}
	}
	if pre != simP || cross < 0 || cut < 0 {
		t.Fatalf("pre-step window %d, crossed at %v, cut at %v", pre, cross, cut)
	}
	return cut - cross, within1, full
}

// TestAdaptive_step: a step from S to 4S per fuel cuts the window at the
// first adjustment after the average crossed the target; after a one-interval
// step the window is back within 3 intervals; after a five-interval step it
// is within 1 of its pre-step value within 10 intervals, growing by at most
// one per interval.
func TestAdaptive_step(t *testing.T) {
	t.Parallel() // a simulation: no goroutines, runs beside the others
	tests := []struct {
		name     string
		from, to time.Duration
		maxFull  int // intervals after the step until back at the pre-step window
		max1     int // … until within 1 of it
	}{
		{"one-interval", 10500 * time.Millisecond, 11500 * time.Millisecond, 3, 3},
		{"five-intervals", 10500 * time.Millisecond, 15500 * time.Millisecond, 10, 10},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, tr := adaptiveRun(t, 40*time.Second, 10*time.Millisecond, 0.3, false, step(tc.from, tc.to))
			cutDelay, within1, full := stepFigures(t, tr, tc.from, tc.to)
			t.Logf("cut %v after the average crossed the target; back within 1 after %d intervals, fully after %d",
				cutDelay, within1, full)
			if cutDelay > adaptInterval {
				t.Errorf("cut %v after crossing the target, want within one interval", cutDelay)
			}
			if within1 < 0 || within1 > tc.max1 || full < 0 || full > tc.maxFull {
				t.Errorf("recovery: within 1 after %d intervals (want ≤ %d), fully after %d (want ≤ %d)",
					within1, tc.max1, full, tc.maxFull)
			}
			for i := 1; i < len(tr.window); i++ {
				if tr.window[i] > tr.window[i-1]+1 {
					t.Fatalf("window grew from %d to %d at %v", tr.window[i-1], tr.window[i], tr.at[i])
				}
			}
		})
	}
}

// changesPer10 counts window changes per 10 intervals in the trace from skip on.
func changesPer10(tr windowTrace, skip time.Duration) float64 {
	changes, first := 0, -1
	for i := 1; i < len(tr.at); i++ {
		if tr.at[i] < skip {
			continue
		}
		if first < 0 {
			first = i
		}
		if tr.window[i] != tr.window[i-1] {
			changes++
		}
	}
	span := tr.at[len(tr.at)-1] - tr.at[first]
	return float64(changes) / (float64(span) / float64(10*adaptInterval))
}

// TestAdaptive_constantLoad: at constant load the window changes at most once
// per 10 intervals. Two loads: service times with ±30 % noise around half
// the target (the window stays put), and host contention (4 cores for 8
// cells: service per fuel grows with running/4, so windows above 6 miss the
// target). Under contention plain AIMD saws (the negative control); the
// probe back-off keeps it under the bar.
func TestAdaptive_constantLoad(t *testing.T) {
	t.Parallel() // a simulation: no goroutines, runs beside the others
	span := scale(600 * time.Second)
	contention := func(_ time.Duration, running int) float64 { return max(1, float64(running)/3.3) }
	tests := []struct {
		name     string
		slowdown func(time.Duration, int) float64
		plain    bool
		wantPass bool
	}{
		{"noise", nil, false, true},
		{"contention", contention, false, true},
		{"contention-plain-AIMD", contention, true, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, tr := adaptiveRun(t, span, 100*time.Millisecond, 0.3, tc.plain, tc.slowdown)
			rate := changesPer10(tr, 0)
			late := changesPer10(tr, span/2)
			st := c.cells[simCell]
			t.Logf("%d changes in %v: %.2f per 10 intervals (second half %.2f); final window %d",
				st.changes, span, rate, late, st.window)
			if pass := rate <= 1; pass != tc.wantPass {
				t.Errorf("%.2f changes per 10 intervals; want ≤ 1: %v", rate, tc.wantPass)
			}
		})
	}
}

// TestAdaptive_contentionTarget checks the contention model's premise: the
// largest healthy window is 6 (the back-off should hold it there).
func TestAdaptive_contentionTarget(t *testing.T) {
	c, tr := adaptiveRun(t, 120*time.Second, 100*time.Millisecond, 0, false,
		func(_ time.Duration, running int) float64 { return max(1, float64(running)/3.3) })
	at6, n := 0, 0
	for i, w := range tr.window {
		if tr.at[i] > 30*time.Second {
			n++
			if w == 6 {
				at6++
			}
		}
	}
	frac := float64(at6) / float64(n)
	t.Logf("window at 6 for %.0f%% of the ticks after 30s; changes %d", 100*frac, c.cells[simCell].changes)
	if frac < 0.5 {
		t.Errorf("window at 6 for only %.0f%% of the time", 100*frac)
	}
}

// TestAdaptive_disabled: a zero target keeps the window at the usable cells.
func TestAdaptive_disabled(t *testing.T) {
	c := newSimCore(t, simConfig(simP, FairnessFuel, 1<<20))
	runSim(simSpec{sched: c, limits: []int{1 << 20}, seed: 6, duration: 20 * time.Second,
		loads:    []workload{{tenant: "t", closed: 64, exec: 5 * time.Millisecond}},
		slowdown: step(5*time.Second, 15*time.Second)})
	if w := c.cells[simCell].window; w != simP || c.cells[simCell].changes != 0 {
		t.Errorf("window %d after %d changes, want %d and 0", w, c.cells[simCell].changes, simP)
	}
}

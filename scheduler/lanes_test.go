package scheduler

import (
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/latent-node/latent-node/vocab"
)

// laneOracle watches dispatches from outside the core and measures, per
// queue class, the run of consecutive higher-class dispatches onto shared
// cells while the class had waiting work (the lane bound). It keeps its own
// running counts to tell reserved from shared dispatches.
type laneOracle struct {
	cfg       Config
	c         *Core
	running   []int // per queue class
	streak    []int // per queue class
	allStreak []int // runs counting reserved dispatches too
	maxStreak int
	maxAll    int
}

func newLaneOracle(cfg Config, c *Core) *laneOracle {
	n := len(cfg.QueueClasses)
	return &laneOracle{cfg: cfg, c: c, running: make([]int, n), streak: make([]int, n), allStreak: make([]int, n)}
}

// higher reports whether queue class a has a higher priority than b.
func (o *laneOracle) higher(a, b int) bool {
	return o.cfg.QueueClasses[a].MaxPriority > o.cfg.QueueClasses[b].MaxPriority
}

// dispatched records a dispatch of queue class q (waiting counts taken
// before the dispatch).
func (o *laneOracle) dispatched(q int, waitingBefore []int) {
	shared := o.running[q] >= o.cfg.QueueClasses[q].ReservedCells
	o.running[q]++
	for r := range o.streak {
		switch {
		case r == q || waitingBefore[r] == 0:
			o.streak[r], o.allStreak[r] = 0, 0
		case o.higher(q, r):
			o.allStreak[r]++
			o.maxAll = max(o.maxAll, o.allStreak[r])
			if shared {
				o.streak[r]++
				o.maxStreak = max(o.maxStreak, o.streak[r])
			}
		}
	}
}

// settle resets the runs of classes with nothing waiting.
func (o *laneOracle) settle() {
	for r := range o.streak {
		if o.c.Waiting(simCell, r) == 0 {
			o.streak[r], o.allStreak[r] = 0, 0
		}
	}
}

// randomLaneConfig draws 2–4 queue classes with shuffled priority ranges,
// 1–5 cells, random reservations and LowerClassAfter in 1..8.
func randomLaneConfig(rng *rand.Rand) Config {
	n := 2 + rng.IntN(3)
	p := 1 + rng.IntN(5)
	cfg := Config{CellClasses: map[vocab.CellClass]CellConfig{simCell: {Parallelism: p}},
		MaxWait: time.Second, LowerClassAfter: 1 + rng.IntN(8), AdjustInterval: time.Second}
	prios := rng.Perm(n)
	budget := p - 1 // leave one shared cell
	for i := range n {
		r := 0
		if budget > 0 && rng.IntN(3) == 0 {
			r = 1 + rng.IntN(budget)
			budget -= r
		}
		cfg.QueueClasses = append(cfg.QueueClasses, QueueConfig{Name: "q" + strconv.Itoa(i),
			MinPriority: uint32(prios[i]), MaxPriority: uint32(prios[i]), MaxQueued: 64, ReservedCells: r})
	}
	return cfg
}

// laneCase is a random configuration and a core built from it, reused by
// many schedules (reset between them: every item drained or completed, so
// the lanes start empty).
type laneCase struct {
	cfg      Config
	c        *Core
	reserved int
}

// laneRun is the scratch state of the schedules, reused to keep 10⁶ of them fast.
type laneRun struct {
	items            []Item
	running, waiting []*Item
	waitingBefore    []int
}

// laneSchedule runs one random schedule of ops operations on lc's core and
// returns the oracle's figures and the number of dispatches.
func laneSchedule(t *testing.T, rng *rand.Rand, lc *laneCase, r *laneRun, ops int) (maxStreak, maxAll, dispatches int) {
	c, cfg := lc.c, lc.cfg
	o := newLaneOracle(cfg, c)
	cs := c.cells[simCell]
	cs.window = cs.usable
	now := c.now
	r.items = r.items[:0]
	if cap(r.items) < ops {
		r.items = make([]Item, 0, ops)
	}
	r.running, r.waiting = r.running[:0], r.waiting[:0]
	r.waitingBefore = append(r.waitingBefore[:0], make([]int, len(cfg.QueueClasses))...)
	for range ops {
		switch op := rng.IntN(16); {
		case op < 7: // arrivals
			r.items = append(r.items, Item{Tenant: tenantNames[rng.IntN(3)], Principal: principalNames[rng.IntN(2)],
				Cell: simCell, Queue: rng.IntN(len(cfg.QueueClasses))})
			it := &r.items[len(r.items)-1]
			if err := c.Enqueue(now, it); err != nil {
				t.Fatal(err)
			}
			r.waiting = append(r.waiting, it)
		case op < 11: // dispatch until the core says no
			for {
				for q := range r.waitingBefore {
					r.waitingBefore[q] = c.Waiting(simCell, q)
				}
				it, ok := c.Next(now, simCell)
				if !ok {
					break
				}
				dispatches++
				o.dispatched(it.Queue, r.waitingBefore)
				r.running = append(r.running, it)
			}
		case op < 14 && len(r.running) > 0: // completions (or a failed lease, an abort)
			i := rng.IntN(len(r.running))
			it := r.running[i]
			r.running[i] = r.running[len(r.running)-1]
			r.running = r.running[:len(r.running)-1]
			o.running[it.Queue]--
			switch rng.IntN(8) {
			case 0:
				if err := c.Requeue(it); err != nil {
					t.Fatal(err)
				}
			case 1:
				if err := c.Abort(it); err != nil {
					t.Fatal(err)
				}
			default:
				if err := c.Done(now, it, uint64(1+rng.IntN(1000)), time.Millisecond); err != nil {
					t.Fatal(err)
				}
			}
		case op == 14 && len(r.waiting) > 0: // a caller goes away
			c.Remove(r.waiting[rng.IntN(len(r.waiting))])
		default: // time passes; the window moves
			now = now.Add(time.Duration(rng.IntN(300)) * time.Millisecond)
			c.Expire(now)
			cs.window = cs.minWindow() + rng.IntN(cs.usable-cs.minWindow()+1)
		}
		o.settle()
	}
	c.Drain()
	for _, it := range r.running {
		if err := c.Abort(it); err != nil {
			t.Fatal(err)
		}
	}
	if cs.running != 0 || cs.waiting != 0 || cs.sharedInUse() != 0 {
		t.Fatalf("core not empty after a schedule: running %d waiting %d", cs.running, cs.waiting)
	}
	return o.maxStreak, o.maxAll, dispatches
}

var (
	tenantNames    = []vocab.TenantID{"t0", "t1", "t2"}
	principalNames = []string{"p0", "p1"}
)

// TestLanes_bound: over many random schedules (fresh core each: random
// classes, priorities, reservations, cells, bound K, and a random mix of
// arrivals, dispatch rounds, completions, failed leases, aborts, removals,
// expiry and window moves), no queue class with waiting work ever sees more
// than K consecutive higher-class dispatches onto shared cells — nor, when
// nothing is reserved, any dispatches at all.
func TestLanes_bound(t *testing.T) {
	t.Parallel() // a simulation: no goroutines, runs beside the others
	const ops, configs = 12, 256
	schedules := 1_000_000
	if testing.Short() || raceEnabled {
		schedules = 100_000 // the race detector makes this ten times slower
	}
	rng := rand.New(rand.NewPCG(7, 7))
	cases := make([]laneCase, configs)
	for i := range cases {
		cfg := randomLaneConfig(rng)
		c, err := NewCore(cfg)
		if err != nil {
			t.Fatal(err)
		}
		cases[i] = laneCase{cfg: c.cfg, c: c}
		for _, q := range cfg.QueueClasses {
			cases[i].reserved += q.ReservedCells
		}
	}
	var scratch laneRun
	worst, worstAll, total, atBound := 0, 0, 0, 0
	for range schedules {
		lc := &cases[rng.IntN(configs)]
		m, all, d := laneSchedule(t, rng, lc, &scratch, ops)
		total += d
		k := lc.cfg.LowerClassAfter
		if m > k || (lc.reserved == 0 && all > k) {
			t.Fatalf("a lower class saw %d (all: %d) consecutive higher-class dispatches, bound %d; config %+v", m, all, k, lc.cfg)
		}
		worst = max(worst, m-k)
		if lc.reserved == 0 {
			worstAll = max(worstAll, all-k)
		}
		if m == k {
			atBound++
		}
	}
	t.Logf("%d schedules of %d operations (%d configurations), %d dispatches; %d schedules reached the bound; "+
		"worst run minus bound: %d (configurations without reserved cells, counting every dispatch: %d)",
		schedules, ops, configs, total, atBound, worst, worstAll)
}

// TestLanes_reachesBound: the bound is tight. With K = 8 and one cell, a
// lower class waiting under a flood of higher-class work is served exactly
// after every 8 higher-class dispatches.
func TestLanes_reachesBound(t *testing.T) {
	cfg := Config{CellClasses: map[vocab.CellClass]CellConfig{simCell: {Parallelism: 1}},
		QueueClasses: []QueueConfig{{Name: "data", MinPriority: 0, MaxPriority: 4, MaxQueued: 1000},
			{Name: "control", MinPriority: 5, MaxPriority: 9, MaxQueued: 1000}},
		MaxWait: time.Hour}
	c := newSimCore(t, cfg)
	for i := range 100 {
		mustEnqueue(t, c, &Item{Tenant: "t", Principal: "p", Cell: simCell, Queue: 1})
		if i < 5 {
			mustEnqueue(t, c, &Item{Tenant: "t", Principal: "p", Cell: simCell, Queue: 0})
		}
	}
	var order []byte
	for range 50 {
		it, ok := c.Next(simEpoch, simCell)
		if !ok {
			t.Fatal("nothing to dispatch")
		}
		order = append(order, "dc"[it.Queue])
		if err := c.Done(simEpoch, it, 1, time.Millisecond); err != nil {
			t.Fatal(err)
		}
	}
	want := "ccccccccd" + "ccccccccd" + "ccccccccd" + "ccccccccd" + "ccccccccd" + "ccccc"
	if string(order) != want {
		t.Errorf("order\nhave %s\nwant %s", order, want)
	}
}

func mustEnqueue(t testing.TB, c *Core, it *Item) {
	t.Helper()
	if err := c.Enqueue(simEpoch, it); err != nil {
		t.Fatal(err)
	}
}

package scheduler

import (
	"context"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/latent-node/latent-node/admission"
	"github.com/latent-node/latent-node/loadsource"
	"github.com/latent-node/latent-node/vocab"
)

// TestCore_overtaken: only a newcomer the fair queue puts first overtakes a
// running item, and only when a cell is free for it. A script is
// space-separated steps: "+t" enqueues an item of tenant t (principal t;
// "+t.q" principal q), named t1, t2, … per tenant; "run" dispatches (Next
// must return something); "done:x" completes x with fuel 1; "x?" and "x!"
// expect Overtaken(x) false and true.
func TestCore_overtaken(t *testing.T) {
	for _, tt := range []struct {
		name   string
		cells  int
		script string
	}{
		{"a newcomer overtakes", 2, "+n +n +n run n1? +q n1!"},
		{"a newcomer is dispatched next", 2, "+n +n run +q n1! run n2?"},
		{"tenants backlogged before the dispatch do not", 2, "+n +m +n +m run n1? run m1? done:n1 run n2? done:m1 run m2?"},
		{"a tenant flooding next to another never overtakes it", 3, "+n +n +m +m run run n1? m1? done:n1 run n2? m1?"},
		{"no free cell", 1, "+n +n run +q n1?"},
		{"a tenant with an item running", 3, "+q +q run +n run q1? n1? done:q1 n1?"},
		{"a newcomer of the running tenant", 2, "+n.a run +n.b n1?"},
		{"only the latest dispatch is overtaken", 3, "+n +n +n run run +q n1? n2!"},
		{"the overtaking item runs: nothing else newer", 3, "+n +n run +q run n1? +r n1! q1!"},
		{"a requeued item is not a newcomer", 3, "+n +m run run requeue:m1 n1?"},
	} {
		for _, mode := range []string{FairnessFuel, FairnessRoundRobin} {
			t.Run(tt.name+"/"+mode, func(t *testing.T) {
				c := newSimCore(t, simConfig(tt.cells, mode, 16))
				items, count := map[string]*Item{}, map[string]int{}
				for _, step := range strings.Fields(tt.script) {
					switch {
					case strings.HasPrefix(step, "+"):
						tenant, principal, ok := strings.Cut(step[1:], ".")
						if !ok {
							principal = tenant
						}
						count[tenant]++
						it := &Item{Tenant: vocab.TenantID(tenant), Principal: principal, Cell: simCell,
							Payload: tenant + strconv.Itoa(count[tenant])}
						mustEnqueue(t, c, it)
						items[it.Payload.(string)] = it
					case step == "run":
						if _, ok := c.Next(simEpoch, simCell); !ok {
							t.Fatalf("%s: nothing dispatched", step)
						}
					case strings.HasPrefix(step, "requeue:"):
						if err := c.Requeue(items[step[8:]]); err != nil {
							t.Fatalf("%s: %v", step, err)
						}
					case strings.HasPrefix(step, "done:"):
						if err := c.Done(simEpoch, items[step[5:]], 1, time.Millisecond); err != nil {
							t.Fatalf("%s: %v", step, err)
						}
					default:
						name, want := step[:len(step)-1], step[len(step)-1] == '!'
						it := items[name]
						if it == nil {
							t.Fatalf("%s: no item %s", step, name)
						}
						if have := c.Overtaken(it); have != want {
							t.Errorf("after %q: Overtaken(%s) = %v, want %v", tt.script[:strings.Index(tt.script, step)+len(step)], name, have, want)
						}
					}
				}
			})
		}
	}
}

// TestCore_overtakingStaysInLane: the newcomer dispatched for a pause is
// the one of the overtaken item's lane, even when a higher queue class
// has work waiting (which Next would choose).
func TestCore_overtakingStaysInLane(t *testing.T) {
	cfg := simConfig(4, FairnessFuel, 16)
	cfg.QueueClasses = []QueueConfig{{Name: "low", MinPriority: 0, MaxPriority: 4, MaxQueued: 16},
		{Name: "high", MinPriority: 5, MaxPriority: 9, MaxQueued: 16}}
	c := newSimCore(t, cfg)
	j := &Item{Tenant: "n", Principal: "n", Cell: simCell, Queue: 0}
	mustEnqueue(t, c, j)
	if it, _ := c.Next(simEpoch, simCell); it != j {
		t.Fatal("j not dispatched")
	}
	b := &Item{Tenant: "h", Principal: "h", Cell: simCell, Queue: 1}
	q := &Item{Tenant: "q", Principal: "q", Cell: simCell, Queue: 0}
	mustEnqueue(t, c, b)
	mustEnqueue(t, c, q)
	if !c.Overtaken(j) {
		t.Fatal("q does not overtake j")
	}
	if it, ok := c.NextOvertaking(simEpoch, j); !ok || it != q {
		t.Errorf("NextOvertaking dispatched %v (ok %v), want q of j's lane", it, ok)
	}
	if it, _ := c.Next(simEpoch, simCell); it != b {
		t.Errorf("Next dispatched %v, want b", it)
	}
}

// TestCore_overtakerRemembered: a tenant whose item overtook a running one
// and went idle ahead of the virtual time starts its next item from its
// attained service, so the overtaken tenant goes first at the next
// dispatch (one item each, not two to one); a tenant that never overtook
// is forgotten and starts at the virtual time (the negative control).
func TestCore_overtakerRemembered(t *testing.T) {
	for _, overtake := range []bool{true, false} {
		c := newSimCore(t, simConfig(2, FairnessFuel, 16))
		n1 := &Item{Tenant: "n", Principal: "n", Cell: simCell}
		n2 := &Item{Tenant: "n", Principal: "n", Cell: simCell}
		mustEnqueue(t, c, n1)
		mustEnqueue(t, c, n2)
		if it, _ := c.Next(simEpoch, simCell); it != n1 {
			t.Fatal("n1 not dispatched first")
		}
		q1 := &Item{Tenant: "q", Principal: "q", Cell: simCell}
		mustEnqueue(t, c, q1)
		var it *Item
		if overtake {
			it, _ = c.NextOvertaking(simEpoch, n1)
		} else {
			it, _ = c.Next(simEpoch, simCell)
		}
		if it != q1 {
			t.Fatal("q1 not dispatched")
		}
		if err := c.Done(simEpoch, q1, 1, time.Millisecond); err != nil {
			t.Fatal(err)
		}
		if err := c.Done(simEpoch, n1, 1, time.Millisecond); err != nil {
			t.Fatal(err)
		}
		q2 := &Item{Tenant: "q", Principal: "q", Cell: simCell}
		mustEnqueue(t, c, q2)
		it, _ = c.Next(simEpoch, simCell)
		if want := map[bool]*Item{true: n2, false: q2}[overtake]; it != want {
			t.Errorf("overtook=%v: dispatched %s/%d, want %s", overtake, it.Tenant, it.seq, want.Tenant)
		}
	}
}

// TestScheduler_pause: with MaxRunning 1, a running job that calls Pause
// while a newcomer of another tenant waits gives its slot to it: the
// newcomer runs and finishes while the paused job waits, then the paused
// job resumes before the backlog behind it. Without a newcomer, or with
// MaxRunning 0, Pause returns at once. The negative control (no Pause)
// runs the newcomer only after the running job. Pause returns how long
// the job was paused, the newcomer's run, which is its result's Paused.
func TestScheduler_pause(t *testing.T) {
	const carolTakes = 7 * time.Millisecond
	for _, pause := range []bool{true, false} {
		t.Run("pause="+strconv.FormatBool(pause), func(t *testing.T) {
			defer goleak.VerifyNone(t)
			events := make(chan string, 64)
			atSafePoint := make(chan struct{})
			var paused time.Duration
			var e *env
			e = newEnv(t, execFunc(func(ctx context.Context, job *testJob, _ *admission.ExecutionPermit, _ Cell) testCompletion {
				name := job.Input()
				events <- "start " + name
				switch name {
				case "alice":
					<-atSafePoint // the test queued the newcomer
					if pause {
						paused = e.s.Pause(ctx, job)
					}
				case "carol":
					e.clock.Advance(carolTakes)
				}
				events <- "end " + name
				return testCompletion{FuelUsed: 1}
			}), envOptions{parallelism: 4, mutate: func(_ *Config, d *testDeps) { d.MaxRunning = 1 }})
			e.run()
			first := e.submit(context.Background(), "acme", "alice", 0)
			if got := <-events; got != "start alice" {
				t.Fatalf("first event %q", got)
			}
			// The jobs' inputs are their subjects.
			backlog := e.submit(context.Background(), "acme", "bob", 0)
			quiet := e.submit(context.Background(), "beta", "carol", 0)
			close(atSafePoint)
			var order []string
			for range 5 {
				order = append(order, <-events)
			}
			results := map[*testJob]testResult{}
			for _, j := range []*testJob{first, backlog, quiet} {
				if results[j] = result(t, j); results[j].Err != nil {
					t.Fatalf("job: %v", results[j].Err)
				}
			}
			if want := map[bool]time.Duration{true: carolTakes}[pause]; paused != want || results[first].Paused != want {
				t.Errorf("Pause returned %v, the result's Paused is %v, want %v", paused, results[first].Paused, want)
			}
			want := "start carol,end carol,end alice,start bob,end bob"
			if !pause {
				want = "end alice,start carol,end carol,start bob,end bob"
			}
			// bob, of alice's tenant, waits behind carol, the newcomer,
			// either way, and behind alice, who resumes first.
			if have := strings.Join(order, ","); have != want {
				t.Errorf("order %s, want %s", have, want)
			}
			if n, want := e.s.Stats().Pauses, map[bool]uint64{true: 1, false: 0}[pause]; n != want {
				t.Errorf("Stats().Pauses = %d, want %d", n, want)
			}
			e.stop()
		})
	}
}

// TestScheduler_pauseCancelled: a paused job whose caller goes away stops
// waiting for a slot (its guest then sees the cancellation), and the
// scheduler ends with nothing held.
func TestScheduler_pauseCancelled(t *testing.T) {
	defer goleak.VerifyNone(t)
	aliceRuns, carolRuns, carolGo := make(chan struct{}), make(chan struct{}), make(chan struct{})
	paused := make(chan time.Duration, 1)
	var e *env
	e = newEnv(t, execFunc(func(ctx context.Context, job *testJob, _ *admission.ExecutionPermit, _ Cell) testCompletion {
		switch job.Input() {
		case "alice":
			close(aliceRuns)
			for e.s.Stats().Cells[0].Waiting == 0 { // carol arrives
				runtime.Gosched()
			}
			e.s.Pause(ctx, job)
			paused <- 0
			return testCompletion{FuelUsed: 1, Outcome: outcome{err: context.Cause(ctx)}}
		case "carol":
			close(carolRuns)
			<-carolGo
		}
		return testCompletion{FuelUsed: 1}
	}), envOptions{parallelism: 4, mutate: func(_ *Config, d *testDeps) { d.MaxRunning = 1 }})
	e.run()
	ctx, cancel := context.WithCancel(context.Background())
	first := e.submit(ctx, "acme", "alice", 0)
	<-aliceRuns // carol is a newcomer: she arrives after alice started
	quiet := e.submit(context.Background(), "beta", "carol", 0)
	<-carolRuns // alice paused for carol
	select {
	case <-paused:
		close(carolGo)
		t.Fatal("Pause returned while carol held the slot")
	default:
	}
	cancel()
	<-paused
	if r := result(t, first); r.Completion.Outcome.err == nil {
		t.Errorf("alice's executor did not see the cancellation: %+v", r)
	}
	close(carolGo)
	if r := result(t, quiet); r.Err != nil {
		t.Fatal(r.Err)
	}
	e.stop()
}

// TestScheduler_pauseHammer: jobs of both tenants, submitted concurrently,
// call Pause at several safe points. Guests that are not paused never
// outnumber MaxRunning, every job gets its result, and nothing is held
// afterwards.
func TestScheduler_pauseHammer(t *testing.T) {
	defer goleak.VerifyNone(t)
	const maxRunning = 2
	var active, peak atomic.Int64
	note := func(d int64) {
		n := active.Add(d)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
	}
	var e *env
	e = newEnv(t, execFunc(func(ctx context.Context, job *testJob, _ *admission.ExecutionPermit, _ Cell) testCompletion {
		note(1)
		for range 4 {
			runtime.Gosched()
			note(-1) // a paused guest does not run
			e.s.Pause(ctx, job)
			note(1)
		}
		note(-1)
		return testCompletion{FuelUsed: 10}
	}), envOptions{maxQueued: 64, parallelism: 8, mutate: func(c *Config, d *testDeps) {
		d.MaxRunning = maxRunning
		d.Clock = vocab.WallClock
	}})
	if err := e.load.Publish(loadsource.Sample{TakenAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	e.run()
	who := [][2]string{{"acme", "alice"}, {"acme", "bob"}, {"beta", "carol"}}
	// Rounds until some jobs paused (most rounds have several), at most 20.
	for round := 0; round < 20 && e.s.Stats().Pauses == 0; round++ {
		var wg sync.WaitGroup
		for i := range 6 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 20 {
					w := who[i%len(who)]
					if r := e.do(context.Background(), vocab.TenantID(w[0]), w[1]); r.Err != nil {
						t.Errorf("%s: %v", w[1], r.Err)
					}
				}
			}()
		}
		wg.Wait()
	}
	if p := peak.Load(); p > maxRunning {
		t.Errorf("%d guests ran at once, MaxRunning %d", p, maxRunning)
	}
	if e.s.Stats().Pauses == 0 {
		t.Error("no job paused in 20 rounds: the test proves nothing")
	}
	e.stop()
}

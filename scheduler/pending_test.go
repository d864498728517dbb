package scheduler

import (
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/latent-node/latent-node/vocab"
)

// pendingModel is a naive reference of the pending slots: per queue class,
// each principal's waiting items in enqueue order.
type pendingModel struct {
	limit   []int
	holders []map[holderKey][]*Item
}

func (m *pendingModel) add(it *Item) {
	k := holderKey{it.Tenant, it.Principal}
	h := m.holders[it.Queue]
	h[k] = append(h[k], it)
	slices.SortFunc(h[k], func(a, b *Item) int { return int(a.seq) - int(b.seq) })
}

func (m *pendingModel) remove(it *Item) {
	k := holderKey{it.Tenant, it.Principal}
	h := m.holders[it.Queue]
	i := slices.Index(h[k], it)
	if i < 0 {
		panic("model: item not waiting")
	}
	h[k] = slices.Delete(h[k], i, i+1)
	if len(h[k]) == 0 {
		delete(h, k)
	}
}

func (m *pendingModel) waiting(q int) int {
	n := 0
	for _, items := range m.holders[q] {
		n += len(items)
	}
	return n
}

// expectVictim applies the rule literally: share = limit / n with n the
// waiting principals counting the arrival; if the arrival holds fewer than
// its share, the newest waiter of the principal holding the most (ties: the
// newest waiter), if that principal holds more than its share.
func (m *pendingModel) expectVictim(q int, arrival holderKey) (*Item, float64) {
	h := m.holders[q]
	n := len(h)
	if _, ok := h[arrival]; !ok {
		n++
	}
	share := float64(m.limit[q]) / float64(n)
	if float64(len(h[arrival])) >= share {
		return nil, share
	}
	var best []*Item
	for _, items := range h {
		if best == nil || len(items) > len(best) ||
			(len(items) == len(best) && items[len(items)-1].seq > best[len(best)-1].seq) {
			best = items
		}
	}
	if best == nil || float64(len(best)) <= share {
		return nil, share
	}
	return best[len(best)-1], share
}

// TestPending_property drives a core with random operations — arrivals from
// a flooder and bursty principals through an admission stand-in that
// enforces MaxQueued = 64 and calls YieldSlotTo when full, dispatch rounds
// (some ending in a failed lease), completions, cancellations, and time in ticks with Expire —
// and checks against the reference: the victim is exactly the newest waiter
// of the largest over-share holder, never a principal at or under its
// share; nothing waits past MaxWait plus one tick; the core's holdings
// match the reference.
func TestPending_property(t *testing.T) {
	t.Parallel() // a simulation: no goroutines, runs beside the others
	const (
		limit   = 64
		maxWait = 2 * time.Second
		tick    = 100 * time.Millisecond
	)
	runs, ops := 10, 100_000
	if testing.Short() || raceEnabled {
		runs = 1
	}
	var evictions, refusals, expiries, dispatches int
	var worstWait time.Duration
	for run := range runs {
		rng := rand.New(rand.NewPCG(uint64(run), 11))
		cfg := Config{
			CellClasses: map[vocab.CellClass]CellConfig{vocab.CellSmall: {Parallelism: 2}, vocab.CellStandard: {Parallelism: 3}},
			QueueClasses: []QueueConfig{{Name: "batch", MinPriority: 0, MaxPriority: 4, MaxQueued: limit},
				{Name: "interactive", MinPriority: 5, MaxPriority: 9, MaxQueued: limit / 4, ReservedCells: 1}},
			MaxWait: maxWait,
		}
		c := newSimCore(t, cfg)
		m := &pendingModel{limit: []int{limit, limit / 4}, holders: []map[holderKey][]*Item{{}, {}}}
		now, nextTick := simEpoch, simEpoch.Add(tick)
		var running []*Item
		cells := []vocab.CellClass{vocab.CellSmall, vocab.CellStandard}
		for range ops {
			switch op := rng.IntN(20); {
			case op < 12: // an arrival; principal 0 of tenant 0 floods
				p := 0
				if rng.IntN(2) == 0 {
					p = rng.IntN(12)
				}
				it := &Item{Tenant: tenantName(p % 3), Principal: "p" + strconv.Itoa(p), Cell: cells[rng.IntN(2)],
					Queue: rng.IntN(2)}
				if m.waiting(it.Queue) >= m.limit[it.Queue] {
					key := holderKey{it.Tenant, it.Principal}
					want, share := m.expectVictim(it.Queue, key)
					victim, ok := c.YieldSlotTo(now, it.Queue, it.Tenant, it.Principal)
					if ok != (want != nil) || victim != want {
						t.Fatalf("YieldSlotTo: have %v %v, want %v", victim, ok, want)
					}
					if !ok {
						refusals++
						continue
					}
					held := len(m.holders[it.Queue][holderKey{victim.Tenant, victim.Principal}])
					if float64(held) <= share {
						t.Fatalf("evicted a principal holding %d ≤ its share %.2f", held, share)
					}
					m.remove(victim)
					evictions++
				}
				mustEnqueueAt(t, c, now, it)
				m.add(it)
			case op < 15: // a dispatch round on one cell class
				cell := cells[rng.IntN(2)]
				for {
					it, ok := c.Next(now, cell)
					if !ok {
						break
					}
					if w := now.Sub(it.EnqueuedAt); w > maxWait+tick {
						t.Fatalf("dispatched after waiting %v", w)
					}
					if rng.IntN(10) == 0 { // no cell to lease: back it goes, the round ends
						if err := c.Requeue(it); err != nil {
							t.Fatal(err)
						}
						break
					}
					m.remove(it)
					running = append(running, it)
					dispatches++
				}
			case op < 18 && len(running) > 0: // a completion
				i := rng.IntN(len(running))
				it := running[i]
				running = slices.Delete(running, i, i+1)
				if err := c.Done(now, it, 1000, time.Millisecond); err != nil {
					t.Fatal(err)
				}
			case op == 18: // a caller goes away
				for _, h := range m.holders[rng.IntN(2)] {
					it := h[rng.IntN(len(h))]
					if !c.Remove(it) {
						t.Fatal("Remove of a waiting item failed")
					}
					m.remove(it)
					break
				}
			default: // time passes, tick by tick
				until := now.Add(time.Duration(rng.IntN(300)) * time.Millisecond)
				for !nextTick.After(until) {
					now = nextTick
					for _, it := range c.Expire(now) {
						w := now.Sub(it.EnqueuedAt)
						if w < maxWait || w > maxWait+tick {
							t.Fatalf("expired after %v (max wait %v, tick %v)", w, maxWait, tick)
						}
						worstWait = max(worstWait, w)
						m.remove(it)
						expiries++
					}
					nextTick = nextTick.Add(tick)
				}
				now = until
			}
			for q := range 2 {
				for k, items := range m.holders[q] {
					if held, _ := c.Holding(q, k.tenant, k.principal); held != len(items) {
						t.Fatalf("core holds %d for %v, reference %d", held, k, len(items))
					}
				}
				if _, n := c.Holding(q, "", ""); n != len(m.holders[q]) {
					t.Fatalf("core has %d holders, reference %d", n, len(m.holders[q]))
				}
			}
		}
	}
	t.Logf("%d runs of %d operations: %d evictions, %d refusals, %d expiries (longest wait %v ≤ %v + %v), %d dispatches",
		runs, ops, evictions, refusals, expiries, worstWait, maxWait, tick, dispatches)
	if evictions == 0 || refusals == 0 || expiries == 0 {
		t.Error("the operations did not exercise eviction, refusal and expiry")
	}
}

func mustEnqueueAt(t testing.TB, c *Core, now time.Time, it *Item) {
	t.Helper()
	if err := c.Enqueue(now, it); err != nil {
		t.Fatal(err)
	}
}

// TestPending_soleHolderKeepsEverySlot: one principal may hold every slot
// while nobody else waits; a second principal then takes exactly its share.
func TestPending_soleHolderKeepsEverySlot(t *testing.T) {
	c := newSimCore(t, simConfig(1, FairnessFuel, 4))
	var flood []*Item
	for range 4 {
		it := &Item{Tenant: "t", Principal: "flood", Cell: simCell}
		mustEnqueue(t, c, it)
		flood = append(flood, it)
	}
	if _, ok := c.YieldSlotTo(simEpoch, 0, "t", "flood"); ok {
		t.Fatal("the sole holder evicted itself")
	}
	// share = 4/2 = 2: "quiet" takes slots until both hold 2.
	var quiet []*Item
	for i := range 2 {
		v, ok := c.YieldSlotTo(simEpoch, 0, "u", "quiet")
		if !ok || v != flood[3-i] {
			t.Fatalf("eviction %d: victim %v, want the flood's newest waiter", i, v)
		}
		it := &Item{Tenant: "u", Principal: "quiet", Cell: simCell}
		mustEnqueue(t, c, it)
		quiet = append(quiet, it)
	}
	if v, ok := c.YieldSlotTo(simEpoch, 0, "u", "quiet"); ok {
		t.Fatalf("quiet at its share evicted %v", v)
	}
	// A third principal: share 4/3; both hold 2, the tie goes to the holder
	// with the newest waiter.
	if v, ok := c.YieldSlotTo(simEpoch, 0, "v", "third"); !ok || v != quiet[1] {
		t.Fatalf("third arrival: victim %v %v, want quiet's newest waiter", v, ok)
	}
}

// BenchmarkCore_yieldSlotTo is a refused arrival of a new principal at a
// full queue class where n principals wait with one item each but the
// first, which holds two: it gives up its newest (put back for the next
// round). What each refusal costs under the scheduler's lock as the
// number of waiting principals grows.
func BenchmarkCore_yieldSlotTo(b *testing.B) {
	for _, n := range []int{10, 1_000, 10_000} {
		b.Run("principals="+strconv.Itoa(n), func(b *testing.B) {
			cfg := Config{
				CellClasses:  map[vocab.CellClass]CellConfig{vocab.CellSmall: {Parallelism: 1}},
				QueueClasses: []QueueConfig{{Name: "q", MinPriority: 0, MaxPriority: 9, MaxQueued: n + 1}},
				MaxWait:      time.Hour,
			}
			c := newSimCore(b, cfg)
			item := func(p int) *Item {
				return &Item{Tenant: "t", Principal: "p" + strconv.Itoa(p), Cell: vocab.CellSmall}
			}
			for p := range n {
				mustEnqueueAt(b, c, simEpoch, item(p))
			}
			mustEnqueueAt(b, c, simEpoch, item(0))
			for b.Loop() {
				v, ok := c.YieldSlotTo(simEpoch, 0, "t", "newcomer")
				if !ok || v.Principal != "p0" {
					b.Fatalf("victim %v %v, want p0's newest", v, ok)
				}
				mustEnqueueAt(b, c, simEpoch, item(0))
			}
		})
	}
}

package scheduler

// The capacity of a cell class: reserved and shared cells, the adaptive
// window and its periodic adjustment (Adjust), and the core's Stats.

import (
	"time"

	"github.com/latent-node/latent-node/vocab"
)

// Capacity of a cell class. Each queue class owns its reserved cells; the
// other usable cells are shared, and the adaptive window W bounds the total:
// a class may start an item when it runs fewer than its reserved cells, or
// when the shared cells in use are fewer than W − Σreserved. W stays in
// [minWindow, usable], so a class without reserved cells always keeps at
// least one shared cell. A class's running items count against its reserved
// cells first. When quarantines leave no more usable cells than are
// reserved, reservations are suspended: every usable cell is shared, so
// every class can still run.

// reservedTotal is the number of cells currently held in reserve.
func (cs *cellState) reservedTotal() int {
	if cs.usable > cs.reserved {
		return cs.reserved
	}
	return 0
}

// reservedOf is the number of cells currently reserved for lane l.
func (cs *cellState) reservedOf(l *lane) int {
	if cs.usable > cs.reserved {
		return l.reserved
	}
	return 0
}

// roomIn reports whether lane l may start an item on a cell that is free:
// one of its reserved cells, else a shared cell when sharedFree (the
// window allows one more: sharedInUse < sharedLimit).
func (cs *cellState) roomIn(l *lane, sharedFree bool) bool {
	return l.running < cs.reservedOf(l) || sharedFree
}

// minWindow is the smallest window: the reserved cells plus one shared cell.
func (cs *cellState) minWindow() int {
	return min(cs.usable, cs.reservedTotal()+1)
}

// sharedLimit is the number of shared cells the window allows.
func (cs *cellState) sharedLimit() int {
	return max(0, min(cs.window, cs.usable)-cs.reservedTotal())
}

// sharedInUse is the number of running items beyond their class's reserved cells.
func (cs *cellState) sharedInUse() int {
	n := 0
	for _, l := range cs.lanes {
		n += max(0, l.running-cs.reservedOf(l))
	}
	return n
}

// windowBound reports whether the window (not the cells) holds back waiting
// work: some class waits beyond its reserved cells, the shared cells the
// window allows are all in use, and the window is below the usable cells.
func (cs *cellState) windowBound() bool {
	if cs.window >= cs.usable || cs.sharedInUse() < cs.sharedLimit() || cs.running >= cs.usable {
		return false
	}
	for _, l := range cs.lanes {
		if l.waiting > 0 && l.running >= cs.reservedOf(l) {
			return true
		}
	}
	return false
}

// perMFuel is the moving average of execution time per 1,000,000 fuel: the
// ratio of the moving averages of time and fuel, so each sample weighs by
// its fuel and the fixed overhead of tiny activations does not dominate.
func (cs *cellState) perMFuel() float64 {
	if cs.svcFuel.v <= 0 {
		return 0
	}
	return cs.svcTime.v / cs.svcFuel.v * 1e6
}

// Adjust runs the periodic work of every cell class, at most once per
// AdjustInterval each (the first call only starts the clock): the adaptive
// window, and the queue-delay average of a class that dispatched and
// expired nothing in the interval (the oldest waiter's age is sampled, or,
// when nothing waits, the average decays). It reports whether a window grew
// (the driver should then call Next).
func (c *Core) Adjust(now time.Time) bool {
	now = c.advance(now)
	grew := false
	for _, cs := range c.cells {
		if cs == nil {
			continue
		}
		if cs.lastAdjust.IsZero() {
			cs.lastAdjust = now
			continue
		}
		if now.Sub(cs.lastAdjust) < c.cfg.AdjustInterval {
			continue
		}
		cs.lastAdjust = now
		switch {
		case cs.delaySamples > 0:
		case cs.age.head != nil:
			cs.sampleDelay(now.Sub(cs.age.head.arrived()))
		default:
			cs.delay.v *= 1 - alphaDelay
		}
		cs.delaySamples = 0
		if cs.target > 0 {
			grew = cs.adapt(now, c.cfg.AdjustInterval, !c.plainAIMD) || grew
		}
		cs.samples, cs.saturated = 0, false
	}
	return grew
}

// Probe back-off: after a window was cut again following a regrowth (the
// ceiling is confirmed), growing back to the ceiling waits
// probeHold·2^(fails−1) intervals, at most maxProbeHold.
const (
	probeHold    = 10
	maxProbeHold = 160
)

// adapt applies the window rule once (see the package doc, "Adaptive
// concurrency") and reports whether the window grew.
func (cs *cellState) adapt(now time.Time, interval time.Duration, backoff bool) bool {
	above := cs.svcFuel.n > 0 && cs.perMFuel() > float64(cs.target)
	switch {
	case above && cs.samples > 0:
		w := max(cs.minWindow(), cs.window*7/10)
		if w == cs.window {
			return false
		}
		if cs.regrown {
			cs.fails++
		}
		hold := 0
		if cs.fails > 0 && backoff {
			hold = min(probeHold<<(min(cs.fails, 16)-1), maxProbeHold)
		}
		cs.ceiling, cs.regrown = cs.window, false
		cs.holdUntil = now.Add(time.Duration(hold) * interval)
		cs.window = w
		cs.changes++
	case !above:
		if cs.ceiling > 0 && cs.window >= cs.ceiling && cs.samples > 0 {
			cs.ceiling, cs.fails = 0, 0 // back where it was cut, and healthy
		}
		if cs.window >= cs.usable || !(cs.saturated || cs.windowBound()) {
			return false
		}
		if cs.ceiling > 0 && cs.window+1 >= cs.ceiling && now.Before(cs.holdUntil) {
			return false
		}
		cs.window++
		cs.regrown = true
		cs.changes++
		return true
	}
	return false
}

// Stats is a snapshot of the core.
type Stats struct {
	Cells  []CellStats  // configured cell classes, in class order
	Queues []QueueStats // queue classes, by index
}

// CellStats describes one cell class.
type CellStats struct {
	Class       vocab.CellClass
	Parallelism int
	// Quarantined counts cells lost to quarantine (LoseCell); Usable is
	// Parallelism minus Quarantined.
	Quarantined, Usable int
	// Window is the adaptive window (Usable when adaptation is off).
	Window int
	// WindowChanges counts the window's changes since start.
	WindowChanges    uint64
	Running, Waiting int
	// QueueDelay is the moving average of queue wait.
	QueueDelay time.Duration
	// ServicePerMFuel is the moving average of execution time per 1M fuel.
	ServicePerMFuel time.Duration
}

// QueueStats describes one queue class across cell classes.
type QueueStats struct {
	Name       string
	MaxQueued  int
	Waiting    int
	Principals int // principals with waiting items
}

// Stats returns a snapshot.
func (c *Core) Stats() Stats {
	var s Stats
	for _, cs := range c.cells {
		if cs == nil {
			continue
		}
		s.Cells = append(s.Cells, CellStats{Class: cs.class, Parallelism: cs.parallelism,
			Quarantined: cs.parallelism - cs.usable, Usable: cs.usable, Window: cs.window, WindowChanges: cs.changes,
			Running: cs.running, Waiting: cs.waiting, QueueDelay: time.Duration(cs.delay.v),
			ServicePerMFuel: time.Duration(cs.perMFuel())})
	}
	for _, q := range c.queues {
		s.Queues = append(s.Queues, QueueStats{Name: q.name, MaxQueued: q.limit, Waiting: q.waiting, Principals: len(q.holders)})
	}
	return s
}

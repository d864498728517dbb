package scheduler

// Core, the scheduler's synchronous state machine: Items, lanes, cell and
// queue classes, and enqueue, dispatch, completion, requeue and expiry.

import (
	"math"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/latent-node/latent-node/vocab"
)

// Item is one queued activation as the core sees it. The caller fills the
// identity fields and Payload; the core owns the rest. An Item is enqueued
// at most once.
type Item struct {
	// Tenant and Principal (the subject) key the two levels of fairness.
	Tenant    vocab.TenantID
	Principal string
	// Cell is the cell class the item runs on (admission selected it).
	Cell vocab.CellClass
	// Queue is the queue class index (admission.Obligations.QueueIndex).
	Queue int
	// Payload is the caller's (the driver stores its *Job).
	Payload any

	// EnqueuedAt is set by Enqueue.
	EnqueuedAt time.Time
	// ArrivedAt is when the request behind the item arrived, before it was
	// read and admitted (zero: EnqueuedAt). The observed queue delay counts
	// from it; expiry counts from EnqueuedAt.
	ArrivedAt time.Time
	// Cost is set by Next: the service charged at dispatch (estimated fuel,
	// or 1 in round-robin mode).
	Cost int64

	// Set by Next: the tenant's attained service before the charge, and the
	// sequence number after the dispatch (see Overtaken).
	tenantStart int64
	dispatchSeq uint64

	seq   uint64
	state itemState
	prin  *flow

	// The principal's FIFO, the holder's waiters (queue class × principal)
	// by seq, the cell class's waiters by seq (and so by EnqueuedAt).
	links [numLinks]itemLinks
}

type itemState uint8

const (
	itemNew itemState = iota
	itemWaiting
	itemRunning
	itemDone
)

// Smoothing of the moving averages, per sample.
const (
	alphaCost    = 0.2 // fuel of completed activations (the cost estimate)
	alphaService = 0.2 // execution time and fuel (the adaptive window)
	alphaDelay   = 0.2 // queue wait
)

// lane is the fair queue of one queue class in one cell class: the root of a
// flow tree, plus the lane rule's counter.
type lane struct {
	flow
	queue    int // queue class index
	reserved int // cells reserved for the queue class
	// skipped counts the consecutive dispatches of higher classes onto
	// shared cells while this lane had waiting work.
	skipped int
}

// cellState is one cell class: its lanes by rank (highest priority first),
// capacity, waiters by age, and adaptive state.
type cellState struct {
	class       vocab.CellClass
	parallelism int
	usable      int // parallelism minus cells lost (quarantined)
	reserved    int // Σ reserved cells over queue classes
	window      int // the adaptive window, in [minWindow, usable]
	lanes       []*lane

	running int
	waiting int

	age itemList // waiting items by seq

	cost ewma // fuel of completed activations (the estimate of last resort)

	target           time.Duration
	svcTime, svcFuel ewma // execution time (ns) and fuel, for the time per fuel
	samples          int  // completions since the last adjustment
	saturated        bool // the window held back waiting work since the last adjustment
	lastAdjust       time.Time
	changes          uint64
	ceiling          int       // the window at the last cut; 0: none pending
	regrown          bool      // the window grew since the last cut
	fails            int       // consecutive cuts that followed a regrowth
	holdUntil        time.Time // no growth to the ceiling before

	delay        ewma // queue wait (ns)
	delaySamples int  // since the last adjustment
}

// queueState is one queue class across cell classes: its pending slots and
// their holders.
type queueState struct {
	name    string
	limit   int
	waiting int
	holders map[holderKey]*holder
	// byCount[k] lists the holders of k waiting items; top is at least the
	// largest such k. YieldSlotTo reads the largest instead of ranging
	// over every holder.
	byCount []holderList
	top     int
}

type holderKey struct {
	tenant    vocab.TenantID
	principal string
}

// holder is a principal's waiting items in one queue class, oldest first.
type holder struct {
	key   holderKey
	n     int
	items itemList
	// prev and next link it in its queue class's byCount[n].
	prev, next *holder
}

// holderList is an intrusive doubly linked list of holders.
type holderList struct{ head, tail *holder }

func (l *holderList) push(h *holder) {
	h.prev, h.next = l.tail, nil
	if l.tail != nil {
		l.tail.next = h
	} else {
		l.head = h
	}
	l.tail = h
}

func (l *holderList) remove(h *holder) {
	if h.prev != nil {
		h.prev.next = h.next
	} else {
		l.head = h.next
	}
	if h.next != nil {
		h.next.prev = h.prev
	} else {
		l.tail = h.prev
	}
	h.prev, h.next = nil, nil
}

// Core is the scheduler's synchronous state machine: fair queues, lanes,
// capacity, pending-slot fair share, expiry and the adaptive window. It takes
// time only as now arguments (which it treats as non-decreasing) and starts
// nothing. It is not safe for concurrent use; the driver serializes calls.
type Core struct {
	cfg    Config
	fuel   bool
	cells  [len(vocab.CellClasses) + 1]*cellState
	queues []queueState
	rankOf []int // queue class index → lane rank
	seq    uint64
	now    time.Time
	pool   flowPool

	plainAIMD bool // tests: no probe back-off (the negative control)
}

// NewCore fills the defaults of cfg (Config.WithDefaults), validates it and
// returns an idle core.
func NewCore(cfg Config) (*Core, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := &Core{cfg: cfg, fuel: cfg.Fairness == FairnessFuel}
	// Lanes by priority, highest range first.
	order := make([]int, len(cfg.QueueClasses))
	for i := range order {
		order[i] = i
	}
	for i := 1; i < len(order); i++ { // insertion sort: a handful of classes
		for j := i; j > 0 && cfg.QueueClasses[order[j]].MaxPriority > cfg.QueueClasses[order[j-1]].MaxPriority; j-- {
			order[j], order[j-1] = order[j-1], order[j]
		}
	}
	c.rankOf = make([]int, len(order))
	for rank, q := range order {
		c.rankOf[q] = rank
	}
	c.queues = make([]queueState, len(cfg.QueueClasses))
	reserved := 0
	for i, q := range cfg.QueueClasses {
		c.queues[i] = queueState{name: q.Name, limit: q.MaxQueued, holders: map[holderKey]*holder{}}
		reserved += q.ReservedCells
	}
	for class, cc := range cfg.CellClasses {
		cs := &cellState{class: class, parallelism: cc.Parallelism, usable: cc.Parallelism, reserved: reserved,
			window: cc.Parallelism, target: cc.TargetServiceTime}
		for _, q := range order {
			l := &lane{flow: *newFlow(nil, "", false), queue: q, reserved: cfg.QueueClasses[q].ReservedCells}
			cs.lanes = append(cs.lanes, l)
		}
		c.cells[class] = cs
	}
	return c, nil
}

// advance returns now, or the latest time seen if now is earlier: the core's
// clock never goes back.
func (c *Core) advance(now time.Time) time.Time {
	if now.Before(c.now) {
		return c.now
	}
	c.now = now
	return now
}

func (c *Core) cell(class vocab.CellClass) *cellState {
	if int(class) >= len(c.cells) {
		return nil
	}
	return c.cells[class]
}

func (c *Core) laneOf(it *Item) (*cellState, *lane) {
	cs := c.cells[it.Cell]
	return cs, cs.lanes[c.rankOf[it.Queue]]
}

// Enqueue adds it, stamped with now, at the tail of its principal's FIFO in
// the lane of its cell class and queue class. It does not check the queue
// class's limit: admission did.
func (c *Core) Enqueue(now time.Time, it *Item) error {
	if it.state != itemNew {
		return errors.AssertionFailedf("scheduler: item enqueued twice")
	}
	if c.cell(it.Cell) == nil {
		return errors.Newf("scheduler: cell class %s is not configured", errors.Safe(it.Cell))
	}
	if it.Queue < 0 || it.Queue >= len(c.queues) {
		return errors.Newf("scheduler: queue class index %d is not configured", errors.Safe(it.Queue))
	}
	now = c.advance(now)
	cs, l := c.laneOf(it)
	c.seq++
	it.seq = c.seq
	it.EnqueuedAt = now
	it.state = itemWaiting
	l.enqueue(it, &c.seq, &c.pool)
	cs.waiting++
	cs.age.insertBySeq(it, ageLinks)
	c.queues[it.Queue].hold(it)
	return nil
}

// Next returns the next item to dispatch on cell class cell, or false when
// nothing waits or capacity does not allow. The driver calls it until
// false, after every Enqueue, Done, Abort, Requeue and Adjust. The item is
// running until Done, Abort or Requeue.
//
// The lane: among queue classes with waiting work that capacity admits
// (their own reserved cells, else a shared cell within the window), the
// highest-priority one, unless some have seen LowerClassAfter consecutive
// higher-class dispatches onto shared cells: then the lowest of those. Within
// the lane: the least-served tenant, its least-served principal, that
// principal's oldest item.
func (c *Core) Next(now time.Time, cell vocab.CellClass) (*Item, bool) {
	cs := c.cell(cell)
	if cs == nil || cs.waiting == 0 {
		return nil, false
	}
	now = c.advance(now)
	chosen, starving := -1, -1
	sharedFree := cs.sharedInUse() < cs.sharedLimit()
	if cs.running < cs.usable {
		for rank, l := range cs.lanes {
			if l.waiting == 0 || !cs.roomIn(l, sharedFree) {
				continue
			}
			if chosen < 0 {
				chosen = rank
			}
			if l.skipped >= c.cfg.LowerClassAfter {
				starving = rank // the last assignment is the lowest such lane
			}
		}
	}
	if starving >= 0 {
		chosen = starving
	}
	if chosen < 0 {
		if cs.windowBound() {
			cs.saturated = true
		}
		return nil, false
	}
	return c.take(now, cs, chosen), true
}

// take dispatches the next item of lane rank chosen of cs (Next's choice,
// or the overtaken item's lane).
func (c *Core) take(now time.Time, cs *cellState, chosen int) *Item {
	l := cs.lanes[chosen]
	onShared := l.running >= cs.reservedOf(l)
	p := l.peek()
	it := l.pop(p, c.estimate(cs, p), &c.seq)
	it.state = itemRunning
	l.skipped = 0
	if onShared {
		for _, low := range cs.lanes[chosen+1:] {
			if low.waiting > 0 {
				low.skipped++
			}
		}
	}
	cs.running++
	cs.waiting--
	cs.age.remove(it, ageLinks)
	c.queues[it.Queue].unhold(it)
	cs.sampleDelay(now.Sub(it.arrived()))
	return it
}

// Overtaken reports whether running item it should give its cell's turn
// to work that waits in its lane: the first tenant in the lane's order
// became backlogged after it was dispatched, has nothing running in the
// lane, had attained no more service than its tenant had at that dispatch
// (the fair queue would have chosen that tenant first had it been waiting
// then), and the lane's capacity would let Next dispatch now. A tenant
// backlogged before the dispatch was passed over by the fairness rule
// already, so tenants that flood together never overtake each other: only a
// newcomer does, at most one item ahead (the package doc's catch-up rule).
// The driver pauses it at a safe point of its guest; it keeps its cell and
// stays running for the core.
func (c *Core) Overtaken(it *Item) bool {
	if it.state != itemRunning {
		return false
	}
	cs, l := c.laneOf(it)
	if l.waiting == 0 || cs.running >= cs.usable || !cs.roomIn(l, cs.sharedInUse() < cs.sharedLimit()) {
		return false
	}
	top := l.kids[0]
	return top != it.prin.parent && top.running == 0 && top.since > it.dispatchSeq && top.served <= it.tenantStart
}

// NextOvertaking dispatches the newcomer that overtakes running item
// running (see Overtaken; false when none does): the next item of
// running's lane, whatever Next would choose among lanes. The newcomer's
// tenant is marked as having overtaken, so that if it goes idle ahead of
// the lane's virtual time the lane remembers its service and its next item
// starts from there (flow.gc).
func (c *Core) NextOvertaking(now time.Time, running *Item) (*Item, bool) {
	if !c.Overtaken(running) {
		return nil, false
	}
	now = c.advance(now)
	cs := c.cells[running.Cell]
	it := c.take(now, cs, c.rankOf[running.Queue])
	it.prin.parent.overtook = true
	return it, true
}

// estimate is the service charged for dispatching from principal p: in fuel
// mode the moving average of the fuel its completed activations used, else
// its tenant's in this lane, else the cell class's, else 1; in round-robin
// mode 1.
func (c *Core) estimate(cs *cellState, p *flow) int64 {
	if !c.fuel {
		return 1
	}
	var e float64
	switch {
	case p.cost.n > 0:
		e = p.cost.v
	case p.parent.cost.n > 0:
		e = p.parent.cost.v
	case cs.cost.n > 0:
		e = cs.cost.v
	default:
		return 1
	}
	return max(1, int64(math.Round(min(e, float64(maxCharge)))))
}

// maxCharge bounds one activation's charge (and correction).
const maxCharge = int64(1) << 50

// Done records the completion of a running item: it frees the item's cell,
// corrects the item's charge to the fuel actually used (fuel mode), and
// feeds the cost estimates and the adaptive window (execTime per fuel).
func (c *Core) Done(now time.Time, it *Item, fuelUsed uint64, execTime time.Duration) error {
	if it.state != itemRunning {
		return errors.AssertionFailedf("scheduler: Done on an item that is not running")
	}
	c.advance(now)
	cs, l := c.laneOf(it)
	fuel := int64(min(fuelUsed, uint64(maxCharge)))
	if c.fuel {
		l.charge(it, fuel-it.Cost)
	}
	p := it.prin
	p.cost.add(float64(fuel), alphaCost)
	p.parent.cost.add(float64(fuel), alphaCost)
	cs.cost.add(float64(fuel), alphaCost)
	if fuel > 0 && execTime > 0 {
		cs.svcTime.add(float64(execTime), alphaService)
		cs.svcFuel.add(float64(fuel), alphaService)
		cs.samples++
	}
	c.release(cs, l, it)
	return nil
}

// Abort frees the capacity of a running item that never executed (its caller
// went away, its permit could not start) and refunds its charge.
func (c *Core) Abort(it *Item) error {
	if it.state != itemRunning {
		return errors.AssertionFailedf("scheduler: Abort on an item that is not running")
	}
	cs, l := c.laneOf(it)
	l.charge(it, -it.Cost)
	c.release(cs, l, it)
	return nil
}

func (c *Core) release(cs *cellState, l *lane, it *Item) {
	l.finish(it, &c.pool)
	cs.running--
	it.state = itemDone
	it.prin = nil
}

// Requeue puts a running item that could not lease a cell back at the head
// of its principal's FIFO, its charge refunded and its age kept. The lane
// counters are not rolled back (the failed dispatch counts as a turn of its
// class; a reset only shortens a run).
func (c *Core) Requeue(it *Item) error {
	if it.state != itemRunning {
		return errors.AssertionFailedf("scheduler: Requeue on an item that is not running")
	}
	cs, l := c.laneOf(it)
	l.charge(it, -it.Cost)
	cs.running--
	l.requeue(it, &c.seq)
	it.state = itemWaiting
	cs.waiting++
	cs.age.insertBySeq(it, ageLinks)
	c.queues[it.Queue].hold(it)
	return nil
}

// Remove removes a waiting item (its caller went away) and reports whether
// it was waiting.
func (c *Core) Remove(it *Item) bool {
	if it.state != itemWaiting {
		return false
	}
	c.drop(it)
	return true
}

// drop removes a waiting item from every structure.
func (c *Core) drop(it *Item) {
	cs, l := c.laneOf(it)
	l.unlink(it, &c.pool)
	if l.waiting == 0 {
		l.skipped = 0
	}
	cs.waiting--
	cs.age.remove(it, ageLinks)
	c.queues[it.Queue].unhold(it)
	it.state = itemDone
	it.prin = nil
}

// Expire removes and returns the items that have waited MaxWait or longer at
// now, oldest first per cell class. Called every tick, nothing waits longer
// than MaxWait plus one tick.
func (c *Core) Expire(now time.Time) []*Item {
	now = c.advance(now)
	var out []*Item
	for _, cs := range c.cells {
		if cs == nil {
			continue
		}
		for it := cs.age.head; it != nil && now.Sub(it.EnqueuedAt) >= c.cfg.MaxWait; it = cs.age.head {
			cs.sampleDelay(now.Sub(it.arrived()))
			c.drop(it)
			out = append(out, it)
		}
	}
	return out
}

// Drain removes and returns every waiting item (shutdown), oldest first per
// cell class.
func (c *Core) Drain() []*Item {
	var out []*Item
	for _, cs := range c.cells {
		if cs == nil {
			continue
		}
		for it := cs.age.head; it != nil; it = cs.age.head {
			c.drop(it)
			out = append(out, it)
		}
	}
	return out
}

// LoseCell records that a cell of class cell left service (quarantined): the
// usable capacity shrinks by one, and the window with it.
func (c *Core) LoseCell(cell vocab.CellClass) {
	cs := c.cell(cell)
	if cs == nil || cs.usable == 0 {
		return
	}
	cs.usable--
	cs.window = min(max(cs.window, cs.minWindow()), cs.usable)
}

// Waiting returns the number of items waiting in cell class cell and queue
// class queue (for tests and stats).
func (c *Core) Waiting(cell vocab.CellClass, queue int) int {
	cs := c.cell(cell)
	if cs == nil || queue < 0 || queue >= len(c.rankOf) {
		return 0
	}
	return cs.lanes[c.rankOf[queue]].waiting
}

func (cs *cellState) sampleDelay(d time.Duration) {
	cs.delay.add(float64(max(d, 0)), alphaDelay)
	cs.delaySamples++
}

// arrived is ArrivedAt, or EnqueuedAt when that is unset or later.
func (it *Item) arrived() time.Time {
	if it.ArrivedAt.IsZero() || it.ArrivedAt.After(it.EnqueuedAt) {
		return it.EnqueuedAt
	}
	return it.ArrivedAt
}

// ObservedQueueDelay is the moving average of the queue wait of cell class
// cell: sampled at each dispatch and expiry, at each adjustment interval
// without either by the age of the oldest waiter (so a stalled queue is
// seen), and decayed toward zero while nothing waits. A class with no usable
// cell reports the largest duration, so admission refuses its work as
// infeasible instead of queueing it to expire.
func (c *Core) ObservedQueueDelay(cell vocab.CellClass) time.Duration {
	cs := c.cell(cell)
	switch {
	case cs == nil:
		return 0
	case cs.usable == 0:
		return math.MaxInt64
	}
	return time.Duration(cs.delay.v)
}

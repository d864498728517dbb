package scheduler

// This file is the two-level fair queue of one lane (cell class × queue
// class): a tree of flows, lane → tenants → principals → a FIFO of items.
// The package doc derives the rule; here are the mechanics.

// rebaseAt is the virtual time beyond which a level's tags are shifted down,
// so the int64 tags never overflow however long the node runs (about a year
// of 64 busy cells at 10⁹ fuel per second each).
const rebaseAt = int64(1) << 60

// flow is a node of a lane's tree: the lane itself (root), a tenant, or a
// principal (leaf, which holds the FIFO).
type flow struct {
	parent *flow
	name   string // the tenant id or the principal; "" for the root

	// Tags, as seen by the parent: served is the attained service (fuel
	// units, or dispatches in round-robin mode) and rr the round-robin
	// sequence that breaks ties (lower first).
	served int64
	rr     uint64
	idx    int // position in parent.kids; -1 when not backlogged
	// since is the sequence number of when the flow last became
	// backlogged (Core.Overtaken).
	since uint64
	// overtook: an item of this tenant overtook a running one (Pause) since
	// the flow was created; see gc.
	overtook bool

	// Interior flows (root, tenants): the backlogged children as a min-heap
	// on (served, rr), every live child by name, and the start tag of the
	// last dispatched child (the virtual time when none is backlogged).
	kids   []*flow
	byName map[string]*flow
	vstart int64
	// memo is the attained service of the last child deleted ahead of
	// vstart after it overtook (see gc); memoName "" when none.
	memoName string
	memo     int64
	peak     int // the most live children at once (bounds what the pool keeps)

	// Leaves (principals): the FIFO of waiting items.
	fifo itemList

	waiting, running int
	cost             ewma // actual fuel of completed activations
}

func newFlow(parent *flow, name string, leaf bool) *flow {
	f := &flow{parent: parent, name: name, idx: -1}
	if !leaf {
		f.byName = map[string]*flow{}
	}
	return f
}

// vtime is the flow's current virtual time for its children: the start tag
// (attained service before the charge) of the last dispatch among them. A
// backlogged child has attained at least that much, except after a
// downward correction, so a child that becomes backlogged at vtime is
// served next, ahead of the backlogged ones, by at most one item.
func (f *flow) vtime() int64 { return f.vstart }

// child returns the live child name, creating it if needed.
func (f *flow) child(name string, leaf bool, pool *flowPool) *flow {
	c, ok := f.byName[name]
	if !ok {
		c = pool.get(f, name, leaf)
		c.served = f.vtime()
		if name == f.memoName {
			c.served = max(c.served, f.memo)
			f.memoName = ""
		}
		f.byName[name] = c
		f.peak = max(f.peak, len(f.byName))
	}
	return c
}

// flowPool recycles the flows of tenants and principals that went idle, so a
// busy node does not allocate per activation. It keeps at most maxPooled.
type flowPool struct {
	free []*flow
}

// The pool keeps at most maxPooled flows, and the child map and heap of a
// flow only if it never had more than maxPooledKids children.
const (
	maxPooled     = 1024
	maxPooledKids = 16
)

func (p *flowPool) get(parent *flow, name string, leaf bool) *flow {
	n := len(p.free)
	if n == 0 {
		return newFlow(parent, name, leaf)
	}
	f := p.free[n-1]
	p.free[n-1] = nil
	p.free = p.free[:n-1]
	f.parent, f.name = parent, name
	if !leaf && f.byName == nil {
		f.byName = map[string]*flow{}
	}
	return f
}

// put takes back an idle flow (nothing waits or runs, so no children).
func (p *flowPool) put(f *flow) {
	if len(p.free) >= maxPooled {
		return
	}
	m, kids := f.byName, f.kids[:0]
	if f.peak > maxPooledKids {
		m, kids = nil, nil
	}
	clear(m)
	*f = flow{byName: m, kids: kids, idx: -1}
	p.free = append(p.free, f)
}

// backlog makes c, a child of f that just got its first waiting item,
// eligible: it starts at max(its attained service, the virtual time), so
// idle time is not banked and a newcomer cannot claim service for the past,
// and it is last among equal tags.
func (f *flow) backlog(c *flow, seq *uint64) {
	c.served = max(c.served, f.vtime())
	*seq++
	c.rr, c.since = *seq, *seq
	f.push(c)
}

// gc deletes child c when nothing of it waits or runs. If an item of c
// overtook a running one (Core.NextOvertaking) and c attained more service
// than f's virtual time, f remembers how much (one child at a time), and c
// starts from there if it comes back before the virtual time passed it.
// Without this, a tenant whose closed-loop client keeps one item at a time
// would be new at each item: it would overtake a backlogged tenant's item
// and then also go first at the next dispatch, two items to their one.
func (f *flow) gc(c *flow, pool *flowPool) {
	if c.waiting == 0 && c.running == 0 {
		if c.overtook && c.served > f.vtime() {
			f.memoName, f.memo = c.name, c.served
		}
		delete(f.byName, c.name)
		pool.put(c)
	}
}

// rebase shifts the tags of f's children down when f's virtual time grew
// past rebaseAt. Order is unchanged.
func (f *flow) rebase() {
	base := f.vtime()
	if base < rebaseAt {
		return
	}
	for _, c := range f.byName {
		c.served -= base
	}
	f.vstart -= base
	f.memo -= base
}

func (f *flow) less(o *flow) bool {
	return f.served < o.served || (f.served == o.served && f.rr < o.rr)
}

// The heap of backlogged children (hand-written: container/heap's
// interface calls cost more than the comparisons).

func (f *flow) push(c *flow) {
	c.idx = len(f.kids)
	f.kids = append(f.kids, c)
	f.up(c.idx)
}

func (f *flow) remove(c *flow) {
	i, last := c.idx, len(f.kids)-1
	if i != last {
		f.swap(i, last)
	}
	f.kids[last] = nil
	f.kids = f.kids[:last]
	c.idx = -1
	if i != last {
		f.fix(i)
	}
}

func (f *flow) fix(i int) {
	if !f.down(i) {
		f.up(i)
	}
}

func (f *flow) swap(i, j int) {
	f.kids[i], f.kids[j] = f.kids[j], f.kids[i]
	f.kids[i].idx = i
	f.kids[j].idx = j
}

func (f *flow) up(j int) {
	for j > 0 {
		i := (j - 1) / 2
		if !f.kids[j].less(f.kids[i]) {
			break
		}
		f.swap(i, j)
		j = i
	}
}

func (f *flow) down(i0 int) bool {
	i, n := i0, len(f.kids)
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		j := l
		if r := l + 1; r < n && f.kids[r].less(f.kids[l]) {
			j = r
		}
		if !f.kids[j].less(f.kids[i]) {
			break
		}
		f.swap(i, j)
		i = j
	}
	return i > i0
}

// enqueue appends it to the FIFO of its principal, creating the tenant and
// principal flows as needed, and backlogs them.
func (root *flow) enqueue(it *Item, seq *uint64, pool *flowPool) {
	t := root.child(string(it.Tenant), false, pool)
	p := t.child(it.Principal, true, pool)
	it.prin = p
	p.fifo.pushBack(it, fifoLinks)
	root.addWaiting(p, seq)
}

// requeue puts a running item back at the head of its principal's FIFO (a
// dispatch that could not lease a cell). The caller refunded its charge.
func (root *flow) requeue(it *Item, seq *uint64) {
	p := it.prin
	for c := p; c != root; c = c.parent {
		c.running--
	}
	root.running--
	p.fifo.pushFront(it, fifoLinks)
	// The item waited before its dispatch: a flow it backlogs again keeps
	// the sequence of when it became backlogged then (Core.Overtaken).
	t := p.parent
	ps, ts := p.since, t.since
	root.addWaiting(p, seq)
	p.since, t.since = ps, ts
}

// addWaiting counts a new waiting item of leaf p up the tree, backlogging
// each flow that was idle.
func (root *flow) addWaiting(p *flow, seq *uint64) {
	for c := p; c != root; c = c.parent {
		c.waiting++
		if c.waiting == 1 {
			c.parent.backlog(c, seq)
		}
	}
	root.waiting++
}

// unlink removes a waiting item from its principal's FIFO and the counts,
// deleting flows left with nothing waiting or running.
func (root *flow) unlink(it *Item, pool *flowPool) {
	p := it.prin
	p.fifo.remove(it, fifoLinks)
	for c := p; c != root; c = c.parent {
		c.waiting--
		if c.waiting == 0 {
			c.parent.remove(c)
		}
	}
	root.waiting--
	t := p.parent
	t.gc(p, pool)
	root.gc(t, pool)
}

// peek returns the principal to dispatch from: the least-served principal
// of the least-served tenant.
//
// REQUIRES: root.waiting > 0.
func (root *flow) peek() *flow { return root.kids[0].kids[0] }

// pop removes the head item of p (what peek returned), charges p and its
// tenant cost, and counts the item running.
func (root *flow) pop(p *flow, cost int64, seq *uint64) *Item {
	it := p.fifo.head
	p.fifo.remove(it, fifoLinks)
	it.Cost = cost
	for c := p; c != root; c = c.parent {
		f := c.parent
		f.vstart = c.served // the start tag of this dispatch
		if f == root {
			it.tenantStart = c.served
		}
		c.served += cost
		*seq++
		c.rr = *seq
		c.waiting--
		c.running++
		if c.waiting == 0 {
			f.remove(c)
		} else {
			f.fix(c.idx)
		}
		f.rebase()
	}
	root.waiting--
	root.running++
	it.dispatchSeq = *seq
	return it
}

// charge adds delta to the attained service of it's principal and tenant
// (a completion's correction, or a refund).
func (root *flow) charge(it *Item, delta int64) {
	for c := it.prin; c != root; c = c.parent {
		c.served += delta
		if c.idx >= 0 {
			c.parent.fix(c.idx)
		}
	}
}

// finish counts a running item as done and deletes idle flows.
func (root *flow) finish(it *Item, pool *flowPool) {
	p := it.prin
	for c := p; c != root; c = c.parent {
		c.running--
	}
	root.running--
	t := p.parent
	t.gc(p, pool)
	root.gc(t, pool)
}

// ewma is an exponentially weighted moving average; zero until the first sample.
type ewma struct {
	v float64
	n uint64 // samples seen
}

func (e *ewma) add(x, alpha float64) {
	if e.n == 0 {
		e.v = x
	} else {
		e.v += alpha * (x - e.v)
	}
	e.n++
}

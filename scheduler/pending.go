package scheduler

// The pending slots of a queue class: each principal's holder of waiting
// items, and the fair share of a full class's slots (YieldSlotTo, Holding).

import (
	"time"

	"github.com/latent-node/latent-node/vocab"
)

// hold links a waiting item into its principal's holder in the queue class,
// in seq order (appended on enqueue; a requeued item walks back to its place).
func (q *queueState) hold(it *Item) {
	k := holderKey{it.Tenant, it.Principal}
	h, ok := q.holders[k]
	if !ok {
		h = &holder{key: k}
		q.holders[k] = h
	} else {
		q.byCount[h.n].remove(h)
	}
	h.items.insertBySeq(it, holdLinks)
	h.n++
	q.waiting++
	for len(q.byCount) <= h.n {
		q.byCount = append(q.byCount, holderList{})
	}
	q.byCount[h.n].push(h)
	q.top = max(q.top, h.n)
}

// unhold unlinks a waiting item from its holder, deleting an empty holder.
func (q *queueState) unhold(it *Item) {
	k := holderKey{it.Tenant, it.Principal}
	h := q.holders[k]
	h.items.remove(it, holdLinks)
	q.byCount[h.n].remove(h)
	h.n--
	q.waiting--
	if h.n == 0 {
		delete(q.holders, k)
	} else {
		q.byCount[h.n].push(h)
	}
}

// largest returns the holders with the most waiting items (empty when
// nobody waits). top only moves down here, past empty lists.
func (q *queueState) largest() holderList {
	for q.top > 0 && q.byCount[q.top].head == nil {
		q.top--
	}
	if q.top == 0 {
		return holderList{}
	}
	return q.byCount[q.top]
}

// YieldSlotTo shares a full queue class's pending slots fairly. The node
// calls it when admission refused an arrival of (tenant, principal) for the
// queue class's capacity. With n the number of principals waiting in the
// class, counting the arrival, and share = MaxQueued ÷ n: if the arrival
// holds fewer than its share, the principal holding the most (and more than
// its share; ties: the one with the newest waiter) gives up its newest
// waiter, which is removed and returned — the node answers it ErrFairShare
// and retries the arrival's admission.
// Otherwise it returns false and the arrival is refused. One principal may
// still hold every slot while nobody else waits, and the total never grows.
func (c *Core) YieldSlotTo(now time.Time, queue int, tenant vocab.TenantID, principal string) (*Item, bool) {
	if queue < 0 || queue >= len(c.queues) {
		return nil, false
	}
	c.advance(now)
	q := &c.queues[queue]
	arrival, ok := q.holders[holderKey{tenant, principal}]
	n, held := len(q.holders), 0
	if ok {
		held = arrival.n
	} else {
		n++
	}
	// held < limit/n and the victim's count > limit/n, in integers.
	if held*n >= q.limit {
		return nil, false
	}
	// Only the holders with the most waiting items can give one up: the
	// largest count decides, and a scan of that count's holders alone
	// breaks the tie (each holds more than limit/n, so fewer than n of them).
	top := q.largest()
	if top.head == nil || top.head.n*n <= q.limit {
		return nil, false
	}
	most := top.head
	for h := most.next; h != nil; h = h.next {
		if h.items.tail.seq > most.items.tail.seq {
			most = h
		}
	}
	victim := most.items.tail
	c.drop(victim)
	return victim, true
}

// Holding returns how many items principal (of tenant) has waiting in queue
// class queue, and how many principals wait there (for tests and stats).
func (c *Core) Holding(queue int, tenant vocab.TenantID, principal string) (held, principals int) {
	if queue < 0 || queue >= len(c.queues) {
		return 0, 0
	}
	q := &c.queues[queue]
	if h, ok := q.holders[holderKey{tenant, principal}]; ok {
		held = h.n
	}
	return held, len(q.holders)
}

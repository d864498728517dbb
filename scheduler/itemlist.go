package scheduler

// itemList, the intrusive linked lists that hold Items (a principal's FIFO,
// a holder's and a cell class's waiters).

// itemList is an intrusive doubly linked list of Items through their
// links[k]. Each Item has one link set per list it can be on: its
// principal's FIFO (fifoLinks), its holder's waiters in a queue class
// (holdLinks) and its cell class's waiters (ageLinks); the last two are
// kept in seq order.
type itemList struct{ head, tail *Item }

type itemLinks struct{ prev, next *Item }

const (
	fifoLinks = iota
	holdLinks
	ageLinks
	numLinks
)

// insertAfter links it after after (at the head when after is nil).
func (l *itemList) insertAfter(it, after *Item, k int) {
	it.links[k].prev = after
	if after != nil {
		it.links[k].next = after.links[k].next
		after.links[k].next = it
	} else {
		it.links[k].next = l.head
		l.head = it
	}
	if n := it.links[k].next; n != nil {
		n.links[k].prev = it
	} else {
		l.tail = it
	}
}

func (l *itemList) pushBack(it *Item, k int)  { l.insertAfter(it, l.tail, k) }
func (l *itemList) pushFront(it *Item, k int) { l.insertAfter(it, nil, k) }

// insertBySeq links it in seq order: appended when it is the newest, as on
// enqueue; a requeued item walks back from the tail to its place.
func (l *itemList) insertBySeq(it *Item, k int) {
	after := l.tail
	for after != nil && after.seq > it.seq {
		after = after.links[k].prev
	}
	l.insertAfter(it, after, k)
}

func (l *itemList) remove(it *Item, k int) {
	lk := &it.links[k]
	if lk.prev != nil {
		lk.prev.links[k].next = lk.next
	} else {
		l.head = lk.next
	}
	if lk.next != nil {
		lk.next.links[k].prev = lk.prev
	} else {
		l.tail = lk.prev
	}
	lk.prev, lk.next = nil, nil
}

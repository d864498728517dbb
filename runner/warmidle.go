// The idle warm instances: by key, and in one list by idle time.

package runner

import "time"

// idleSet holds the idle warm instances twice over: by key, most recently
// used last (take serves the warmest), and all of them in one list from the
// longest idle to the most recent (expiry and eviction take from its
// front). Every operation but dropKey (which costs the instances it drops)
// costs the same whether ten instances are idle or a hundred thousand, and
// whether they belong to one revision or to many.
//
// An instance is in both or in neither. The lists agree on order: put
// appends to both and take removes from the end of its key's, so the first
// of a key's instances is the one the long list reaches first.
type idleSet struct {
	byKey          map[warmKey][]*warmInstance
	oldest, newest *warmInstance // the long list, by warmInstance.older/newer
	n              int
}

func newIdleSet() idleSet { return idleSet{byKey: map[warmKey][]*warmInstance{}} }

// add makes w idle since now, the most recent of its key and of all. A now
// before the most recent instance's (two activations that ended at once,
// put back in the other order) counts as that instance's, so the long list
// stays in the order of idleSince and expire can stop at its first
// instance that is not due.
func (s *idleSet) add(w *warmInstance, now time.Time) {
	if s.newest != nil && now.Before(s.newest.idleSince) {
		now = s.newest.idleSince
	}
	w.idleSince = now
	s.byKey[w.key] = append(s.byKey[w.key], w)
	w.older, w.newer = s.newest, nil
	if s.newest != nil {
		s.newest.newer = w
	} else {
		s.oldest = w
	}
	s.newest = w
	s.n++
}

// take removes and returns the most recently used idle instance of k, or nil.
func (s *idleSet) take(k warmKey) *warmInstance {
	list := s.byKey[k]
	if len(list) == 0 {
		return nil
	}
	w := list[len(list)-1]
	list[len(list)-1] = nil
	if list = list[:len(list)-1]; len(list) == 0 {
		delete(s.byKey, k)
	} else {
		s.byKey[k] = list
	}
	s.unlink(w)
	return w
}

// dropOldest removes and returns the longest idle instance, or nil.
func (s *idleSet) dropOldest() *warmInstance {
	w := s.oldest
	if w == nil {
		return nil
	}
	if list := s.byKey[w.key]; len(list) == 1 {
		delete(s.byKey, w.key)
	} else {
		// list[0] is w: the lists agree. Slicing it off costs the same
		// however long the list is (shifting the rest would make a sweep
		// of one revision's n instances cost n²); append reallocates the
		// array, dropping the slots left behind, once its capacity is
		// used up.
		list[0] = nil
		s.byKey[w.key] = list[1:]
	}
	s.unlink(w)
	return w
}

// dropKey removes and returns every idle instance of k.
func (s *idleSet) dropKey(k warmKey) []*warmInstance {
	list := s.byKey[k]
	delete(s.byKey, k)
	for _, w := range list {
		s.unlink(w)
	}
	return list
}

// expire removes and returns the instances idle longer than idle at now.
func (s *idleSet) expire(now time.Time, idle time.Duration) (closing []*warmInstance) {
	for s.oldest != nil && now.Sub(s.oldest.idleSince) > idle {
		closing = append(closing, s.dropOldest())
	}
	return closing
}

// unlink removes w from the long list.
func (s *idleSet) unlink(w *warmInstance) {
	if w.older != nil {
		w.older.newer = w.newer
	} else {
		s.oldest = w.newer
	}
	if w.newer != nil {
		w.newer.older = w.older
	} else {
		s.newest = w.older
	}
	w.older, w.newer = nil, nil
	s.n--
}

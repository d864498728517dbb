// The idle warm instances: by key, and in one list by idle time.

package runner

import (
	"time"

	"github.com/latent-node/latent-node/vocab"
)

// idleSet holds the idle warm instances twice over: by key, most recently
// used last (take serves the warmest), and all of them in one list from the
// longest idle to the most recent (expiry and eviction take from its
// front), and the keys with idle instances by their module's digest (a
// module's last release drops them). Every operation but dropKey and
// dropDigest (which cost the instances they drop) costs the same whether
// ten instances are idle or a hundred thousand, and whether they belong
// to one revision or to many.
//
// An instance is in both or in neither. The lists agree on order: put
// appends to both and take removes from the end of its key's, so the first
// of a key's instances is the one the long list reaches first.
type idleSet struct {
	byKey map[warmKey][]*warmInstance
	// keys are the keys of byKey by their instances' module (w.m.digest).
	// A module's set stays, empty, when its last idle instance is taken
	// (the next put needs it again) and goes with the module (dropDigest).
	keys           map[vocab.Digest]map[warmKey]struct{}
	oldest, newest *warmInstance // the long list, by warmInstance.older/newer
	n              int
}

func newIdleSet() idleSet {
	return idleSet{byKey: map[warmKey][]*warmInstance{}, keys: map[vocab.Digest]map[warmKey]struct{}{}}
}

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
	if len(s.byKey[w.key]) == 0 {
		ks := s.keys[w.m.digest]
		if ks == nil {
			ks = map[warmKey]struct{}{}
			s.keys[w.m.digest] = ks
		}
		ks[w.key] = struct{}{}
	}
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
		s.deleteKey(w)
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
		s.deleteKey(w)
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
	if len(list) == 0 {
		return nil
	}
	s.deleteKey(list[0])
	for _, w := range list {
		s.unlink(w)
	}
	return list
}

// dropDigest removes and returns every idle instance of the module d, and
// forgets the module.
func (s *idleSet) dropDigest(d vocab.Digest) (closing []*warmInstance) {
	for k := range s.keys[d] { // dropKey deletes k from the map ranged over: allowed
		closing = append(closing, s.dropKey(k)...)
	}
	delete(s.keys, d)
	return closing
}

// deleteKey forgets the key of w, whose last idle instance is going.
func (s *idleSet) deleteKey(w *warmInstance) {
	delete(s.byKey, w.key)
	delete(s.keys[w.m.digest], w.key)
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

package runner

import (
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/latent-node/latent-node/vocab"
)

// idleModel is the oracle for idleSet: the idle instances in the order they
// were added, each operation a scan of all of them.
type idleModel struct{ all []*warmInstance }

func (m *idleModel) add(w *warmInstance, now time.Time) {
	if n := len(m.all); n > 0 && now.Before(m.all[n-1].idleSince) {
		now = m.all[n-1].idleSince
	}
	w.idleSince = now
	m.all = append(m.all, w)
}

// take is the most recently added instance of k.
func (m *idleModel) take(k warmKey) *warmInstance {
	for i := len(m.all) - 1; i >= 0; i-- {
		if w := m.all[i]; w.key == k {
			m.all = slices.Delete(m.all, i, i+1)
			return w
		}
	}
	return nil
}

// dropOldest is the instance with the earliest idleSince, the first added
// among equals.
func (m *idleModel) dropOldest() *warmInstance {
	if len(m.all) == 0 {
		return nil
	}
	o := 0
	for i, w := range m.all {
		if w.idleSince.Before(m.all[o].idleSince) {
			o = i
		}
	}
	w := m.all[o]
	m.all = slices.Delete(m.all, o, o+1)
	return w
}

func (m *idleModel) removeIf(f func(*warmInstance) bool) (out []*warmInstance) {
	m.all = slices.DeleteFunc(m.all, func(w *warmInstance) bool {
		if f(w) {
			out = append(out, w)
			return true
		}
		return false
	})
	return out
}

// TestIdleSet_model runs random operations on an idleSet and on the
// oracle, and compares every answer and, after each step, the whole state:
// every key's instances in order, the long list in both directions, and
// the keys by module. Revisions share modules, as revisions of one
// artifact do.
func TestIdleSet_model(t *testing.T) {
	keys := make([]warmKey, 6)
	mods := []*module{{digest: "sha256:d0"}, {digest: "sha256:d1"}, {digest: "sha256:d2"}}
	modOf := map[warmKey]*module{}
	for i := range keys {
		keys[i] = warmKey{vocab.TenantID("t" + strconv.Itoa(i%2)), vocab.RevisionID("r" + strconv.Itoa(i))}
		modOf[keys[i]] = mods[i%len(mods)]
	}
	for seed := range uint64(50) {
		rng := rand.New(rand.NewPCG(seed, 1))
		s, m := newIdleSet(), &idleModel{}
		now := time.Unix(1000, 0)
		for step := range 400 {
			k := keys[rng.IntN(len(keys))]
			var got, want []*warmInstance
			switch op := rng.IntN(11); {
			case op < 4: // add; sometimes at an earlier time (put back late)
				now = now.Add(time.Duration(rng.IntN(5)-1) * time.Millisecond)
				w1, w2 := &warmInstance{key: k, m: modOf[k]}, &warmInstance{key: k, m: modOf[k]}
				s.add(w1, now)
				m.add(w2, now)
				if !w1.idleSince.Equal(w2.idleSince) {
					t.Fatalf("seed %d step %d: idle since %v, model %v", seed, step, w1.idleSince, w2.idleSince)
				}
				continue
			case op < 7:
				got, want = []*warmInstance{s.take(k)}, []*warmInstance{m.take(k)}
			case op < 8:
				got, want = []*warmInstance{s.dropOldest()}, []*warmInstance{m.dropOldest()}
			case op < 9:
				got, want = s.dropKey(k), m.removeIf(func(w *warmInstance) bool { return w.key == k })
			case op < 10: // in no order: sorted as the model's
				d := modOf[k].digest
				got, want = s.dropDigest(d), m.removeIf(func(w *warmInstance) bool { return w.m.digest == d })
				order := func(a, b *warmInstance) int {
					if c := a.idleSince.Compare(b.idleSince); c != 0 {
						return c
					}
					return strings.Compare(string(a.key.rev), string(b.key.rev))
				}
				slices.SortStableFunc(got, order)
				slices.SortStableFunc(want, order)
			default:
				at, idle := now.Add(time.Duration(rng.IntN(4))*time.Millisecond), time.Duration(rng.IntN(30))*time.Millisecond
				got = s.expire(at, idle)
				want = m.removeIf(func(w *warmInstance) bool { return at.Sub(w.idleSince) > idle })
			}
			checkIdleSet(t, seed, step, &s, m, got, want)
		}
	}
}

// checkIdleSet compares the answers of one operation (instances are
// compared by their model twins: same key, same idleSince, same position)
// and the state of s with the model's.
func checkIdleSet(t *testing.T, seed uint64, step int, s *idleSet, m *idleModel, got, want []*warmInstance) {
	t.Helper()
	same := func(a, b *warmInstance) bool {
		return (a == nil) == (b == nil) && (a == nil || a.key == b.key && a.idleSince.Equal(b.idleSince))
	}
	if !slices.EqualFunc(got, want, same) {
		t.Fatalf("seed %d step %d: answered %v, model %v", seed, step, describe(got), describe(want))
	}
	var long []*warmInstance
	for w := s.oldest; w != nil; w = w.newer {
		long = append(long, w)
	}
	var back []*warmInstance
	for w := s.newest; w != nil; w = w.older {
		back = append(back, w)
	}
	slices.Reverse(back)
	if !slices.EqualFunc(long, m.all, same) || !slices.Equal(long, back) || s.n != len(m.all) {
		t.Fatalf("seed %d step %d: long list %v (backwards %v, n %d), model %v",
			seed, step, describe(long), describe(back), s.n, describe(m.all))
	}
	total := 0
	for k, list := range s.byKey {
		var want []*warmInstance
		for _, w := range long {
			if w.key == k {
				want = append(want, w)
			}
		}
		if len(list) == 0 || !slices.Equal(list, want) {
			t.Fatalf("seed %d step %d: key %v holds %v, the long list %v", seed, step, k, describe(list), describe(want))
		}
		total += len(list)
	}
	if total != s.n {
		t.Fatalf("seed %d step %d: %d by key, %d in all", seed, step, total, s.n)
	}
	indexed := 0
	for d, ks := range s.keys {
		for k := range ks {
			if list := s.byKey[k]; len(list) == 0 || list[0].m.digest != d {
				t.Fatalf("seed %d step %d: key %v indexed under %s, holds %v", seed, step, k, d, describe(list))
			}
		}
		indexed += len(ks)
	}
	if indexed != len(s.byKey) {
		t.Fatalf("seed %d step %d: %d keys indexed by module, %d held", seed, step, indexed, len(s.byKey))
	}
}

func describe(ws []*warmInstance) []string {
	var out []string
	for _, w := range ws {
		if w == nil {
			out = append(out, "nil")
			continue
		}
		out = append(out, string(w.key.rev)+"@"+strconv.FormatInt(w.idleSince.UnixMilli()%100000, 10))
	}
	return out
}

// TestWarmPool_boundCountsRunning: the pool's bound counts the instances
// running as well as the idle ones; an instance put back while the
// running ones fill the bound is given back to close, and once they end
// the idle ones may fill it again.
func TestWarmPool_boundCountsRunning(t *testing.T) {
	p := newWarmPool(nil, nil, nil, Config{})
	now := time.Unix(0, 0)
	put := func(rev string, max int) int {
		now = now.Add(time.Millisecond)
		return len(p.put(&warmInstance{key: warmKey{"acme", vocab.RevisionID(rev)}, m: &module{digest: "sha256:d"}}, now, max, time.Hour))
	}
	p.running.Add(1) // one activation runs
	if closed := put("a", 2); closed != 0 || p.idle.n != 1 {
		t.Fatalf("first put: %d closed, %d idle; want it kept (1 idle + 1 running = the bound)", closed, p.idle.n)
	}
	if closed := put("b", 2); closed != 1 || p.idle.n != 1 {
		t.Fatalf("second put: %d closed, %d idle; want the longest idle closed", closed, p.idle.n)
	}
	p.running.Add(1)
	if closed := put("c", 2); closed != 2 || p.idle.n != 0 {
		t.Fatalf("with two running: %d closed, %d idle; want the idle one and the one put back closed", closed, p.idle.n)
	}
	p.running.Add(-2)
	if closed := put("d", 2) + put("e", 2); closed != 0 || p.idle.n != 2 {
		t.Fatalf("none running: %d closed, %d idle; want both kept", closed, p.idle.n)
	}
}

package front

import (
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"strconv"
	"testing"
	"time"
)

// benchConn is a connection from ip that does nothing.
type benchConn struct {
	net.Conn // nil: only RemoteAddr and Close are called
	ip       net.IP
}

func (c benchConn) RemoteAddr() net.Addr { return &net.TCPAddr{IP: c.ip, Port: 1} }
func (c benchConn) Close() error         { return nil }

func benchIP(i int) net.IP { return net.IPv4(10, byte(i>>16), byte(i>>8), byte(i)) }

// BenchmarkConnLimiter_admitAtBound is a new connection at the total bound
// with n connections open, one per address: all busy (the new one is
// refused), or all idle keep-alives (the heaviest address's longest idle
// one is shed and the new one goes idle in turn). What one accept costs
// under the limiter's lock, which every request's state changes take too.
func BenchmarkConnLimiter_admitAtBound(b *testing.B) {
	for _, state := range []http.ConnState{http.StateActive, http.StateIdle} {
		for _, n := range []int{10, 1_000, 100_000} {
			b.Run(state.String()+"/conns="+strconv.Itoa(n), func(b *testing.B) {
				l := NewConnLimiter(ConnLimits{MaxConns: n, MaxConnsPerAddr: n, WriteStall: time.Second}, nil)
				for i := range n {
					l.ConnState(l.admit(benchConn{ip: benchIP(i)}), state)
				}
				i := n
				for b.Loop() {
					tc := l.admit(benchConn{ip: benchIP(i % (2 * n))})
					i++
					if (tc != nil) != (state == http.StateIdle) {
						b.Fatalf("admitted %v with every connection %s", tc != nil, state)
					}
					if tc != nil {
						l.ConnState(tc, state)
					}
				}
			})
		}
	}
}

// TestConnLimiter_heaviestModel drives a limiter with random accepts, state
// changes and closes, and after each checks heaviestLocked against its
// definition, computed by ranging over every address: an address with an
// idle or fresh connection, none with one holding more connections.
func TestConnLimiter_heaviestModel(t *testing.T) {
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 2))
		l := NewConnLimiter(ConnLimits{MaxConns: 40, MaxConnsPerAddr: 12, WriteStall: time.Second}, nil)
		var open []*trackedConn
		for step := range 600 {
			switch op := rng.IntN(10); {
			case op < 4:
				if tc := l.admit(benchConn{ip: benchIP(rng.IntN(8))}); tc != nil {
					open = append(open, tc)
				}
			case op < 8 && len(open) > 0:
				states := []http.ConnState{http.StateActive, http.StateIdle, http.StateActive}
				l.ConnState(open[rng.IntN(len(open))], states[rng.IntN(len(states))])
			case len(open) > 0:
				i := rng.IntN(len(open))
				_ = open[i].Close()
				open = slices.Delete(open, i, i+1)
			}
			open = slices.DeleteFunc(open, func(c *trackedConn) bool { return c.kind == kindClosed }) // shed
			l.mu.Lock()
			most := -1
			for _, a := range l.mu.byAddr {
				if a.idle.head != nil || a.fresh.head != nil {
					most = max(most, a.open)
				}
			}
			got := l.heaviestLocked()
			l.mu.Unlock()
			switch {
			case most < 0 && got != nil:
				t.Fatalf("seed %d step %d: no address has an idle or fresh connection, heaviest holds %d", seed, step, got.open)
			case most >= 0 && (got == nil || got.open != most || got.idle.head == nil && got.fresh.head == nil):
				t.Fatalf("seed %d step %d: heaviest %+v, want one holding %d with one to shed", seed, step, got, most)
			}
		}
	}
}

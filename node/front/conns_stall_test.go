package front

import (
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/errors"
)

// TestConnLimiter_shedsStalledWriter: at a bound where every connection is
// serving a request, a connection whose write has been blocked for
// WriteStall (a client that stopped reading) is shed for the new one; a
// write blocked for less, or no write, is never shed.
func TestConnLimiter_shedsStalledWriter(t *testing.T) {
	tests := []struct {
		name string
		lim  ConnLimits
	}{
		{"per-address bound", ConnLimits{MaxConns: 100, MaxConnsPerAddr: 2, WriteStall: time.Second}},
		{"total bound", ConnLimits{MaxConns: 2, MaxConnsPerAddr: 100, WriteStall: time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := NewConnLimiter(tt.lim, nil)
			l.fakeNow = &atomic.Int64{}
			l.fakeNow.Store(int64(time.Hour))
			advance := func(d time.Duration) { l.fakeNow.Add(int64(d)) }
			var peers []net.Conn
			admit := func() *trackedConn {
				server, client := net.Pipe()
				peers = append(peers, server, client)
				tc := l.admit(server)
				if tc != nil {
					l.ConnState(tc, http.StateActive)
				}
				return tc
			}
			defer func() {
				for _, c := range peers {
					_ = c.Close()
				}
			}()
			c1, c2 := admit(), admit()
			if c1 == nil || c2 == nil {
				t.Fatal("the first two connections were refused")
			}
			if admit() != nil {
				t.Fatal("admitted at the bound with every connection busy and no write blocked")
			}
			advance(time.Second / 2)
			c1.writing.Store(l.sinceEpoch()) // blocked from now on
			advance(tt.lim.WriteStall - time.Nanosecond)
			if admit() != nil {
				t.Fatal("admitted by shedding a write blocked for less than WriteStall")
			}
			advance(time.Nanosecond)
			if admit() == nil {
				t.Fatal("refused although a write has been blocked for WriteStall")
			}
			_ = c1.Conn.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
			if _, err := c1.Conn.Write([]byte("x")); !errors.Is(err, io.ErrClosedPipe) {
				t.Fatalf("the stalled connection was not closed: %v", err)
			}
			if st := l.Stats(); st.Shed != 1 || st.Open != 2 || st.Refused != 2 {
				t.Fatalf("stats %+v, want 1 shed, 2 open, 2 refused", st)
			}
		})
	}
}

package front

import (
	"bufio"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/errors"
	"go.uber.org/goleak"

	"github.com/latent-node/latent-node/internal/testutil"
)

// limitedServer is an http.Server on a loopback listener wrapped by a
// ConnLimiter, owned by the test.
type limitedServer struct {
	l       *ConnLimiter
	addr    string
	kick    chan struct{} // a token after every limiter state change
	release chan struct{} // closing it ends the /block requests
	once    sync.Once
	srv     *http.Server
	wg      sync.WaitGroup
}

// unblock ends the /block requests.
func (ls *limitedServer) unblock() { ls.once.Do(func() { close(ls.release) }) }

func startLimited(t *testing.T, lim ConnLimits) *limitedServer {
	t.Helper()
	ignore := goleak.IgnoreCurrent()
	ls := &limitedServer{kick: make(chan struct{}, 1), release: make(chan struct{})}
	ls.l = NewConnLimiter(lim, nil)
	ls.l.changed = func() {
		select {
		case ls.kick <- struct{}{}:
		default:
		}
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") })
	mux.HandleFunc("GET /block", func(w http.ResponseWriter, _ *http.Request) {
		<-ls.release
		_, _ = io.WriteString(w, "done\n")
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ls.addr = ln.Addr().String()
	ls.srv = &http.Server{Handler: mux, ConnState: ls.l.ConnState, ReadHeaderTimeout: 10 * time.Second}
	ls.wg.Add(1)
	go func() {
		defer ls.wg.Done()
		_ = ls.srv.Serve(ls.l.Wrap(ln))
	}()
	t.Cleanup(func() {
		ls.unblock()
		_ = ls.srv.Close()
		ls.wg.Wait()
		goleak.VerifyNone(t, ignore)
	})
	return ls
}

// wait blocks until cond holds for the limiter's counters (at most 10 s).
func (ls *limitedServer) wait(t *testing.T, what string, cond func(ConnStats) bool) {
	t.Helper()
	deadline := time.NewTimer(10 * time.Second)
	defer deadline.Stop()
	for !cond(ls.l.Stats()) {
		select {
		case <-ls.kick:
		case <-deadline.C:
			t.Fatalf("%s: never reached; have %+v", what, ls.l.Stats())
		}
	}
}

// rawConn is one raw keep-alive connection.
type rawConn struct {
	c net.Conn
	r *bufio.Reader
}

func (ls *limitedServer) dial(t *testing.T, from string) *rawConn {
	t.Helper()
	d := net.Dialer{Timeout: 5 * time.Second}
	if from != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(from)}
	}
	c, err := d.Dial("tcp", ls.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	return &rawConn{c: c, r: bufio.NewReader(c)}
}

func (c *rawConn) send(path string) error {
	_, err := io.WriteString(c.c, "GET "+path+" HTTP/1.1\r\nHost: node\r\n\r\n")
	return err
}

// get sends one request and reads its answer; the connection stays open.
func (c *rawConn) get(path string) (int, error) {
	if err := c.send(path); err != nil {
		return 0, err
	}
	return c.read()
}

func (c *rawConn) read() (int, error) {
	resp, err := http.ReadResponse(c.r, nil)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode, nil
}

// closed reports whether the server closed the connection.
func (c *rawConn) closed() bool {
	_, err := c.r.ReadByte()
	return errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET)
}

func TestConnLimiter_shedsIdleForHealthz(t *testing.T) {
	const max, extra = 8, 4
	ls := startLimited(t, ConnLimits{MaxConns: max, MaxConnsPerAddr: 100})
	var cs []*rawConn
	for i := 0; i < max+extra; i++ {
		c := ls.dial(t, "")
		if st, err := c.get("/healthz"); err != nil || st != 200 {
			t.Fatalf("connection %d: %d %v", i, st, err)
		}
		ls.wait(t, "idle", func(s ConnStats) bool { return s.Idle == min(i+1, max) })
		cs = append(cs, c)
	}
	h := ls.dial(t, "")
	if st, err := h.get("/healthz"); err != nil || st != 200 {
		t.Fatalf("/healthz at the bound: %d %v", st, err)
	}
	s := ls.l.Stats()
	if s.Open != max || s.Shed != extra+1 || s.Refused != 0 {
		t.Fatalf("stats: %+v", s)
	}
	// The longest-idle connections were closed, the newest still serve.
	for i, c := range cs {
		if i <= extra {
			if !c.closed() {
				t.Fatalf("connection %d (longest idle) still open", i)
			}
			continue
		}
		if st, err := c.get("/healthz"); err != nil || st != 200 {
			t.Fatalf("connection %d: %d %v", i, st, err)
		}
	}
}

func TestConnLimiter_perAddress(t *testing.T) {
	ls := startLimited(t, ConnLimits{MaxConns: 100, MaxConnsPerAddr: 3})
	// Two idle connections from 127.0.0.2, older than any of 127.0.0.1.
	var other []*rawConn
	for i := 0; i < 2; i++ {
		c := ls.dial(t, "127.0.0.2")
		if st, err := c.get("/healthz"); err != nil || st != 200 {
			t.Fatalf("127.0.0.2: %d %v", st, err)
		}
		other = append(other, c)
	}
	ls.wait(t, "two idle", func(s ConnStats) bool { return s.Idle == 2 })

	// 127.0.0.1 at its bound with busy connections: a fourth is refused, and
	// no connection of another address is shed for it.
	var busy []*rawConn
	for i := 0; i < 3; i++ {
		c := ls.dial(t, "127.0.0.1")
		if err := c.send("/block"); err != nil {
			t.Fatal(err)
		}
		busy = append(busy, c)
	}
	ls.wait(t, "three busy", func(s ConnStats) bool { return s.Busy == 3 })
	refused := ls.dial(t, "127.0.0.1")
	if _, err := refused.get("/healthz"); err == nil {
		t.Fatal("a connection over the address's bound was served")
	}
	ls.wait(t, "refused", func(s ConnStats) bool { return s.Refused == 1 })
	if s := ls.l.Stats(); s.Shed != 0 || s.Open != 5 {
		t.Fatalf("stats: %+v", s)
	}
	// Another address is not held back by it.
	if st, err := ls.dial(t, "127.0.0.3").get("/healthz"); err != nil || st != 200 {
		t.Fatalf("other address: %d %v", st, err)
	}

	// Once 127.0.0.1's connections are idle, a new one sheds its own
	// longest-idle one, not 127.0.0.2's older ones.
	ls.unblock()
	for _, c := range busy {
		if st, err := c.read(); err != nil || st != 200 {
			t.Fatalf("blocked request: %d %v", st, err)
		}
	}
	allIdle := func(s ConnStats) bool { return s.Idle == s.Open }
	ls.wait(t, "all idle", allIdle)
	for _, c := range busy[1:] { // busy[0] becomes the address's longest idle
		if st, err := c.get("/healthz"); err != nil || st != 200 {
			t.Fatalf("touch: %d %v", st, err)
		}
		ls.wait(t, "idle again", allIdle)
	}
	if st, err := ls.dial(t, "127.0.0.1").get("/healthz"); err != nil || st != 200 {
		t.Fatalf("after idle: %d %v", st, err)
	}
	if !busy[0].closed() {
		t.Fatal("the address's longest-idle connection is open")
	}
	for _, c := range append(other, busy[1:]...) {
		if st, err := c.get("/healthz"); err != nil || st != 200 {
			t.Fatalf("a connection that should stay: %d %v", st, err)
		}
	}
	if s := ls.l.Stats(); s.Shed != 1 || s.Refused != 1 {
		t.Fatalf("stats: %+v", s)
	}
}

func TestConnLimiter_allBusyRefuses(t *testing.T) {
	ls := startLimited(t, ConnLimits{MaxConns: 2, MaxConnsPerAddr: 2})
	for i := 0; i < 2; i++ {
		if err := ls.dial(t, "").send("/block"); err != nil {
			t.Fatal(err)
		}
	}
	ls.wait(t, "two busy", func(s ConnStats) bool { return s.Busy == 2 })
	if _, err := ls.dial(t, "").get("/healthz"); err == nil {
		t.Fatal("served over the bound with every connection busy")
	}
	ls.wait(t, "refused", func(s ConnStats) bool { return s.Refused == 1 })
	// Idle connections go first, then one that never sent a request.
	ls.unblock()
	ls.wait(t, "idle", func(s ConnStats) bool { return s.Idle == 2 })
	_ = ls.dial(t, "") // silent
	ls.wait(t, "new", func(s ConnStats) bool { return s.New == 1 })
	if st, err := ls.dial(t, "").get("/healthz"); err != nil || st != 200 {
		t.Fatalf("healthz: %d %v", st, err)
	}
	// Both idle connections were shed before the silent one.
	if s := ls.l.Stats(); s.Shed != 2 || s.New != 1 || s.Open != 2 {
		t.Fatalf("stats: %+v", s)
	}
}

func TestConnLimiter_shedsSilent(t *testing.T) {
	ls := startLimited(t, ConnLimits{MaxConns: 1, MaxConnsPerAddr: 1})
	silent := ls.dial(t, "")
	ls.wait(t, "new", func(s ConnStats) bool { return s.New == 1 })
	// Nothing is idle: the connection that never sent a request makes room.
	if st, err := ls.dial(t, "").get("/healthz"); err != nil || st != 200 {
		t.Fatalf("healthz: %d %v", st, err)
	}
	if !silent.closed() {
		t.Fatal("the silent connection is open")
	}
	if s := ls.l.Stats(); s.Shed != 1 || s.Refused != 0 || s.Open != 1 {
		t.Fatalf("stats: %+v", s)
	}
}

// failingListener fails its first n accepts with err, then hands out conns
// of a pipe; Accept after Close returns net.ErrClosed.
type failingListener struct {
	mu     sync.Mutex
	fails  int
	err    error
	calls  chan struct{}
	closed chan struct{}
	once   sync.Once
}

func (f *failingListener) Accept() (net.Conn, error) {
	select {
	case f.calls <- struct{}{}:
	default:
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	select {
	case <-f.closed:
		return nil, net.ErrClosed
	default:
	}
	if f.fails != 0 {
		f.fails--
		return nil, f.err
	}
	a, b := net.Pipe()
	_ = b.Close()
	return a, nil
}

func (f *failingListener) Close() error   { f.once.Do(func() { close(f.closed) }); return nil }
func (f *failingListener) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)} }

func TestLimitedListener_backoff(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	var buf testutil.SyncBuffer
	lg := slog.New(slog.NewJSONHandler(&buf, nil))
	emfile := &net.OpError{Op: "accept", Net: "tcp", Err: syscall.EMFILE}
	f := &failingListener{fails: 3, err: emfile, calls: make(chan struct{}, 1), closed: make(chan struct{})}
	l := NewConnLimiter(ConnLimits{MaxConns: 4, MaxConnsPerAddr: 4}, lg)
	ln := l.Wrap(f)
	start := time.Now()
	c, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	_ = c.Close()
	// 5 + 10 + 20 ms of back-off; far less than a busy loop would spin.
	if el := time.Since(start); el < 35*time.Millisecond {
		t.Fatalf("three failed accepts retried within %v", el)
	}
	if s := l.Stats(); s.AcceptErrors != 3 || s.Open != 0 {
		t.Fatalf("stats: %+v", s)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 1 || !strings.Contains(lines[0], `"msg":"accept failed; retrying"`) ||
		!strings.Contains(lines[0], "too many open files") {
		t.Fatalf("want one JSON line, have:\n%s", buf.String())
	}

	// Closing the listener ends a back-off at once.
	f.mu.Lock()
	f.fails = 1 << 30
	f.mu.Unlock()
	done := make(chan error, 1)
	go func() { _, err := ln.Accept(); done <- err }()
	<-f.calls
	_ = ln.Close()
	select {
	case err := <-done:
		if !errors.Is(err, net.ErrClosed) {
			t.Fatalf("want net.ErrClosed, have %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Accept did not return after Close")
	}

	// A permanent error ends Accept.
	f2 := &failingListener{fails: 1, err: errors.New("boom"), calls: make(chan struct{}, 1), closed: make(chan struct{})}
	if _, err := l.Wrap(f2).Accept(); err == nil || err.Error() != "boom" {
		t.Fatalf("want the permanent error, have %v", err)
	}
}

func TestRateLog(t *testing.T) {
	var buf testutil.SyncBuffer
	r := NewRateLog(slog.New(slog.NewJSONHandler(&buf, nil)), time.Second)
	now := time.Unix(1000, 0)
	r.now = func() time.Time { return now }
	w := errorLogWriter{r}
	for i := 0; i < 5; i++ {
		_, _ = w.Write([]byte("http: TLS handshake error from 1.2.3.4:5: EOF\n"))
	}
	now = now.Add(time.Second)
	_, _ = w.Write([]byte("second\n"))
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], `"suppressed":0`) || !strings.Contains(lines[1], `"suppressed":4`) ||
		!strings.Contains(lines[1], `"err":"second"`) || !strings.HasPrefix(lines[0], "{") {
		t.Fatalf("have:\n%s", buf.String())
	}
	// The server's ErrorLog writes through it.
	buf.Reset()
	NewErrorLog(slog.New(slog.NewJSONHandler(&buf, nil))).Printf("http: %s", "x")
	if !strings.Contains(buf.String(), `"msg":"http server","err":"http: x"`) {
		t.Fatalf("error log: %s", buf.String())
	}
}

// TestConnLimiter_heaviestAddressPays: at the total bound the connection
// shed is the heaviest address's, even when a lighter address holds the
// longest-idle one (a quiet client's keep-alive connection survives a
// flood from another address).
func TestConnLimiter_heaviestAddressPays(t *testing.T) {
	const max = 6
	ls := startLimited(t, ConnLimits{MaxConns: max, MaxConnsPerAddr: 100})
	quiet := ls.dial(t, "127.0.0.1") // the longest idle of all
	if st, err := quiet.get("/healthz"); err != nil || st != 200 {
		t.Fatalf("quiet: %d %v", st, err)
	}
	ls.wait(t, "quiet idle", func(s ConnStats) bool { return s.Idle == 1 })
	for i := 1; i < max+3; i++ {
		c := ls.dial(t, "127.0.0.2")
		if st, err := c.get("/healthz"); err != nil || st != 200 {
			t.Fatalf("flood %d: %d %v", i, st, err)
		}
		ls.wait(t, "idle", func(s ConnStats) bool { return s.Idle == min(i+1, max) })
	}
	if st, err := quiet.get("/healthz"); err != nil || st != 200 {
		t.Fatalf("quiet after the flood (its connection was shed?): %d %v", st, err)
	}
	if s := ls.l.Stats(); s.Shed != 3 || s.Open != max {
		t.Fatalf("stats: %+v", s)
	}
}

func TestAddrKey(t *testing.T) {
	tcp := func(ip string, port int) net.Addr { return &net.TCPAddr{IP: net.ParseIP(ip), Port: port} }
	tests := []struct {
		name string
		a, b net.Addr
		same bool
	}{
		{"same IPv4, other port", tcp("10.0.0.1", 1), tcp("10.0.0.1", 2), true},
		{"other IPv4", tcp("10.0.0.1", 1), tcp("10.0.0.2", 1), false},
		{"IPv4 and its mapped IPv6 form", tcp("10.0.0.1", 1), tcp("::ffff:10.0.0.1", 1), true},
		{"same IPv6 /64", tcp("2001:db8:1:2::1", 1), tcp("2001:db8:1:2:ffff::9", 1), true},
		{"other IPv6 /64", tcp("2001:db8:1:2::1", 1), tcp("2001:db8:1:3::1", 1), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if have := addrKey(tt.a) == addrKey(tt.b); have != tt.same {
				t.Fatalf("same key: have %v, want %v", have, tt.same)
			}
		})
	}
}

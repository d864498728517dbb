package front

// The connection bounds of the HTTP listener: ConnLimiter, the listener it
// wraps with accept back-off, and the rate-limited log of the http.Server's
// errors.

import (
	"context"
	"crypto/tls"
	"log"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cockroachdb/errors"
)

// Connection bounds of the HTTP listener.
const (
	// DefaultMaxConnsCeiling is the highest default of ConnLimits.MaxConns;
	// the default is lower when the process's open-file limit is.
	DefaultMaxConnsCeiling = 4096
	// DefaultMaxConnsPerAddr is the default of ConnLimits.MaxConnsPerAddr.
	DefaultMaxConnsPerAddr = 256
	// DefaultWriteStall is the default of ConnLimits.WriteStall.
	DefaultWriteStall = time.Second
	// connsFDReserve is what DefaultMaxConns leaves of RLIMIT_NOFILE to the
	// data directory, the compile cache and the runtime.
	connsFDReserve = 64
)

// Accept error back-off: doubling from the first to the last, reset by a
// successful accept.
const (
	acceptBackoffMin = 5 * time.Millisecond
	acceptBackoffMax = time.Second
)

// ConnLimits bound the connections of the node's HTTP listener.
type ConnLimits struct {
	// MaxConns bounds open connections in total (0: DefaultMaxConns()).
	MaxConns int
	// MaxConnsPerAddr bounds open connections from one remote IP address
	// (0: DefaultMaxConnsPerAddr).
	MaxConnsPerAddr int
	// WriteStall is how long a connection's write must have been blocked
	// (its client not reading) for the connection to be shed at a bound
	// when no idle or fresh one can be (0: DefaultWriteStall).
	WriteStall time.Duration
}

func (c ConnLimits) withDefaults() ConnLimits {
	if c.MaxConns <= 0 {
		c.MaxConns = DefaultMaxConns()
	}
	if c.MaxConnsPerAddr <= 0 {
		c.MaxConnsPerAddr = DefaultMaxConnsPerAddr
	}
	if c.WriteStall <= 0 {
		c.WriteStall = DefaultWriteStall
	}
	return c
}

// ConnStats are the limiter's counters.
type ConnStats struct {
	Open         int    // connections open now: Busy + Idle + New
	Busy         int    // serving a request
	Idle         int    // keep-alive connections between requests
	New          int    // accepted, no request read yet
	Shed         uint64 // idle, silent or stalled connections closed to make room
	Refused      uint64 // connections accepted and closed at once: nothing could be shed
	AcceptErrors uint64 // failed accepts (each retried after a back-off)
}

// ConnLimiter bounds the connections of the listeners it wraps, in total and
// per remote address. At a bound it closes a connection that is not serving
// a request, to make room for the new one: the longest-idle keep-alive
// connection first, then the oldest connection that has not sent a request
// yet (of the new connection's address when that address is at its bound,
// else of the address that holds the most connections), and failing
// those, the connection whose answer's write has been blocked the longest,
// once for at least WriteStall (a client that stopped reading; its own
// address's at its bound, else the most loaded address's). Only when every
// connection is serving a request and writing, or waiting, normally is the
// new connection closed at once. A client that keeps a connection open
// without using it, or uses it without reading the answers, therefore
// never locks out another, and /healthz keeps answering at the bound.
//
// It learns whether a connection serves a request from the http.Server's
// ConnState hook (ConnState below), so the server must use it.
type ConnLimiter struct {
	lim      ConnLimits
	acceptLg *RateLog
	epoch    time.Time // of trackedConn.writing
	// fakeNow, when set (tests), is sinceEpoch.
	fakeNow *atomic.Int64

	mu struct {
		sync.Mutex
		open   int
		byAddr map[string]*addrConns
		// idle, fresh and active count every address's idle,
		// not-yet-active and active connections.
		idle, fresh, active int
		// sheddable[n] lists the addresses that hold n connections and
		// have an idle or fresh one; top is at least the highest such n.
		// heaviestLocked reads them instead of ranging over byAddr.
		sheddable []addrList
		top       int
		// noStallBefore (sinceEpoch): no connection's write can have been
		// blocked for WriteStall before then, as the last scan found
		// (stalledAnyLocked).
		noStallBefore int64
		shed          uint64
		refused       uint64
		acceptErrs    uint64
	}
	// changed, when set (tests), is called after every state change, without
	// the lock.
	changed func()
}

// addrConns are one remote address's connections.
type addrConns struct {
	open                int
	idle, fresh, active connList
	// bucket is the index of the sheddable list a is on, -1 for none;
	// links its place there.
	bucket int
	links[addrConns]
}

// links are an element's place in a dlist: embedded, its prev and next.
type links[T any] struct{ prev, next *T }

func (l *links[T]) linksOf() *links[T] { return l }

// dlist is an intrusive doubly linked list of elements that embed links,
// oldest first.
type dlist[T any, P interface {
	*T
	linksOf() *links[T]
}] struct{ head, tail *T }

// connList is one address's connections of one kind; addrList addresses.
type (
	connList = dlist[trackedConn, *trackedConn]
	addrList = dlist[addrConns, *addrConns]
)

func (q *dlist[T, P]) push(x *T) {
	l := P(x).linksOf()
	l.prev, l.next = q.tail, nil
	if q.tail != nil {
		P(q.tail).linksOf().next = x
	} else {
		q.head = x
	}
	q.tail = x
}

func (q *dlist[T, P]) remove(x *T) {
	l := P(x).linksOf()
	if l.prev != nil {
		P(l.prev).linksOf().next = l.next
	} else {
		q.head = l.next
	}
	if l.next != nil {
		P(l.next).linksOf().prev = l.prev
	} else {
		q.tail = l.prev
	}
	l.prev, l.next = nil, nil
}

func NewConnLimiter(lim ConnLimits, lg *slog.Logger) *ConnLimiter {
	l := &ConnLimiter{lim: lim.withDefaults(), acceptLg: NewRateLog(lg, time.Second), epoch: time.Now()}
	l.mu.byAddr = map[string]*addrConns{}
	return l
}

// OnChange makes the limiter call f after every state change, without its
// lock held. Set it before the limiter serves (tests wait on it).
func (l *ConnLimiter) OnChange(f func()) { l.changed = f }

// Stats returns the current counters.
func (l *ConnLimiter) Stats() ConnStats {
	l.mu.Lock()
	defer l.mu.Unlock()
	return ConnStats{Open: l.mu.open, Busy: l.mu.open - l.mu.idle - l.mu.fresh, Idle: l.mu.idle, New: l.mu.fresh,
		Shed: l.mu.shed, Refused: l.mu.refused, AcceptErrors: l.mu.acceptErrs}
}

// connKind is where a tracked connection is listed.
type connKind uint8

const (
	kindFresh  connKind = iota // accepted, no request read yet
	kindActive                 // serving a request (or hijacked)
	kindIdle                   // keep-alive, between requests
	kindClosed                 // removed
	kindNone                   // on no list: being admitted or dropped
)

// trackedConn is an accepted connection the limiter counts. It sits in at
// most one list of its address, by kind.
type trackedConn struct {
	net.Conn
	l    *ConnLimiter
	addr *addrConns
	key  string
	kind connKind // guarded by l.mu
	// writing is when the Write in progress began (nanoseconds since the
	// limiter's epoch, plus one), 0 when none is: a write blocked for
	// long makes the connection sheddable (stalledLocked).
	writing            atomic.Int64
	links[trackedConn] // its place in the address's list of its kind
	closeOnce          sync.Once
	closeErr           error
}

// list returns c's address list of kind and the limiter's count of that
// kind (nil, nil for none and closed).
//
// REQUIRES: l.mu held.
func (l *ConnLimiter) list(c *trackedConn, k connKind) (*connList, *int) {
	switch k {
	case kindIdle:
		return &c.addr.idle, &l.mu.idle
	case kindFresh:
		return &c.addr.fresh, &l.mu.fresh
	case kindActive:
		return &c.addr.active, &l.mu.active
	}
	return nil, nil
}

// setKind moves c to the list of k.
//
// REQUIRES: l.mu held.
func (l *ConnLimiter) setKind(c *trackedConn, k connKind) {
	if c.kind == k || c.kind == kindClosed {
		return
	}
	if q, n := l.list(c, c.kind); q != nil {
		q.remove(c)
		*n--
	}
	c.kind = k
	if q, n := l.list(c, k); q != nil {
		q.push(c)
		*n++
	}
	l.reindex(c.addr)
}

// reindex puts a on the sheddable list of its connection count if it has
// an idle or fresh connection, else on none. Call it after a's count or
// lists change.
//
// REQUIRES: l.mu held.
func (l *ConnLimiter) reindex(a *addrConns) {
	want := -1
	if a.idle.head != nil || a.fresh.head != nil {
		want = a.open
	}
	if want == a.bucket {
		return
	}
	if a.bucket >= 0 {
		l.mu.sheddable[a.bucket].remove(a)
	}
	a.bucket = want
	if want < 0 {
		return
	}
	for len(l.mu.sheddable) <= want {
		l.mu.sheddable = append(l.mu.sheddable, addrList{})
	}
	l.mu.sheddable[want].push(a)
	l.mu.top = max(l.mu.top, want)
}

// victim returns the connection of a (nil: none) to close to make room:
// its oldest idle one, else its oldest fresh one.
//
// REQUIRES: l.mu held.
func (l *ConnLimiter) victim(a *addrConns) *trackedConn {
	if a == nil {
		return nil
	}
	if a.idle.head != nil {
		return a.idle.head
	}
	return a.fresh.head
}

// heaviestLocked returns the address holding the most connections among
// those with one to shed (nil when none has), so that at the total bound
// the address that takes the most room gives it back, not a quiet client
// whose one keep-alive connection happens to be the longest idle.
//
// REQUIRES: l.mu held.
func (l *ConnLimiter) heaviestLocked() *addrConns {
	if l.mu.idle+l.mu.fresh == 0 {
		return nil
	}
	// top only moves down here, one empty list at a time: at most the
	// per-address bound of steps, each a nil check.
	for l.mu.top > 0 && l.mu.sheddable[l.mu.top].head == nil {
		l.mu.top--
	}
	if l.mu.top < len(l.mu.sheddable) {
		return l.mu.sheddable[l.mu.top].head
	}
	return nil
}

// stalledLocked returns the connection of a (nil: none) whose write has
// been blocked the longest, if for at least the limits' WriteStall at now
// (sinceEpoch): a client that stopped reading its answers.
//
// REQUIRES: l.mu held.
func (l *ConnLimiter) stalledLocked(a *addrConns, now int64) *trackedConn {
	var worst *trackedConn
	var since int64
	for c := a.active.head; c != nil; c = c.next {
		if w := c.writing.Load(); w != 0 && now-w >= int64(l.lim.WriteStall) && (worst == nil || w < since) {
			worst, since = c, w
		}
	}
	return worst
}

// stalledAnyLocked is stalledLocked of the address holding the most
// connections among those with a stalled one. It looks at every active
// connection, so when it finds none it notes when the first could be: the
// earliest write in progress plus WriteStall, or now plus WriteStall, as a
// write that begins later stalls later. Until then it answers nil at once,
// so a flood of connections at a bound where every connection is busy
// costs one scan per WriteStall, not one per connection. (A write whose
// start the scan did not see yet, because its goroutine read the clock
// before the scan and stored it after, is found late by that gap.)
//
// REQUIRES: l.mu held.
func (l *ConnLimiter) stalledAnyLocked(now int64) *trackedConn {
	if now < l.mu.noStallBefore {
		return nil
	}
	stall := int64(l.lim.WriteStall)
	var worst *trackedConn
	var since int64
	next := now + stall
	for _, a := range l.mu.byAddr {
		for c := a.active.head; c != nil; c = c.next {
			w := c.writing.Load()
			switch {
			case w == 0:
			case now-w < stall:
				next = min(next, w+stall)
			case worst == nil || a.open > worst.addr.open || a == worst.addr && w < since:
				worst, since = c, w
			}
		}
	}
	if worst == nil {
		l.mu.noStallBefore = next
	}
	return worst
}

// sinceEpoch is now for trackedConn.writing.
func (l *ConnLimiter) sinceEpoch() int64 {
	if l.fakeNow != nil {
		return l.fakeNow.Load()
	}
	return int64(time.Since(l.epoch)) + 1
}

// admit counts a newly accepted connection, closing victims to make room:
// an idle or fresh connection, else one whose answer's write has been
// blocked for WriteStall. It returns nil when nothing could be shed.
func (l *ConnLimiter) admit(c net.Conn) *trackedConn {
	key := addrKey(c.RemoteAddr())
	var shed []*trackedConn
	now := l.sinceEpoch()
	l.mu.Lock()
	a := l.mu.byAddr[key]
	if a == nil {
		a = &addrConns{bucket: -1}
	}
	ok := true
	if a.open >= l.lim.MaxConnsPerAddr {
		v := l.victim(a)
		if v == nil {
			v = l.stalledLocked(a, now)
		}
		if v != nil {
			l.dropLocked(v)
			shed = append(shed, v)
		} else {
			ok = false
		}
	}
	if ok && l.mu.open >= l.lim.MaxConns {
		v := l.victim(l.heaviestLocked())
		if v == nil {
			v = l.stalledAnyLocked(now)
		}
		if v != nil {
			l.dropLocked(v)
			shed = append(shed, v)
		} else {
			ok = false
		}
	}
	l.mu.shed += uint64(len(shed))
	var tc *trackedConn
	if ok {
		if a.open == 0 {
			l.mu.byAddr[key] = a
		}
		tc = &trackedConn{Conn: c, l: l, addr: a, key: key, kind: kindNone}
		a.open++
		l.mu.open++
		l.setKind(tc, kindFresh)
	} else {
		l.mu.refused++
	}
	l.mu.Unlock()
	for _, v := range shed {
		_ = v.Conn.Close() // the server sees the read fail and forgets it
	}
	l.notify()
	return tc
}

// dropLocked stops counting c.
//
// REQUIRES: l.mu held.
func (l *ConnLimiter) dropLocked(c *trackedConn) {
	if c.kind == kindClosed {
		return
	}
	l.setKind(c, kindNone) // off every list
	c.kind = kindClosed
	c.addr.open--
	l.mu.open--
	l.reindex(c.addr)
	if c.addr.open == 0 {
		delete(l.mu.byAddr, c.key)
	}
}

func (l *ConnLimiter) notify() {
	if l.changed != nil {
		l.changed()
	}
}

// ConnState is the http.Server's ConnState hook: it tells the limiter which
// connections serve a request.
func (l *ConnLimiter) ConnState(c net.Conn, s http.ConnState) {
	if t, ok := c.(*tls.Conn); ok { // a TLS listener over the wrapped one
		c = t.NetConn()
	}
	tc, ok := c.(*trackedConn)
	if !ok || tc.l != l {
		return
	}
	l.mu.Lock()
	switch s {
	case http.StateIdle:
		l.setKind(tc, kindIdle)
	case http.StateActive, http.StateHijacked:
		l.setKind(tc, kindActive)
	case http.StateClosed:
		l.dropLocked(tc)
	}
	l.mu.Unlock()
	l.notify()
}

// Write records when it began, so a write that stays blocked makes the
// connection sheddable.
func (c *trackedConn) Write(p []byte) (int, error) {
	c.writing.Store(c.l.sinceEpoch())
	n, err := c.Conn.Write(p)
	c.writing.Store(0)
	return n, err
}

// Close stops counting the connection and closes it.
func (c *trackedConn) Close() error {
	c.closeOnce.Do(func() {
		c.l.mu.Lock()
		c.l.dropLocked(c)
		c.l.mu.Unlock()
		c.closeErr = c.Conn.Close()
		c.l.notify()
	})
	return c.closeErr
}

// addrKey is the remote IPv4 address, or the /64 prefix of an IPv6 one
// (the port varies per connection).
func addrKey(a net.Addr) string {
	if ta, ok := a.(*net.TCPAddr); ok {
		if ip4 := ta.IP.To4(); ip4 != nil {
			return string(ip4)
		}
		// An IPv6 client usually holds a whole /64: one address per
		// connection would escape the per-address bound.
		return string(ta.IP.To16()[:8])
	}
	if a == nil {
		return ""
	}
	s := a.String()
	if host, _, err := net.SplitHostPort(s); err == nil {
		return host
	}
	return s
}

// limitedListener applies a ConnLimiter to a listener and backs off on
// accept errors instead of spinning.
type limitedListener struct {
	net.Listener
	l      *ConnLimiter
	closed chan struct{}
	once   sync.Once
}

// Wrap returns ln bounded by the limiter.
func (l *ConnLimiter) Wrap(ln net.Listener) net.Listener {
	return &limitedListener{Listener: ln, l: l, closed: make(chan struct{})}
}

// Accept returns the next connection the limiter admits. A failed accept
// that can succeed later (out of file descriptors, a connection aborted
// before it was accepted, a timeout) is logged (at most one line a second)
// and retried after a back-off that doubles up to a second; any other error,
// or closing the listener, ends Accept.
func (ll *limitedListener) Accept() (net.Conn, error) {
	var backoff time.Duration
	for {
		c, err := ll.Listener.Accept()
		if err != nil {
			if !retryableAccept(err) {
				return nil, err
			}
			backoff = min(max(2*backoff, acceptBackoffMin), acceptBackoffMax)
			ll.l.mu.Lock()
			ll.l.mu.acceptErrs++
			ll.l.mu.Unlock()
			ll.l.acceptLg.Log("accept failed; retrying", "err", err.Error(), "retry_in", backoff.String())
			t := time.NewTimer(backoff)
			select {
			case <-t.C:
			case <-ll.closed:
				t.Stop()
				return nil, net.ErrClosed
			}
			continue
		}
		backoff = 0
		if tc := ll.l.admit(c); tc != nil {
			return tc, nil
		}
		_ = c.Close() // nothing to shed: refused at once
	}
}

// Close closes the listener and ends a back-off in progress.
func (ll *limitedListener) Close() error {
	ll.once.Do(func() { close(ll.closed) })
	return ll.Listener.Close()
}

// retryableAccept reports whether an accept error can go away by itself.
func retryableAccept(err error) bool {
	if errors.Is(err, net.ErrClosed) {
		return false
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		switch errno {
		case syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM, syscall.ECONNABORTED,
			syscall.ECONNRESET, syscall.EINTR, syscall.EAGAIN, syscall.EPROTO, syscall.EPERM:
			return true
		}
	}
	return false
}

// RateLog writes at most one line per interval through a slog logger; the
// next line written counts the lines suppressed since the last one.
type RateLog struct {
	lg    *slog.Logger
	every time.Duration
	now   func() time.Time

	mu         sync.Mutex
	last       time.Time
	suppressed uint64
}

func NewRateLog(lg *slog.Logger, every time.Duration) *RateLog {
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	return &RateLog{lg: lg, every: every, now: time.Now}
}

func (r *RateLog) Log(msg string, args ...any) {
	r.mu.Lock()
	now := r.now()
	if !r.last.IsZero() && now.Sub(r.last) < r.every {
		r.suppressed++
		r.mu.Unlock()
		return
	}
	n := r.suppressed
	r.last, r.suppressed = now, 0
	r.mu.Unlock()
	r.lg.LogAttrs(context.Background(), slog.LevelWarn, msg, append(slog.Group("", args...).Value.Group(),
		slog.Uint64("suppressed", n))...)
}

// errorLogWriter is the http.Server's ErrorLog output: each line becomes a
// rate-limited structured record, so nothing reaches stderr as plain text.
type errorLogWriter struct{ r *RateLog }

func (w errorLogWriter) Write(p []byte) (int, error) {
	w.r.Log("http server", "err", strings.TrimSpace(string(p)))
	return len(p), nil
}

// NewErrorLog returns a *log.Logger for http.Server.ErrorLog writing to lg
// (at most one line a second).
func NewErrorLog(lg *slog.Logger) *log.Logger {
	return log.New(errorLogWriter{NewRateLog(lg, time.Second)}, "", 0)
}

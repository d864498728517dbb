package front

import (
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"
)

type stepClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *stepClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *stepClock) add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func TestLogLimiter_rate(t *testing.T) {
	clock := &stepClock{now: time.Unix(1000, 0)}
	dropped := map[string]int{}
	var mu sync.Mutex
	l := NewLogLimiter(clock, LogRates{Lines: 2, BurstLines: 3, Bytes: 1 << 20, BurstBytes: 1 << 20}, []string{"acme", "demo"},
		func(tenant string) func() {
			return func() { mu.Lock(); dropped[tenant]++; mu.Unlock() }
		})
	allowed := func(src LogSource, times int) int {
		n := 0
		for range times {
			if l.Allow(src, 100) {
				n++
			}
		}
		return n
	}
	acme, demo := LogSource{Tenant: "acme"}, LogSource{Tenant: "demo"}
	if got := allowed(acme, 5); got != 3 { // the burst
		t.Fatalf("acme: %d lines allowed, want 3", got)
	}
	if got := allowed(demo, 3); got != 3 { // its own bucket
		t.Fatalf("demo: %d lines allowed, want 3", got)
	}
	// Unauthenticated and unconfigured tenants share one bucket (from one
	// address: its shard has a quarter of the burst, at least one line).
	if got := allowed(LogSource{}, 2) + allowed(LogSource{Tenant: "stranger"}, 2); got != 1 {
		t.Fatalf("shared, one address: %d lines allowed, want 1", got)
	}
	// Peers have their own bucket.
	if got := allowed(LogSource{Peer: true}, 4); got != 3 {
		t.Fatalf("peer: %d lines allowed, want 3", got)
	}
	clock.add(time.Second) // two tokens back
	if got := allowed(acme, 5); got != 2 {
		t.Fatalf("acme after a second: %d lines allowed, want 2", got)
	}
	want := map[string]int{"acme": 5, SharedLogTenant: 3, PeerLogTenant: 1}
	for k, v := range want {
		if dropped[k] != v {
			t.Errorf("dropped[%s] = %d, want %d (%v)", k, dropped[k], v, dropped)
		}
	}
	if n := len(*l.buckets.Load()); n != 2 {
		t.Fatalf("%d tenant buckets, want 2 (only the configuration adds any)", n)
	}
	// A reload that configures beta gives it a bucket of its own, full;
	// acme's keeps its state.
	l.AddTenants([]string{"acme", "beta"})
	if got := allowed(LogSource{Tenant: "beta"}, 5); got != 3 {
		t.Fatalf("beta after addTenants: %d lines allowed, want 3", got)
	}
	if got := allowed(acme, 1); got != 0 {
		t.Fatalf("acme after addTenants: %d lines allowed, want 0 (its bucket is empty)", got)
	}
	if n := len(*l.buckets.Load()); n != 3 || dropped["beta"] != 2 {
		t.Fatalf("%d buckets (want 3), beta dropped %d (want 2)", n, dropped["beta"])
	}
}

// TestLogLimiter_bytes: a bucket also runs out of bytes; one client
// address takes at most its shard's share of the shared bucket, so other
// addresses still log, and the peers' bucket is apart.
func TestLogLimiter_bytes(t *testing.T) {
	clock := &stepClock{now: time.Unix(1000, 0)}
	l := NewLogLimiter(clock, LogRates{Lines: 1000, BurstLines: 1000, Bytes: 4000, BurstBytes: 8000}, []string{"acme"},
		func(string) func() { return func() {} })
	count := func(src LogSource, n, times int) int {
		ok := 0
		for range times {
			if l.Allow(src, n) {
				ok++
			}
		}
		return ok
	}
	if got := count(LogSource{Tenant: "acme"}, 1000, 20); got != 8 {
		t.Fatalf("acme: %d lines of 1000 bytes, want 8 (the byte burst)", got)
	}
	flood := LogSource{Addr: netip.MustParseAddr("192.0.2.1")}
	if got := count(flood, 1000, 20); got != 2 { // a quarter of 8000 bytes
		t.Fatalf("one address: %d lines of 1000 bytes, want 2", got)
	}
	// Other addresses (some share the flood's shard) still log.
	logged := 0
	for i := range 8 {
		logged += count(LogSource{Addr: netip.AddrFrom4([4]byte{198, 51, 100, byte(i)})}, 100, 1)
	}
	if logged < 6 {
		t.Fatalf("%d of 8 other addresses logged, want most", logged)
	}
	if got := count(LogSource{Peer: true}, 1000, 20); got != 8 {
		t.Fatalf("peer: %d lines, want 8 (its own bucket)", got)
	}
	clock.add(time.Second)
	if got := count(LogSource{Tenant: "acme"}, 1000, 20); got != 4 {
		t.Fatalf("acme after a second: %d lines, want 4", got)
	}
	// An IPv6 /64 is one client: one shard (of 2000 bytes) for both
	// addresses (a fresh limiter, so no other shard is spent).
	l = NewLogLimiter(clock, LogRates{Lines: 1000, BurstLines: 1000, Bytes: 4000, BurstBytes: 8000}, nil,
		func(string) func() { return func() {} })
	a, b := LogSource{Addr: netip.MustParseAddr("2001:db8::1")}, LogSource{Addr: netip.MustParseAddr("2001:db8::2")}
	if got := count(a, 1000, 2) + count(b, 1000, 2); got != 2 {
		t.Fatalf("one /64: %d lines, want 2", got)
	}
}

// TestLogSafe: fields are valid UTF-8 with one U+FFFD per run of invalid
// bytes, bounded once escaped, and cut with a marker.
func TestLogSafe(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"plain", "demo", "demo"},
		{"invalid run once", "a\xff\xfe\xffb", "a\ufffdb"},
		{"long invalid", strings.Repeat("\xff", 30000), "\ufffd"},
		{"cut", strings.Repeat("x", 200), strings.Repeat("x", 128) + "…[cut 72 bytes]"},
		{"escaped cost", strings.Repeat("\x01", 40), strings.Repeat("\x01", 21) + "…[cut 19 bytes]"},
		{"utf-8 kept", "grüße", "grüße"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if have := LogSafe(tc.in, 128); have != tc.want {
				t.Errorf("have %q, want %q", have, tc.want)
			}
		})
	}
}

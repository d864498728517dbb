// The access log's rate limits and field sanitising: the token buckets
// each line is charged to (per configured tenant, the peers', and a
// shared one behind shards by client address), and the bounds and forms
// of the fields a line carries.

package front

import (
	"hash/maphash"
	"log/slog"
	"maps"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/latent-node/latent-node/node/activation"
	"github.com/latent-node/latent-node/node/api"
	"github.com/latent-node/latent-node/vocab"
)

// Access log defaults: each bucket (a configured tenant's, the peers',
// and the shared one of requests without a configured tenant) may write
// this many lines and bytes a second, and this many at once after a quiet
// spell. Lines over either rate are dropped and counted in
// latent_log_lines_dropped_total. A line's bytes are estimated from its
// fields, each of which is bounded (MaxLogFieldBytes, MaxLogStderrBytes),
// so no single line is longer than a few KiB.
const (
	DefaultAccessLogRate       = 100
	DefaultAccessLogBurst      = 200
	DefaultAccessLogBytesRate  = 64 << 10
	DefaultAccessLogBytesBurst = 256 << 10
)

// Unauthenticated lines take a token from the shard of their client's
// address (IPv4 address or IPv6 /64, hashed into logShards shards with a
// per-process seed) before the shared bucket: one address gets at most a
// logShardShare-th of the shared rates, so it cannot exhaust the bucket
// and hide other clients' lines.
const (
	logShards     = 1024
	logShardShare = 4
)

// SharedLogTenant is the bucket and label of requests without a configured
// tenant (unauthenticated ones, mostly).
const SharedLogTenant = "unauthenticated"

// PeerLogTenant is the bucket and label of requests from cluster peers
// that presented the peer token.
const PeerLogTenant = "peer"

// Bounds of logged fields, in bytes once JSON-escaped (LogSafe).
const (
	MaxLogFieldBytes  = 128     // ids, names, methods, reasons
	MaxLogStderrBytes = 8 << 10 // a guest's stderr tail (4 KiB raw)
)

// invalidLogField stands for a path name the catalog's rules refuse.
const invalidLogField = "(invalid)"

// LogRates are a bucket's rates and bursts, in lines and bytes.
type LogRates struct{ Lines, BurstLines, Bytes, BurstBytes float64 }

// DefaultLogRates are the defaults above.
var DefaultLogRates = LogRates{Lines: DefaultAccessLogRate, BurstLines: DefaultAccessLogBurst, Bytes: DefaultAccessLogBytesRate,
	BurstBytes: DefaultAccessLogBytesBurst}

// shard is a client address shard's share of r.
func (r LogRates) shard() LogRates {
	return LogRates{r.Lines / logShardShare, max(r.BurstLines/logShardShare, 1), r.Bytes / logShardShare,
		max(r.BurstBytes/logShardShare, 1)}
}

// logBucket is a token bucket of log lines and bytes.
type logBucket struct {
	mu      sync.Mutex
	rates   LogRates
	lines   float64
	bytes   float64
	last    time.Time
	dropped func() // increments latent_log_lines_dropped_total{tenant}
}

func newLogBucket(r LogRates, now time.Time, dropped func()) *logBucket {
	return &logBucket{rates: r, lines: r.BurstLines, bytes: r.BurstBytes, last: now, dropped: dropped}
}

// take takes a line of n bytes at now; false when either rate is spent.
func (b *logBucket) take(now time.Time, n int) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if el := now.Sub(b.last).Seconds(); el > 0 {
		b.lines = min(b.rates.BurstLines, b.lines+el*b.rates.Lines)
		b.bytes = min(b.rates.BurstBytes, b.bytes+el*b.rates.Bytes)
		b.last = now
	}
	need := min(float64(n), b.rates.BurstBytes) // a line longer than the burst still passes a full bucket
	if b.lines < 1 || b.bytes < need {
		return false
	}
	b.lines--
	b.bytes -= need
	return true
}

// LogSource is who a log line is charged to.
type LogSource struct {
	Tenant vocab.TenantID // the authenticated principal's ("" before authentication)
	Peer   bool           // a cluster peer that presented the peer token
	Addr   netip.Addr     // the client's address (zero: unknown)
}

// LogLimiter rate-limits log lines per configured tenant. Its buckets are
// the configured tenants', the peers', and the shared one of every other
// line, behind fixed shards by client address; a reload that configures new
// tenants adds theirs (AddTenants), and nothing else ever does, so every
// map and array grows only with the configuration.
type LogLimiter struct {
	clock   vocab.Clock
	rates   LogRates
	newDrop func(tenant string) func()
	mu      sync.Mutex                            // serializes addTenants
	buckets atomic.Pointer[map[string]*logBucket] // replaced whole, never changed
	peer    *logBucket
	shared  *logBucket
	shards  [logShards]*logBucket
	seed    maphash.Seed
}

// NewLogLimiter rate-limits log lines at rates r (DefaultLogRates in
// production), with a bucket for each of tenants; dropped(tenant) returns
// what counts a dropped line of that bucket (SharedLogTenant,
// PeerLogTenant or a tenant).
func NewLogLimiter(clock vocab.Clock, r LogRates, tenants []string, dropped func(tenant string) func()) *LogLimiter {
	r.BurstLines, r.BurstBytes = max(r.BurstLines, 1), max(r.BurstBytes, 1)
	now := clock.Now()
	l := &LogLimiter{clock: clock, rates: r, newDrop: dropped, seed: maphash.MakeSeed(),
		peer: newLogBucket(r, now, dropped(PeerLogTenant)), shared: newLogBucket(r, now, dropped(SharedLogTenant))}
	for i := range l.shards {
		l.shards[i] = newLogBucket(r.shard(), now, l.shared.dropped)
	}
	m := make(map[string]*logBucket, len(tenants))
	l.buckets.Store(&m)
	l.AddTenants(tenants)
	return l
}

// AddTenants gives each tenant that has none a bucket of its own (full).
func (l *LogLimiter) AddTenants(tenants []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	cur := *l.buckets.Load()
	var next map[string]*logBucket
	now := l.clock.Now()
	for _, t := range tenants {
		if _, ok := cur[t]; ok || t == "" {
			continue
		}
		if next == nil {
			next = maps.Clone(cur)
		}
		next[t] = newLogBucket(l.rates, now, l.newDrop(t))
	}
	if next != nil {
		l.buckets.Store(&next)
	}
}

// bucket is tenant's bucket: its own when it is configured, else the
// shared one.
func (l *LogLimiter) bucket(tenant vocab.TenantID) *logBucket {
	if b := (*l.buckets.Load())[string(tenant)]; b != nil && tenant != "" {
		return b
	}
	return l.shared
}

// OwnBucket reports whether tenant has a bucket of its own (it is
// configured) rather than the shared one.
func (l *LogLimiter) OwnBucket(tenant vocab.TenantID) bool { return l.bucket(tenant) != l.shared }

// Allow takes a line of about n bytes from src's bucket, or counts a
// dropped line: a configured tenant's own bucket, else the peers', else
// the client address's shard and then the shared bucket.
func (l *LogLimiter) Allow(src LogSource, n int) bool {
	now := l.clock.Now()
	b := l.bucket(src.Tenant)
	switch {
	case b != l.shared:
	case src.Peer:
		b = l.peer
	default:
		key := src.Addr.Unmap().AsSlice()
		if len(key) == 16 {
			key = key[:8] // an IPv6 client usually holds a whole /64
		}
		if !l.shards[maphash.Bytes(l.seed, key)%logShards].take(now, n) {
			b.dropped()
			return false
		}
	}
	if !b.take(now, n) {
		b.dropped()
		return false
	}
	return true
}

// ClientAddr is r's remote address (zero when it is not ip:port).
func ClientAddr(r *http.Request) netip.Addr {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return netip.Addr{}
	}
	return ap.Addr()
}

// LogSafe is s as a log field: valid UTF-8 (each run of invalid bytes is
// one U+FFFD, never one per byte) and at most max bytes once JSON-escaped,
// else cut there with a marker naming how many bytes of s it left out.
func LogSafe(s string, max int) string {
	plain := len(s) <= max
	for i := 0; plain && i < len(s); i++ {
		plain = s[i] >= ' ' && s[i] < utf8.RuneSelf && s[i] != '"' && s[i] != '\\'
	}
	if plain {
		return s
	}
	var b strings.Builder
	cost := 0
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		next, c := i+size, 0
		switch {
		case r == utf8.RuneError && size <= 1:
			for next < len(s) {
				if r2, s2 := utf8.DecodeRuneInString(s[next:]); r2 != utf8.RuneError || s2 > 1 {
					break
				}
				next++
			}
			c = 3
		case r == '"' || r == '\\' || r == '\n' || r == '\r' || r == '\t':
			c = 2
		case r < ' ' || r == '\u2028' || r == '\u2029':
			c = 6
		default:
			c = size
		}
		if cost+c > max {
			b.WriteString("…[cut ")
			b.WriteString(strconv.Itoa(len(s) - i))
			b.WriteString(" bytes]")
			break
		}
		cost += c
		if r == utf8.RuneError && size <= 1 {
			b.WriteRune(utf8.RuneError)
		} else {
			b.WriteString(s[i:next])
		}
		i = next
	}
	return b.String()
}

// LogName is a tenant, service or route name of a request's path, logged
// only when the catalog's rules accept it.
func LogName(s string) string {
	if vocab.ValidatePathName(s) != nil {
		return invalidLogField
	}
	return s
}

// LineBytes estimates the bytes of a log line with attrs: its fields'
// (already bounded) plus the time, level, message and punctuation.
func LineBytes(attrs []slog.Attr) int {
	n := 96
	for _, a := range attrs {
		n += len(a.Key) + 4
		if a.Value.Kind() == slog.KindString {
			n += len(a.Value.String())
		} else {
			n += 20
		}
	}
	return n
}

// RouteKind names the API route of a mux pattern; the set is fixed, so the
// HTTP metrics' labels stay bounded.
func RouteKind(pattern string) string {
	if _, p, ok := strings.Cut(pattern, " "); ok {
		pattern = p
	}
	for _, k := range [...]struct{ prefix, kind string }{
		{"/v1/invoke/", "invoke"}, {"/v1/artifacts/", "artifact"}, {"/v1/deployments", "deployment"},
		{"/v1/admin/", "admin"}, {"/v1/admission", "admission"}, {"/healthz", "health"}, {"/readyz", "health"},
		{"/metrics", "metrics"}, {"/ui", "ui"},
	} {
		if strings.HasPrefix(pattern, k.prefix) {
			return k.kind
		}
	}
	return "other"
}

// ActivationID is the activation id of an invocation request, chosen
// before its handler runs: the caller's Latent-Activation-Id when the
// header parser accepts it (api.CallerActivationID), or a fresh one. It goes into the request's record and on the
// answer, refusals before the handler ran included; the handler and the
// log read the record.
func ActivationID(r *http.Request) string {
	if id, ok := api.CallerActivationID(r.Header); ok {
		return id
	}
	return activation.NewID() // the handler refuses such a header (invalid-header)
}

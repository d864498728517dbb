package node

import (
	"context"
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
	"github.com/latent-node/latent-node/runner"
	"github.com/latent-node/latent-node/vocab"
)

// Access log defaults: each bucket (a configured tenant's, the peers',
// and the shared one of requests without a configured tenant) may write
// this many lines and bytes a second, and this many at once after a quiet
// spell. Lines over either rate are dropped and counted in
// latent_log_lines_dropped_total. A line's bytes are estimated from its
// fields, each of which is bounded (maxLogFieldBytes, maxLogStderrBytes),
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

// sharedLogTenant is the bucket and label of requests without a configured
// tenant (unauthenticated ones, mostly).
const sharedLogTenant = "unauthenticated"

// peerLogTenant is the bucket and label of requests from cluster peers
// that presented the peer token.
const peerLogTenant = "peer"

// Bounds of logged fields, in bytes once JSON-escaped (logSafe).
const (
	maxLogFieldBytes  = 128     // ids, names, methods, reasons
	maxLogStderrBytes = 8 << 10 // a guest's stderr tail (4 KiB raw)
)

// invalidLogField stands for a path name the catalog's rules refuse.
const invalidLogField = "(invalid)"

// logRates are a bucket's rates and bursts, in lines and bytes.
type logRates struct{ lines, burstLines, bytes, burstBytes float64 }

// defaultLogRates are the defaults above.
var defaultLogRates = logRates{DefaultAccessLogRate, DefaultAccessLogBurst, DefaultAccessLogBytesRate, DefaultAccessLogBytesBurst}

// shard is a client address shard's share of r.
func (r logRates) shard() logRates {
	return logRates{r.lines / logShardShare, max(r.burstLines/logShardShare, 1), r.bytes / logShardShare,
		max(r.burstBytes/logShardShare, 1)}
}

// logBucket is a token bucket of log lines and bytes.
type logBucket struct {
	mu      sync.Mutex
	rates   logRates
	lines   float64
	bytes   float64
	last    time.Time
	dropped func() // increments latent_log_lines_dropped_total{tenant}
}

func newLogBucket(r logRates, now time.Time, dropped func()) *logBucket {
	return &logBucket{rates: r, lines: r.burstLines, bytes: r.burstBytes, last: now, dropped: dropped}
}

// take takes a line of n bytes at now; false when either rate is spent.
func (b *logBucket) take(now time.Time, n int) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if el := now.Sub(b.last).Seconds(); el > 0 {
		b.lines = min(b.rates.burstLines, b.lines+el*b.rates.lines)
		b.bytes = min(b.rates.burstBytes, b.bytes+el*b.rates.bytes)
		b.last = now
	}
	need := min(float64(n), b.rates.burstBytes) // a line longer than the burst still passes a full bucket
	if b.lines < 1 || b.bytes < need {
		return false
	}
	b.lines--
	b.bytes -= need
	return true
}

// logSource is who a log line is charged to.
type logSource struct {
	tenant vocab.TenantID // the authenticated principal's ("" before authentication)
	peer   bool           // a cluster peer that presented the peer token
	addr   netip.Addr     // the client's address (zero: unknown)
}

// logLimiter rate-limits log lines per configured tenant. Its buckets are
// the configured tenants', the peers', and the shared one of every other
// line, behind fixed shards by client address; a reload that configures new
// tenants adds theirs (addTenants), and nothing else ever does, so every
// map and array grows only with the configuration.
type logLimiter struct {
	clock   vocab.Clock
	rates   logRates
	newDrop func(tenant string) func()
	mu      sync.Mutex                            // serializes addTenants
	buckets atomic.Pointer[map[string]*logBucket] // replaced whole, never changed
	peer    *logBucket
	shared  *logBucket
	shards  [logShards]*logBucket
	seed    maphash.Seed
}

func newLogLimiter(clock vocab.Clock, r logRates, tenants []string, dropped func(tenant string) func()) *logLimiter {
	r.burstLines, r.burstBytes = max(r.burstLines, 1), max(r.burstBytes, 1)
	now := clock.Now()
	l := &logLimiter{clock: clock, rates: r, newDrop: dropped, seed: maphash.MakeSeed(),
		peer: newLogBucket(r, now, dropped(peerLogTenant)), shared: newLogBucket(r, now, dropped(sharedLogTenant))}
	for i := range l.shards {
		l.shards[i] = newLogBucket(r.shard(), now, l.shared.dropped)
	}
	m := make(map[string]*logBucket, len(tenants))
	l.buckets.Store(&m)
	l.addTenants(tenants)
	return l
}

// addTenants gives each tenant that has none a bucket of its own (full).
func (l *logLimiter) addTenants(tenants []string) {
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
func (l *logLimiter) bucket(tenant vocab.TenantID) *logBucket {
	if b := (*l.buckets.Load())[string(tenant)]; b != nil && tenant != "" {
		return b
	}
	return l.shared
}

// allow takes a line of about n bytes from src's bucket, or counts a
// dropped line: a configured tenant's own bucket, else the peers', else
// the client address's shard and then the shared bucket.
func (l *logLimiter) allow(src logSource, n int) bool {
	now := l.clock.Now()
	b := l.bucket(src.tenant)
	switch {
	case b != l.shared:
	case src.peer:
		b = l.peer
	default:
		key := src.addr.Unmap().AsSlice()
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

// clientAddr is r's remote address (zero when it is not ip:port).
func clientAddr(r *http.Request) netip.Addr {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return netip.Addr{}
	}
	return ap.Addr()
}

// logSafe is s as a log field: valid UTF-8 (each run of invalid bytes is
// one U+FFFD, never one per byte) and at most max bytes once JSON-escaped,
// else cut there with a marker naming how many bytes of s it left out.
func logSafe(s string, max int) string {
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

// logName is a tenant, service or route name of a request's path, logged
// only when the catalog's rules accept it.
func logName(s string) string {
	if vocab.ValidatePathName(s) != nil {
		return invalidLogField
	}
	return s
}

// lineBytes estimates the bytes of a log line with attrs: its fields'
// (already bounded) plus the time, level, message and punctuation.
func lineBytes(attrs []slog.Attr) int {
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

// accessWriter records the answer's status for the access log, and the
// refusal of a problem answer (RecordProblem).
type accessWriter struct {
	http.ResponseWriter
	status int
	rec    *activation.Record
}

func (w *accessWriter) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *accessWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(p)
}

// RecordProblem notes in the request's record the refusal whose problem
// api.WriteProblem is writing (an executed activation's outcome problem
// is not one).
func (w *accessWriter) RecordProblem(p api.Problem) {
	if p.Outcome == "" {
		w.rec.Answered, w.rec.Refusal = true, p.Refusal
	}
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (w *accessWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// routeKind names the API route of a mux pattern; the set is fixed, so the
// HTTP metrics' labels stay bounded.
func routeKind(pattern string) string {
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

// requestActivationID is the activation id of an invocation request, chosen
// before its handler runs: the caller's (one Latent-Activation-Id header,
// not blank, at most maxActivationIDBytes, trimmed as the header parser
// trims it) or a fresh one. It goes into the request's record and on the
// answer, refusals before the handler ran included; the handler and the
// log read the record.
func requestActivationID(r *http.Request) string {
	if v := r.Header.Values("Latent-Activation-Id"); len(v) == 1 && len(v[0]) <= maxActivationIDBytes {
		if id := strings.TrimSpace(v[0]); id != "" {
			return id
		}
	}
	return activation.NewID() // the handler refuses such a header (invalid-header)
}

// maxActivationIDBytes is the longest Latent-Activation-Id the node
// accepts (api.ParseInvokeHeaders' bound on a header's value).
const maxActivationIDBytes = 1024

// accessLogged writes one INFO line per request (rate-limited per tenant),
// counts every refusal in latent_rejections_total and observes the request's
// duration. Invocations carry their activation id in the answer's
// Latent-Activation-Id header, refusals before the handler ran included.
func (n *Node) accessLogged(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := n.clock.Now()
		rec := &activation.Record{}
		aw := &accessWriter{ResponseWriter: w, rec: rec}
		invoke := strings.HasPrefix(r.URL.Path, "/v1/invoke/")
		if invoke {
			rec.ID = requestActivationID(r)
			w.Header().Set("Latent-Activation-Id", rec.ID)
		}
		r = r.WithContext(activation.With(r.Context(), rec))
		defer func() {
			n.finishAccess(aw, r, rec, invoke, n.clock.Now().Sub(start))
		}()
		next.ServeHTTP(aw, r)
	})
}

func (n *Node) finishAccess(aw *accessWriter, r *http.Request, rec *activation.Record, invoke bool, took time.Duration) {
	status := aw.status
	if status == 0 {
		status = http.StatusOK // the handler wrote nothing: net/http answers 200
	}
	kind := routeKind(r.Pattern)
	n.metrics.request(kind, status, took)
	if rec.Refused() {
		n.metrics.rejected(rec.Refusal)
	}
	args := make([]slog.Attr, 0, 12)
	if invoke {
		id := rec.ID
		// The target as the path names it (the rate limit goes by the
		// authenticated tenant); names the catalog refuses are not logged.
		args = append(args, slog.String("id", logSafe(id, maxLogFieldBytes)), slog.String("tenant", logName(r.PathValue("tenant"))),
			slog.String("service", logName(r.PathValue("service"))), slog.String("route", logName(r.PathValue("route"))),
			slog.String("revision", string(rec.Revision)),
			slog.Int("status", status))
	} else {
		args = append(args, slog.String("method", logSafe(r.Method, maxLogFieldBytes)), slog.String("route_kind", kind),
			slog.String("tenant", string(rec.Tenant)), slog.Int("status", status))
	}
	switch {
	case rec.Executed:
		args = append(args, slog.String("outcome", rec.Outcome.String()), slog.Uint64("fuel", rec.FuelUsed),
			slog.Float64("queue_ms", ms(rec.Timing.QueueWait())), slog.Float64("exec_ms", ms(rec.Execution)))
	case rec.Refused():
		args = append(args, slog.String("reason", rec.Refusal.Reason.String()))
	}
	args = append(args, slog.Float64("ms", ms(took)))
	src := logSource{tenant: rec.Tenant, peer: rec.Peer, addr: clientAddr(r)}
	if !n.metrics.access.allow(src, lineBytes(args)) {
		return
	}
	msg := "request"
	if invoke {
		msg = "activation"
	}
	ctx := context.Background()
	n.log.LogAttrs(ctx, slog.LevelInfo, msg, args...)
	if rec.Executed && len(rec.Stderr) > 0 {
		level := slog.LevelInfo
		if rec.Outcome == runner.Success {
			level = slog.LevelDebug
		}
		if !n.log.Enabled(ctx, level) {
			return
		}
		attrs := []slog.Attr{args[0], slog.String("stderr", logSafe(string(rec.Stderr), maxLogStderrBytes))}
		if n.metrics.access.allow(src, lineBytes(attrs)) {
			n.log.LogAttrs(ctx, level, "guest stderr", attrs...)
		}
	}
}

// ms is d in milliseconds with microsecond resolution.
func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

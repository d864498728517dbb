package node

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"maps"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/latent-node/latent-node/catalog"
	"github.com/latent-node/latent-node/runner"
)

// Access log defaults: each tenant (and the shared bucket of requests
// without a configured tenant) may write this many lines a second, and this
// many at once after a quiet spell. Lines over the rate are dropped and
// counted in latent_log_lines_dropped_total.
const (
	DefaultAccessLogRate  = 100
	DefaultAccessLogBurst = 200
)

// sharedLogTenant is the bucket and label of requests without a configured
// tenant (unauthenticated ones, mostly).
const sharedLogTenant = "unauthenticated"

// maxProblemCapture bounds the bytes of a problem body the access log keeps
// to read its code and reason from; the fields it reads come first.
const maxProblemCapture = 4 << 10

// access is what one request's log line says. The handlers fill it through
// the request's context; the access-log middleware writes it once the
// answer is complete.
type access struct {
	tenant   catalog.TenantID // the authenticated principal's ("" before authentication)
	revision string
	// executed is set once a guest ran; outcome and the figures below are
	// then the activation's.
	executed    bool
	outcome     string
	fuel        uint64
	queue, exec time.Duration
	stderr      []byte
}

type accessKey struct{}

// accessOf returns the request's access record, or a record nobody reads
// when the request did not pass the access-log middleware.
func accessOf(ctx context.Context) *access {
	if a, ok := ctx.Value(accessKey{}).(*access); ok {
		return a
	}
	return &access{}
}

// logBucket is a token bucket of log lines.
type logBucket struct {
	mu      sync.Mutex
	tokens  float64
	last    time.Time
	dropped func() // increments latent_log_lines_dropped_total{tenant}
}

// logLimiter rate-limits log lines per configured tenant. Its buckets are
// the configured tenants' and one that every other line shares; a reload
// that configures new tenants adds theirs (addTenants), and nothing else
// ever does, so the map grows only with the configuration.
type logLimiter struct {
	clock   Clock
	rate    float64 // lines per second
	burst   float64
	newDrop func(tenant string) func()
	mu      sync.Mutex                            // serializes addTenants
	buckets atomic.Pointer[map[string]*logBucket] // replaced whole, never changed
}

func newLogLimiter(clock Clock, rate, burst int, tenants []string, dropped func(tenant string) func()) *logLimiter {
	l := &logLimiter{clock: clock, rate: float64(rate), burst: float64(max(burst, 1)), newDrop: dropped}
	m := make(map[string]*logBucket, len(tenants)+1)
	l.buckets.Store(&m)
	l.addTenants(append(tenants, sharedLogTenant))
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
		if _, ok := cur[t]; ok {
			continue
		}
		if next == nil {
			next = maps.Clone(cur)
		}
		next[t] = &logBucket{tokens: l.burst, last: now, dropped: l.newDrop(t)}
	}
	if next != nil {
		l.buckets.Store(&next)
	}
}

// bucket is tenant's bucket: its own when it is configured, else the
// shared one.
func (l *logLimiter) bucket(tenant catalog.TenantID) *logBucket {
	m := *l.buckets.Load()
	if b, ok := m[string(tenant)]; ok && tenant != "" {
		return b
	}
	return m[sharedLogTenant]
}

// allow takes a token from tenant's bucket, or counts a dropped line.
func (l *logLimiter) allow(tenant catalog.TenantID) bool {
	b := l.bucket(tenant)
	now := l.clock.Now()
	b.mu.Lock()
	if el := now.Sub(b.last); el > 0 {
		b.tokens = min(l.burst, b.tokens+el.Seconds()*l.rate)
		b.last = now
	}
	ok := b.tokens >= 1
	if ok {
		b.tokens--
	}
	b.mu.Unlock()
	if !ok {
		b.dropped()
	}
	return ok
}

// accessWriter records the status of the answer and the head of a problem
// body.
type accessWriter struct {
	http.ResponseWriter
	status  int
	problem bool
	head    bytes.Buffer
}

func (w *accessWriter) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
		w.problem = strings.HasPrefix(w.Header().Get("Content-Type"), "application/problem+json")
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *accessWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if w.problem && w.head.Len() < maxProblemCapture {
		w.head.Write(p[:min(len(p), maxProblemCapture-w.head.Len())])
	}
	return w.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (w *accessWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// problemFields are the fields of a problem body the access log and the
// refusal metrics read.
type problemFields struct{ code, reason, scope, dimension, outcome string }

// readProblem reads the top-level string fields of a problem body, as far
// as its (possibly cut) head goes: they come before the long ones.
func readProblem(head []byte) problemFields {
	var p problemFields
	dec := json.NewDecoder(bytes.NewReader(head))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return p
	}
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			return p
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return p
		}
		var s string
		if len(v) == 0 || v[0] != '"' || json.Unmarshal(v, &s) != nil {
			continue
		}
		switch k {
		case "code":
			p.code = s
		case "reason":
			p.reason = s
		case "scope":
			p.scope = s
		case "dimension":
			p.dimension = s
		case "outcome":
			p.outcome = s
		}
	}
	return p
}

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

// requestActivationID is the activation id of an invocation request before
// its handler ran: the caller's (one non-empty header) or a fresh one. The
// handler keeps it (or, for an invalid header, sets its own); the log reads
// the answer's header, so both always agree.
func requestActivationID(r *http.Request) string {
	if v := r.Header.Values("Latent-Activation-Id"); len(v) == 1 && v[0] != "" {
		return v[0]
	}
	return newActivationID()
}

// accessLogged writes one INFO line per request (rate-limited per tenant),
// counts every refusal in latent_rejections_total and observes the request's
// duration. Invocations carry their activation id in the answer's
// Latent-Activation-Id header, refusals before the handler ran included.
func (n *Node) accessLogged(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := n.clock.Now()
		rec := &access{}
		aw := &accessWriter{ResponseWriter: w}
		invoke := strings.HasPrefix(r.URL.Path, "/v1/invoke/")
		if invoke {
			w.Header().Set("Latent-Activation-Id", requestActivationID(r))
		}
		r = r.WithContext(context.WithValue(r.Context(), accessKey{}, rec))
		defer func() {
			n.finishAccess(aw, r, rec, invoke, n.clock.Now().Sub(start))
		}()
		next.ServeHTTP(aw, r)
	})
}

func (n *Node) finishAccess(aw *accessWriter, r *http.Request, rec *access, invoke bool, took time.Duration) {
	status := aw.status
	if status == 0 {
		status = http.StatusOK // the handler wrote nothing: net/http answers 200
	}
	kind := routeKind(r.Pattern)
	n.metrics.request(kind, status, took)
	var prob problemFields
	if aw.problem {
		prob = readProblem(aw.head.Bytes())
		if prob.outcome == "" && !rec.executed {
			n.metrics.rejected(prob.code, prob.reason, prob.scope, prob.dimension)
		}
	}
	if !n.metrics.access.allow(rec.tenant) {
		return
	}
	args := make([]slog.Attr, 0, 12)
	if invoke {
		id := aw.Header().Get("Latent-Activation-Id")
		// The target as the path names it (the rate limit goes by the
		// authenticated tenant).
		args = append(args, slog.String("id", id), slog.String("tenant", r.PathValue("tenant")),
			slog.String("service", r.PathValue("service")), slog.String("route", r.PathValue("route")),
			slog.String("revision", rec.revision),
			slog.Int("status", status))
	} else {
		args = append(args, slog.String("method", r.Method), slog.String("route_kind", kind),
			slog.String("tenant", string(rec.tenant)), slog.Int("status", status))
	}
	switch {
	case rec.executed:
		args = append(args, slog.String("outcome", rec.outcome), slog.Uint64("fuel", rec.fuel),
			slog.Float64("queue_ms", ms(rec.queue)), slog.Float64("exec_ms", ms(rec.exec)))
	case aw.problem:
		args = append(args, slog.String("reason", prob.reason))
	}
	args = append(args, slog.Float64("ms", ms(took)))
	msg := "request"
	if invoke {
		msg = "activation"
	}
	ctx := context.Background()
	n.log.LogAttrs(ctx, slog.LevelInfo, msg, args...)
	if rec.executed && len(rec.stderr) > 0 {
		level := slog.LevelInfo
		if rec.outcome == string(runner.Success) {
			level = slog.LevelDebug
		}
		if n.log.Enabled(ctx, level) && n.metrics.access.allow(rec.tenant) {
			n.log.LogAttrs(ctx, level, "guest stderr", slog.String("id", aw.Header().Get("Latent-Activation-Id")),
				slog.String("stderr", string(rec.stderr)))
		}
	}
}

// ms is d in milliseconds with microsecond resolution.
func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

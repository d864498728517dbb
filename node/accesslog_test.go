package node

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/latent-node/latent-node/internal/testutil"
	"github.com/latent-node/latent-node/internal/testwasm"
	"github.com/latent-node/latent-node/node/front"
	"github.com/latent-node/latent-node/refusal"
	"github.com/latent-node/latent-node/vocab"
)

// startLoggedNode is startNode with the node's log captured as JSON lines
// (debug level included).
func startLoggedNode(t *testing.T) (*testNode, *testutil.SyncBuffer) {
	t.Helper()
	logs := &testutil.SyncBuffer{}
	return startNodeLogged(t, nil, slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))), logs
}

// logLines returns the captured lines with message msg and field id.
func logLines(t *testing.T, logs *testutil.SyncBuffer, msg, id string) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(logs.String()))
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("log line %q: %v", sc.Text(), err)
		}
		if m["msg"] == msg && m["id"] == id {
			out = append(out, m)
		}
	}
	return out
}

// TestAccessLog_followsActivation follows activation ids through the
// answer's header, the one log line and the metrics: a completed
// activation (generated id), one with the caller's id, refusals before and
// after authentication.
func TestAccessLog_followsActivation(t *testing.T) {
	tn, logs := startLoggedNode(t)
	m := tn.n.metrics
	tests := []struct {
		name    string
		key     string
		path    string
		headers map[string]string
		status  int
		want    map[string]any // fields the line must have
		counter func() float64 // a metric the request must have moved to 1
	}{
		{"completed, generated id", tn.key, "/v1/invoke/demo/hello/greet", nil, 200,
			map[string]any{"level": "INFO", "tenant": "demo", "service": "hello", "route": "greet", "status": 200.0, "outcome": "success"},
			nil},
		{"completed, caller's id", tn.key, "/v1/invoke/demo/hello/greet", map[string]string{"Latent-Activation-Id": "trace-me-1"}, 200,
			map[string]any{"id": "trace-me-1", "outcome": "success"}, nil},
		{"refused: invalid header", tn.key, "/v1/invoke/demo/hello/greet", map[string]string{"Latent-Priority": "high"}, 400,
			map[string]any{"reason": refusal.ReasonInvalidHeader.String(), "status": 400.0},
			func() float64 {
				return counterValue(m.rejections.WithLabelValues("invalid-argument", refusal.ReasonInvalidHeader.String(), "request", "Latent-Priority"))
			}},
		{"refused: unauthenticated", "", "/v1/invoke/demo/hello/greet", map[string]string{"Latent-Activation-Id": "anon-1"}, 401,
			map[string]any{"id": "anon-1", "reason": "unauthenticated", "tenant": "demo"},
			func() float64 {
				return counterValue(m.rejections.WithLabelValues("unauthenticated", "unauthenticated", "principal", ""))
			}},
		{"refused: other tenant", tn.key, "/v1/invoke/acme/hello/greet", nil, 403,
			map[string]any{"reason": refusal.ReasonPrincipalNotAuthorized.String(), "tenant": "acme"},
			func() float64 {
				return counterValue(m.rejections.WithLabelValues("permission-denied", refusal.ReasonPrincipalNotAuthorized.String(), "principal", ""))
			}},
		{"refused: unknown service", tn.key, "/v1/invoke/demo/nope/greet", nil, 404,
			map[string]any{"service": "nope", "status": 404.0}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := tn.do(t, "POST", tc.path, tc.key, []byte("ada"), tc.headers)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.status, body)
			}
			id := resp.Header.Get("Latent-Activation-Id")
			if id == "" {
				t.Fatal("no Latent-Activation-Id in the answer")
			}
			lines := logLines(t, logs, "activation", id)
			if len(lines) != 1 {
				t.Fatalf("%d activation lines for id %s, want 1; log:\n%s", len(lines), id, logs.String())
			}
			line := lines[0]
			for k, v := range tc.want {
				if line[k] != v {
					t.Errorf("%s = %v, want %v (line %v)", k, line[k], v, line)
				}
			}
			if tc.status == 200 {
				rev, _ := line["revision"].(string)
				fuel, _ := line["fuel"].(float64)
				_, qok := line["queue_ms"].(float64)
				_, eok := line["exec_ms"].(float64)
				if !strings.HasPrefix(rev, "rev1-") || fuel == 0 || !qok || !eok || rev != resp.Header.Get("Latent-Revision") {
					t.Fatalf("completed line lacks its figures: %v", line)
				}
				got := counterValue(m.activations.WithLabelValues("demo", "hello", "greet", rev, "success"))
				if got == 0 {
					t.Fatal("latent_activations_total has no series for the revision")
				}
			}
			if tc.counter != nil {
				if got := tc.counter(); got != 1 {
					t.Fatalf("refusal counted %v times, want 1", got)
				}
			}
		})
	}
	// Negative control: an id no request carried has no line.
	if l := logLines(t, logs, "activation", "never-sent"); len(l) != 0 {
		t.Fatalf("lines for an unknown id: %v", l)
	}
}

// TestAccessLog_roleRefusalCounted: a 403 for a missing role and a 404 for an
// unknown path are counted (the access log counts every refusal).
func TestAccessLog_roleRefusalCounted(t *testing.T) {
	tn, _ := startLoggedNode(t)
	m := tn.n.metrics
	resp, _ := tn.do(t, "GET", "/no/such/path", tn.key, nil, nil)
	if resp.StatusCode != 404 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if got := counterValue(m.rejections.WithLabelValues("invalid-argument", refusal.ReasonUnknownPath.String(), "request", "path")); got != 1 {
		t.Fatalf("unknown path counted %v times", got)
	}
	// A success is not a refusal.
	before := seriesCount(m.rejections)
	if resp, _ := tn.do(t, "GET", "/v1/admission", tn.key, nil, nil); resp.StatusCode != 200 {
		t.Fatalf("admission: %d", resp.StatusCode)
	}
	if after := seriesCount(m.rejections); after != before {
		t.Fatalf("a 200 added refusal series: %d -> %d", before, after)
	}
}

// TestAccessLog_rateLimited drives the middleware with an injected limiter:
// lines over the rate are dropped and counted per tenant (one client
// address: its shard has a quarter of the shared bucket's rates).
func TestAccessLog_rateLimited(t *testing.T) {
	n, logs := bareNode(t)
	clock := testutil.NewClock(time.Unix(1000, 0))
	n.clock = clock
	n.metrics.access = front.NewLogLimiter(clock, front.LogRates{Lines: 4, BurstLines: 8, Bytes: 1 << 20, BurstBytes: 1 << 20}, nil,
		func(t string) func() { return n.metrics.logDropped.WithLabelValues(t).Inc })
	h := accessLogOf(n).logged(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(204) }))
	for range 5 {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/healthz", nil))
	}
	if got := strings.Count(logs.String(), `"msg":"request"`); got != 2 {
		t.Fatalf("%d lines written, want 2:\n%s", got, logs.String())
	}
	if got := counterValue(n.metrics.logDropped.WithLabelValues(front.SharedLogTenant)); got != 3 {
		t.Fatalf("dropped counter %v, want 3", got)
	}
	clock.Advance(time.Second)
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/healthz", nil))
	if got := strings.Count(logs.String(), `"msg":"request"`); got != 3 {
		t.Fatalf("%d lines after a second, want 3", got)
	}
}

// TestAccessLog_boundedFields: a request with an invalid-UTF-8 path and
// a long activation id logs a short line: the names the catalog refuses
// as a marker, no id longer than the node accepts (the answer gets a fresh
// one), and no method longer than the field bound.
func TestAccessLog_boundedFields(t *testing.T) {
	n, logs := bareNode(t)
	n.clock = vocab.WallClock
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(404) })
	h := accessLogOf(n).logged(front.RouteInvocations(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(401) }), mux))
	junk := strings.Repeat("%FF", 10000)
	req := httptest.NewRequest("POST", "/v1/invoke/"+junk+"/s/"+junk, nil)
	req.Header.Set("Latent-Activation-Id", strings.Repeat("\xff", 30000))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if id := rec.Header().Get("Latent-Activation-Id"); len(id) != 32 {
		t.Errorf("answer's activation id %q, want a fresh one", id)
	}
	req = httptest.NewRequest("POST", "/v1/invoke/demo/hello/greet", nil)
	req.Header.Set("Latent-Activation-Id", strings.Repeat("\xfe", 1000)) // accepted, logged cut
	h.ServeHTTP(httptest.NewRecorder(), req)
	req = httptest.NewRequest("GET", "/", nil)
	req.Method = strings.Repeat("M", 5000)
	h.ServeHTTP(httptest.NewRecorder(), req)
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d lines, want 3:\n%s", len(lines), logs.String())
	}
	for _, l := range lines {
		if len(l) > 1024 {
			t.Errorf("line of %d bytes: %.300s", len(l), l)
		}
	}
	if !strings.Contains(lines[0], `"tenant":"(invalid)","service":"s","route":"(invalid)"`) {
		t.Errorf("invalid names logged as %s", lines[0])
	}
	if !strings.Contains(lines[1], "\"id\":\"\ufffd\",") || !strings.Contains(lines[1], `"tenant":"demo","service":"hello","route":"greet"`) {
		t.Errorf("valid request logged as %s", lines[1])
	}
	if !strings.Contains(lines[2], `"method":"MMM`) || !strings.Contains(lines[2], "…[cut 4872 bytes]") {
		t.Errorf("long method logged as %s", lines[2])
	}
}

// counterValue reads a counter.
func counterValue(c prometheus.Counter) float64 {
	r := prometheus.NewRegistry()
	r.MustRegister(c)
	mfs, err := r.Gather()
	if err != nil || len(mfs) != 1 || len(mfs[0].GetMetric()) != 1 {
		panic(fmt.Sprint("gather: ", err))
	}
	return mfs[0].GetMetric()[0].GetCounter().GetValue()
}

// seriesCount is the number of series c collects.
func seriesCount(c prometheus.Collector) int {
	ch := make(chan prometheus.Metric, 4096)
	c.Collect(ch)
	close(ch)
	return len(ch)
}

// TestAccessLog_guestStderr: a failed activation's stderr tail is logged
// at INFO under its activation id.
func TestAccessLog_guestStderr(t *testing.T) {
	tn, logs := startLoggedNode(t)
	ctx := context.Background()
	digest, err := tn.c.UploadArtifact(ctx, testwasm.Bytes(t, "complain"))
	if err != nil {
		t.Fatal(err)
	}
	manifest := map[string]any{"tenant": "demo", "service": "complain",
		"revisions": []any{map[string]any{"name": "v1", "artifact": digest, "trust_class": "untrusted",
			"ceiling": map[string]any{"cpu_fuel": 10_000_000, "memory_bytes": "1MiB", "wall_time": "2s"}}},
		"routes": []any{map[string]any{"name": "run", "targets": []any{map[string]any{"revision": "v1", "weight": 1}}}}}
	if _, err := tn.c.Deploy(ctx, "demo", "complain", manifest); err != nil {
		t.Fatal(err)
	}
	resp, _ := tn.do(t, "POST", "/v1/invoke/demo/complain/run", tn.key, nil, nil)
	if resp.StatusCode != 502 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	id := resp.Header.Get("Latent-Activation-Id")
	lines := logLines(t, logs, "guest stderr", id)
	if len(lines) != 1 || lines[0]["level"] != "INFO" || lines[0]["stderr"] != "complaint: bad input\n" {
		t.Fatalf("stderr lines for %s: %v", id, lines)
	}
	act := logLines(t, logs, "activation", id)
	if len(act) != 1 || act[0]["outcome"] != "declared-error" || act[0]["reason"] != nil {
		t.Fatalf("activation line: %v", act)
	}
}

// BenchmarkAccessLog is the middleware's cost on a request that answers
// 204, with the JSON handler writing to io.Discard.
func BenchmarkAccessLog(b *testing.B) {
	n := &Node{log: slog.New(slog.NewJSONHandler(io.Discard, nil)), clock: vocab.WallClock}
	n.metrics = newMetrics(n)
	n.metrics.access = front.NewLogLimiter(vocab.WallClock, front.LogRates{Lines: 1 << 30, BurstLines: 1 << 30, Bytes: 1 << 40, BurstBytes: 1 << 40}, nil, func(string) func() { return func() {} })
	h := accessLogOf(n).logged(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(204) }))
	req := httptest.NewRequest("POST", "/v1/invoke/demo/hello/greet", nil)
	b.ReportAllocs()
	for b.Loop() {
		h.ServeHTTP(httptest.NewRecorder(), req)
	}
}

// accessLogOf is n's access log, as Handler makes it.
func accessLogOf(n *Node) *accessLog {
	return &accessLog{clock: n.clock, log: n.log, metrics: n.metrics}
}

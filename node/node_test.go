package node

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/errors"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/latent-node/latent-node/cellpool"
	"github.com/latent-node/latent-node/client"
	"github.com/latent-node/latent-node/internal/testwasm"
	"github.com/latent-node/latent-node/loadsource"
	"github.com/latent-node/latent-node/node/auth"
	"github.com/latent-node/latent-node/node/config"
	"github.com/latent-node/latent-node/node/front"
	"github.com/latent-node/latent-node/refusal"
	"github.com/latent-node/latent-node/vocab"
)

// calmSource reports a quiet host, so tests do not depend on the machine's load.
type calmSource struct{}

func (calmSource) Sample(context.Context) (float64, float64, error) { return 0.1, 0.1, nil }

type testNode struct {
	n      *Node
	srv    *httptest.Server
	key    string
	c      *client.Client
	cancel context.CancelFunc
	wait   func() error
	// held is the actor startNodeHolding did not start (zero otherwise).
	held Actor
}

// startNode runs the demo configuration with its actors, owned by the test.
func startNode(t *testing.T) *testNode { return startNodeWith(t, nil) }

// startNodeWith is startNode with the demo configuration changed by mutate
// (not validated again: tests may set values below the configuration's
// minimums).
func startNodeWith(t *testing.T, mutate func(*config.Config)) *testNode {
	t.Helper()
	return startNodeLogged(t, mutate, nil)
}

// startNodeLogged is startNodeWith with the node's logger (nil: the
// default).
func startNodeLogged(t *testing.T, mutate func(*config.Config), logger *slog.Logger) *testNode {
	t.Helper()
	return startNodeHolding(t, mutate, logger, "")
}

// startNodeHolding is startNodeLogged with the actor named hold (if any)
// left to the test to run (tn.held): a test that needs the node without
// one of its loops says which, by name, instead of starting the others by
// hand.
func startNodeHolding(t *testing.T, mutate func(*config.Config), logger *slog.Logger, hold string) *testNode {
	t.Helper()
	key, hash, err := auth.Generate()
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Demo(config.WithDataDir(t.TempDir()), config.WithDemoKey(hash))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Overload.SampleInterval = 10 * time.Millisecond
	if mutate != nil {
		mutate(cfg)
	}
	n, err := New(context.Background(), cfg, Options{LoadSource: calmSource{}, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.DeployDemo(context.Background()); err != nil {
		t.Fatal(err)
	}
	tn := &testNode{n: n, key: key}
	ctx, cancel := context.WithCancel(context.Background())
	tn.cancel = cancel
	var actors []Actor
	for _, a := range n.Actors() {
		if a.Name == hold {
			tn.held = a
			continue
		}
		actors = append(actors, a)
	}
	if hold != "" && tn.held.Run == nil {
		t.Fatalf("the node has no actor %q", hold)
	}
	tn.wait = Go(ctx, actors)
	tn.srv = httptest.NewServer(n.Handler())
	tn.c, _ = client.New(tn.srv.URL, key, client.WithRetry(client.RetryPolicy{}))
	// Ready once the first sample arrived.
	for i := 0; i < 500; i++ {
		resp, err := http.Get(tn.srv.URL + "/readyz")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		<-time.After(2 * time.Millisecond) // bounded poll of an external endpoint
	}
	t.Cleanup(func() {
		tn.srv.Close()
		cancel()
		_ = tn.wait()
		n.Close(context.Background())
	})
	return tn
}

func (tn *testNode) do(t *testing.T, method, path, key string, body []byte, headers map[string]string) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest(method, tn.srv.URL+path, bytes.NewReader(body))
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	data, _ := io.ReadAll(resp.Body)
	return resp, data
}

func TestNode_endToEnd(t *testing.T) {
	tn := startNode(t)
	ctx := context.Background()

	res, err := tn.c.Invoke(ctx, "demo", "hello", "greet", []byte("ada"), client.InvokeOptions{RoutingKey: "k"})
	if err != nil {
		t.Fatal(err)
	}
	if string(res.Output) != "hello, ada\n" || res.Outcome != "success" || res.FuelUsed == 0 || res.CellClass != "tiny" ||
		res.ActivationID == "" || !strings.HasPrefix(res.Revision, "rev1-") {
		t.Fatalf("invoke: %+v", res)
	}

	// Deploy a module of our own through the API and run it.
	compute := testwasm.Bytes(t, "compute")
	digest, err := tn.c.UploadArtifact(ctx, compute)
	if err != nil {
		t.Fatal(err)
	}
	manifest := map[string]any{"tenant": "demo", "service": "calc",
		"revisions": []any{map[string]any{"name": "v1", "artifact": digest, "trust_class": "untrusted",
			"ceiling": map[string]any{"cpu_fuel": 10_000_000, "memory_bytes": "1MiB", "wall_time": "2s"}}},
		"routes": []any{map[string]any{"name": "run", "targets": []any{map[string]any{"revision": "v1", "weight": 1}}}}}
	dep, err := tn.c.Deploy(ctx, "demo", "calc", manifest)
	if err != nil || dep.Generation == 0 || len(dep.Revisions) != 1 {
		t.Fatalf("deploy: %+v %v", dep, err)
	}
	res, err = tn.c.Invoke(ctx, "demo", "calc", "run", []byte("1000"), client.InvokeOptions{})
	if err != nil || string(res.Output) != "2926642762503582672\n" {
		t.Fatalf("calc: %+v %v", res, err)
	}
	// A declared error returns its exit code and stderr tail.
	complain := testwasm.Bytes(t, "complain")
	cd, err := tn.c.UploadArtifact(ctx, complain)
	if err != nil {
		t.Fatal(err)
	}
	manifest["service"] = "complain"
	manifest["revisions"].([]any)[0].(map[string]any)["artifact"] = cd
	if _, err := tn.c.Deploy(ctx, "demo", "complain", manifest); err != nil {
		t.Fatal(err)
	}
	_, err = tn.c.Invoke(ctx, "demo", "complain", "run", nil, client.InvokeOptions{})
	var dp *client.Problem
	if !errors.As(err, &dp) || dp.Status != 502 || dp.Outcome != "declared-error" || dp.ExitCode == nil || *dp.ExitCode != 3 ||
		dp.Stderr != "complaint: bad input\n" {
		t.Fatalf("want 502 declared-error 3 with the stderr tail, have %+v", err)
	}
	manifest["service"] = "calc"
	manifest["revisions"].([]any)[0].(map[string]any)["artifact"] = digest

	// Requested fuel below what it needs: fuel-exhausted, 502.
	_, err = tn.c.Invoke(ctx, "demo", "calc", "run", []byte("1000"), client.InvokeOptions{Fuel: 100})
	var p *client.Problem
	if !errors.As(err, &p) || p.Status != 502 || p.Outcome != "fuel-exhausted" {
		t.Fatalf("want 502 fuel-exhausted, have %v", err)
	}

	tests := []struct {
		name, method, path, key string
		body                    []byte
		headers                 map[string]string
		status                  int
		reason                  string
	}{
		{"no key", "POST", "/v1/invoke/demo/hello/greet", "", nil, nil, 401, "unauthenticated"},
		{"unknown key", "POST", "/v1/invoke/demo/hello/greet", "lk_nope", nil, nil, 401, "unauthenticated"},
		{"unknown route", "POST", "/v1/invoke/demo/hello/nope", tn.key, nil, nil, 404, refusal.ReasonRouteNotFound.String()},
		{"other tenant", "POST", "/v1/invoke/acme/hello/greet", tn.key, nil, nil, 403, refusal.ReasonPrincipalNotAuthorized.String()},
		{"bad budget", "POST", "/v1/invoke/demo/hello/greet", tn.key, nil, map[string]string{"Latent-Budget": "gpu=1"}, 400, refusal.ReasonInvalidHeader.String()},
		{"bad priority", "POST", "/v1/invoke/demo/hello/greet", tn.key, nil, map[string]string{"Latent-Priority": "x"}, 400, refusal.ReasonInvalidHeader.String()},
		{"expired deadline", "POST", "/v1/invoke/demo/hello/greet", tn.key, nil, map[string]string{"Latent-Deadline-Unix-Ms": "1000"}, 504, "deadline-exceeded"},
		{"payload too large", "POST", "/v1/invoke/demo/hello/greet", tn.key, bytes.Repeat([]byte("x"), 1<<20+1), nil, 413, refusal.ReasonPayloadTooLarge.String()},
		{"zero fuel", "POST", "/v1/invoke/demo/hello/greet", tn.key, nil, map[string]string{"Latent-Budget": "fuel=0"}, 400, refusal.ReasonBudgetInfeasible.String()},
		{"wrong-tenant deploy", "PUT", "/v1/deployments/acme/x", tn.key, []byte(`{}`), nil, 403, refusal.ReasonPrincipalNotAuthorized.String()},
		{"invalid manifest", "PUT", "/v1/deployments/demo/x", tn.key, []byte(`{"tenant":"demo","service":"x"}`), nil, 422, refusal.ReasonInvalidManifest.String()},
		{"digest mismatch", "PUT", "/v1/artifacts/" + client.Digest([]byte("a")), tn.key, []byte("b"), nil, 400, refusal.ReasonDigestMismatch.String()},
		{"bad digest", "PUT", "/v1/artifacts/md5:x", tn.key, []byte("b"), nil, 400, refusal.ReasonInvalidDigest.String()},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := tn.do(t, tc.method, tc.path, tc.key, tc.body, tc.headers)
			if resp.StatusCode != tc.status {
				t.Fatalf("want %d, have %d: %s", tc.status, resp.StatusCode, body)
			}
			var prob struct {
				Reason    string `json:"reason"`
				Retryable bool   `json:"retryable"`
			}
			_ = json.Unmarshal(body, &prob)
			if prob.Reason != tc.reason {
				t.Fatalf("want reason %q, have %s", tc.reason, body)
			}
			if (resp.Header.Get("Retry-After") != "") != prob.Retryable {
				t.Fatalf("Retry-After %q with retryable=%v", resp.Header.Get("Retry-After"), prob.Retryable)
			}
			if strings.Contains(string(body), "demo") && tc.status != 422 {
				t.Fatalf("problem echoes the tenant: %s", body)
			}
		})
	}

	// The node keeps serving after the bad input, and nothing is half-applied.
	if res, err := tn.c.Invoke(ctx, "demo", "hello", "greet", nil, client.InvokeOptions{}); err != nil || string(res.Output) != "hello, world\n" {
		t.Fatalf("after bad input: %v %v", res, err)
	}
	raw, err := tn.c.Admission(ctx)
	if err != nil || !strings.Contains(string(raw), `"live_activations": 0`) {
		t.Fatalf("admission: %s %v", raw, err)
	}
	resp, body := tn.do(t, "GET", "/v1/admin/admission", tn.key, nil, nil)
	if resp.StatusCode != 200 || !strings.Contains(string(body), "queue_classes") {
		t.Fatalf("admin admission: %d %s", resp.StatusCode, body)
	}
	resp, body = tn.do(t, "GET", "/metrics", tn.key, nil, nil)
	if resp.StatusCode != 200 {
		t.Fatalf("metrics: %d", resp.StatusCode)
	}
	for _, want := range []string{`latent_activations_total{outcome="success",revision="rev1-`, "latent_rejections_total",
		"latent_queue_wait_seconds_bucket", "latent_concurrency_window", "latent_permits_leaked_total 0"} {
		if !strings.Contains(string(body), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	resp, body = tn.do(t, "DELETE", "/v1/deployments/demo/calc", tn.key, nil, nil)
	if resp.StatusCode != 200 {
		t.Fatalf("delete: %d %s", resp.StatusCode, body)
	}
	if _, err := tn.c.Invoke(ctx, "demo", "calc", "run", nil, client.InvokeOptions{}); !errors.As(err, &p) || p.Status != 404 {
		t.Fatalf("deleted service: %v", err)
	}
}

func TestDemoHello_matchesFixture(t *testing.T) {
	want, err := os.ReadFile(testwasm.Path("hello"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(want, DemoHello) {
		t.Fatal("node/demo/hello.wasm differs from testdata/wasm/hello.wasm: copy it again")
	}
}

func TestRejections_aggregatedLog(t *testing.T) {
	var buf bytes.Buffer
	n := &Node{log: slog.New(slog.NewJSONHandler(&buf, nil))}
	m := &metrics{log: &n.rejections, rejections: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "x"},
		[]string{"code", "reason", "scope", "dimension"})}
	for i := 0; i < 1000; i++ {
		m.rejected(refusal.Refusal{Code: refusal.CodeResourceExhausted, Reason: refusal.ReasonCapacityExhausted,
			Scope: refusal.ScopeTenant, Dimension: refusal.DimQueued, Retryable: true})
	}
	m.rejected(refusal.Refusal{Code: refusal.CodeUnauthenticated, Reason: refusal.ReasonUnauthenticated, Scope: refusal.ScopePrincipal})
	n.rejections.Flush(n.log)
	n.rejections.Flush(n.log) // nothing new: no second line
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 1 || !strings.Contains(lines[0], `"resource-exhausted/capacity-exhausted tenant/queued":1000`) ||
		!strings.Contains(lines[0], `"unauthenticated/unauthenticated principal":1`) {
		t.Fatalf("want one aggregated line, have:\n%s", buf.String())
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := n.rejections.Run(ctx, n.log, time.Hour); err != nil {
		t.Fatal(err)
	}
}

// TestReadyz_degraded: a quarantined cell makes /readyz say "degraded" with
// the class and its usable cells; the pool's driver replaces the cell and
// /readyz says "ready" again.
func TestReadyz_degraded(t *testing.T) {
	tn := startNodeHolding(t, nil, nil, "cells")
	readyz := func() string {
		resp, body := tn.do(t, "GET", "/readyz", "", nil, nil)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("readyz: status %d", resp.StatusCode)
		}
		return string(body)
	}
	if have := readyz(); have != "ready\n" {
		t.Fatalf("before: have %q", have)
	}
	l, err := tn.n.pool.TryLease(vocab.CellTiny)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Release(cellpool.Quarantine); err != nil && !errors.Is(err, cellpool.ErrQuarantined) {
		t.Fatal(err)
	}
	st := tn.n.pool.Stats()[vocab.CellTiny]
	want := fmt.Sprintf("degraded: tiny %d/%d cells usable\n", st.Parallelism-1, st.Parallelism)
	if have := readyz(); have != want {
		t.Fatalf("quarantined: have %q, want %q", have, want)
	}

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- tn.held.Run(ctx) }()
	defer func() { cancel(); <-done }()
	deadline := time.After(10 * time.Second)
	for readyz() != "ready\n" {
		select {
		case <-deadline:
			t.Fatalf("not ready again: %q", readyz())
		case <-time.After(5 * time.Millisecond): // bounded poll of the endpoint
		}
	}
	mfs, err := tn.n.metrics.registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	replaced := -1.0
	for _, mf := range mfs {
		if mf.GetName() != "latent_cells_replaced_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if m.GetLabel()[0].GetValue() == "tiny" {
				replaced = m.GetCounter().GetValue()
			}
		}
	}
	if replaced != 1 {
		t.Fatalf("latent_cells_replaced_total{cell_class=tiny}: have %v, want 1", replaced)
	}
}

// TestInvoke_serverTiming: an executed activation says where its time went,
// in Server-Timing with microsecond resolution, and its queue wait counts
// from the moment the request was read.
func TestInvoke_serverTiming(t *testing.T) {
	tn := startNode(t)
	resp, body := tn.do(t, "POST", "/v1/invoke/demo/hello/greet", tn.key, []byte("ada"), nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("invoke: %d %s", resp.StatusCode, body)
	}
	parts := map[string]float64{}
	for _, p := range strings.Split(resp.Header.Get("Server-Timing"), ", ") {
		name, dur, ok := strings.Cut(p, ";dur=")
		if !ok {
			t.Fatalf("Server-Timing part %q", p)
		}
		ms, err := strconv.ParseFloat(dur, 64)
		if err != nil || ms < 0 || !strings.Contains(dur, ".") {
			t.Fatalf("Server-Timing %s: %q", name, dur)
		}
		parts[name] = ms
	}
	for _, name := range []string{"front", "queue", "exec", "back"} {
		if _, ok := parts[name]; !ok {
			t.Fatalf("Server-Timing %q lacks %s", resp.Header.Get("Server-Timing"), name)
		}
	}
	if parts["exec"] == 0 {
		t.Errorf("exec took no time: %v", parts)
	}
	wait, err := strconv.ParseInt(resp.Header.Get("Latent-Queue-Wait-Ms"), 10, 64)
	if err != nil || float64(wait) > parts["front"]+parts["queue"] {
		t.Errorf("Latent-Queue-Wait-Ms %q, front+queue %.3f ms", resp.Header.Get("Latent-Queue-Wait-Ms"), parts["front"]+parts["queue"])
	}
}

// TestInvoke_refusalsPaced: a principal refused faster than the refusal
// rate has its refusals held (counted in latent_refusals_held_total),
// whether admission refused them or the checks of their headers, names
// and body before it; an executed activation is never held.
func TestInvoke_refusalsPaced(t *testing.T) {
	for _, tc := range []struct {
		name, path string
		headers    map[string]string
		status     int
		method     string // POST when empty
		body       []byte
	}{
		{"unknown route", "/v1/invoke/demo/hello/nope", nil, 404, "", nil},
		{"malformed header", "/v1/invoke/demo/hello/greet", map[string]string{"Latent-Priority": "high"}, 400, "", nil},
		{"invalid name", "/v1/invoke/demo/hello/a%20b", nil, 400, "", nil},
		{"path suffix on a stdio route", "/v1/invoke/demo/hello/greet/more", nil, 404, "", nil},
		{"GET of a stdio route", "/v1/invoke/demo/hello/greet", nil, 405, "GET", nil},
		{"body over the payload limit", "/v1/invoke/demo/hello/greet", nil, 413, "", make([]byte, 2<<20)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			testRefusalsPaced(t, cmp.Or(tc.method, "POST"), tc.path, tc.headers, tc.body, tc.status)
		})
	}
}

func testRefusalsPaced(t *testing.T, method, path string, headers map[string]string, body []byte, status int) {
	tn := startNode(t)
	tn.n.pacer = front.NewRefusalPacer(2, 5) // 500ms apart after a burst of 5
	held := func() float64 {
		mfs, err := tn.n.metrics.registry.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() == "latent_refusals_held_total" {
				return mf.GetMetric()[0].GetCounter().GetValue()
			}
		}
		return -1
	}
	for range 5 {
		if resp, _ := tn.do(t, "POST", "/v1/invoke/demo/hello/greet", tn.key, []byte("x"), nil); resp.StatusCode != 200 {
			t.Fatalf("invoke: %d", resp.StatusCode)
		}
	}
	if h := held(); h != 0 {
		t.Fatalf("executed activations held: %v", h)
	}
	for range 7 {
		if resp, got := tn.do(t, method, path, tn.key, body, headers); resp.StatusCode != status {
			t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, got)
		}
	}
	// The first five came within the burst; the sixth and seventh came
	// well before they were due (500ms apart) and were held.
	if h := held(); h != 2 {
		t.Fatalf("7 refusals in a row with a burst of 5: %v held, want 2", h)
	}
}

// TestLoadSourceKind: the node says what its pressure readings measure, in
// /readyz's Latent-Load-Source header and a metric.
func TestLoadSourceKind(t *testing.T) {
	_, hash, err := auth.Generate()
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Demo(config.WithDataDir(t.TempDir()), config.WithDemoKey(hash))
	if err != nil {
		t.Fatal(err)
	}
	n, err := New(context.Background(), cfg, Options{LoadSource: loadsource.FixedSource{CPU: 0.1, Memory: 0.1}})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close(context.Background())
	if have := n.LoadSourceKind(); have != loadsource.KindFixed {
		t.Fatalf("kind: have %q", have)
	}
	rec := httptest.NewRecorder()
	n.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
	if have := rec.Header().Get("Latent-Load-Source"); have != loadsource.KindFixed {
		t.Fatalf("readyz Latent-Load-Source: have %q", have)
	}
}

// TestInvoke_stderrTail: Latent-Stderr: tail returns a successful
// activation's stderr tail, quoted, in Latent-Stderr-Tail; without it there
// is none; any other value is an invalid header.
func TestInvoke_stderrTail(t *testing.T) {
	tn := startNode(t)
	ctx := context.Background()
	digest, err := tn.c.UploadArtifact(ctx, testwasm.Bytes(t, "chatty"))
	if err != nil {
		t.Fatal(err)
	}
	manifest := map[string]any{"tenant": "demo", "service": "chatty",
		"revisions": []any{map[string]any{"name": "v1", "artifact": digest, "trust_class": "untrusted",
			"ceiling": map[string]any{"cpu_fuel": 100_000_000, "memory_bytes": "16MiB", "wall_time": "5s"}}},
		"routes": []any{map[string]any{"name": "run", "targets": []any{map[string]any{"revision": "v1", "weight": 1}}}}}
	if _, err := tn.c.Deploy(ctx, "demo", "chatty", manifest); err != nil {
		t.Fatal(err)
	}
	input := []byte(`{"words":["b","a"]}`)
	resp, body := tn.do(t, "POST", "/v1/invoke/demo/chatty/run", tn.key, input, map[string]string{"Latent-Stderr": "tail"})
	if resp.StatusCode != 200 {
		t.Fatalf("invoke: %d %s", resp.StatusCode, body)
	}
	tail, err := strconv.Unquote(resp.Header.Get("Latent-Stderr-Tail"))
	if err != nil || tail != "chatty: one\nchatty: two\n" {
		t.Fatalf("Latent-Stderr-Tail %q: %q, %v", resp.Header.Get("Latent-Stderr-Tail"), tail, err)
	}
	resp, _ = tn.do(t, "POST", "/v1/invoke/demo/chatty/run", tn.key, input, nil)
	if resp.StatusCode != 200 || resp.Header.Get("Latent-Stderr-Tail") != "" {
		t.Fatalf("without asking: %d, tail %q", resp.StatusCode, resp.Header.Get("Latent-Stderr-Tail"))
	}
	resp, body = tn.do(t, "POST", "/v1/invoke/demo/chatty/run", tn.key, input, map[string]string{"Latent-Stderr": "all"})
	if resp.StatusCode != 400 || !strings.Contains(string(body), "Latent-Stderr") {
		t.Fatalf("Latent-Stderr: all answered %d %s", resp.StatusCode, body)
	}
}

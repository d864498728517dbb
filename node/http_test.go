package node

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/latent-node/latent-node/admission"
	"github.com/latent-node/latent-node/catalog"
	"github.com/latent-node/latent-node/client"
	"github.com/latent-node/latent-node/internal/testutil"
	"github.com/latent-node/latent-node/internal/testwasm"
	"github.com/latent-node/latent-node/node/api"
	"github.com/latent-node/latent-node/node/auth"
	"github.com/latent-node/latent-node/node/config"
	"github.com/latent-node/latent-node/node/front"
	"github.com/latent-node/latent-node/refusal"
	"github.com/latent-node/latent-node/runner"
)

// servedNode is the demo node served by its own Server() on a wrapped
// loopback listener, with a second principal that may only invoke.
type servedNode struct {
	n          *Node
	url, addr  string
	admin, inv string // keys: the demo principal (every role), an invoke-only one
	log        *testutil.SyncBuffer
}

func startServed(t testing.TB) *servedNode {
	t.Helper()
	return startServedWith(t, nil)
}

// startServedWith is startServed with the configuration changed by mod
// (nil: none) before the node is made.
func startServedWith(t testing.TB, mod func(*config.Config)) *servedNode {
	t.Helper()
	admin, adminHash, err := auth.Generate()
	if err != nil {
		t.Fatal(err)
	}
	inv, invHash, _ := auth.Generate()
	cfg, err := config.Demo(config.WithDataDir(t.TempDir()), config.WithDemoKey(adminHash))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Principals = append(cfg.Principals, config.Principal{Subject: "inv", Kind: admission.KindUser, Tenant: "demo",
		Roles: config.RoleInvoke, APIKeys: []string{invHash}})
	cfg.Overload.SampleInterval = 10 * time.Millisecond
	if mod != nil {
		mod(cfg)
	}
	logs := &testutil.SyncBuffer{}
	n, err := New(context.Background(), cfg, Options{LoadSource: calmSource{}, Logger: slog.New(slog.NewJSONHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.DeployDemo(context.Background()); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := n.Server()
	ctx, cancel := context.WithCancel(context.Background())
	wait := Go(ctx, append(n.Actors(), Actor{Name: "http", Run: func(context.Context) error {
		return srv.Serve(n.WrapListener(ln))
	}}))
	sn := &servedNode{n: n, url: "http://" + ln.Addr().String(), addr: ln.Addr().String(), admin: admin, inv: inv, log: logs}
	t.Cleanup(func() {
		_ = srv.Close()
		cancel()
		_ = wait()
		n.Close(context.Background())
	})
	for i := 0; i < 500; i++ { // ready once the first load sample arrived
		if r := sn.do(t, "GET", "/readyz", "", nil, nil); r.status == 200 {
			break
		}
		<-time.After(2 * time.Millisecond) // bounded poll of the endpoint
	}
	return sn
}

type answerOf struct {
	status int
	header http.Header
	body   []byte
	prob   api.Problem
}

func (sn *servedNode) do(t testing.TB, method, path, key string, body io.Reader, headers map[string]string) answerOf {
	t.Helper()
	req, _ := http.NewRequest(method, sn.url+path, body)
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
	return readAnswer(t, resp)
}

func readAnswer(t testing.TB, resp *http.Response) answerOf {
	t.Helper()
	data, _ := io.ReadAll(resp.Body)
	a := answerOf{status: resp.StatusCode, header: resp.Header, body: data}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "application/problem+json") {
		if err := json.Unmarshal(data, &a.prob); err != nil {
			t.Fatalf("problem %q: %v", data, err)
		}
	}
	return a
}

// raw sends req as bytes on a new connection, half-closes it and reads
// the answer.
func (sn *servedNode) raw(t *testing.T, req string) answerOf {
	t.Helper()
	c, err := net.Dial("tcp", sn.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	_ = c.(*net.TCPConn).CloseWrite()
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	return readAnswer(t, resp)
}

func wantProblem(t *testing.T, a answerOf, status int, reason string) {
	t.Helper()
	if a.status != status || a.prob.Status != status || a.prob.Reason != reason || a.prob.Code == "" {
		t.Fatalf("want %d %s, have %d %s", status, reason, a.status, a.body)
	}
	if (a.header.Get("Retry-After") != "") != a.prob.Retryable {
		t.Fatalf("Retry-After %q with retryable=%v", a.header.Get("Retry-After"), a.prob.Retryable)
	}
}

func TestHTTP_metricsNeedAdmin(t *testing.T) {
	sn := startServed(t)
	wantProblem(t, sn.do(t, "GET", "/metrics", "", nil, nil), 401, "unauthenticated")
	wantProblem(t, sn.do(t, "GET", "/metrics", sn.inv, nil, nil), 403, refusal.ReasonRoleNotAuthorized.String())
	a := sn.do(t, "GET", "/metrics", sn.admin, nil, nil)
	if a.status != 200 || !strings.Contains(string(a.body), "latent_http_connections{state=\"busy\"}") {
		t.Fatalf("admin metrics: %d %.300s", a.status, a.body)
	}
	// No unauthenticated answer names a tenant.
	for _, p := range []string{"/healthz", "/readyz", "/metrics", "/v1/admission", "/v1/admin/admission",
		"/v1/deployments/demo/hello", "/nope"} {
		if a := sn.do(t, "GET", p, "", nil, nil); strings.Contains(string(a.body), "demo") {
			t.Fatalf("%s names a tenant without authentication: %s", p, a.body)
		}
	}
}

func TestHTTP_malformedBodies(t *testing.T) {
	sn := startServed(t)
	auth := "Authorization: Bearer " + sn.admin + "\r\n"
	digest := client.Digest([]byte("0123456789"))
	tests := []struct {
		name, req string
		status    int
		reason    string
	}{
		{"invoke bad chunk size", "POST /v1/invoke/demo/hello/greet HTTP/1.1\r\nHost: n\r\n" + auth +
			"Transfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n", 400, refusal.ReasonMalformedBody.String()},
		{"invoke chunk cut short", "POST /v1/invoke/demo/hello/greet HTTP/1.1\r\nHost: n\r\n" + auth +
			"Transfer-Encoding: chunked\r\n\r\n10\r\nabc", 400, refusal.ReasonMalformedBody.String()},
		{"invoke truncated", "POST /v1/invoke/demo/hello/greet HTTP/1.1\r\nHost: n\r\n" + auth +
			"Content-Length: 10\r\n\r\nabc", 400, refusal.ReasonMalformedBody.String()},
		{"invoke long declared, truncated", "POST /v1/invoke/demo/hello/greet HTTP/1.1\r\nHost: n\r\n" + auth +
			"Content-Length: 100000\r\n\r\nabc", 400, refusal.ReasonMalformedBody.String()},
		{"invoke declared, nothing sent", "POST /v1/invoke/demo/hello/greet HTTP/1.1\r\nHost: n\r\n" + auth +
			"Content-Length: 10\r\n\r\n", 400, refusal.ReasonMalformedBody.String()},
		{"invoke chunked over the bound", "POST /v1/invoke/demo/hello/greet HTTP/1.1\r\nHost: n\r\n" + auth +
			"Transfer-Encoding: chunked\r\n\r\n100001\r\n" + strings.Repeat("x", 1<<20+1) + "\r\n0\r\n\r\n", 413, refusal.ReasonPayloadTooLarge.String()},
		{"artifact bad chunk", "PUT /v1/artifacts/" + digest + " HTTP/1.1\r\nHost: n\r\n" + auth +
			"Transfer-Encoding: chunked\r\n\r\n5\r\n01234XX\r\n", 400, refusal.ReasonMalformedBody.String()},
		{"artifact truncated", "PUT /v1/artifacts/" + digest + " HTTP/1.1\r\nHost: n\r\n" + auth +
			"Content-Length: 10\r\n\r\n01234", 400, refusal.ReasonMalformedBody.String()},
		{"deploy bad chunk", "PUT /v1/deployments/demo/x HTTP/1.1\r\nHost: n\r\n" + auth +
			"Transfer-Encoding: chunked\r\n\r\n;;\r\n{}\r\n", 400, refusal.ReasonMalformedBody.String()},
		{"deploy truncated", "PUT /v1/deployments/demo/x HTTP/1.1\r\nHost: n\r\n" + auth +
			"Content-Length: 100\r\n\r\n{\"tenant\":", 400, refusal.ReasonMalformedBody.String()},
		{"deploy not JSON", "PUT /v1/deployments/demo/x HTTP/1.1\r\nHost: n\r\n" + auth +
			"Content-Length: 9\r\n\r\n{\"tenant\"", 400, refusal.ReasonMalformedBody.String()},
		{"deploy invalid manifest", "PUT /v1/deployments/demo/x HTTP/1.1\r\nHost: n\r\n" + auth +
			"Content-Length: 31\r\n\r\n{\"tenant\":\"demo\",\"service\":\"x\"}", 422, refusal.ReasonInvalidManifest.String()},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := sn.raw(t, tc.req)
			wantProblem(t, a, tc.status, tc.reason)
			if strings.Contains(tc.name, "declared") || tc.name == "invoke truncated" {
				if a.prob.Detail != detailBodyTruncated {
					t.Fatalf("detail %q, want %q", a.prob.Detail, detailBodyTruncated)
				}
			}
		})
	}
	// The node still serves.
	if a := sn.do(t, "POST", "/v1/invoke/demo/hello/greet", sn.admin, strings.NewReader("ada"), nil); a.status != 200 {
		t.Fatalf("after malformed bodies: %d %s", a.status, a.body)
	}
	if strings.Contains(sn.log.String(), "internal error") {
		t.Fatalf("a malformed body was blamed on the node:\n%s", sn.log.String())
	}
}

func TestHTTP_problemsForUnknownPathsAndMethods(t *testing.T) {
	sn := startServed(t)
	tests := []struct {
		method, path string
		status       int
		reason       string
	}{
		{"GET", "/nope", 404, refusal.ReasonUnknownPath.String()},
		{"DELETE", "/v1/artifacts/sha256:00", 405, refusal.ReasonMethodNotAllowed.String()},
		{"POST", "/metrics", 405, refusal.ReasonMethodNotAllowed.String()},
		{"GET", "/v1//admission", 404, refusal.ReasonUnknownPath.String()},
		{"GET", "/v1/admission/../admission", 404, refusal.ReasonUnknownPath.String()},
		{"PATCH", "/v1/deployments/demo/hello", 405, refusal.ReasonMethodNotAllowed.String()},
	}
	for _, tc := range tests {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			wantProblem(t, sn.raw(t, tc.method+" "+tc.path+" HTTP/1.1\r\nHost: n\r\n\r\n"), tc.status, tc.reason)
		})
	}
}

// bareNode is a node with only what the error paths need.
func bareNode(t *testing.T) (*Node, *testutil.SyncBuffer) {
	logs := &testutil.SyncBuffer{}
	n := &Node{log: slog.New(slog.NewJSONHandler(logs, nil)), cfg: &config.Config{}}
	n.metrics = newMetrics(n)
	n.panics = front.NewRateLog(n.log, time.Second)
	return n, logs
}

func TestHTTP_catalogErrors(t *testing.T) {
	n, logs := bareNode(t)
	tests := []struct {
		name      string
		err       error
		status    int
		reason    string
		dimension string
	}{
		{"storage full", errors.Wrap(errors.Mark(errors.New("write /var/lib/secret/artifacts/x: no space left on device"),
			catalog.ErrStorageFull), "catalog: put artifact"), 507, refusal.ReasonInsufficientStorage.String(), "storage-bytes"},
		{"tenant quota", errors.Wrap(&catalog.QuotaError{Dimension: catalog.QuotaArtifactBytes, Limit: 10, Used: 9}, "x"),
			429, refusal.ReasonTenantQuotaExceeded.String(), "artifact-bytes"},
		{"service quota", &catalog.QuotaError{Dimension: catalog.QuotaServices, Limit: 1, Used: 1}, 429,
			refusal.ReasonTenantQuotaExceeded.String(), "services"},
		{"catalog full", errors.Wrap(catalog.ErrCatalogFull, "x"), 507, refusal.ReasonCatalogFull.String(), "services"},
		{"compile cache disk full", errors.Wrap(errors.Mark(errors.New("write /var/lib/cache: no space left on device"),
			runner.ErrStorageFull), "inspect"), 507, refusal.ReasonInsufficientStorage.String(), "storage-bytes"},
		{"compiled modules bound", errors.Wrap(runner.ErrCompiledCacheFull, "inspect"), 507, refusal.ReasonInsufficientStorage.String(), "compiled-bytes"},
		{"other", errors.New("disk on fire at /var/lib/secret"), 500, refusal.ReasonPlatformFailure.String(), ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			(&deployments{log: n.log}).writeCatalogError(rec, tc.err)
			a := readAnswer(t, rec.Result())
			wantProblem(t, a, tc.status, tc.reason)
			if a.prob.Dimension != tc.dimension || strings.Contains(string(a.body), "/var/lib") {
				t.Fatalf("problem: %s", a.body)
			}
			if tc.reason == refusal.ReasonInsufficientStorage.String() && (!a.prob.Retryable || a.header.Get("Retry-After") != "60") {
				t.Fatalf("storage full must be retryable: %v %s", a.header, a.body)
			}
			if tc.status == 429 && a.prob.Retryable {
				t.Fatal("a tenant quota is not retryable")
			}
		})
	}
	if !strings.Contains(logs.String(), "no space left on device") {
		t.Fatal("the storage cause was not logged")
	}
}

func TestHTTP_recover(t *testing.T) {
	n, logs := bareNode(t)
	h := n.recovered(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/late" {
			w.WriteHeader(200)
		}
		panic("boom")
	}))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	a := readAnswer(t, rec.Result())
	wantProblem(t, a, 500, refusal.ReasonPlatformFailure.String())
	if !strings.Contains(logs.String(), `"msg":"handler panic"`) {
		t.Fatalf("panic not logged: %s", logs.String())
	}
	// After the status line, the connection is aborted instead.
	func() {
		defer func() {
			if v := recover(); v != http.ErrAbortHandler { //nolint:errorlint // the sentinel is panicked as is
				t.Fatalf("want http.ErrAbortHandler, have %v", v)
			}
		}()
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/late", nil))
	}()
}

func TestBodyProblem(t *testing.T) {
	tests := []struct {
		err    error
		status int
		detail string
	}{
		{&http.MaxBytesError{Limit: 1}, 413, ""},
		{errors.Wrap(io.ErrUnexpectedEOF, "x"), 400, detailBodyTruncated},
		{errors.New("invalid byte in chunk length"), 400, detailBodyChunked},
		{errors.New("http: request body too slow"), 400, detailBodyRead},
		{&net.OpError{Op: "read", Err: timeoutErr{}}, 400, detailBodyTimeout},
	}
	for _, tc := range tests {
		p := bodyProblem(tc.err, refusal.DimPayloadBytes)
		if p.Status != tc.status || p.Detail != tc.detail {
			t.Errorf("%v: %+v", tc.err, p)
		}
	}
}

type timeoutErr struct{}

func (timeoutErr) Error() string { return "i/o timeout" }
func (timeoutErr) Timeout() bool { return true }

// BenchmarkHTTP_invoke is one invocation of the demo guest over a
// keep-alive loopback connection: the whole per-request path of the front
// (access log, governor, authentication, admission, scheduler, cell, the
// answer) plus the client. Compare commits with benchstat.
func BenchmarkHTTP_invoke(b *testing.B) {
	sn := startServed(b)
	invokeLoop(b, "POST", sn.url+"/v1/invoke/demo/hello/greet", sn.admin, []byte("world"), 200)
}

// invokeLoop sends method url with body (key's) over one keep-alive
// connection for b.N iterations, wanting status each time.
func invokeLoop(b *testing.B, method, url, key string, body []byte, status int) {
	b.Helper()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
	b.ReportAllocs()
	for b.Loop() {
		req, _ := http.NewRequest(method, url, bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != status {
			b.Fatalf("status %d", resp.StatusCode)
		}
	}
}

// BenchmarkHTTP_invokeServer is BenchmarkHTTP_invoke with a client that
// allocates nothing per request (one request written as prepared bytes, the
// answer read in place), so its allocations are the server's alone:
// net/http's server, the node and wazero. net/http's client accounts for
// the difference between the two benchmarks.
//
// Its sub-benchmarks are the demo guest on a fresh instance per request
// (fresh) and a reactor fixture on a reused warm instance (reuse): what
// the node adds per request on each path.
func BenchmarkHTTP_invokeServer(b *testing.B) {
	sn := startServed(b)
	c0, err := client.New(sn.url, sn.admin)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	digest, err := c0.UploadArtifact(ctx, testwasm.Bytes(b, "state"))
	if err != nil {
		b.Fatal(err)
	}
	if _, err := c0.Deploy(ctx, "demo", "warm", map[string]any{"tenant": "demo", "service": "warm",
		"revisions": []any{map[string]any{"name": "v1", "artifact": digest, "trust_class": "untrusted", "instance": "reuse",
			"ceiling": map[string]any{"cpu_fuel": 10_000_000, "memory_bytes": "1MiB", "wall_time": "2s"}}},
		"routes": []any{map[string]any{"name": "run", "function": "handle", "targets": []any{map[string]any{"revision": "v1", "weight": 1}}}}}); err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct{ name, path string }{{"fresh", "/v1/invoke/demo/hello/greet"}, {"reuse", "/v1/invoke/demo/warm/run"}} {
		b.Run(c.name, func(b *testing.B) {
			invoke := rawInvokerOf(b, sn, c.path)
			b.ReportAllocs()
			for b.Loop() {
				invoke()
			}
		})
	}
}

// rawInvoker returns a function that invokes the demo guest over one
// keep-alive connection without allocating on the client's side: the
// request written as prepared bytes, the answer read in place.
func rawInvoker(t testing.TB, sn *servedNode) func() {
	return rawInvokerOf(t, sn, "/v1/invoke/demo/hello/greet")
}

// rawInvokerOf is rawInvoker of the invocation path.
func rawInvokerOf(t testing.TB, sn *servedNode, path string) func() {
	conn, err := net.Dial("tcp", sn.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	req := []byte("POST " + path + " HTTP/1.1\r\nHost: node\r\nAuthorization: Bearer " +
		sn.admin + "\r\nContent-Length: 5\r\n\r\nworld")
	br := bufio.NewReaderSize(conn, 16<<10)
	return func() {
		if _, err := conn.Write(req); err != nil {
			t.Fatal(err)
		}
		if status, n := readRawAnswer(t, br); status != 200 || n == 0 {
			t.Fatalf("status %d, %d body bytes", status, n)
		}
	}
}

// readRawAnswer reads one HTTP/1.1 answer with a Content-Length from br
// without allocating: its status and body length.
func readRawAnswer(t testing.TB, br *bufio.Reader) (status, n int) {
	line, err := br.ReadSlice('\n')
	if err != nil || len(line) < 12 {
		t.Fatalf("status line %q: %v", line, err)
	}
	status = int(line[9]-'0')*100 + int(line[10]-'0')*10 + int(line[11]-'0')
	for {
		line, err = br.ReadSlice('\n')
		if err != nil {
			t.Fatal(err)
		}
		if len(line) <= 2 {
			break
		}
		if k := []byte("content-length: "); len(line) > len(k) && bytes.EqualFold(line[:len(k)], k) {
			for _, c := range bytes.TrimSpace(line[len(k):]) {
				n = n*10 + int(c-'0')
			}
		}
	}
	if _, err := br.Discard(n); err != nil {
		t.Fatal(err)
	}
	return status, n
}

// BenchmarkHTTP_invokeParallel is BenchmarkHTTP_invoke with 16 clients at
// once (run it pinned to one CPU to see the front's cost per request).
func BenchmarkHTTP_invokeParallel(b *testing.B) {
	sn := startServed(b)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
	body := []byte("world")
	b.ReportAllocs()
	b.SetParallelism(16)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			req, _ := http.NewRequest("POST", sn.url+"/v1/invoke/demo/hello/greet", bytes.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+sn.admin)
			resp, err := client.Do(req)
			if err != nil {
				b.Error(err)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode != 200 {
				b.Errorf("status %d", resp.StatusCode)
				return
			}
		}
	})
}

package node

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/latent-node/latent-node/client"
	"github.com/latent-node/latent-node/internal/hostilewasm"
	"github.com/latent-node/latent-node/internal/testutil"
	"github.com/latent-node/latent-node/internal/testwasm"
	"github.com/latent-node/latent-node/node/config"
)

// TestInvoke_wasiHTTP: wasi-http components of testdata/components answer
// through the node, and each way a component fails is that activation's
// outcome, never a platform failure; the node serves the next request.
func TestInvoke_wasiHTTP(t *testing.T) {
	tn := startNode(t)
	ctx := context.Background()
	for _, tc := range []struct {
		fixture, outcome string
		status           int
	}{
		{"hello", "success", 200},
		{"loop", "fuel-exhausted", 502},
		{"trap", "trap", 0},
		{"grow", "memory-exhausted", 0},
		{"noresponse", "malformed-response", 502},
		{"badstring", "trap", 0},
		{"badutf8", "trap", 0},
		{"badhandle", "trap", 0},
		{"wronghandle", "trap", 0},
		{"handleflood", "trap", 0},
		{"outbound", "success", 403}, // its outbound request is denied
	} {
		t.Run(tc.fixture, func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join("..", "testdata", "components", tc.fixture+".wasm"))
			if err != nil {
				t.Fatal(err)
			}
			digest, err := tn.c.UploadArtifact(ctx, b)
			if err != nil {
				t.Fatal(err)
			}
			rev := map[string]any{"name": "v1", "artifact": digest, "trust_class": "untrusted", "abi": "wasi-http",
				"ceiling": map[string]any{"cpu_fuel": 10_000_000, "memory_bytes": "1MiB", "wall_time": "2s"}}
			manifest := map[string]any{"tenant": "demo", "service": tc.fixture, "revisions": []any{rev},
				"routes": []any{map[string]any{"name": "run", "targets": []any{map[string]any{"revision": "v1", "weight": 1}}}}}
			if _, err := tn.c.Deploy(ctx, "demo", tc.fixture, manifest); err != nil {
				t.Fatal(err)
			}
			resp, body := tn.do(t, "GET", "/v1/invoke/demo/"+tc.fixture+"/run/a/b?q=1", tn.key, nil, nil)
			if got := resp.Header.Get("Latent-Outcome"); got != tc.outcome || tc.status != 0 && resp.StatusCode != tc.status {
				t.Fatalf("%d %s, want %d %s: %s", resp.StatusCode, got, tc.status, tc.outcome, body)
			}
			if tc.fixture == "hello" && (string(body) != "hello /a/b?q=1\n" || resp.Header.Get("X-Fixture") != "hello") {
				t.Fatalf("hello: %v %q", resp.Header, body)
			}
			if resp.StatusCode == 500 || strings.Contains(string(body), "platform-failure") {
				t.Fatalf("platform failure: %s", body)
			}
		})
	}
	// A core module with abi = "wasi-http" and a component importing
	// sockets are refused at deploy, naming the cause.
	b, _ := os.ReadFile(filepath.Join("..", "testdata", "components", "sockets.wasm"))
	digest, err := tn.c.UploadArtifact(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	rev := map[string]any{"name": "v1", "artifact": digest, "trust_class": "untrusted", "abi": "wasi-http",
		"ceiling": map[string]any{"cpu_fuel": 10_000_000, "memory_bytes": "1MiB", "wall_time": "2s"}}
	manifest := map[string]any{"tenant": "demo", "service": "sockets", "revisions": []any{rev},
		"routes": []any{map[string]any{"name": "run", "targets": []any{map[string]any{"revision": "v1", "weight": 1}}}}}
	if _, err := tn.c.Deploy(ctx, "demo", "sockets", manifest); err == nil || !strings.Contains(err.Error(), "wasi:sockets/tcp") {
		t.Fatalf("sockets deploy: %v", err)
	}
}

// deployComponent deploys artifact as demo/service, abi wasi-http, route
// run, with a small ceiling (10 million fuel, 1 MiB, 2 s).
func (tn *testNode) deployComponent(t *testing.T, service string, artifact []byte) {
	t.Helper()
	tn.deployComponentWith(t, service, artifact, map[string]any{"cpu_fuel": 10_000_000, "memory_bytes": "1MiB", "wall_time": "2s"})
}

// deployComponentWith is deployComponent with the given ceiling.
func (tn *testNode) deployComponentWith(t *testing.T, service string, artifact []byte, ceiling map[string]any) {
	t.Helper()
	if err := tn.tryDeployComponent(t, service, artifact, map[string]any{"ceiling": ceiling}); err != nil {
		t.Fatal(err)
	}
}

// tryDeployComponent deploys artifact as demo/service with the revision
// fields rev (a small ceiling unless rev has one) and returns the refusal.
func (tn *testNode) tryDeployComponent(t *testing.T, service string, artifact []byte, rev map[string]any) error {
	t.Helper()
	ctx := context.Background()
	digest, err := tn.c.UploadArtifact(ctx, artifact)
	if err != nil {
		t.Fatal(err)
	}
	r := map[string]any{"name": "v1", "artifact": digest, "trust_class": "untrusted", "abi": "wasi-http",
		"ceiling": map[string]any{"cpu_fuel": 10_000_000, "memory_bytes": "1MiB", "wall_time": "2s"}}
	for k, v := range rev {
		r[k] = v
	}
	manifest := map[string]any{"tenant": "demo", "service": service, "revisions": []any{r},
		"routes": []any{map[string]any{"name": "run", "targets": []any{map[string]any{"revision": "v1", "weight": 1}}}}}
	_, err = tn.c.Deploy(ctx, "demo", service, manifest)
	return err
}

// TestInvoke_wasiHTTPSnapshot: a component in snapshot mode starts every
// activation from the state after its initialisation (counter.wasm counts
// in its memory: 1 every time, as fresh, where a kept memory would count
// on) on a restored instance; a snapshot of a component whose
// initialisation keeps a resource handle (keeps.wasm) is refused at
// deploy, and it runs fresh.
func TestInvoke_wasiHTTPSnapshot(t *testing.T) {
	tn := startNode(t)
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join("..", "testdata", "components", name+".wasm"))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	counter, keeps := read("counter"), read("keeps")
	for _, mode := range []string{"fresh", "snapshot"} {
		if err := tn.tryDeployComponent(t, "counter-"+mode, counter, map[string]any{"instance": mode}); err != nil {
			t.Fatal(err)
		}
		for i := range 4 {
			resp, body := tn.do(t, "GET", "/v1/invoke/demo/counter-"+mode+"/run/", tn.key, nil, nil)
			if resp.StatusCode != 200 || string(body) != "count 1\n" {
				t.Fatalf("%s, call %d: %d %q, want count 1", mode, i, resp.StatusCode, body)
			}
		}
	}
	if got := tn.metric(t, `latent_instance_activations_total{mode="snapshot",path="restored"}`); got < 3 {
		t.Fatalf("%v snapshot activations on a restored instance, want 3 (each but the first)", got)
	}
	if err := tn.tryDeployComponent(t, "keeps", keeps, nil); err != nil {
		t.Fatal(err)
	}
	if resp, body := tn.do(t, "GET", "/v1/invoke/demo/keeps/run/k", tn.key, nil, nil); resp.StatusCode != 200 || string(body) != "hello /k\n" {
		t.Fatalf("keeps, fresh: %d %q", resp.StatusCode, body)
	}
	err := tn.tryDeployComponent(t, "keeps-snapshot", keeps, map[string]any{"instance": "snapshot"})
	if err == nil || !strings.Contains(err.Error(), "keeps 1 resource handles") {
		resp, body := tn.do(t, "GET", "/v1/invoke/demo/keeps-snapshot/run/k", tn.key, nil, nil)
		t.Fatalf("keeps, snapshot: %v; %d %s", err, resp.StatusCode, body)
	}
}

// TestInvoke_wasiHTTPLies: components whose handler lies to the canonical
// ABI (hostilewasm.LyingComponent: hello.wasm with its core module
// replaced) each end their own activation, a trap, or output-exceeded for
// the stream flood; the truthful one answers, and after every lie the
// node answers the next request.
func TestInvoke_wasiHTTPLies(t *testing.T) {
	tn := startNodeWith(t, func(c *config.Config) { c.Node.MaxStreamedBytes = 2 * uint64(c.Node.MaxOutputBytes) })
	template, err := os.ReadFile(filepath.Join("..", "testdata", "components", "hello.wasm"))
	if err != nil {
		t.Fatal(err)
	}
	truth, err := hostilewasm.LyingComponent(template, hostilewasm.LieNone)
	if err != nil {
		t.Fatal(err)
	}
	tn.deployComponent(t, "truth", truth)
	answers := func(t *testing.T) {
		t.Helper()
		resp, body := tn.do(t, "GET", "/v1/invoke/demo/truth/run/", tn.key, nil, nil)
		if resp.StatusCode != 200 || string(body) != "hello" {
			t.Fatalf("the truthful component: %d %s", resp.StatusCode, body)
		}
	}
	answers(t)
	for i, lie := range hostilewasm.Lies {
		t.Run(lie.String(), func(t *testing.T) {
			c, err := hostilewasm.LyingComponent(template, lie)
			if err != nil {
				t.Fatal(err)
			}
			service := fmt.Sprintf("lie%d", i)
			tn.deployComponent(t, service, c)
			want, on := "trap", tn
			if lie == hostilewasm.LieStreamFlood {
				want = "output-exceeded"
				streamFlood(t, tn, "/v1/invoke/demo/"+service+"/run/x")
				// With streaming off, the flood ends at max_output_bytes
				// before anything went out: a 502 that says so.
				off := startNodeWith(t, func(c *config.Config) { c.Node.MaxStreamedBytes = 0 })
				off.deployComponent(t, service, c)
				on = off
			}
			resp, body := on.do(t, "GET", "/v1/invoke/demo/"+service+"/run/x", on.key, nil, nil)
			if got := resp.Header.Get("Latent-Outcome"); got != want || resp.StatusCode != 502 {
				t.Fatalf("want 502 %s, have %d %s: %s", want, resp.StatusCode, got, body)
			}
			if want == "trap" && !strings.Contains(string(body), `"trap_kind":"canonical-abi"`) {
				t.Fatalf("a trap of another kind: %s", body)
			}
			// The problem names the rule the guest broke, and nothing of
			// the host's internals.
			var p struct{ Detail string }
			if err := json.Unmarshal(body, &p); err != nil {
				t.Fatal(err)
			}
			if want == "trap" && (!strings.Contains(p.Detail, lieWords[lie]) || strings.Contains(p.Detail, "stack")) {
				t.Fatalf("detail %q, want the rule (%q)", p.Detail, lieWords[lie])
			}
			t.Logf("detail: %s", p.Detail)
			answers(t)
		})
	}
}

// streamFlood: a guest that writes its response body without end has it
// streamed past max_output_bytes, up to max_streamed_bytes (twice
// max_output_bytes in this test's node), then the answer is cut off: the caller sees a body
// that fails, never one that looks whole, and no activation trailers.
func streamFlood(t *testing.T, tn *testNode, path string) {
	t.Helper()
	req, _ := http.NewRequest("GET", tn.srv.URL+path, nil)
	req.Header.Set("Authorization", "Bearer "+tn.key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	n, err := io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != 200 || err == nil || resp.Trailer.Get("Latent-Outcome") != "" {
		t.Fatalf("streamed flood: %d %s, %d bytes, read error %v, trailers %v", resp.StatusCode, resp.Header, n, err, resp.Trailer)
	}
	if limit := int64(tn.n.cfg.Node.MaxStreamedBytes); n > limit || n < limit-(64<<10) {
		t.Fatalf("the flood sent %d bytes; want up to max_streamed_bytes, %d", n, limit)
	}
	_, metrics := tn.do(t, "GET", "/metrics", tn.key, nil, nil)
	if !regexp.MustCompile(`(?m)^latent_activations_total\{[^}]*outcome="output-exceeded"[^}]*\} 1$`).Match(metrics) {
		t.Fatal("/metrics counts no output-exceeded activation")
	}
}

// lieWords is a word the detail of each lie's trap must hold.
var lieWords = map[hostilewasm.Lie]string{
	hostilewasm.LieStringOutOfBounds:  "out of bounds",
	hostilewasm.LieInvalidUTF8:        "not valid UTF-8",
	hostilewasm.LieListOutOfBounds:    "out of bounds",
	hostilewasm.LieDanglingHandle:     "not a live handle",
	hostilewasm.LieWrongHandleType:    "another resource type",
	hostilewasm.LieBadDiscriminant:    "discriminant 7",
	hostilewasm.LieReallocOutOfBounds: "realloc returned",
	hostilewasm.LieHandleFlood:        "handle table full",
}

// TestInvoke_wasiHTTPAdapted: a component of the shape rustc's
// wasm32-wasip2 target emits (testdata/components/adapted.wasm: the Rust
// example http.rs for WASI preview 1 with the preview 1 adapter, four core
// modules) flattens, links and answers: its routes, a body echoed byte for
// byte, a status, and its std's eprintln! (through the adapter to
// wasi:cli/stderr) on the 404.
func TestInvoke_wasiHTTPAdapted(t *testing.T) {
	tn := startNode(t)
	b, err := os.ReadFile(filepath.Join("..", "testdata", "components", "adapted.wasm"))
	if err != nil {
		t.Fatal(err)
	}
	tn.deployComponentWith(t, "adapted", b, map[string]any{"cpu_fuel": 200_000_000, "memory_bytes": "8MiB", "wall_time": "5s"})
	body := make([]byte, 256<<10)
	for i := range body {
		body[i] = byte(i * 7)
	}
	for _, tc := range []struct {
		name, method, path string
		body               []byte
		status             int
		want               []byte
		header             map[string]string
	}{
		{"greeting", "GET", "/", nil, 200, []byte("hello from Rust: GET /\n"), map[string]string{"X-Example": "rust"}},
		{"query", "DELETE", "/?a=1&b=2", nil, 200, []byte("hello from Rust: DELETE /?a=1&b=2\n"), nil},
		{"echo", "POST", "/echo?q=1", body, 200, body, map[string]string{"X-Method": "POST", "X-Query": "?q=1", "X-Body-Bytes": "262144"}},
		{"status", "GET", "/status/418", nil, 418, []byte("status 418\n"), nil},
		{"no route", "GET", "/nope", nil, 404, []byte("no route /nope\n"), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, got := tn.do(t, tc.method, "/v1/invoke/demo/adapted/run"+tc.path, tn.key, tc.body, nil)
			if resp.StatusCode != tc.status || !bytes.Equal(got, tc.want) {
				t.Fatalf("%d %q, want %d %q", resp.StatusCode, trim(got), tc.status, trim(tc.want))
			}
			for k, v := range tc.header {
				if resp.Header.Get(k) != v {
					t.Fatalf("%s: %q, want %q", k, resp.Header.Get(k), v)
				}
			}
		})
	}
}

// trim is at most 80 bytes of b, for messages.
func trim(b []byte) []byte { return b[:min(len(b), 80)] }

// metric is the value of the sample line of /metrics that starts with
// series (its name and labels); the test fails without one.
func (tn *testNode) metric(t *testing.T, series string) float64 {
	t.Helper()
	resp, body := tn.do(t, "GET", "/metrics", tn.key, nil, nil)
	if resp.StatusCode != 200 {
		t.Fatalf("/metrics: %d", resp.StatusCode)
	}
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatal(err)
			}
			return f
		}
	}
	t.Fatalf("/metrics has no %s", series)
	return 0
}

// BenchmarkHTTP_invokeComponent is one GET of the Rust wasi:http handler
// (testdata/components/adapted.wasm: four core modules, flattened) over a
// keep-alive loopback connection, fresh and from its snapshot: the
// component's whole per-request path on the node.
func BenchmarkHTTP_invokeComponent(b *testing.B) {
	sn := startServed(b)
	c, _ := client.New(sn.url, sn.admin, client.WithRetry(client.RetryPolicy{}))
	artifact, err := os.ReadFile(filepath.Join("..", "testdata", "components", "adapted.wasm"))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	digest, err := c.UploadArtifact(ctx, artifact)
	if err != nil {
		b.Fatal(err)
	}
	for _, mode := range []string{"fresh", "snapshot"} {
		rev := map[string]any{"name": "v1", "artifact": digest, "trust_class": "untrusted", "abi": "wasi-http", "instance": mode,
			"ceiling": map[string]any{"cpu_fuel": 100_000_000, "memory_bytes": "16MiB", "wall_time": "5s"}}
		manifest := map[string]any{"tenant": "demo", "service": "rust-" + mode, "revisions": []any{rev},
			"routes": []any{map[string]any{"name": "run", "targets": []any{map[string]any{"revision": "v1", "weight": 1}}}}}
		if _, err := c.Deploy(ctx, "demo", "rust-"+mode, manifest); err != nil {
			b.Fatal(err)
		}
		b.Run(mode, func(b *testing.B) {
			invokeLoop(b, "GET", sn.url+"/v1/invoke/demo/rust-"+mode+"/run/", sn.admin, nil, 200)
		})
	}
}

// TestInvoke_wasiHTTPOutbound: the Rust handler's /fetch through
// allowed_outbound_hosts: a listed host answers; an unlisted one, a name
// that resolves to loopback (localhost) and the node's own address, even
// listed, are denied with HTTP-request-denied; every request is counted.
func TestInvoke_wasiHTTPOutbound(t *testing.T) {
	logs := &testutil.SyncBuffer{}
	tn := startNodeLogged(t, nil, slog.New(slog.NewJSONHandler(logs, nil)))
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("hello from the backend " + r.URL.RequestURI()))
	}))
	t.Cleanup(backend.Close)
	back := backend.Listener.Addr().String()
	self := tn.srv.Listener.Addr().String()
	tn.n.run.SetOwnAddrs(netip.MustParseAddrPort(self))
	artifact, err := os.ReadFile(filepath.Join("..", "testdata", "components", "adapted.wasm"))
	if err != nil {
		t.Fatal(err)
	}
	_, backPort, _ := net.SplitHostPort(back)
	// Another backend, listed only by a name that resolves to loopback.
	other := httptest.NewServer(backend.Config.Handler)
	t.Cleanup(other.Close)
	_, otherPort, _ := net.SplitHostPort(other.Listener.Addr().String())
	if err := tn.tryDeployComponent(t, "fetcher", artifact, map[string]any{
		"allowed_outbound_hosts": []string{"http://" + back, "http://localhost:" + otherPort, "http://" + self},
		"ceiling":                map[string]any{"cpu_fuel": 200_000_000, "memory_bytes": "8MiB", "wall_time": "5s"}}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, url string
		status    int
		body      string
	}{
		{"listed", "http://" + back + "/x?y=1", 200, "status 200\nhello from the backend /x?y=1"},
		{"not listed", "http://127.0.0.2:" + backPort + "/", 502, "HTTP-request-denied\n"},
		{"a name for loopback", "http://localhost:" + otherPort + "/", 502, "HTTP-request-denied\n"},
		{"the node itself", "http://" + self + "/healthz", 502, "HTTP-request-denied\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := tn.do(t, "GET", "/v1/invoke/demo/fetcher/run/fetch?url="+tc.url, tn.key, nil, nil)
			if resp.StatusCode != tc.status || string(body) != tc.body {
				t.Fatalf("%d %q, want %d %q", resp.StatusCode, body, tc.status, tc.body)
			}
		})
	}
	if got := tn.metric(t, `latent_outbound_requests_total{result="answered"}`); got != 1 {
		t.Fatalf("%v answered, want 1", got)
	}
	if got := tn.metric(t, `latent_outbound_requests_total{result="denied"}`); got != 3 {
		t.Fatalf("%v denied, want 3", got)
	}
	// Each has its log line, without the query.
	var lines []string
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, `"msg":"outbound"`) {
			lines = append(lines, l)
		}
	}
	if len(lines) != 4 || !strings.Contains(lines[0], `"url":"http://`+back+`/x"`) || !strings.Contains(lines[0], `"status":200`) ||
		!strings.Contains(lines[1], `"error":"HTTP-request-denied"`) || strings.Contains(logs.String(), "y=1") {
		t.Fatalf("outbound log lines:\n%s", strings.Join(lines, "\n"))
	}
	// A revision without the list reaches nothing.
	if err := tn.tryDeployComponent(t, "closed", artifact, map[string]any{
		"ceiling": map[string]any{"cpu_fuel": 200_000_000, "memory_bytes": "8MiB", "wall_time": "5s"}}); err != nil {
		t.Fatal(err)
	}
	if resp, body := tn.do(t, "GET", "/v1/invoke/demo/closed/run/fetch?url=http://"+back+"/", tn.key, nil, nil); resp.StatusCode != 502 ||
		string(body) != "HTTP-request-denied\n" {
		t.Fatalf("no list: %d %q", resp.StatusCode, body)
	}
	if got := tn.metric(t, `latent_outbound_requests_total{result="denied"}`); got != 4 {
		t.Fatalf("%v denied after the unlisted revision's request, want 4: a request denied without a list is counted too", got)
	}
}

// TestInvoke_wasiHTTPReuse: a reused component keeps its memory between
// activations (counter.wasm counts on) and the handles of its standard
// streams (the Rust handler's adapter caches its stderr stream: each 404,
// logged with eprintln!, works on the same instance), and nothing else
// of a request: after every activation the instance holds only those.
func TestInvoke_wasiHTTPReuse(t *testing.T) {
	tn := startNode(t)
	if err := tn.tryDeployComponent(t, "counter", testwasm.Component(t, "counter"), map[string]any{"instance": "reuse"}); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 4; i++ {
		resp, body := tn.do(t, "GET", "/v1/invoke/demo/counter/run/", tn.key, nil, nil)
		if want := fmt.Sprintf("count %d\n", i); resp.StatusCode != 200 || string(body) != want {
			t.Fatalf("call %d: %d %q, want %q", i, resp.StatusCode, body, want)
		}
	}
	// postreturn.wasm traps on a call whose previous call's post-return
	// did not run (componentize-js's bindings do): the host calls it after
	// every handle, so a reused instance answers every time.
	if err := tn.tryDeployComponent(t, "postreturn", testwasm.Component(t, "postreturn"), map[string]any{"instance": "reuse"}); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 3; i++ {
		resp, body := tn.do(t, "GET", "/v1/invoke/demo/postreturn/run/", tn.key, nil, nil)
		if want := fmt.Sprintf("count %d\n", i); resp.StatusCode != 200 || string(body) != want {
			t.Fatalf("post-return, call %d: %d %q, want %q", i, resp.StatusCode, body, want)
		}
	}
	if err := tn.tryDeployComponent(t, "rust", testwasm.Component(t, "adapted"), map[string]any{"instance": "reuse",
		"ceiling": map[string]any{"cpu_fuel": 200_000_000, "memory_bytes": "8MiB", "wall_time": "5s"}}); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if resp, body := tn.do(t, "GET", "/v1/invoke/demo/rust/run/nope", tn.key, nil, nil); resp.StatusCode != 404 || string(body) != "no route /nope\n" {
			t.Fatalf("call %d: %d %q", i, resp.StatusCode, body)
		}
		if resp, body := tn.do(t, "GET", "/v1/invoke/demo/rust/run/?i=1", tn.key, nil, nil); resp.StatusCode != 200 || string(body) != "hello from Rust: GET /?i=1\n" {
			t.Fatalf("call %d: %d %q", i, resp.StatusCode, body)
		}
	}
	if got := tn.metric(t, `latent_instance_activations_total{mode="reuse",path="reused"}`); got < 8 {
		t.Fatalf("%v activations on a reused instance, want at least 8", got)
	}
}

// TestInvoke_wasiHTTPStreamed: the Rust handler's /stream copies the
// request body to its response as it arrives, in a memory of 8 MiB, for
// bodies larger than both: with a declared length and chunked, the answer
// is the body byte for byte, its headers the guest's, the activation's in
// trailers. A body over the tenant's limit is refused before the guest
// runs when declared, and cuts the answer off when it is not; a short
// body is read before admission as for every ABI.
func TestInvoke_wasiHTTPStreamed(t *testing.T) {
	const payload = 24 << 20
	tn := startNodeWith(t, func(c *config.Config) {
		c.Node.Limits.MaxPayloadBytes = payload + 1<<20
		demo := c.Tenants["demo"]
		demo.Limits.MaxPayloadBytes = payload
		c.Tenants["demo"] = demo
	})
	b, err := os.ReadFile(filepath.Join("..", "testdata", "components", "adapted.wasm"))
	if err != nil {
		t.Fatal(err)
	}
	tn.deployComponentWith(t, "adapted", b, map[string]any{"cpu_fuel": 2_000_000_000, "memory_bytes": "8MiB", "wall_time": "10s"})
	post := func(t *testing.T, n int64, chunked bool) (*http.Response, []byte, error) {
		t.Helper()
		var body io.Reader = testutil.Pattern(n)
		if chunked {
			body = io.MultiReader(body) // no length net/http can see
		}
		req, _ := http.NewRequest("POST", tn.srv.URL+"/v1/invoke/demo/adapted/run/stream", body)
		if !chunked {
			req.ContentLength = n
		}
		req.Header.Set("Authorization", "Bearer "+tn.key)
		req.Header.Set("Content-Type", "application/x-test")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = resp.Body.Close() }()
		got, err := io.ReadAll(resp.Body)
		return resp, got, err
	}
	want := make([]byte, payload)
	_, _ = io.ReadFull(testutil.Pattern(payload), want)
	for _, chunked := range []bool{false, true} {
		t.Run(fmt.Sprintf("chunked=%v", chunked), func(t *testing.T) {
			resp, got, err := post(t, payload, chunked)
			if err != nil || resp.StatusCode != 200 || !bytes.Equal(got, want) {
				t.Fatalf("%d, %d bytes of %d, equal %v, err %v", resp.StatusCode, len(got), payload, bytes.Equal(got, want), err)
			}
			if resp.Header.Get("Content-Type") != "application/x-test" || resp.Header.Get("X-Example") != "rust" || resp.ContentLength != -1 {
				t.Fatalf("headers %v, length %d", resp.Header, resp.ContentLength)
			}
			if resp.Trailer.Get("Latent-Outcome") != "success" || resp.Trailer.Get("Latent-Fuel-Used") == "" ||
				!strings.Contains(resp.Trailer.Get("Server-Timing"), "exec") || resp.Header.Get("Latent-Activation-Id") == "" {
				t.Fatalf("trailers %v", resp.Trailer)
			}
		})
	}
	t.Run("declared over the limit", func(t *testing.T) {
		resp, got, _ := post(t, payload+1, false)
		if resp.StatusCode != 413 || resp.Header.Get("Latent-Outcome") != "" || !strings.Contains(string(got), `"scope":"tenant"`) {
			t.Fatalf("%d %v %s", resp.StatusCode, resp.Header, trim(got))
		}
	})
	t.Run("chunked over the limit", func(t *testing.T) {
		resp, got, err := post(t, payload+1, true)
		if err == nil || resp.StatusCode != 200 || len(got) > payload || resp.Trailer.Get("Latent-Outcome") != "" {
			t.Fatalf("%d, %d bytes, err %v, trailers %v: want an answer cut off", resp.StatusCode, len(got), err, resp.Trailer)
		}
	})
	t.Run("short chunked body over the limit", func(t *testing.T) {
		// Smaller than max_output_bytes: nothing went out yet, so the
		// node answers the body's refusal.
		small := startNodeWith(t, func(c *config.Config) {
			demo := c.Tenants["demo"]
			demo.Limits.MaxPayloadBytes = 100 << 10
			c.Tenants["demo"] = demo
		})
		small.deployComponentWith(t, "adapted", b, map[string]any{"cpu_fuel": 200_000_000, "memory_bytes": "8MiB", "wall_time": "5s"})
		req, _ := http.NewRequest("POST", small.srv.URL+"/v1/invoke/demo/adapted/run/stream", io.MultiReader(testutil.Pattern(200<<10)))
		req.Header.Set("Authorization", "Bearer "+small.key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != 413 || !strings.Contains(string(got), `"scope":"tenant"`) || resp.Header.Get("Latent-Outcome") != "success" {
			t.Fatalf("%d %v %s", resp.StatusCode, resp.Header, trim(got))
		}
	})
}

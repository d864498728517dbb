package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/latent-node/latent-node/internal/testutil"
	"github.com/latent-node/latent-node/internal/testwasm"
	"github.com/latent-node/latent-node/refusal"
)

// component reads a fixture of testdata/components (built by its build.sh).
func component(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "testdata", "components", name+".wasm"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// deployComponent uploads artifact and PUTs tenant/service with one revision
// of abi (omitted when "") on route "web"; it returns the deploy's reply.
func (n *node) deployComponent(t *testing.T, who, tenant, service string, artifact []byte, abi string, ceiling map[string]any) reply {
	t.Helper()
	digest, err := n.client(t, who).UploadArtifact(context.Background(), artifact)
	if err != nil {
		t.Fatal(err)
	}
	if ceiling == nil {
		ceiling = map[string]any{"cpu_fuel": 20_000_000, "memory_bytes": "1MiB", "wall_time": "5s"}
	}
	rv := map[string]any{"name": "v1", "artifact": digest, "trust_class": "untrusted", "ceiling": ceiling}
	if abi != "" {
		rv["abi"] = abi
	}
	body, _ := json.Marshal(map[string]any{"tenant": tenant, "service": service, "revisions": []any{rv},
		"routes": []any{map[string]any{"name": "web", "targets": []any{map[string]any{"revision": "v1", "weight": 1}}}}})
	return n.do(t, "PUT", "/v1/deployments/"+tenant+"/"+service, who, bytes.NewReader(body), nil)
}

// TestWasiHTTP_components: wasi:http components deploy into the real binary
// and answer on their route; every way one fails is a problem body naming
// that activation's outcome, never a 500; what cannot run is refused at
// deploy with a problem naming the cause; and a tenant looping in its
// component does not stop another tenant's component from answering.
func TestWasiHTTP_components(t *testing.T) {
	n, _ := startNode(t, nil, calm)
	deployed := func(t *testing.T, who, tenant, fixture string, ceiling map[string]any) {
		t.Helper()
		if r := n.deployComponent(t, who, tenant, fixture, component(t, fixture), "wasi-http", ceiling); r.status != 200 {
			t.Fatalf("deploy %s: %d %s", fixture, r.status, r.body)
		}
	}

	t.Run("hello", func(t *testing.T) {
		deployed(t, "alice", "acme", "hello", nil)
		r := n.do(t, "DELETE", "/v1/invoke/acme/hello/web/a/b?q=1&r=%20", "alice", nil, nil)
		if r.status != 200 || string(r.body) != "hello /a/b?q=1&r=%20\n" || r.header.Get("X-Fixture") != "hello" {
			t.Fatalf("%d %v %q", r.status, r.header, r.body)
		}
		if r.header.Get("Latent-Activation-Id") == "" || r.header.Get("Latent-Outcome") != "success" ||
			!strings.Contains(r.header.Get("Server-Timing"), "exec") {
			t.Fatalf("node headers missing: %v", r.header)
		}
	})

	t.Run("outcomes", func(t *testing.T) {
		for _, tc := range []struct {
			fixture, outcome string
			status           int
		}{
			{"loop", "fuel-exhausted", 502},
			{"trap", "trap", 502},
			{"grow", "memory-exhausted", 502},
			{"noresponse", "malformed-response", 502},
			{"badstring", "trap", 502},
			{"badutf8", "trap", 502},
			{"badhandle", "trap", 502},
			{"wronghandle", "trap", 502},
			{"handleflood", "trap", 502},
		} {
			t.Run(tc.fixture, func(t *testing.T) {
				deployed(t, "alice", "acme", tc.fixture, nil)
				r := n.do(t, "POST", "/v1/invoke/acme/"+tc.fixture+"/web/x", "alice", strings.NewReader("body"), nil)
				if r.status != tc.status || r.problem.Outcome != tc.outcome || r.problem.Status != tc.status {
					t.Fatalf("want %d %s as a problem, have %d %s", tc.status, tc.outcome, r.status, r.body)
				}
				// The node answers the next request as before.
				if r := n.do(t, "GET", "/v1/invoke/acme/hello/web/", "alice", nil, nil); r.status != 200 {
					t.Fatalf("hello after %s: %d %s", tc.fixture, r.status, r.body)
				}
			})
		}
	})

	t.Run("outbound denied", func(t *testing.T) {
		// outbound.wasm answers 403 when its request is refused with
		// HTTP-request-denied, 200 when it is let through.
		deployed(t, "alice", "acme", "outbound", nil)
		if r := n.do(t, "GET", "/v1/invoke/acme/outbound/web", "alice", nil, nil); r.status != 403 || r.header.Get("Latent-Outcome") != "success" {
			t.Fatalf("want the guest's 403, have %d %v %s", r.status, r.header, r.body)
		}
	})

	t.Run("outbound allowed", func(t *testing.T) {
		// The Rust handler's /fetch through allowed_outbound_hosts on the
		// real binary: a listed backend answers; an unlisted address, a
		// name for loopback and the node's own address (listed) are
		// denied.
		backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = w.Write([]byte("backend " + r.URL.Path))
		}))
		t.Cleanup(backend.Close)
		back := backend.Listener.Addr().String()
		_, port, _ := net.SplitHostPort(back)
		// Another backend, reached only by a name for loopback.
		other := httptest.NewServer(backend.Config.Handler)
		t.Cleanup(other.Close)
		_, otherPort, _ := net.SplitHostPort(other.Listener.Addr().String())
		self := strings.TrimPrefix(n.url, "http://")
		digest, err := n.client(t, "alice").UploadArtifact(context.Background(), component(t, "adapted"))
		if err != nil {
			t.Fatal(err)
		}
		rv := map[string]any{"name": "v1", "artifact": digest, "trust_class": "untrusted", "abi": "wasi-http",
			"allowed_outbound_hosts": []string{"http://" + back, "http://localhost:*", "http://" + self},
			"ceiling":                map[string]any{"cpu_fuel": 200_000_000, "memory_bytes": "8MiB", "wall_time": "5s"}}
		body, _ := json.Marshal(map[string]any{"tenant": "acme", "service": "fetcher", "revisions": []any{rv},
			"routes": []any{map[string]any{"name": "web", "targets": []any{map[string]any{"revision": "v1", "weight": 1}}}}})
		if r := n.do(t, "PUT", "/v1/deployments/acme/fetcher", "alice", bytes.NewReader(body), nil); r.status != 200 {
			t.Fatalf("deploy: %d %s", r.status, r.body)
		}
		for _, tc := range []struct{ url, want string }{
			{"http://" + back + "/b", "status 200\nbackend /b"},
			{"http://127.0.0.2:" + port + "/", "HTTP-request-denied\n"},
			{"http://localhost:" + otherPort + "/", "HTTP-request-denied\n"},
			{"http://" + self + "/healthz", "HTTP-request-denied\n"},
		} {
			r := n.do(t, "GET", "/v1/invoke/acme/fetcher/web/fetch?url="+tc.url, "alice", nil, nil)
			if string(r.body) != tc.want {
				t.Fatalf("%s: %d %q, want %q", tc.url, r.status, r.body, tc.want)
			}
		}
	})

	t.Run("snapshot", func(t *testing.T) {
		// counter.wasm counts in its memory: from a snapshot every
		// activation sees the count its initialisation left.
		digest, err := n.client(t, "alice").UploadArtifact(context.Background(), component(t, "counter"))
		if err != nil {
			t.Fatal(err)
		}
		rv := map[string]any{"name": "v1", "artifact": digest, "trust_class": "untrusted", "abi": "wasi-http", "instance": "snapshot",
			"ceiling": map[string]any{"cpu_fuel": 20_000_000, "memory_bytes": "1MiB", "wall_time": "5s"}}
		body, _ := json.Marshal(map[string]any{"tenant": "acme", "service": "counter", "revisions": []any{rv},
			"routes": []any{map[string]any{"name": "web", "targets": []any{map[string]any{"revision": "v1", "weight": 1}}}}})
		if r := n.do(t, "PUT", "/v1/deployments/acme/counter", "alice", bytes.NewReader(body), nil); r.status != 200 {
			t.Fatalf("deploy: %d %s", r.status, r.body)
		}
		for i := range 3 {
			if r := n.do(t, "GET", "/v1/invoke/acme/counter/web/", "alice", nil, nil); r.status != 200 || string(r.body) != "count 1\n" {
				t.Fatalf("call %d: %d %q", i, r.status, r.body)
			}
		}
	})

	t.Run("refused at deploy", func(t *testing.T) {
		hello := component(t, "hello")
		for _, tc := range []struct {
			name     string
			artifact []byte
			abi      string
			problem  string // in the invalid field's problem
		}{
			{"unsupported import", component(t, "sockets"), "wasi-http", "unsupported-import wasi:sockets/tcp@0.2.12"},
			{"truncated component", hello[:len(hello)/2], "wasi-http", "component"},
			{"core module as wasi-http", testwasm.Bytes(t, "echo"), "wasi-http", "the artifact is a core module"},
			{"component as stdio", hello, "", `the artifact is a WebAssembly component; declare abi = "wasi-http"`},
			{"component as wagi", hello, "wagi", `the artifact is a WebAssembly component; declare abi = "wasi-http"`},
		} {
			t.Run(tc.name, func(t *testing.T) {
				r := n.deployComponent(t, "alice", "acme", "refused", tc.artifact, tc.abi, nil)
				checkRefusal(t, r, 422, refusal.ReasonInvalidManifest.String())
				var p struct {
					Fields []struct{ Field, Problem string } `json:"invalid_fields"`
				}
				if err := json.Unmarshal(r.body, &p); err != nil || len(p.Fields) != 1 ||
					!strings.Contains(p.Fields[0].Problem, tc.problem) {
					t.Fatalf("want one problem naming %q, have %s", tc.problem, r.body)
				}
			})
		}
		if r := n.do(t, "GET", "/v1/deployments/acme/refused", "alice", nil, nil); r.status != 404 {
			t.Fatalf("a refused deploy left a deployment: %d %s", r.status, r.body)
		}
	})

	t.Run("a looping tenant does not stop another", func(t *testing.T) {
		// beta's loop runs until its wall time with fuel to spare; while it
		// runs, acme's hello keeps answering, and after it too.
		deployed(t, "bob", "beta", "loop", map[string]any{"cpu_fuel": 5_000_000_000, "memory_bytes": "1MiB", "wall_time": "1500ms"})
		loop := make(chan result, 1)
		go func() {
			r, err := n.try("GET", "/v1/invoke/beta/loop/web", "bob", nil, nil)
			loop <- result{r, err}
		}()
		n.waitUsage(t, "bob", func(live, _ uint64) bool { return live == 1 })
		for i := 0; i < 20; i++ {
			if r := n.do(t, "GET", "/v1/invoke/acme/hello/web/quiet", "alice", nil, nil); r.status != 200 || string(r.body) != "hello /quiet\n" {
				t.Fatalf("hello while beta loops: %d %s", r.status, r.body)
			}
		}
		if live, _ := n.usage(t, "bob"); live != 1 {
			t.Fatalf("beta's loop ended before acme's requests were answered (live %d): no proof of isolation", live)
		}
		r := await(t, loop, 30*time.Second)
		if r.status != 504 && r.status != 502 || r.problem.Outcome != "deadline-exceeded" && r.problem.Outcome != "fuel-exhausted" {
			t.Fatalf("loop: want deadline-exceeded or fuel-exhausted, have %d %s", r.status, r.body)
		}
		if r := n.do(t, "GET", "/v1/invoke/acme/hello/web/after", "alice", nil, nil); r.status != 200 {
			t.Fatalf("hello after beta's loop: %d %s", r.status, r.body)
		}
	})
}

// TestWasiHTTP_streamed: on the real binary with max_payload_bytes at 64
// MiB, a 64 MiB upload (declared, then chunked) is echoed byte for byte by
// the Rust handler's /stream in a memory ceiling of 8 MiB, its activation
// headers in trailers, while the node's resident memory grows by less than
// 8 MiB: neither the body nor the answer is held.
func TestWasiHTTP_streamed(t *testing.T) {
	const payload = 64 << 20
	n, _ := startNode(t, func(p *params) { p.MaxPayload = "64MiB" }, calm)
	ceiling := map[string]any{"cpu_fuel": 2_000_000_000, "memory_bytes": "8MiB", "wall_time": "10s"}
	if r := n.deployComponent(t, "bob", "beta", "stream", component(t, "adapted"), "wasi-http", ceiling); r.status != 200 {
		t.Fatalf("deploy: %d %s", r.status, r.body)
	}
	echo := func(t *testing.T, size int64, chunked bool) {
		t.Helper()
		var body io.Reader = testutil.Pattern(size)
		if chunked {
			body = io.MultiReader(body) // a length net/http cannot see
		}
		req, _ := http.NewRequest("POST", n.url+"/v1/invoke/beta/stream/web/stream", body)
		if !chunked {
			req.ContentLength = size
		}
		req.Header.Set("Authorization", "Bearer "+n.keys["bob"])
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = resp.Body.Close() }()
		got, want := sha256.New(), sha256.New()
		m, err := io.Copy(got, resp.Body)
		_, _ = io.Copy(want, testutil.Pattern(size))
		if err != nil || resp.StatusCode != 200 || m != size || !bytes.Equal(got.Sum(nil), want.Sum(nil)) {
			t.Fatalf("%d: %d bytes of %d, err %v", resp.StatusCode, m, size, err)
		}
		if resp.Trailer.Get("Latent-Outcome") != "success" {
			t.Fatalf("trailers %v", resp.Trailer)
		}
	}
	echo(t, 4<<20, false) // warm: the compiled module, the cell, the connection
	rss := &rssSampler{pid: n.cmd.Process.Pid}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- rss.Run(ctx) }()
	defer func() { cancel(); <-done }()
	for _, chunked := range []bool{false, true} {
		rss.resetWindow()
		before, _, _ := testutil.ProcStatus(strconv.Itoa(n.cmd.Process.Pid))
		start := time.Now()
		echo(t, payload, chunked)
		took := time.Since(start)
		peak := rss.windowMax()
		grew := int64(peak) - int64(before)
		t.Logf("64 MiB echoed (chunked %v) in %v; node RSS %.1f MiB before, peak %.1f MiB (+%.1f MiB)", chunked,
			took.Round(time.Millisecond), float64(before)/(1<<20), float64(peak)/(1<<20), float64(grew)/(1<<20))
		if grew >= 8<<20 {
			t.Fatalf("the node's RSS grew by %.1f MiB while streaming, want less than 8 MiB", float64(grew)/(1<<20))
		}
	}
}

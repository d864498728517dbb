package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// jsCase is one request to a wasi:http example: the JavaScript handler
// (examples/js/app.js) and the Rust one (examples/rust/http.rs) answer
// alike.
type jsCase struct {
	name, method, path string // path below the route
	body               []byte
	headers            map[string]string
	// want is the answer when the reference host cannot give one (jco
	// serve 1.35 fails every body-less response, 204 and 304).
	want *jsAnswer
}

// jsAnswer is what the comparison looks at: the status, the guest's own
// headers and the body.
type jsAnswer struct {
	status int
	// fuel and timing are the node's Latent-Fuel-Used and
	// Server-Timing, for the log.
	fuel, timing string
	header       map[string]string // guestHeaders, lower case
	body         []byte
}

// guestHeaders are the headers app.js sets, compared between the hosts.
var guestHeaders = []string{"content-type", "x-example", "x-method", "x-query", "x-body-bytes", "x-echo"}

// jsCases are the requests; example is the x-example header of the handler.
func jsCases(example string) []jsCase {
	mib := make([]byte, 1<<20)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range mib {
		mib[i] = byte(r.Uint32())
	}
	return []jsCase{
		{name: "GET /", method: "GET", path: "/"},
		{name: "GET with a query", method: "GET", path: "/?a=1&b=two%20words"},
		{name: "POST echo", method: "POST", path: "/echo?q=1", body: []byte("hello, world\n"),
			headers: map[string]string{"Content-Type": "text/plain", "X-Echo": "e1"}},
		{name: "DELETE headers", method: "DELETE", path: "/headers?z=1",
			headers: map[string]string{"X-One": "1", "X-Two": "two, three", "Cookie": "session=secret"}},
		{name: "1 MiB echoed", method: "POST", path: "/echo", body: mib,
			headers: map[string]string{"Content-Type": "application/octet-stream"}},
		{name: "4 MiB answer", method: "GET", path: "/big?mib=4"},
		{name: "201", method: "PUT", path: "/status/201"},
		{name: "204", method: "GET", path: "/status/204",
			want: &jsAnswer{status: 204, header: map[string]string{"x-example": example}}},
		{name: "418", method: "GET", path: "/status/418"},
		{name: "503", method: "GET", path: "/status/503"},
		{name: "not found", method: "GET", path: "/nowhere"},
	}
}

// httpExample is a wasi:http example: where build.sh writes it and the
// manifest that deploys it.
type httpExample struct {
	lang, module, manifest, service, example string
}

var httpExamples = []httpExample{
	{lang: "js", module: "app.wasm", manifest: "manifest.toml", service: "app-js", example: "js"},
	{lang: "rust", module: "http.wasm", manifest: "http.toml", service: "http-rust", example: "rust"},
}

// TestExampleHTTP_matchesReference builds the wasi:http examples (the
// JavaScript one with componentize-js, the Rust one with rustc and
// wasm-tools), deploys each with the CLI into the real binary's demo
// configuration and sends each jsCase to it and to the reference host, jco
// serve (every request in its own worker: sharing one instance, jco serve
// 1.35 answers the JavaScript component once and then fails "respondWith
// can't be called twice"). Status, the guest's headers and the body must
// match; the node must also keep the credentials from the guest. It needs
// Node.js and npm (build.sh installs componentize-js and jco) and takes
// about a minute: not in -short.
func TestExampleHTTP_matchesReference(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and compiles a 13 MB component (about a minute): run without -short")
	}
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skipf("no sh to run examples/build.sh: %v", err)
	}
	addr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	p := startFor(t, 5*time.Minute, calm, "serve", "--demo", "--listen", addr)
	key := strings.TrimPrefix(p.stdout.wait(t, 30*time.Second, func(s string) bool { return strings.HasPrefix(s, "demo api key: ") }), "demo api key: ")
	p.url = "http://" + addr
	waitReady(t, p.url)
	for _, ex := range httpExamples {
		t.Run(ex.lang, func(t *testing.T) {
			dir := t.TempDir()
			if err := buildExample(sh, ex.lang, dir); err != nil {
				if skip, ok := err.(skipError); ok {
					t.Skip(string(skip))
				}
				t.Fatal(err)
			}
			if _, err := os.Stat(filepath.Join(dir, ex.module)); err != nil {
				t.Skipf("build.sh %s did not build %s (its output says why): %v", ex.lang, ex.module, err)
			}
			ref := startJcoServe(t, filepath.Join(dir, ex.module))
			manifest, err := os.ReadFile(filepath.Join("..", "examples", ex.lang, ex.manifest))
			if err != nil {
				t.Fatal(err)
			}
			release := filepath.Join(dir, ex.manifest)
			if err := os.WriteFile(release, manifest, 0o600); err != nil {
				t.Fatal(err)
			}
			began := time.Now()
			if out, err := exec.Command(binary(t), "deploy", "--node", p.url, "--key", key, release).CombinedOutput(); err != nil {
				t.Fatalf("deploy: %v\n%s", err, out)
			}
			t.Logf("deployed in %v", time.Since(began).Round(time.Millisecond))
			for _, c := range jsCases(ex.example) {
				t.Run(c.name, func(t *testing.T) {
					want := c.want
					if want == nil {
						want = jsAsk(t, c, ref+c.path, "")
					}
					have := jsAsk(t, c, p.url+"/v1/invoke/demo/"+ex.service+"/web"+c.path, key)
					if have.status != want.status || !bytes.Equal(have.body, want.body) {
						t.Fatalf("node %d %d bytes (sha256 %x), reference %d %d bytes (sha256 %x)\nnode: %.300q\nreference: %.300q",
							have.status, len(have.body), sha256.Sum256(have.body), want.status, len(want.body), sha256.Sum256(want.body), have.body, want.body)
					}
					for _, h := range guestHeaders {
						if have.header[h] != want.header[h] {
							t.Errorf("header %s: node %q, reference %q", h, have.header[h], want.header[h])
						}
					}
					if c.body != nil && c.path == "/echo" && !bytes.Equal(have.body, c.body) {
						t.Fatal("the echo is not the body sent")
					}
					t.Logf("fuel %s, %s", have.fuel, have.timing)
				})
			}
		})
	}
}

// jsAsk sends c to url (with key as the bearer token if set) and returns the
// answer; for /headers it drops the headers the two hosts add or keep on
// purpose (Host, and the credentials, which the node must not pass on).
func jsAsk(t *testing.T, c jsCase, url, key string) *jsAnswer {
	t.Helper()
	req, err := http.NewRequest(c.method, url, bytes.NewReader(c.body))
	if err != nil {
		t.Fatal(err)
	}
	if c.body == nil {
		req.Body = http.NoBody
	}
	for k, v := range c.headers {
		req.Header.Set(k, v)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	a := &jsAnswer{status: resp.StatusCode, header: map[string]string{}, body: body,
		fuel: resp.Header.Get("Latent-Fuel-Used"), timing: resp.Header.Get("Server-Timing")}
	for _, h := range guestHeaders {
		if v := resp.Header.Get(h); v != "" {
			a.header[h] = v
		}
	}
	if strings.HasPrefix(c.path, "/headers") && resp.StatusCode == 200 {
		var seen map[string]string
		if err := json.Unmarshal(body, &seen); err != nil {
			t.Fatalf("headers: %v: %s", err, body)
		}
		if key != "" && (seen["authorization"] != "" || seen["cookie"] != "") {
			t.Fatalf("the node passed credentials on to the guest: %s", body)
		}
		for _, h := range []string{"host", "authorization", "cookie", "connection"} {
			delete(seen, h)
		}
		a.body, _ = json.Marshal(seen)
	}
	return a
}

// startJcoServe runs jco serve on component from the directory build.sh
// installed jco into, and returns its URL once it answers.
func startJcoServe(t *testing.T, component string) string {
	t.Helper()
	dir := os.Getenv("JCO_DIR")
	if dir == "" {
		cache, err := os.UserCacheDir()
		if err != nil {
			t.Skipf("no jco: %v", err)
		}
		dir = filepath.Join(cache, "latent-node", "jco")
	}
	jco := filepath.Join(dir, "node_modules", ".bin", "jco")
	if _, err := os.Stat(jco); err != nil {
		t.Skipf("no reference host (jco serve) at %s: %v", jco, err)
	}
	port := strconv.Itoa(freePort(t))
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, jco, "serve", "--port", port, "--host", "127.0.0.1",
		"--isolate-requests", "worker", "--isolate-worker-pool-size", "4", component)
	cmd.Dir = dir
	// A child jco serve leaves behind keeps the output pipe open: stop
	// waiting for it two seconds after the kill.
	cmd.WaitDelay = 2 * time.Second
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("jco serve:\n%s", log.String())
		}
	})
	url := "http://127.0.0.1:" + port
	hc := &http.Client{Timeout: 5 * time.Second}
	for i := 0; i < 600; i++ {
		if resp, err := hc.Get(url + "/"); err == nil {
			_ = resp.Body.Close()
			return url
		}
		<-time.After(100 * time.Millisecond) // bounded poll: jco transpiles the component first
	}
	t.Fatalf("jco serve never answered on %s", url)
	return ""
}

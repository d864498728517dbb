package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// wagiCase is one HTTP request to an example service and what it must
// answer. The WAGI handlers of examples/ are on route "web", the stdio
// functions on route "run".
type wagiCase struct {
	name    string
	method  string
	path    string // below /v1/invoke/demo/<service>/: route, suffix, query
	body    string
	headers map[string]string
	status  int
	outcome string // Latent-Outcome; "" is success
	// contentType is the answer's exact Content-Type.
	contentType string
	// header are answer headers and their values; "" must be absent.
	header map[string]string
	// want is the exact body ("" with contains or check: not checked).
	want     string
	contains []string // substrings of the body
	absent   []string // strings the body must not contain
	check    func(t *testing.T, r reply)
}

// stdioRefusesGET is the negative control of each service: its stdio route
// keeps the stdio contract, POST only, whatever the WAGI route next to it.
var stdioRefusesGET = wagiCase{
	name: "stdio route refuses GET", method: "GET", path: "run", status: 405,
	outcome: "-", contentType: "application/problem+json",
}

var goRouterCases = []wagiCase{
	{name: "hello", method: "GET", path: "web/hello?name=Ada", headers: map[string]string{"Accept-Language": "fr-CH, en;q=0.8"},
		status: 200, contentType: "application/json",
		header: map[string]string{"X-Example": "go-router", "Content-Language": "fr", "Vary": "Accept-Language"},
		check: func(t *testing.T, r reply) {
			var a struct{ Greeting, Path, Activation string }
			if err := json.Unmarshal(r.body, &a); err != nil || a.Greeting != "bonjour, Ada" || a.Path != "/hello" {
				t.Fatalf("answer %q: %v", r.body, err)
			}
			if id := r.header.Get("Latent-Activation-Id"); id == "" || a.Activation != id {
				t.Fatalf("answer's activation %q, header %q", a.Activation, id)
			}
		}},
	{name: "hello in English by default", method: "GET", path: "web/hello", status: 200, contentType: "application/json",
		header: map[string]string{"Content-Language": "en"}, contains: []string{`"greeting":"hello, world"`}},
	{name: "index", method: "GET", path: "web/", status: 200, contentType: "text/html; charset=utf-8",
		header:   map[string]string{"X-Example": "go-router", "Cache-Control": "max-age=60"},
		contains: []string{"<h1>router</h1>", `href="/v1/invoke/demo/greet-go/web/hello?name=Ada"`}},
	{name: "echo", method: "POST", path: "web/echo", body: `{"a":1}`, headers: map[string]string{"Content-Type": "application/vnd.example+json"},
		status: 200, contentType: "application/vnd.example+json", header: map[string]string{"X-Body-Bytes": "7", "X-Example": "go-router"}, want: `{"a":1}`},
	{name: "unknown path", method: "GET", path: "web/nowhere/else", status: 404, contentType: "application/json",
		header: map[string]string{"X-Example": "go-router"}, want: `{"error":"no route /nowhere/else"}` + "\n"},
	{name: "wrong method", method: "DELETE", path: "web/echo", status: 405, contentType: "application/json",
		contains: []string{"DELETE /echo: want POST"}},
	stdioRefusesGET,
}

var rustCountCases = []wagiCase{
	{name: "words of a query", method: "GET", path: "web/words?text=to+be+or%20not%20to+be", status: 200,
		contentType: "text/plain; charset=utf-8", header: map[string]string{"X-Example": "rust-count", "X-Count": "6"}, want: "6 words\n"},
	{name: "lines of a body as JSON", method: "POST", path: "web/lines", body: "one\ntwo\nthree\n",
		headers: map[string]string{"Accept": "application/json"}, status: 200, contentType: "application/json",
		header: map[string]string{"X-Count": "3"}, want: `{"count":3,"unit":"lines"}` + "\n"},
	{name: "words of a body on the bare route", method: "POST", path: "web", body: "héllo wörld", status: 200,
		contentType: "text/plain; charset=utf-8", want: "2 words\n", header: map[string]string{"X-Count": "2"}},
	{name: "unknown unit", method: "GET", path: "web/vowels?text=a", status: 404, contentType: "text/plain",
		header: map[string]string{"X-Example": "rust-count", "X-Count": ""}, contains: []string{"no unit /vowels"}},
	{name: "not UTF-8", method: "POST", path: "web/bytes", body: "caf\xe9", status: 400, contentType: "text/plain",
		contains: []string{"not UTF-8"}},
	stdioRefusesGET,
}

var cCaseCases = []wagiCase{
	{name: "upper of a query, repeated", method: "GET", path: "web/upper?text=Hello%2C+Ada", headers: map[string]string{"X-Repeat": "2"},
		status: 200, contentType: "text/plain", header: map[string]string{"X-Example": "c-case", "X-Transform": "upper"}, want: "HELLO, ADA\nHELLO, ADA\n"},
	{name: "lower of a body", method: "POST", path: "web/lower", body: strings.Repeat("ABC", 5000), status: 200,
		contentType: "text/plain", header: map[string]string{"X-Transform": "lower"}, want: strings.Repeat("abc", 5000)},
	{name: "unknown transform", method: "GET", path: "web/title?text=a", status: 404, contentType: "text/plain",
		header: map[string]string{"X-Example": "c-case", "X-Transform": ""}, contains: []string{"no such transform"}},
	{name: "wrong method", method: "PUT", path: "web/upper", body: "x", status: 405, contentType: "text/plain", contains: []string{"want GET or POST"}},
	stdioRefusesGET,
}

// checkWAGI sends c to the service at prefix ("demo/<service>/") and checks
// the answer.
func checkWAGI(t *testing.T, n *node, prefix string, c wagiCase) {
	t.Helper()
	r := n.do(t, c.method, "/v1/invoke/"+prefix+c.path, "demo", strings.NewReader(c.body), c.headers)
	outcome := c.outcome
	if outcome == "" {
		outcome = "success"
	}
	if r.status != c.status || outcome != "-" && r.header.Get("Latent-Outcome") != outcome {
		t.Fatalf("want %d %s, have %d %s: %s", c.status, outcome, r.status, r.header.Get("Latent-Outcome"), r.body)
	}
	if ct := r.header.Get("Content-Type"); ct != c.contentType {
		t.Fatalf("Content-Type %q, want %q: %s", ct, c.contentType, r.body)
	}
	for name, want := range c.header {
		if have := r.header.Get(name); have != want {
			t.Fatalf("header %s %q, want %q", name, have, want)
		}
	}
	if outcome == "success" {
		fuel, err := strconv.ParseUint(r.header.Get("Latent-Fuel-Used"), 10, 64)
		if err != nil || fuel == 0 {
			t.Fatalf("Latent-Fuel-Used %q", r.header.Get("Latent-Fuel-Used"))
		}
		t.Logf("%s %s: fuel %d, memory peak %s bytes", c.method, c.path, fuel, r.header.Get("Latent-Memory-Peak-Bytes"))
	}
	if c.want != "" && string(r.body) != c.want {
		t.Fatalf("body %q, want %q", r.body, c.want)
	}
	for _, s := range c.contains {
		if !strings.Contains(string(r.body), s) {
			t.Fatalf("body %q lacks %q", r.body, s)
		}
	}
	for _, s := range c.absent {
		if strings.Contains(string(r.body), s) {
			t.Fatalf("body %q has %q", r.body, s)
		}
	}
	if c.check != nil {
		c.check(t, r)
	}
}

// TestWAGI_publicModule deploys print-env, a WAGI guest of the WAGI project
// itself (testdata/wagi/print-env: its unchanged source and the module
// built from it), once as a WAGI revision (route "web") and once as a stdio
// revision (route "run"), and checks that the node gives it the request as
// WAGI does: the method, the path suffix, the query and the headers in its
// environment, its CGI header block turned into the answer's headers.
func TestWAGI_publicModule(t *testing.T) {
	t.Parallel()
	addr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	p := start(t, calm, "serve", "--demo", "--listen", addr)
	keyLine := p.stdout.wait(t, 30*time.Second, func(s string) bool { return strings.HasPrefix(s, "demo api key: ") })
	key := strings.TrimPrefix(keyLine, "demo api key: ")
	p.url = "http://" + addr
	waitReady(t, p.url)
	n := &node{proc: p, keys: map[string]string{"demo": key}}

	dir := t.TempDir()
	for _, f := range []string{"manifest.toml", "print-env.wasm"} {
		b, err := os.ReadFile(filepath.Join("..", "testdata", "wagi", "print-env", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	deployCLI(t, n.url, key, filepath.Join(dir, "manifest.toml"))
	env := func(lines ...string) []string { return lines }
	for _, c := range []wagiCase{
		{name: "GET with a suffix, a query and a header", method: "GET", path: "web/some/where?x=1&y=two",
			headers: map[string]string{"X-Trace-Me": "yes", "Accept": "text/plain"}, status: 200, contentType: "text/plain",
			contains: env("\nREQUEST_METHOD = GET\n", "\nPATH_INFO = /some/where\n", "\nQUERY_STRING = x=1&y=two\n",
				"\nHTTP_X_TRACE_ME = yes\n", "\nHTTP_ACCEPT = text/plain\n", "\nSCRIPT_NAME = /v1/invoke/demo/print-env/web\n",
				"\nLATENT_REVISION = ", "\nGATEWAY_INTERFACE = CGI/1.1\n"),
			// Credentials never reach a guest.
			absent: env("HTTP_AUTHORIZATION", "Bearer"),
			check: func(t *testing.T, r reply) {
				if !strings.HasPrefix(string(r.body), "CONTENT_LENGTH = 0\n") {
					t.Fatalf("the sorted environment does not start with CONTENT_LENGTH: %q", r.body)
				}
			}},
		{name: "POST on the bare route", method: "POST", path: "web", body: "ignored", headers: map[string]string{"Content-Type": "text/csv"},
			status: 200, contentType: "text/plain",
			contains: env("CONTENT_LENGTH = 7\n", "\nCONTENT_TYPE = text/csv\n", "\nREQUEST_METHOD = POST\n", "\nPATH_INFO = \n")},
		// The negative controls: the same module as a stdio revision
		// refuses GET, and on POST its CGI header block is just the body.
		{name: "stdio revision refuses GET", method: "GET", path: "run", status: 405, outcome: "-", contentType: "application/problem+json"},
		{name: "stdio revision answers the header block as body", method: "POST", path: "run", status: 200,
			contentType: "application/octet-stream", want: "Content-Type: text/plain\n\nLATENT_ACTIVATION_ID = "},
	} {
		t.Run(c.name, func(t *testing.T) {
			if strings.HasPrefix(c.want, "Content-Type: text/plain\n\n") {
				// The stdio answer goes on with the two variables a
				// stdio guest gets: compare only its start.
				c.contains, c.want = env(c.want), ""
			}
			checkWAGI(t, n, "demo/print-env/", c)
		})
	}
}

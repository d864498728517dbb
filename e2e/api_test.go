package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/latent-node/latent-node/client"
	"github.com/latent-node/latent-node/internal/testwasm"
	"github.com/latent-node/latent-node/refusal"
)

// otherArch is an architecture this host is not.
func otherArch() string {
	if runtime.GOARCH == "arm64" {
		return "x86_64"
	}
	return "aarch64"
}

// TestOutcomesAndRejections covers every activation outcome and every
// refusal of docs/api.md that one node with a calm load source can show.
func TestOutcomesAndRejections(t *testing.T) {
	n, _ := startNode(t, nil, calm)
	for _, g := range []string{"echo", "exit", "trap_unreachable", "trap_divzero", "trap_oob", "recursion", "infinite", "flood", "sleep"} {
		n.deploy(t, "alice", "acme", strings.ReplaceAll(g, "_", "-"), rev{guest: g})
	}
	n.deploy(t, "alice", "acme", "grow", rev{guest: "grow", memory: "1MiB"})
	n.deploy(t, "bob", "beta", "partner", rev{guest: "echo", trust: "partner"})
	n.deploy(t, "bob", "beta", "sleep", rev{guest: "sleep"})
	// Revisions whose requirements the node cannot satisfy are refused at
	// deploy (TestDeployRefusesWhatCannotRun), so admission's trust-class,
	// cell-class, threading and placement refusals are unit-tested in
	// admission.

	t.Run("outcomes", func(t *testing.T) {
		r := n.invoke(t, "alice", "acme/echo/run", "ping", nil)
		if r.status != 200 || string(r.body) != "ping" {
			t.Fatalf("success: %d %q", r.status, r.body)
		}
		for _, h := range []string{"Latent-Activation-Id", "Latent-Revision", "Latent-Outcome", "Latent-Fuel-Used",
			"Latent-Memory-Peak-Bytes", "Latent-Queue-Wait-Ms", "Latent-Execution-Ms", "Latent-Cell-Class"} {
			if r.header.Get(h) == "" {
				t.Errorf("success lacks %s", h)
			}
		}
		if r.header.Get("Latent-Outcome") != "success" || r.header.Get("Latent-Cell-Class") != "tiny" {
			t.Errorf("success headers: %v", r.header)
		}

		r = n.invoke(t, "alice", "acme/exit/run", "42", nil)
		if r.status != 502 || r.problem.Outcome != "declared-error" || r.problem.ExitCode == nil || *r.problem.ExitCode != 42 {
			t.Fatalf("declared-error: %d %s", r.status, r.body)
		}
		if !strings.Contains(string(r.body), `"exit_code":42`) || r.header.Get("Latent-Outcome") != "declared-error" {
			t.Fatalf("declared-error body/headers: %s %v", r.body, r.header)
		}

		for _, g := range []string{"trap-unreachable", "trap-divzero", "trap-oob", "recursion"} {
			r = n.invoke(t, "alice", "acme/"+g+"/run", "", nil)
			if r.status != 502 || r.problem.Outcome != "trap" || r.problem.TrapKind == "" {
				t.Fatalf("%s: want 502 trap with trap_kind, have %d %s", g, r.status, r.body)
			}
		}

		r = n.invoke(t, "alice", "acme/infinite/run", "", map[string]string{"Latent-Budget": "fuel=1000000"})
		if r.status != 502 || r.problem.Outcome != "fuel-exhausted" {
			t.Fatalf("fuel-exhausted: %d %s", r.status, r.body)
		}
		r = n.invoke(t, "alice", "acme/grow/run", "", nil)
		if r.status != 502 || r.problem.Outcome != "memory-exhausted" {
			t.Fatalf("memory-exhausted: %d %s", r.status, r.body)
		}
		r = n.invoke(t, "alice", "acme/flood/run", "", nil)
		if r.status != 502 || r.problem.Outcome != "output-exceeded" {
			t.Fatalf("output-exceeded: %d %s", r.status, r.body)
		}
		start := time.Now()
		r = n.invoke(t, "alice", "acme/sleep/run", "", map[string]string{"Latent-Timeout-Ms": "300"})
		if r.status != 504 || r.problem.Outcome != "deadline-exceeded" || r.header.Get("Latent-Outcome") != "deadline-exceeded" {
			t.Fatalf("deadline-exceeded: %d %s", r.status, r.body)
		}
		if el := time.Since(start); el > 5*time.Second {
			t.Fatalf("deadline-exceeded took %v", el)
		}
		// The node keeps serving after every failure.
		if r = n.invoke(t, "alice", "acme/echo/run", "again", nil); r.status != 200 || string(r.body) != "again" {
			t.Fatalf("after failures: %d %s", r.status, r.body)
		}
	})

	t.Run("rejections", func(t *testing.T) {
		big := strings.Repeat("x", 64<<10+1)
		meta := map[string]string{}
		for i := 0; i < 33; i++ {
			meta["Latent-Meta-K"+strconv.Itoa(i)] = "v"
		}
		longName := strings.Repeat("r", 200)
		tests := []struct {
			name, who, target, input string
			headers                  map[string]string
			status                   int
			reason                   string
		}{
			{"no key", "", "acme/echo/run", "", nil, 401, "unauthenticated"},
			{"unknown key", "lk_unknown", "acme/echo/run", "", nil, 401, "unauthenticated"},
			{"other tenant's route", "bob", "acme/echo/run", "", nil, 403, refusal.ReasonPrincipalNotAuthorized.String()},
			{"subject not allowed by tenant", "mallory", "acme/echo/run", "", nil, 403, refusal.ReasonPrincipalNotAuthorized.String()},
			{"admin lacks invoke role", "root", "acme/echo/run", "", nil, 403, refusal.ReasonRoleNotAuthorized.String()},
			{"priority over tenant max", "alice", "acme/echo/run", "", map[string]string{"Latent-Priority": "7"}, 403, refusal.ReasonPriorityNotAuthorized.String()},
			{"bad budget dimension", "alice", "acme/echo/run", "", map[string]string{"Latent-Budget": "gpu=1"}, 400, refusal.ReasonInvalidHeader.String()},
			{"bad budget value", "alice", "acme/echo/run", "", map[string]string{"Latent-Budget": "fuel=lots"}, 400, refusal.ReasonInvalidHeader.String()},
			{"bad priority", "alice", "acme/echo/run", "", map[string]string{"Latent-Priority": "-1"}, 400, refusal.ReasonInvalidHeader.String()},
			{"bad deadline", "alice", "acme/echo/run", "", map[string]string{"Latent-Deadline-Unix-Ms": "soon"}, 400, refusal.ReasonInvalidHeader.String()},
			{"bad timeout", "alice", "acme/echo/run", "", map[string]string{"Latent-Timeout-Ms": "1.5s"}, 400, refusal.ReasonInvalidHeader.String()},
			{"invalid identifier", "alice", "acme/echo/" + longName, "", nil, 400, refusal.ReasonInvalidIdentifier.String()},
			{"invalid activation id", "alice", "acme/echo/run", "", map[string]string{"Latent-Activation-Id": strings.Repeat("a", 200)}, 400, refusal.ReasonInvalidIdentifier.String()},
			{"too much metadata", "alice", "acme/echo/run", "", meta, 400, refusal.ReasonMetadataTooLarge.String()},
			{"zero fuel", "alice", "acme/echo/run", "", map[string]string{"Latent-Budget": "fuel=0"}, 400, refusal.ReasonBudgetInfeasible.String()},
			{"unknown route", "alice", "acme/echo/nope", "", nil, 404, refusal.ReasonRouteNotFound.String()},
			{"unknown service", "alice", "acme/nope/run", "", nil, 404, refusal.ReasonServiceNotFound.String()},
			{"payload over node cap", "alice", "acme/echo/run", big, nil, 413, refusal.ReasonPayloadTooLarge.String()},
			{"payload over tenant cap", "alice", "acme/echo/run", strings.Repeat("x", 32<<10+1), nil, 413, refusal.ReasonPayloadTooLarge.String()},
			{"infeasible deadline", "alice", "acme/echo/run", "", map[string]string{"Latent-Timeout-Ms": "50"}, 503, refusal.ReasonQueueDeadlineInfeasible.String()},
			{"expired deadline", "alice", "acme/echo/run", "", map[string]string{"Latent-Deadline-Unix-Ms": "1000"}, 504, "deadline-exceeded"},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				r := n.invoke(t, tc.who, tc.target, tc.input, tc.headers)
				checkRefusal(t, r, tc.status, tc.reason)
				if tc.status == 401 && !strings.HasPrefix(r.header.Get("WWW-Authenticate"), "Bearer") {
					t.Fatalf("401 without WWW-Authenticate: %v", r.header)
				}
				if tc.status != 401 && tc.reason != refusal.ReasonRoleNotAuthorized.String() && r.header.Get("Latent-Activation-Id") == "" {
					t.Fatalf("refusal without Latent-Activation-Id")
				}
				if bytes.Contains(r.body, []byte("acme")) || bytes.Contains(r.body, []byte("alice")) {
					t.Fatalf("problem echoes tenant or principal: %s", r.body)
				}
			})
		}

		t.Run("chunked payload over cap", func(t *testing.T) {
			// An io.Reader of unknown length is sent chunked.
			body := io.MultiReader(strings.NewReader(big[:1<<10]), strings.NewReader(big[1<<10:]))
			r := n.do(t, "POST", "/v1/invoke/acme/echo/run", "alice", body, nil)
			checkRefusal(t, r, 413, refusal.ReasonPayloadTooLarge.String())
		})

		t.Run("capacity exhausted", func(t *testing.T) {
			// beta may have one live activation: a running sleep holds it.
			first := n.async("bob", "beta/sleep/run", "", map[string]string{"Latent-Timeout-Ms": "1500"})
			n.waitUsage(t, "bob", func(live, _ uint64) bool { return live == 1 })
			r := n.invoke(t, "bob", "beta/partner/run", "x", nil)
			checkRefusal(t, r, 429, refusal.ReasonCapacityExhausted.String())
			if r.problem.Scope != "tenant" || !r.problem.Retryable {
				t.Fatalf("capacity: %s", r.body)
			}
			if s, err := strconv.Atoi(r.header.Get("Retry-After")); err != nil || s < 1 {
				t.Fatalf("Retry-After %q", r.header.Get("Retry-After"))
			}
			if r := await(t, first, 10*time.Second); r.status != 504 {
				t.Fatalf("first: %d %s", r.status, r.body)
			}
			// The slot is free again, and the partner trust class is fine for beta.
			if r := n.invoke(t, "bob", "beta/partner/run", "x", nil); r.status != 200 || string(r.body) != "x" {
				t.Fatalf("after capacity: %d %s", r.status, r.body)
			}
		})

		t.Run("duplicate activation id", func(t *testing.T) {
			id := map[string]string{"Latent-Activation-Id": "dup-1", "Latent-Timeout-Ms": "1500"}
			first := n.async("alice", "acme/sleep/run", "", id)
			n.waitUsage(t, "alice", func(live, _ uint64) bool { return live >= 1 })
			r := n.invoke(t, "alice", "acme/echo/run", "x", map[string]string{"Latent-Activation-Id": "dup-1"})
			checkRefusal(t, r, 409, refusal.ReasonActivationIDUnavailable.String())
			if r.header.Get("Latent-Activation-Id") != "dup-1" {
				t.Fatalf("409 activation id %q", r.header.Get("Latent-Activation-Id"))
			}
			if r := await(t, first, 10*time.Second); r.status != 504 || r.header.Get("Latent-Activation-Id") != "dup-1" {
				t.Fatalf("first: %d %s", r.status, r.body)
			}
			// Once the first finished, the id is free again.
			if r := n.invoke(t, "alice", "acme/echo/run", "y", map[string]string{"Latent-Activation-Id": "dup-1"}); r.status != 200 {
				t.Fatalf("reuse after finish: %d %s", r.status, r.body)
			}
		})
	})

	// Nothing leaked: no live reservations once everything answered.
	n.waitUsage(t, "alice", func(live, queued uint64) bool { return live == 0 && queued == 0 })
	r := n.do(t, "GET", "/metrics", "root", nil, nil)
	if r.status != 200 || !strings.Contains(string(r.body), "latent_permits_leaked_total 0") {
		t.Fatalf("metrics: %d", r.status)
	}
}

// rawExchange writes req on a new connection, half-closes it and reads the
// answer (for framing no client would send).
func (n *node) rawExchange(t *testing.T, req string) reply {
	t.Helper()
	c, err := net.DialTimeout("tcp", strings.TrimPrefix(n.url, "http://"), 5*time.Second)
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
		t.Fatalf("no answer: %v", err)
	}
	defer func() { _ = resp.Body.Close() }()
	data, _ := io.ReadAll(resp.Body)
	r := reply{status: resp.StatusCode, header: resp.Header, body: data}
	if err := json.Unmarshal(data, &r.problem); err != nil {
		t.Fatalf("not a problem body: %q", data)
	}
	return r
}

// TestAPI_hardening: /metrics is for administrators, activation ids are per
// tenant, and malformed bodies are the caller's 400.
func TestAPI_hardening(t *testing.T) {
	n, _ := startNode(t, nil, calm)
	n.deploy(t, "alice", "acme", "sleep", rev{guest: "sleep"})
	n.deploy(t, "alice", "acme", "echo", rev{guest: "echo"})
	n.deploy(t, "bob", "beta", "echo", rev{guest: "echo"})

	t.Run("metrics need admin", func(t *testing.T) {
		checkRefusal(t, n.do(t, "GET", "/metrics", "", nil, nil), 401, "unauthenticated")
		checkRefusal(t, n.do(t, "GET", "/metrics", "alice", nil, nil), 403, refusal.ReasonRoleNotAuthorized.String())
		r := n.do(t, "GET", "/metrics", "root", nil, nil)
		if r.status != 200 || !strings.Contains(string(r.body), "latent_http_connections") {
			t.Fatalf("admin: %d %.200s", r.status, r.body)
		}
	})

	t.Run("activation ids are per tenant", func(t *testing.T) {
		id := "shared-activation"
		held := n.async("alice", "acme/sleep/run", "", map[string]string{"Latent-Activation-Id": id, "Latent-Timeout-Ms": "2000"})
		n.waitUsage(t, "alice", func(live, _ uint64) bool { return live == 1 })
		// beta uses the same id while acme's is live: admitted and run.
		r := n.invoke(t, "bob", "beta/echo/run", "mine", map[string]string{"Latent-Activation-Id": id})
		if r.status != 200 || string(r.body) != "mine" || r.header.Get("Latent-Activation-Id") != id {
			t.Fatalf("beta with acme's live id: %d %s", r.status, r.body)
		}
		// Negative control: within acme the id is still taken.
		checkRefusal(t, n.invoke(t, "alice", "acme/echo/run", "x", map[string]string{"Latent-Activation-Id": id}),
			409, refusal.ReasonActivationIDUnavailable.String())
		if r := await(t, held, 10*time.Second); r.status != 504 || r.header.Get("Latent-Activation-Id") != id {
			t.Fatalf("held: %d %s", r.status, r.body)
		}
	})

	t.Run("malformed bodies", func(t *testing.T) {
		head := func(method, path string) string {
			return method + " " + path + " HTTP/1.1\r\nHost: n\r\nAuthorization: Bearer " + n.keys["alice"] + "\r\n"
		}
		digest := client.Digest([]byte("0123456789"))
		tests := []struct{ name, req string }{
			{"invoke bad chunk size", head("POST", "/v1/invoke/acme/echo/run") + "Transfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n"},
			{"invoke chunk longer than declared", head("POST", "/v1/invoke/acme/echo/run") + "Transfer-Encoding: chunked\r\n\r\n2\r\nabcdef\r\n0\r\n\r\n"},
			{"invoke truncated", head("POST", "/v1/invoke/acme/echo/run") + "Content-Length: 10\r\n\r\nabc"},
			{"artifact bad chunk size", head("PUT", "/v1/artifacts/"+digest) + "Transfer-Encoding: chunked\r\n\r\nzz\r\n0123\r\n0\r\n\r\n"},
			{"artifact truncated", head("PUT", "/v1/artifacts/"+digest) + "Content-Length: 10\r\n\r\n01234"},
			{"deployment bad chunk size", head("PUT", "/v1/deployments/acme/m") + "Transfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n"},
			{"deployment not JSON", head("PUT", "/v1/deployments/acme/m") + "Content-Length: 10\r\n\r\n{\"tenant\":"},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				checkRefusal(t, n.rawExchange(t, tc.req), 400, refusal.ReasonMalformedBody.String())
			})
		}
		// A body over its bound stays 413, also chunked.
		big := strings.Repeat("x", 64<<10+1)
		checkRefusal(t, n.rawExchange(t, head("POST", "/v1/invoke/acme/echo/run")+"Transfer-Encoding: chunked\r\n\r\n"+
			strconv.FormatInt(int64(len(big)), 16)+"\r\n"+big+"\r\n0\r\n\r\n"), 413, refusal.ReasonPayloadTooLarge.String())
		// The node still serves, and blamed none of it on itself.
		if r := n.invoke(t, "alice", "acme/echo/run", "ok", nil); r.status != 200 || string(r.body) != "ok" {
			t.Fatalf("after malformed bodies: %d %s", r.status, r.body)
		}
		if strings.Contains(n.stderr.String(), "internal error") {
			t.Fatalf("a malformed body was logged as the node's error:\n%s", n.stderr.String())
		}
	})

	t.Run("module refusals name the problem", func(t *testing.T) {
		digest, err := n.client(t, "alice").UploadArtifact(context.Background(), testwasm.Bytes(t, "bad_import"))
		if err != nil {
			t.Fatal(err)
		}
		manifest := `{"tenant":"acme","service":"bad","revisions":[{"name":"v1","artifact":"` + digest +
			`","trust_class":"untrusted","ceiling":{"cpu_fuel":1000000,"memory_bytes":"1MiB","wall_time":"1s"}}],` +
			`"routes":[{"name":"run","targets":[{"revision":"v1","weight":1}]}]}`
		r := n.do(t, "PUT", "/v1/deployments/acme/bad", "alice", strings.NewReader(manifest), nil)
		checkRefusal(t, r, 422, refusal.ReasonInvalidManifest.String())
		var p struct {
			Fields []struct{ Field, Problem string } `json:"invalid_fields"`
		}
		if err := json.Unmarshal(r.body, &p); err != nil || len(p.Fields) != 1 ||
			p.Fields[0].Field != "revisions[0].artifact" || !strings.Contains(p.Fields[0].Problem, "import") {
			t.Fatalf("field problems: %s", r.body)
		}
	})

	t.Run("unknown paths are problems", func(t *testing.T) {
		checkRefusal(t, n.do(t, "GET", "/v1/nope", "", nil, nil), 404, refusal.ReasonUnknownPath.String())
		checkRefusal(t, n.do(t, "GET", "/v1/invoke/acme/echo/run", "alice", nil, nil), 405, refusal.ReasonMethodNotAllowed.String())
	})

	// Whatever the server met, its log stays structured: one JSON object a line.
	for _, l := range strings.Split(strings.TrimSpace(n.stderr.String()), "\n") {
		if !json.Valid([]byte(l)) {
			t.Errorf("a log line is not JSON: %q", l)
		}
	}
}

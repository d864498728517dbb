package e2e

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/latent-node/latent-node/internal/testutil/nodeconf"
	"github.com/latent-node/latent-node/refusal"
)

// The ingress governor against the real binary: requests are held open by
// sending their headers (and part of their body) and not the rest, so the
// node holds their ingress reservations while the tests look at the other
// requests; the admission views are polled until they show the held ones.

// startIngressNode serves the harness configuration with ingress appended
// (TOML tables of [ingress]).
func startIngressNode(t *testing.T, ingress string, mods ...func(*nodeconf.Config)) *node {
	t.Helper()
	k, h := principalKeys(t)
	p := defaults(t)
	p.Hashes = h
	cfg := harnessConfig(p)
	cfg.Extra = ingress
	for _, m := range mods {
		m(&cfg)
	}
	path := filepath.Join(t.TempDir(), "node.toml")
	if err := os.WriteFile(path, []byte(cfg.TOML()), 0o600); err != nil {
		t.Fatal(err)
	}
	return &node{proc: serve(t, path, nil), keys: k}
}

// heldRequest is a request whose body the node is still waiting for.
type heldRequest struct {
	c net.Conn
}

// hold sends a POST to path as who with the extra header lines (each
// ending in CRLF) and the start of its body, and leaves it unfinished. The
// connection is closed when the test ends.
func (n *node) hold(t *testing.T, who, path, header, partial string) *heldRequest {
	t.Helper()
	c, err := net.DialTimeout("tcp", strings.TrimPrefix(n.url, "http://"), 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	req := "POST " + path + " HTTP/1.1\r\nHost: node\r\nAuthorization: Bearer " + n.keys[who] + "\r\n" + header + "\r\n" + partial
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	return &heldRequest{c: c}
}

// holdDeclared holds an invocation that declares length bytes and sends
// none of them.
func (n *node) holdDeclared(t *testing.T, who, target string, length int) *heldRequest {
	t.Helper()
	return n.hold(t, who, "/v1/invoke/"+target, "Content-Length: "+strconv.Itoa(length)+"\r\n", "")
}

// close ends the request: the node's read of its body fails.
func (h *heldRequest) close() { _ = h.c.Close() }

// finish sends the rest of the body and reads the answer.
func (h *heldRequest) finish(t *testing.T, rest string) reply {
	t.Helper()
	_ = h.c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(h.c, rest); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(h.c), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(resp.Body)
	return reply{status: resp.StatusCode, header: resp.Header, body: body}
}

// ingressPool is one pool of an admission view's "ingress".
type ingressPool struct {
	Slots             int               `json:"slots"`
	Bytes             uint64            `json:"bytes"`
	BytesPerTenant    uint64            `json:"max_bytes_per_tenant"`
	BytesPerPrincipal uint64            `json:"max_bytes_per_principal"`
	Tenants           map[string]int    `json:"tenants"`
	TenantBytes       map[string]uint64 `json:"tenant_bytes"`
}

// ingressView reads the ingress pools of GET path (/v1/admin/admission
// or /v1/admission) as who.
func (n *node) ingressView(t *testing.T, who, path string) map[string]ingressPool {
	t.Helper()
	r := n.do(t, "GET", path, who, nil, nil)
	var v struct {
		Ingress map[string]ingressPool `json:"ingress"`
	}
	if r.status != http.StatusOK || json.Unmarshal(r.body, &v) != nil || len(v.Ingress) != 2 {
		t.Fatalf("%s: %d %s", path, r.status, r.body)
	}
	return v.Ingress
}

// waitIngress polls the node's admission view (as root, an administrator)
// until cond holds of its data pool, at most 10s.
func (n *node) waitIngress(t *testing.T, what string, cond func(ingressPool) bool) {
	t.Helper()
	var last ingressPool
	if !poll(10*time.Second, 10*time.Millisecond, func() bool {
		last = n.ingressView(t, "root", "/v1/admin/admission")["data"]
		return cond(last)
	}) {
		t.Fatalf("the data pool never showed %s: %+v", what, last)
	}
}

// checkIngressRefused asserts a 429 capacity-exhausted of scope and
// dimension.
func checkIngressRefused(t *testing.T, r reply, scope, dimension string) {
	t.Helper()
	checkRefusal(t, r, http.StatusTooManyRequests, refusal.ReasonCapacityExhausted.String())
	if r.problem.Scope != scope || r.problem.Dimension != dimension || !r.problem.Retryable {
		t.Fatalf("want scope %s, dimension %s, retryable: %s", scope, dimension, r.body)
	}
}

// TestIngress_controlServedWhileDataFull: with the data pool's slots held by
// invocations whose bodies never arrive, another tenant's invocation is
// refused data-slots while the admission views, an upload and a deploy
// (the control pool) are served; once the held requests end, the
// invocation is served.
func TestIngress_controlServedWhileDataFull(t *testing.T) {
	n := startIngressNode(t, "[ingress.data]\nslots = 2\nper_tenant = 2\nper_principal = 2\n")
	// The target exists: a body is read only once its target resolved.
	n.deploy(t, "alice", "acme", "echo", rev{guest: "echo"})
	var held []*heldRequest
	for range 2 {
		held = append(held, n.holdDeclared(t, "alice", "acme/echo/run", 100))
	}
	n.waitIngress(t, "2 held slots", func(p ingressPool) bool { return p.Slots == 2 && p.Tenants["acme"] == 2 })

	checkIngressRefused(t, n.invoke(t, "bob", "beta/echo/run", "ping", nil), "node", "data-slots")
	if v := n.ingressView(t, "bob", "/v1/admission")["data"]; v.Slots != 0 || v.Tenants != nil {
		t.Fatalf("beta's view counts another tenant's requests: %+v", v)
	}
	if v := n.ingressView(t, "alice", "/v1/admission")["data"]; v.Slots != 2 || v.Bytes != 2*(100+4096) {
		t.Fatalf("acme's view: %+v", v)
	}
	n.deploy(t, "bob", "beta", "echo", rev{guest: "echo"}) // upload and deploy: control pool
	if r := n.do(t, "GET", "/v1/deployments/beta/echo", "bob", nil, nil); r.status != http.StatusOK {
		t.Fatalf("get deployment: %d %s", r.status, r.body)
	}
	checkIngressRefused(t, n.invoke(t, "bob", "beta/echo/run", "ping", nil), "node", "data-slots")

	// Negative control: the same invocation once the held requests are gone.
	for _, h := range held {
		h.close()
	}
	n.waitIngress(t, "no held slots", func(p ingressPool) bool { return p.Slots == 0 })
	if r := n.invoke(t, "bob", "beta/echo/run", "ping", nil); r.status != http.StatusOK || string(r.body) != "ping" {
		t.Fatalf("invoke after the held requests ended: %d %s", r.status, r.body)
	}
}

// TestIngress_tenantBytes: while tenant acme holds its byte budget with
// bodies that never arrive (sent by mallory, a second principal of acme,
// listed in its subjects here), acme's alice is refused
// data-bytes, scope tenant, for a body one byte over what is left and
// served for one that fits exactly, and another tenant's invocation is
// served; the views show each tenant only its own bytes.
func TestIngress_tenantBytes(t *testing.T) {
	// Two held 64KiB bodies model 2×(64KiB+4KiB) = 136KiB; the budget
	// leaves 4KiB: exactly an empty body's overhead.
	const held, budget = 2 * (64<<10 + 4<<10), 140 << 10
	n := startIngressNode(t, "[ingress.data]\nbytes_per_tenant = \"140KiB\"\nbytes_per_principal = \"140KiB\"\n",
		func(c *nodeconf.Config) { c.Tenants[0].Subjects = append(c.Tenants[0].Subjects, "mallory") })
	n.deploy(t, "alice", "acme", "echo", rev{guest: "echo"})
	n.deploy(t, "bob", "beta", "echo", rev{guest: "echo"})
	for range 2 {
		n.holdDeclared(t, "mallory", "acme/echo/run", 64<<10)
	}
	n.waitIngress(t, "acme's held bytes", func(p ingressPool) bool { return p.TenantBytes["acme"] == held })

	// alice holds nothing: the refusal is her tenant's.
	checkIngressRefused(t, n.invoke(t, "alice", "acme/echo/run", "p", nil), "tenant", "data-bytes")
	if r := n.invoke(t, "alice", "acme/echo/run", "", nil); r.status != http.StatusOK {
		t.Fatalf("an empty body fits the budget exactly: %d %s", r.status, r.body)
	}
	if r := n.invoke(t, "bob", "beta/echo/run", "ping", nil); r.status != http.StatusOK || string(r.body) != "ping" {
		t.Fatalf("another tenant: %d %s", r.status, r.body)
	}
	if v := n.ingressView(t, "alice", "/v1/admission")["data"]; v.Bytes != held || v.BytesPerTenant != budget || v.TenantBytes != nil {
		t.Fatalf("acme's view: %+v", v)
	}
	if v := n.ingressView(t, "bob", "/v1/admission")["data"]; v.Bytes != 0 || v.Slots != 0 || v.TenantBytes != nil {
		t.Fatalf("beta's view shows another tenant's requests: %+v", v)
	}
}

// TestIngress_chunkedReservesTheCap: a chunked invocation reserves the
// route's cap (node.limits.max_payload_bytes, 64KiB) plus the overhead
// before its body is read, whatever it then sends: with it held, the rest
// of its tenant's budget is exactly what the reservation left (the
// principal's budget is the tenant's, and the tenant's is checked first),
// for the next request's body and, once its guest ran, its answer.
// Finishing the body serves it and gives the reservation back.
func TestIngress_chunkedReservesTheCap(t *testing.T) {
	const reserved, budget = 64<<10 + 4<<10, 100 << 10
	n := startIngressNode(t, "[ingress.data]\nbytes_per_tenant = \"100KiB\"\nbytes_per_principal = \"100KiB\"\n")
	n.deploy(t, "alice", "acme", "echo", rev{guest: "echo"})
	h := n.hold(t, "alice", "/v1/invoke/acme/echo/run", "Transfer-Encoding: chunked\r\n", "3\r\nabc\r\n")
	n.waitIngress(t, "the chunked reservation", func(p ingressPool) bool { return p.TenantBytes["acme"] == reserved })

	fits := budget - reserved - 4<<10 // what is left, less the next request's overhead
	if r := n.invoke(t, "alice", "acme/echo/run", strings.Repeat("x", fits+1), nil); r.status != http.StatusTooManyRequests ||
		r.problem.Dimension != "data-bytes" || r.problem.Scope != "tenant" {
		t.Fatalf("one byte over what the chunked request left: %d %s", r.status, r.body)
	}
	// Exactly what it left admits the body, and the echo runs, but its
	// answer of as many bytes does not fit: it is refused after the run.
	if r := n.invoke(t, "alice", "acme/echo/run", strings.Repeat("x", fits), nil); r.status != http.StatusTooManyRequests ||
		r.problem.Dimension != "data-bytes" || r.header.Get("Latent-Outcome") != "success" {
		t.Fatalf("exactly what the chunked request left, for the body alone: %d %v %.200s", r.status, r.header, r.body)
	}
	if r := n.invoke(t, "alice", "acme/echo/run", strings.Repeat("x", fits/3), nil); r.status != http.StatusOK || len(r.body) != fits/3 {
		t.Fatalf("a body and its answer within what the chunked request left: %d %.200s", r.status, r.body)
	}

	if r := h.finish(t, "0\r\n\r\n"); r.status != http.StatusOK || string(r.body) != "abc" {
		t.Fatalf("the chunked invocation: %d %s", r.status, r.body)
	}
	n.waitIngress(t, "the reservation given back", func(p ingressPool) bool { return p.Slots == 0 && p.Bytes == 0 })
	if r := n.invoke(t, "alice", "acme/echo/run", strings.Repeat("x", fits+1), nil); r.status != http.StatusOK {
		t.Fatalf("after the chunked request ended: %d %s", r.status, r.body)
	}
}

package node

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/latent-node/latent-node/node/config"
)

func TestModeledBytes(t *testing.T) {
	tests := []struct {
		name     string
		declared int64
		cap      uint64
		want     uint64
	}{
		{"empty", 0, 100, IngressOverheadBytes},
		{"declared", 40, 100, 40 + IngressOverheadBytes},
		{"declared at the cap", 100, 100, 100 + IngressOverheadBytes},
		{"declared over the cap (its reader refuses it)", 101, 100, 100 + IngressOverheadBytes},
		{"unknown length (chunked) reserves the cap", -1, 100, 100 + IngressOverheadBytes},
		{"no body route", -1, 0, IngressOverheadBytes},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if have := modeledBytes(tt.declared, tt.cap); have != tt.want {
				t.Fatalf("have %d, want %d", have, tt.want)
			}
		})
	}
}

// TestIngressPool: every bound at its boundary, refusals name scope and
// dimension, and a release gives back everything (no entry left).
func TestIngressPool(t *testing.T) {
	p := newIngressPool(PoolData, config.IngressPool{Slots: 3, Bytes: 100, PerTenant: 2, PerPrincipal: 1})
	a, prob := p.reserve(60)
	if prob != nil {
		t.Fatal(prob)
	}
	if _, prob := p.reserve(41); prob == nil || prob.Dimension != "data-bytes" || prob.Scope != "node" || prob.Status != http.StatusTooManyRequests || !prob.Retryable {
		t.Fatalf("bytes over the pool: %+v", prob)
	}
	b, prob := p.reserve(40) // exactly the pool's bytes
	if prob != nil {
		t.Fatalf("bytes at the pool's bound: %+v", prob)
	}
	c, prob := p.reserve(0)
	if prob != nil {
		t.Fatal(prob)
	}
	if _, prob := p.reserve(0); prob == nil || prob.Dimension != "data-slots" || prob.Scope != "node" {
		t.Fatalf("slots over the pool: %+v", prob)
	}
	if prob := a.bind("acme", "alice"); prob != nil {
		t.Fatal(prob)
	}
	if prob := b.bind("acme", "alice"); prob == nil || prob.Scope != "principal" {
		t.Fatalf("principal over its bound: %+v", prob)
	}
	if prob := b.bind("acme", "bob"); prob != nil {
		t.Fatal(prob)
	}
	if prob := c.bind("acme", "carol"); prob == nil || prob.Scope != "tenant" {
		t.Fatalf("tenant over its bound: %+v", prob)
	}
	if prob := c.bind("beta", "carol"); prob != nil {
		t.Fatalf("another tenant: %+v", prob)
	}
	if u := p.usage("acme", false); u.Slots != 2 || u.Tenants != nil {
		t.Fatalf("tenant view: %+v", u)
	}
	if u := p.usage("", true); u.Slots != 3 || u.Bytes != 100 || u.Tenants["acme"] != 2 || u.Tenants["beta"] != 1 {
		t.Fatalf("node view: %+v", u)
	}
	for _, tk := range []*ingressTicket{a, b, c} {
		tk.release()
	}
	if p.slots != 0 || p.bytes != 0 || len(p.tenants) != 0 || len(p.principals) != 0 {
		t.Fatalf("after release: %d slots, %d bytes, %v, %v", p.slots, p.bytes, p.tenants, p.principals)
	}
}

// TestIngress_controlServedWhileDataFull: with the data pool full, an
// invocation is refused before its body is read and the control pool still
// serves; health answers outside both.
func TestIngress_controlServedWhileDataFull(t *testing.T) {
	tn := startNode(t)
	var held []*ingressTicket
	for {
		tk, prob := tn.n.dataPool.reserve(0)
		if prob != nil {
			break
		}
		held = append(held, tk)
	}
	defer func() {
		for _, tk := range held {
			tk.release()
		}
	}()
	resp, body := tn.do(t, "POST", "/v1/invoke/demo/hello/greet", tn.key, []byte("ada"), nil)
	if resp.StatusCode != http.StatusTooManyRequests || !contains(body, `"data-slots"`) {
		t.Fatalf("invoke with the data pool full: %d %s", resp.StatusCode, body)
	}
	if resp, body := tn.do(t, "GET", "/v1/admission", tn.key, nil, nil); resp.StatusCode != http.StatusOK || !contains(body, `"ingress"`) {
		t.Fatalf("control pool: %d %s", resp.StatusCode, body)
	}
	if resp, _ := tn.do(t, "GET", "/healthz", "", nil, nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("healthz: %d", resp.StatusCode)
	}
}

func contains(b []byte, s string) bool { return strings.Contains(string(b), s) }

// TestIngress_chunkedReservesTheCap: a body of unknown length reserves the
// route's cap before it is read, a declared one its length: with the data
// pool's bytes one short of the payload cap plus overhead, a chunked
// invocation is refused and a declared one is served.
func TestIngress_chunkedReservesTheCap(t *testing.T) {
	tn := startNodeWith(t, func(c *config.Config) {
		c.Ingress.Data.Bytes = c.Node.Limits.MaxPayloadBytes + IngressOverheadBytes - 1
	})
	resp, body := tn.do(t, "POST", "/v1/invoke/demo/hello/greet", tn.key, []byte("ada"), nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("declared body: %d %s", resp.StatusCode, body)
	}
	req, _ := http.NewRequest("POST", tn.srv.URL+"/v1/invoke/demo/hello/greet", io.NopCloser(strings.NewReader("ada")))
	req.ContentLength = -1 // chunked
	req.Header.Set("Authorization", "Bearer "+tn.key)
	r, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = r.Body.Close() }()
	b, _ := io.ReadAll(r.Body)
	if r.StatusCode != http.StatusTooManyRequests || !contains(b, `"data-bytes"`) {
		t.Fatalf("chunked body: %d %s", r.StatusCode, b)
	}
}

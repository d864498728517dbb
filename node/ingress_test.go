package node

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/latent-node/latent-node/node/config"
	"github.com/latent-node/latent-node/node/front"
	"github.com/latent-node/latent-node/vocab"
)

// TestIngress_tenantBytes: an invocation that would take its tenant past
// its byte budget is refused before its body is read; one that leaves room
// for its answer is served; one that reaches the budget exactly runs, but
// its answer, which the node holds until the caller read it, does not fit
// and is refused (the activation headers still say what the guest did).
// The views show the tenant's bytes, and everything is given back.
func TestIngress_tenantBytes(t *testing.T) {
	const budget = 64 << 10
	tn := startNodeWith(t, func(c *config.Config) {
		c.Ingress.Data.BytesPerTenant = budget
		c.Ingress.Data.BytesPerPrincipal = budget
	})
	invoke := front.ModeledBytes(3, tn.n.cfg.Node.Limits.MaxPayloadBytes) // "ada"
	for _, tt := range []struct {
		name   string
		held   uint64
		status int
		ran    bool // the guest ran (the answer was refused after)
	}{
		{"room for the answer", budget - invoke - 64, http.StatusOK, true},
		{"exactly the budget: the answer does not fit", budget - invoke, http.StatusTooManyRequests, true},
		{"one byte over", budget - invoke + 1, http.StatusTooManyRequests, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			held, prob := tn.n.dataPool.Reserve(tt.held)
			if prob == nil {
				prob = held.Bind("demo", "another-principal")
			}
			if prob != nil {
				t.Fatal(prob)
			}
			defer held.Release()
			var u struct {
				Ingress map[string]front.IngressUsage `json:"ingress"`
			}
			if resp, body := tn.do(t, "GET", "/v1/admission", tn.key, nil, nil); resp.StatusCode != http.StatusOK ||
				json.Unmarshal(body, &u) != nil || u.Ingress[front.PoolData].Bytes != tt.held || u.Ingress[front.PoolData].BytesPerTenant != budget {
				t.Fatalf("tenant view: %d %s", resp.StatusCode, body)
			}
			resp, body := tn.do(t, "POST", "/v1/invoke/demo/hello/greet", tn.key, []byte("ada"), nil)
			if resp.StatusCode != tt.status {
				t.Fatalf("have %d %s", resp.StatusCode, body)
			}
			if tt.status != http.StatusOK && (!contains(body, `"data-bytes"`) || !contains(body, `"tenant"`) || resp.Header.Get("Retry-After") == "") {
				t.Fatalf("refusal: %s", body)
			}
			if ran := resp.Header.Get("Latent-Outcome") == "success"; ran != tt.ran {
				t.Fatalf("Latent-Outcome %q, want the guest to have run: %v", resp.Header.Get("Latent-Outcome"), tt.ran)
			}
		})
	}
	if u := tn.n.dataPool.Usage("", true); u.Slots != 0 || u.Bytes != 0 || len(u.Tenants) != 0 {
		t.Fatalf("after release: %+v", u)
	}
}

// TestIngress_controlServedWhileDataFull: with the data pool full, an
// invocation is refused before its body is read and the control pool still
// serves; health answers outside both.
func TestIngress_controlServedWhileDataFull(t *testing.T) {
	tn := startNode(t)
	var held []*front.IngressTicket
	for {
		tk, prob := tn.n.dataPool.Reserve(0)
		if prob != nil {
			break
		}
		held = append(held, tk)
	}
	defer func() {
		for _, tk := range held {
			tk.Release()
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
		c.Ingress.Data.Bytes = c.Node.Limits.MaxPayloadBytes + front.IngressOverheadBytes - 1
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

// TestIngress_wagiEnvironment: a WAGI revision's CGI environment, held
// while the activation waits and runs, is charged to the request's
// reservation before admission: a request whose headers make an
// environment larger than its tenant's remaining budget is refused
// without running its guest, a small one is served.
func TestIngress_wagiEnvironment(t *testing.T) {
	const budget = 64 << 10
	tn := startNodeWith(t, func(c *config.Config) {
		c.Ingress.Data.BytesPerTenant = budget
		c.Ingress.Data.BytesPerPrincipal = budget
	})
	tn.deployGuest(t, "cgi", "cgienv", "wagi")
	invoke := front.ModeledBytes(2, tn.n.cfg.Node.Limits.MaxPayloadBytes)
	defer holdFor(t, tn.n.dataPool, "demo", budget-invoke-4<<10).Release() // 4 KiB left for the environment and answer
	resp, body := tn.do(t, "POST", "/v1/invoke/demo/cgi/run", tn.key, []byte("in"), nil)
	if resp.StatusCode != 201 {
		t.Fatalf("small environment: %d %s", resp.StatusCode, body)
	}
	resp, body = tn.do(t, "POST", "/v1/invoke/demo/cgi/run", tn.key, []byte("in"),
		map[string]string{"X-Pad": strings.Repeat("p", 8<<10)})
	if resp.StatusCode != http.StatusTooManyRequests || !contains(body, `"data-bytes"`) || !contains(body, `"tenant"`) {
		t.Fatalf("large environment: %d %s", resp.StatusCode, body)
	}
	if o := resp.Header.Get("Latent-Outcome"); o != "" {
		t.Fatalf("the guest ran (Latent-Outcome %q): the environment was not charged before admission", o)
	}
}

// TestIngress_jsonAnswerCharged: a JSON answer of the control API is held
// until its caller has read it, so it is charged to the request's
// reservation like an invocation's answer: with the tenant's control
// budget all but spent, the admission view is refused (control-bytes),
// with room for it, served.
func TestIngress_jsonAnswerCharged(t *testing.T) {
	tn := startNodeWith(t, func(c *config.Config) { c.Ingress.Control.BytesPerPrincipal = c.Ingress.Control.BytesPerTenant })
	budget := tn.n.cfg.Ingress.Control.BytesPerTenant
	get := front.ModeledBytes(0, 0) // a GET without a body
	for _, tt := range []struct {
		name   string
		room   uint64 // left for the answer
		status int
	}{
		{"room for the answer", 64 << 10, http.StatusOK},
		{"no room for the answer", 16, http.StatusTooManyRequests},
	} {
		t.Run(tt.name, func(t *testing.T) {
			defer holdFor(t, tn.n.controlPool, "demo", budget-get-tt.room).Release()
			resp, body := tn.do(t, "GET", "/v1/admission", tn.key, nil, nil)
			wantControlBytes(t, resp, body, tt.status)
		})
	}
	if u := tn.n.controlPool.Usage("", true); u.Slots != 0 || u.Bytes != 0 {
		t.Fatalf("after release: %+v", u)
	}
}

// TestIngress_deployHoldsItsModules: a deploy reads the modules it names
// into memory to inspect them, so their bytes are charged to its
// reservation: with the tenant's control budget short of the module, the
// deploy is refused (control-bytes) before anything is inspected; with
// room for it, the deploy is served.
func TestIngress_deployHoldsItsModules(t *testing.T) {
	tn := startNodeWith(t, func(c *config.Config) { c.Ingress.Control.BytesPerPrincipal = c.Ingress.Control.BytesPerTenant })
	digest, err := tn.c.UploadArtifact(context.Background(), DemoHello)
	if err != nil {
		t.Fatal(err)
	}
	manifest, _ := json.Marshal(map[string]any{"tenant": "demo", "service": "held",
		"revisions": []any{map[string]any{"name": "v1", "artifact": digest, "trust_class": "untrusted",
			"ceiling": map[string]any{"cpu_fuel": 1_000_000, "memory_bytes": "1MiB", "wall_time": "2s"}}},
		"routes": []any{map[string]any{"name": "run", "targets": []any{map[string]any{"revision": "v1", "weight": 1}}}}})
	budget := tn.n.cfg.Ingress.Control.BytesPerTenant
	deploy := front.ModeledBytes(int64(len(manifest)), budget) // the request's own reservation
	module := uint64(len(DemoHello))
	for _, tt := range []struct {
		name   string
		room   uint64 // left beyond the request's reservation
		status int
	}{
		{"short of the module", module - 1, http.StatusTooManyRequests},
		{"room for the module and the answer", module + 64<<10, http.StatusOK},
	} {
		t.Run(tt.name, func(t *testing.T) {
			defer holdFor(t, tn.n.controlPool, "demo", budget-deploy-tt.room).Release()
			resp, body := tn.do(t, "PUT", "/v1/deployments/demo/held", tn.key, manifest, nil)
			wantControlBytes(t, resp, body, tt.status)
		})
	}
}

// holdFor holds bytes of pool for another principal of tenant, as a
// request in flight would; the caller releases it.
func holdFor(t *testing.T, pool *front.IngressPool, tenant vocab.TenantID, bytes uint64) *front.IngressTicket {
	t.Helper()
	held, prob := pool.Reserve(bytes)
	if prob != nil {
		t.Fatal(prob)
	}
	if prob := held.Bind(tenant, "another-principal"); prob != nil {
		held.Release()
		t.Fatal(prob)
	}
	return held
}

// wantControlBytes fails unless the answer has status, and is the
// tenant's control-bytes refusal when it is not 200.
func wantControlBytes(t *testing.T, resp *http.Response, body []byte, status int) {
	t.Helper()
	if resp.StatusCode != status {
		t.Fatalf("have %d %s", resp.StatusCode, body)
	}
	if status != http.StatusOK && (!contains(body, `"control-bytes"`) || !contains(body, `"tenant"`)) {
		t.Fatalf("refusal: %s", body)
	}
}

package node

import (
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/latent-node/latent-node/node/config"
	"github.com/latent-node/latent-node/refusal"
)

func TestCrossSite(t *testing.T) {
	tests := []struct {
		name     string
		tls      bool
		host     string
		fetch    string
		origins  []string
		refusing bool
	}{
		{"no browser headers", true, "node:8443", "", nil, false},
		{"same origin", true, "node:8443", "same-origin", []string{"https://node:8443"}, false},
		{"same origin, case", true, "NODE:8443", "", []string{"HTTPS://node:8443"}, false},
		{"user navigation", true, "node:8443", "none", nil, false},
		{"cross-site", true, "node:8443", "cross-site", nil, true},
		{"same-site", true, "node:8443", "same-site", nil, true},
		{"unknown fetch site", true, "node:8443", "elsewhere", nil, true},
		{"foreign origin", true, "node:8443", "", []string{"https://evil.example"}, true},
		{"other port", true, "node:8443", "", []string{"https://node:9443"}, true},
		{"other scheme", true, "node:8443", "", []string{"http://node:8443"}, true},
		{"plain http own origin", false, "node:8080", "", []string{"http://node:8080"}, false},
		{"null origin", true, "node:8443", "", []string{"null"}, true},
		{"two origins", true, "node:8443", "", []string{"https://node:8443", "https://node:8443"}, true},
		{"origin prefix", true, "node:8443", "", []string{"https://node:84430"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest("POST", "/v1/admin/reload", nil)
			r.Host = tt.host
			if tt.tls {
				r.TLS = &tls.ConnectionState{}
			}
			if tt.fetch != "" {
				r.Header.Set("Sec-Fetch-Site", tt.fetch)
			}
			for _, o := range tt.origins {
				r.Header.Add("Origin", o)
			}
			if have := crossSite(r); have != tt.refusing {
				t.Fatalf("crossSite = %v, want %v", have, tt.refusing)
			}
		})
	}
}

func TestHostAllowed(t *testing.T) {
	def := uiHosts(&config.Config{Node: config.Node{Listen: "127.0.0.1:8080"}})
	named := uiHosts(&config.Config{Node: config.Node{Listen: "node1.internal:8080"}})
	set := uiHosts(&config.Config{Node: config.Node{Listen: "node1.internal:8080", UIHosts: []string{"Ops.Example."}}})
	tests := []struct {
		host    string
		names   []string
		allowed bool
	}{
		{"localhost", def, true},
		{"LOCALHOST:8080", def, true},
		{"localhost.:8080", def, true},
		{"127.0.0.1:8080", def, true},
		{"[::1]:8080", def, true},
		{"10.1.2.3", def, true},
		{"attacker.example", def, false},
		{"attacker.example:8080", def, false},
		{"", def, false},
		{"localhost.attacker.example", def, false},
		{"node1.internal:8080", named, true},
		{"node1.internal", def, false},
		{"ops.example", set, true},
		{"localhost", set, false},
		{"node1.internal", set, false},
	}
	for _, tt := range tests {
		if have := hostAllowed(tt.host, tt.names); have != tt.allowed {
			t.Errorf("hostAllowed(%q, %q) = %v, want %v", tt.host, tt.names, have, tt.allowed)
		}
	}
}

// TestUI_hostRefused: the status page under a name it does not know is
// refused before authentication; under an address it is served.
func TestUI_hostRefused(t *testing.T) {
	sn := startServed(t)
	for _, path := range []string{"/ui", "/ui/data"} {
		req, _ := http.NewRequest("GET", sn.url+path, nil)
		req.Host = "attacker.example"
		req.Header.Set("Authorization", "Bearer "+sn.admin)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		a := readAnswer(t, resp)
		_ = resp.Body.Close()
		if a.status != http.StatusForbidden || a.prob.Reason != refusal.ReasonHostNotAllowed.String() {
			t.Fatalf("%s under attacker.example: %d %s", path, a.status, a.body)
		}
		if a := sn.do(t, "GET", path, sn.admin, nil, nil); a.status != http.StatusOK {
			t.Fatalf("%s under the listen address: %d %s", path, a.status, a.body)
		}
	}
}

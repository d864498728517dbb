package front

import (
	"crypto/tls"
	"net/http/httptest"
	"testing"

	"github.com/latent-node/latent-node/node/config"
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
			if have := CrossSite(r); have != tt.refusing {
				t.Fatalf("crossSite = %v, want %v", have, tt.refusing)
			}
		})
	}
}

func TestHostAllowed(t *testing.T) {
	def := UIHosts(&config.Config{Node: config.Node{Listen: "127.0.0.1:8080"}})
	named := UIHosts(&config.Config{Node: config.Node{Listen: "node1.internal:8080"}})
	set := UIHosts(&config.Config{Node: config.Node{Listen: "node1.internal:8080", UIHosts: []string{"Ops.Example."}}})
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
		if have := HostAllowed(tt.host, tt.names); have != tt.allowed {
			t.Errorf("HostAllowed(%q, %q) = %v, want %v", tt.host, tt.names, have, tt.allowed)
		}
	}
}

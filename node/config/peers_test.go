package config

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/latent-node/latent-node/internal/testcert"
)

// TestCluster_advertiseURL: cluster.advertise_url is scheme://host:port and
// nothing else (the peer token is sent to the URLs members advertise), and
// https once the node serves TLS; the plain URL of the docs parses (the
// negative control).
func TestCluster_advertiseURL(t *testing.T) {
	base, err := os.ReadFile("testdata/design.toml")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ca := testcert.NewCA(t, "node CA")
	cert, key := ca.Issue(t, testcert.Spec{}).Write(t, dir, "server")
	tlsTable := "\n[node.tls]\ncert_file = \"" + filepath.ToSlash(cert) + "\"\nkey_file = \"" + filepath.ToSlash(key) + "\"\n"
	tests := []struct {
		name, url string
		tls       bool
		ok        bool
	}{
		{"plain http", "http://10.0.0.5:8080", false, true},
		{"https", "https://node-1.internal:8443/", false, true},
		{"https with tls", "https://node-1.internal:8443", true, true},
		{"http with tls", "http://10.0.0.5:8080", true, false},
		{"query", "http://169.254.169.254:80/latest?", false, false},
		{"userinfo", "http://u:p@10.0.0.5:8080", false, false},
		{"path", "http://10.0.0.5:8080/api", false, false},
		{"fragment", "http://10.0.0.5:8080#f", false, false},
		{"no port", "http://10.0.0.5", false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			file := slices.Clip(base)
			if tt.tls {
				file = append(file, tlsTable...)
			}
			file = append(file, "\n[cluster]\nendpoints = [\"http://127.0.0.1:2379\"]\nnode_id = \"node-1\"\nadvertise_url = \""+tt.url+"\"\n"...)
			_, err := Parse(file)
			if tt.ok {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if have := keysOfProblems(err); !slices.Equal(have, []string{"cluster.advertise_url"}) {
				t.Fatalf("problems %v (%v), want cluster.advertise_url", have, err)
			}
		})
	}
}

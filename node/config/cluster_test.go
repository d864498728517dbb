package config

import (
	"os"
	"slices"
	"testing"
	"time"
)

// TestCluster_defaultsAndAbsence: without [cluster] the node is standalone;
// a table naming only the required keys gets the documented defaults.
func TestCluster_defaultsAndAbsence(t *testing.T) {
	base, err := os.ReadFile("testdata/design.toml")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Cluster.Enabled {
		t.Fatal("a file without [cluster] enabled the cluster")
	}
	withCluster := append(slices.Clip(base), []byte(`
[cluster]
endpoints = ["http://127.0.0.1:2379"]
node_id = "node-1"
advertise_url = "http://10.0.0.5:8080"
`)...)
	cfg, err = Parse(withCluster)
	if err != nil {
		t.Fatal(err)
	}
	want := Cluster{Enabled: true, Endpoints: []string{"http://127.0.0.1:2379"}, Prefix: "/latent/v1", NodeID: "node-1",
		AdvertiseURL: "http://10.0.0.5:8080", LeaseTTL: 5 * time.Second, Replication: 2, MaxStaleness: 30 * time.Second}
	got := cfg.Cluster
	if !got.Enabled || !slices.Equal(got.Endpoints, want.Endpoints) || got.Prefix != want.Prefix || got.NodeID != want.NodeID ||
		got.AdvertiseURL != want.AdvertiseURL || got.LeaseTTL != want.LeaseTTL || got.Replication != want.Replication ||
		got.MaxStaleness != want.MaxStaleness || got.TLS != (ClusterTLS{}) {
		t.Fatalf("cluster %+v, want %+v", got, want)
	}
	// A [cluster] table without its required keys is refused, naming them.
	_, err = Parse(append(slices.Clip(base), []byte("\n[cluster]\n")...))
	if err == nil {
		t.Fatal("an empty [cluster] table was accepted")
	}
	keys := keysOfProblems(err)
	for _, k := range []string{"cluster.advertise_url", "cluster.endpoints", "cluster.node_id"} {
		if !slices.Contains(keys, k) {
			t.Errorf("no problem for %s in %v", k, keys)
		}
	}
}

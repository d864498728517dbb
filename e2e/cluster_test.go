//go:build !race

// The cluster tests build etcd's server into the test binary (embedded
// etcd); make test runs them without the race detector, whose build of
// etcd takes minutes on two cores.

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/latent-node/latent-node/internal/testutil/etcdtest"
	"github.com/latent-node/latent-node/internal/testwasm"
	"github.com/latent-node/latent-node/refusal"
)

// clusterNode is a node binary serving in a cluster.
type clusterNode struct {
	*node
	id string
}

// startClusterNode starts node id with endpoints as its etcd.
func startClusterNode(t *testing.T, id string, endpoints []string) *clusterNode {
	t.Helper()
	k, h := principalKeys(t)
	p := defaults(t)
	p.Hashes = h
	port := freePort(t)
	quoted := make([]string, len(endpoints))
	for i, e := range endpoints {
		quoted[i] = strconv.Quote(e)
	}
	toml := configTOML(p) + fmt.Sprintf(`
[cluster]
endpoints = [%s]
node_id = %q
advertise_url = "http://127.0.0.1:%d"
lease_ttl = "2s"
replication = 2
max_staleness = "30s"
`, strings.Join(quoted, ", "), id, port)
	path := filepath.Join(t.TempDir(), "node.toml")
	if err := os.WriteFile(path, []byte(toml), 0o600); err != nil {
		t.Fatal(err)
	}
	// Fixed load samples: the test's own load (four nodes, etcd, the
	// clients) must not make the nodes refuse invocations as overloaded.
	pr := startFor(t, 10*time.Minute, []string{"LATENT_NODE_LOAD_SOURCE=fixed:0.1,0.1"}, "serve", "--config", path, "--listen", "127.0.0.1:"+strconv.Itoa(port))
	pr.stderr.wait(t, 30*time.Second, func(s string) bool { return strings.Contains(s, `"msg":"serving"`) })
	pr.url = "http://127.0.0.1:" + strconv.Itoa(port)
	waitReady(t, pr.url)
	return &clusterNode{node: &node{proc: pr, keys: k}, id: id}
}

// status is GET /v1/cluster/status.
type status struct {
	NodeID      string `json:"node_id"`
	Generation  uint64 `json:"generation"`
	CatalogHash string `json:"catalog_hash"`
	Fresh       bool   `json:"fresh"`
	Ready       bool   `json:"ready"`
}

func (n *clusterNode) status(t *testing.T) status {
	t.Helper()
	r := n.do(t, "GET", "/v1/cluster/status", "root", nil, nil)
	var s status
	if r.status != 200 || json.Unmarshal(r.body, &s) != nil {
		t.Fatalf("%s: cluster status %d %s", n.id, r.status, r.body)
	}
	return s
}

// members counts the members a node lists.
func (n *clusterNode) members(t *testing.T) int {
	t.Helper()
	r := n.do(t, "GET", "/v1/cluster/nodes", "root", nil, nil)
	var l struct {
		Nodes []json.RawMessage `json:"nodes"`
	}
	if r.status != 200 || json.Unmarshal(r.body, &l) != nil {
		return -1
	}
	return len(l.Nodes)
}

// poll waits (bounded) until cond holds.
func pollFor(t *testing.T, what string, within time.Duration, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	if !poll(within, 10*time.Millisecond, cond) {
		t.Fatalf("%s: not within %v", what, within)
	}
	return time.Since(start)
}

// manifestJSON is acme/svc with revisions a and b of artifact d split
// weightA:100-weightA on route run (1 ≤ weightA ≤ 99).
func manifestJSON(d string, weightA int) []byte {
	rev := func(name string) map[string]any {
		return map[string]any{"name": name, "artifact": d, "trust_class": "untrusted",
			"ceiling": map[string]any{"cpu_fuel": 1_000_000_000, "memory_bytes": "8MiB", "wall_time": "5s"}}
	}
	targets := []any{map[string]any{"revision": "a", "weight": weightA}, map[string]any{"revision": "b", "weight": 100 - weightA}}
	m := map[string]any{"tenant": "acme", "service": "svc", "revisions": []any{rev("a"), rev("b")},
		"routes": []any{map[string]any{"name": "run", "targets": targets}}}
	data, _ := json.Marshal(m)
	return data
}

// withCustomSection appends a custom section of n bytes to a module.
func withCustomSection(module []byte, n int) []byte {
	name := "padding"
	payload := append([]byte{byte(len(name))}, name...)
	payload = append(payload, bytes.Repeat([]byte{0x5a}, n)...)
	out := append(slices.Clip(module), 0)
	for v := uint32(len(payload)); ; {
		b := byte(v & 0x7f)
		v >>= 7
		if v != 0 {
			out = append(out, b|0x80)
			continue
		}
		out = append(out, b)
		break
	}
	return append(out, payload...)
}

func percentile(ds []time.Duration, p float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, int(p*float64(len(s))))]
}

// TestCluster_fourNodes runs four node binaries on a three-member etcd
// cluster (in this process, behind pausing proxies): a deploy through any
// node is applied by all, metadata-only deploys and a 1 MB artifact are
// timed, all nodes end at the same generation and catalog hash; with etcd
// cut off every node keeps serving, turns stale and refuses deploys, and
// converges once etcd is back; a killed node leaves the membership.
func TestCluster_fourNodes(t *testing.T) {
	ec := etcdtest.Start(t, 3)
	var proxies []*etcdtest.Proxy
	var endpoints []string
	for _, u := range ec.ClientURLs() {
		p := etcdtest.StartProxy(t, strings.TrimPrefix(u, "http://"))
		proxies = append(proxies, p)
		endpoints = append(endpoints, p.URL())
	}
	var nodes []*clusterNode
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n := startClusterNode(t, "n"+strconv.Itoa(i+1), endpoints)
			mu.Lock()
			nodes = append(nodes, n)
			mu.Unlock()
		}()
	}
	wg.Wait()
	if len(nodes) != 4 {
		t.FailNow()
	}
	slices.SortFunc(nodes, func(a, b *clusterNode) int { return strings.Compare(a.id, b.id) })
	pollFor(t, "four fresh members", 20*time.Second, func() bool {
		for _, n := range nodes {
			if !n.status(t).Fresh {
				return false
			}
		}
		return nodes[0].members(t) == 4
	})

	// The first deploy through n1: its artifact reaches the others.
	ctx := context.Background()
	digest, err := nodes[0].client(t, "alice").UploadArtifact(ctx, testwasm.Bytes(t, "hello"))
	if err != nil {
		t.Fatal(err)
	}
	deploy := func(n *clusterNode, body []byte) (reply, time.Duration) {
		start := time.Now()
		r := n.do(t, "PUT", "/v1/deployments/acme/svc", "alice", bytes.NewReader(body), map[string]string{"Content-Type": "application/json"})
		return r, time.Since(start)
	}
	r, took := deploy(nodes[0], manifestJSON(digest, 50))
	if r.status != 200 || r.header.Get("Latent-Cluster-Applied") != "4/4" {
		t.Fatalf("first deploy: %d %s, applied %q", r.status, r.body, r.header.Get("Latent-Cluster-Applied"))
	}
	t.Logf("first deploy (artifact replicated to a second node, fetched by two more) answered in %v", took.Round(time.Millisecond))
	for _, n := range nodes {
		if got := n.invoke(t, "alice", "acme/svc/run", "ada", nil); got.status != 200 {
			t.Fatalf("%s: invoke %d %s", n.id, got.status, got.body)
		}
	}

	// Metadata-only deploys (new weights) through every node in turn.
	rounds := 40
	if !testing.Short() {
		rounds = 200
	}
	var times, applied []time.Duration
	for i := range rounds {
		r, took := deploy(nodes[i%4], manifestJSON(digest, 1+i%98))
		if r.status != 200 || r.header.Get("Latent-Cluster-Applied") != "4/4" {
			t.Fatalf("deploy %d through %s: %d %s, applied %q", i, nodes[i%4].id, r.status, r.body, r.header.Get("Latent-Cluster-Applied"))
		}
		ms, err := strconv.ParseFloat(r.header.Get("Latent-Cluster-Applied-Ms"), 64)
		if err != nil {
			t.Fatalf("Latent-Cluster-Applied-Ms %q", r.header.Get("Latent-Cluster-Applied-Ms"))
		}
		times, applied = append(times, took), append(applied, time.Duration(ms*float64(time.Millisecond)))
	}
	p50, p99 := percentile(applied, 0.5), percentile(applied, 0.99)
	t.Logf("%d metadata-only deploys: applied on all 4 nodes (commit to the last node's apply) p50 %v, p99 %v; whole deploy call p50 %v, p99 %v",
		rounds, p50.Round(100*time.Microsecond), p99.Round(100*time.Microsecond),
		percentile(times, 0.5).Round(100*time.Microsecond), percentile(times, 0.99).Round(100*time.Microsecond))
	if !testing.Short() && p99 > 100*time.Millisecond {
		t.Errorf("metadata-only deploy applied on all nodes: p99 %v, want ≤ 100ms", p99)
	}

	// A new 1 MB artifact, uploaded to n2 and deployed through it.
	big := withCustomSection(testwasm.Bytes(t, "hello"), 1<<20)
	bigDigest, err := nodes[1].client(t, "alice").UploadArtifact(ctx, big)
	if err != nil {
		t.Fatal(err)
	}
	r, took = deploy(nodes[1], manifestJSON(bigDigest, 50))
	if r.status != 200 || r.header.Get("Latent-Cluster-Applied") != "4/4" {
		t.Fatalf("1 MB deploy: %d %s, applied %q", r.status, r.body, r.header.Get("Latent-Cluster-Applied"))
	}
	t.Logf("deploy of a new %d-byte artifact applied on all 4 nodes in %v", len(big), took.Round(time.Millisecond))
	if took > time.Second {
		t.Errorf("1 MB artifact deploy took %v, want ≤ 1s", took)
	}
	same := func() bool {
		s0 := nodes[0].status(t)
		for _, n := range nodes[1:] {
			if s := n.status(t); s.Generation != s0.Generation || s.CatalogHash != s0.CatalogHash {
				return false
			}
		}
		return true
	}
	pollFor(t, "same generation and catalog hash", 2*time.Second, same)

	// etcd cut off: serving goes on, stale within 3 s, deploys refused.
	before := nodes[0].status(t)
	cut := time.Now()
	for _, p := range proxies {
		p.Pause()
	}
	staleIn := pollFor(t, "all nodes stale", 4*time.Second, func() bool {
		for _, n := range nodes {
			if n.status(t).Fresh {
				return false
			}
		}
		return true
	})
	t.Logf("all nodes stale %v after etcd was cut off", staleIn.Round(10*time.Millisecond))
	outage := 5 * time.Second
	if !testing.Short() {
		outage = 60 * time.Second
	}
	invokes := 0
	for time.Since(cut) < outage {
		for _, n := range nodes {
			if got := n.invoke(t, "alice", "acme/svc/run", "ada", nil); got.status != 200 {
				t.Fatalf("%s: invoke with etcd cut off: %d %s", n.id, got.status, got.body)
			}
			invokes++
		}
	}
	t.Logf("%d invokes over %v with etcd cut off, all answered 200", invokes, outage)
	// Ready until max_staleness (30 s) after the last fresh moment, then not.
	for _, n := range nodes {
		resp, err := http.Get(n.url + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		want := http.StatusOK
		if outage > 30*time.Second {
			want = http.StatusServiceUnavailable
		}
		if resp.StatusCode != want {
			t.Fatalf("%s: /readyz %d after %v cut off, want %d", n.id, resp.StatusCode, outage, want)
		}
	}
	if r, _ := deploy(nodes[2], manifestJSON(digest, 30)); r.status != 503 || r.problem.Reason != refusal.ReasonClusterUnavailable.String() {
		t.Fatalf("deploy with etcd cut off: %d %s", r.status, r.body)
	}
	for _, n := range nodes {
		if s := n.status(t); s.Generation != before.Generation {
			t.Fatalf("%s: generation %d while etcd was cut off, before %d", n.id, s.Generation, before.Generation)
		}
	}
	back := time.Now()
	for _, p := range proxies {
		p.Resume()
	}
	pollFor(t, "all nodes fresh again", 5*time.Second, func() bool {
		for _, n := range nodes {
			if !n.status(t).Fresh {
				return false
			}
		}
		return true
	})
	t.Logf("all nodes fresh %v after etcd was reachable again", time.Since(back).Round(10*time.Millisecond))
	if r, _ := deploy(nodes[2], manifestJSON(digest, 30)); r.status != 200 {
		t.Fatalf("deploy after etcd returned: %d %s", r.status, r.body)
	}
	pollFor(t, "same generation and catalog hash after the outage", 2*time.Second, same)

	// A killed node leaves the membership within its lease (2 s) + 1 s.
	if err := nodes[3].cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	left := pollFor(t, "killed node gone", 3*time.Second, func() bool { return nodes[0].members(t) == 3 })
	t.Logf("a killed node left the membership %v after the kill (lease 2s)", left.Round(10*time.Millisecond))
}

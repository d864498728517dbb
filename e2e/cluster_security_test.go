//go:build !race

// Built like cluster_test.go: embedded etcd, without the race detector.

package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/latent-node/latent-node/internal/testutil/etcdtest"
	"github.com/latent-node/latent-node/internal/testwasm"
	"github.com/latent-node/latent-node/refusal"
)

// tokenSpy counts the requests it gets and those carrying the peer token.
type tokenSpy struct {
	srv          *httptest.Server
	hits, tokens atomic.Int64
}

func newTokenSpy(t *testing.T, answer http.HandlerFunc) *tokenSpy {
	t.Helper()
	s := &tokenSpy{}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		if r.Header.Get("Latent-Peer-Token") != "" {
			s.tokens.Add(1)
		}
		answer(w, r)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

// deployDigest deploys tenant/service with one revision of digest and
// returns the client's error.
func deployDigest(t *testing.T, n *node, who, tenant, service, digest string) error {
	t.Helper()
	rv := map[string]any{"name": "v1", "artifact": digest, "trust_class": "untrusted",
		"ceiling": map[string]any{"cpu_fuel": 1_000_000_000, "memory_bytes": "8MiB", "wall_time": "5s"}}
	m := map[string]any{"tenant": tenant, "service": service, "revisions": []any{rv},
		"routes": []any{map[string]any{"name": "run", "targets": []any{map[string]any{"revision": "v1", "weight": 1}}}}}
	_, err := n.client(t, who).Deploy(context.Background(), tenant, service, m)
	return err
}

// TestClusterSecurity_peers: two nodes sharing an embedded etcd, attacked
// by an etcd writer (fake member records) and a holder of the peer token.
func TestClusterSecurity_peers(t *testing.T) {
	ec := etcdtest.Start(t, 1)
	endpoints := ec.ClientURLs()
	n1 := startClusterNode(t, "n1", endpoints)
	n2 := startClusterNode(t, "n2", endpoints)
	pollFor(t, "two fresh members", 20*time.Second, func() bool {
		return n1.status(t).Fresh && n2.status(t).Fresh && n1.members(t) == 2
	})
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cli.Close() }()
	ctx := context.Background()
	put := func(key, value string) {
		t.Helper()
		if _, err := cli.Put(ctx, key, value); err != nil {
			t.Fatal(err)
		}
	}
	member := func(id, advertise string) {
		data, _ := json.Marshal(map[string]any{"name": id, "advertise_url": advertise, "ready": true, "fresh": true})
		put("/latent/v1/nodes/"+id, string(data))
	}
	token := func() string {
		t.Helper()
		resp, err := cli.Get(ctx, "/latent/v1/secret")
		if err != nil || len(resp.Kvs) != 1 {
			t.Fatalf("peer token: %v", err)
		}
		return string(resp.Kvs[0].Value)
	}
	echo := sha256.Sum256(testwasm.Bytes(t, "echo"))
	echoDigest := "sha256:" + hex.EncodeToString(echo[:])

	t.Run("token only to valid members, no redirects", func(t *testing.T) {
		// On 611fe67: the member advertising ".../latest/meta-data?" got
		// a request with the token, and so did the redirect's target (Go's
		// client follows redirects, forwarding custom headers).
		ok := func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }
		bad := newTokenSpy(t, ok)
		member("x-ssrf", bad.srv.URL+"/latest/meta-data?")
		target := newTokenSpy(t, ok)
		redirector := newTokenSpy(t, func(w http.ResponseWriter, r *http.Request) {
			if strings.HasPrefix(r.URL.Path, "/v1/cluster/replicate/") {
				w.WriteHeader(http.StatusNoContent)
				return
			}
			http.Redirect(w, r, target.srv.URL+r.URL.Path, http.StatusFound)
		})
		member("y-redirector", redirector.srv.URL)
		defer func() {
			_, _ = cli.Delete(ctx, "/latent/v1/nodes/x-ssrf")
			_, _ = cli.Delete(ctx, "/latent/v1/nodes/y-redirector")
		}()
		n1.deploy(t, "alice", "acme", "svc", rev{guest: "echo"}) // the negative control: the deploy works
		if n := bad.tokens.Load(); n != 0 {
			t.Errorf("the member with an invalid advertise URL got %d requests with the peer token", n)
		}
		if redirector.tokens.Load() == 0 {
			t.Error("the valid fake member was never asked (the test proves nothing)")
		}
		if n := target.tokens.Load(); n != 0 {
			t.Errorf("the redirect was followed: its target got %d requests with the peer token", n)
		}
		if r := n2.invoke(t, "alice", "acme/svc/run", "ping", nil); r.status != 200 {
			t.Fatalf("acme/svc on n2: %d %s", r.status, r.body)
		}
	})

	t.Run("replicate grants no ownership", func(t *testing.T) {
		// A token holder asks n2 to replicate acme's module for beta, then
		// beta deploys it. On 611fe67: 204, then beta's deploy of acme's
		// module succeeded.
		tok := map[string]string{"Latent-Peer-Token": token()}
		r := n2.do(t, "POST", "/v1/cluster/replicate/beta/"+echoDigest, "", nil, tok)
		if r.status != http.StatusForbidden || !strings.Contains(string(r.body), refusal.ReasonNotPending.String()) {
			t.Fatalf("replicate for beta: %d %s, want 403 not-pending", r.status, r.body)
		}
		if err := deployDigest(t, n2.node, "bob", "beta", "stolen", echoDigest); err == nil {
			t.Fatal("beta deployed acme's module")
		}
		// The control: for acme, which owns it on n2, replicate answers 204.
		if r := n2.do(t, "POST", "/v1/cluster/replicate/acme/"+echoDigest, "", nil, tok); r.status != http.StatusNoContent {
			t.Fatalf("replicate for its owner: %d %s", r.status, r.body)
		}
	})

	t.Run("token rotation", func(t *testing.T) {
		// A new token in etcd is accepted without a restart. On 611fe67
		// the node kept the token it read at start: the rotated one was
		// still refused (404) after 15 s.
		old := token()
		rotated := strings.Repeat("6b", 32)
		put("/latent/v1/secret", rotated)
		get := func(tok string) int {
			return n2.do(t, "GET", "/v1/cluster/artifacts/"+echoDigest, "", nil, map[string]string{"Latent-Peer-Token": tok}).status
		}
		pollFor(t, "the rotated token accepted", 15*time.Second, func() bool { return get(rotated) == 200 })
		if s := get(old); s != 200 {
			t.Errorf("the previous token within its grace period: %d", s)
		}
		if s := get("0" + rotated[1:]); s != 404 {
			t.Errorf("a wrong token: %d, want 404", s)
		}
		n1.deploy(t, "alice", "acme", "after", rev{guest: "hello"}) // peers still talk
		if r := n2.invoke(t, "alice", "acme/after/run", "ping", nil); r.status != 200 {
			t.Fatalf("acme/after on n2: %d %s", r.status, r.body)
		}
	})
}

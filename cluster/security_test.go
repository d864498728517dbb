package cluster

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/errors"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/latent-node/latent-node/internal/testutil/etcdtest"
	"github.com/latent-node/latent-node/vocab"
)

// peerSpy is an HTTP server that counts the requests carrying the peer
// token and answers each with answer.
type peerSpy struct {
	srv    *httptest.Server
	tokens atomic.Int64 // requests that carried a peer token
	hits   atomic.Int64 // all requests
}

func startSpy(t *testing.T, answer http.HandlerFunc) *peerSpy {
	t.Helper()
	s := &peerSpy{}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		if r.Header.Get(PeerTokenHeader) != "" {
			s.tokens.Add(1)
		}
		answer(w, r)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

// putMember writes a member record as an etcd writer could (no lease).
func putMember(t *testing.T, m *member, id, advertise string) {
	t.Helper()
	data, _ := json.Marshal(Member{ID: id, AdvertiseURL: advertise, Ready: true, Fresh: true})
	if _, err := m.c.cli.Put(context.Background(), m.c.k.node(id), string(data)); err != nil {
		t.Fatal(err)
	}
}

// TestCluster_peerTokenStaysWithPeers: member records whose advertise URL
// is not scheme://host:port (a query that swallows the peer path, user
// information) are ignored: a deploy sends them no request, so no peer
// token (before: every ready member record got GET /v1/cluster/applied
// with the token). A record with a valid URL that answers with a redirect
// gets its request, but the redirect is not followed, so the token does
// not travel to the redirect's target (before: Go's client followed it,
// forwarding the Latent-Peer-Token header). The deploy itself succeeds
// (the negative control).
func TestCluster_peerTokenStaysWithPeers(t *testing.T) {
	ctx := context.Background()
	endpoint := etcdtest.Start(t, 1).ClientURLs()[0]
	a := startMember(t, endpoint, "a")
	waitFor(t, "a fresh", 10*time.Second, func() bool { return a.c.Status().Fresh })

	ok := func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }
	bad := startSpy(t, ok)
	putMember(t, a, "ssrf", bad.srv.URL+"/latest/meta-data?")
	putMember(t, a, "userinfo", "http://user:pw@"+bad.srv.Listener.Addr().String())
	target := startSpy(t, ok)
	redirector := startSpy(t, func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/v1/cluster/replicate/") {
			w.WriteHeader(http.StatusNoContent) // it "holds" the artifact
			return
		}
		http.Redirect(w, r, target.srv.URL+r.URL.Path, http.StatusFound)
	})
	putMember(t, a, "redirector", redirector.srv.URL)

	members, err := a.c.Members(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range members {
		ids = append(ids, m.ID)
	}
	if len(ids) != 2 || ids[0] != "a" || ids[1] != "redirector" {
		t.Errorf("members %v, want [a redirector]: invalid advertise URLs are ignored", ids)
	}

	d := upload(t, a, "acme", []byte("module"))
	res, err := a.c.Deploy(ctx, manifest("acme", "svc", d, 1))
	if err != nil {
		t.Fatal(err)
	}
	if res.Members != 2 {
		t.Errorf("deploy counted %d members, want 2 (a and the redirector)", res.Members)
	}
	if n := bad.hits.Load(); n != 0 {
		t.Errorf("the members with invalid advertise URLs got %d requests (%d with the token), want none", n, bad.tokens.Load())
	}
	if redirector.tokens.Load() == 0 {
		t.Error("the member with a valid URL was not asked (the test proves nothing)")
	}
	if n := target.hits.Load(); n != 0 {
		t.Errorf("the redirect was followed: its target got %d requests (%d with the token)", n, target.tokens.Load())
	}
}

// TestCluster_replicateNeedsPendingRelease: a peer request to replicate
// an artifact for a tenant that does not own it, with no deploy of a
// release of that tenant naming it announced in etcd, is refused
// (ErrNotPending) and grants nothing (before: b fetched the module and
// recorded tenant other as its owner, so other could deploy acme's
// module). A deploy through a naming it for acme replicates it to b (the
// negative control) and withdraws its announcement afterwards.
func TestCluster_replicateNeedsPendingRelease(t *testing.T) {
	ctx := context.Background()
	endpoint := etcdtest.Start(t, 1).ClientURLs()[0]
	a, b := startMember(t, endpoint, "a"), startMember(t, endpoint, "b")
	waitFor(t, "members fresh", 10*time.Second, func() bool {
		ms, err := a.c.Members(ctx)
		return a.c.Status().Fresh && b.c.Status().Fresh && err == nil && len(ms) == 2
	})
	d := upload(t, a, "acme", []byte("acme's module"))
	if err := a.c.member.hold(ctx, d); err != nil {
		t.Fatal(err)
	}

	for _, tenant := range []vocab.TenantID{"other", "acme"} {
		if err := b.c.Replicate(ctx, tenant, d); !errors.Is(err, ErrNotPending) {
			t.Fatalf("replicate for %s without a pending release: %v, want ErrNotPending", tenant, err)
		}
		if b.cat.Artifacts().Has(tenant, d) {
			t.Fatalf("b granted %s the artifact", tenant)
		}
	}

	if _, err := a.c.Deploy(ctx, manifest("acme", "svc", d, 1)); err != nil {
		t.Fatal(err)
	}
	if !b.cat.Artifacts().Has("acme", d) {
		t.Fatal("the deploy did not replicate the artifact to b")
	}
	if b.cat.Artifacts().Has("other", d) {
		t.Fatal("b granted other the artifact")
	}
	resp, err := a.c.cli.Get(ctx, a.c.k.prefix+"/pending/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	if resp.Count != 0 {
		t.Fatalf("%d pending announcements left after the deploy", resp.Count)
	}
}

// TestCluster_tokenRotation: a new peer token written to etcd is picked
// up by every member without a restart (before: read once and kept until
// the process ended); the previous one stays accepted for tokenGrace, and
// deploys keep working across the change (the negative control).
func TestCluster_tokenRotation(t *testing.T) {
	ctx := context.Background()
	endpoint := etcdtest.Start(t, 1).ClientURLs()[0]
	a, b := startMember(t, endpoint, "a"), startMember(t, endpoint, "b")
	waitFor(t, "members fresh", 10*time.Second, func() bool {
		ms, err := a.c.Members(ctx)
		return a.c.Status().Fresh && b.c.Status().Fresh && err == nil && len(ms) == 2
	})
	old := a.c.peers.token()
	const rotated = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	if _, err := a.c.cli.Put(ctx, a.c.k.secret(), rotated); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the new token accepted by both", 10*time.Second, func() bool {
		return a.c.PeerAuthorized(rotated) && b.c.PeerAuthorized(rotated) && b.c.peers.token() == rotated
	})
	if !a.c.PeerAuthorized(old) {
		t.Error("the previous token was refused within its grace period")
	}
	if a.c.PeerAuthorized("") || a.c.PeerAuthorized("guess") {
		t.Error("a wrong token was accepted")
	}
	a.c.mu.Lock()
	a.c.peers.mu.prevUntil = time.Now().Add(-time.Second)
	a.c.mu.Unlock()
	if a.c.PeerAuthorized(old) {
		t.Error("the previous token was accepted after its grace period")
	}
	d := upload(t, a, "acme", []byte("module after rotation"))
	res, err := a.c.Deploy(ctx, manifest("acme", "svc", d, 1))
	if err != nil || res.Applied != 2 || !b.cat.Artifacts().Has("acme", d) {
		t.Fatalf("deploy after the rotation: %+v, %v", res, err)
	}
}

// TestCluster_peerRequestPreviousToken: right after the token changed, a
// peer that still knows only the previous one answers 404; the request is
// sent again with the previous token within its grace period, and not
// after it.
func TestCluster_peerRequestPreviousToken(t *testing.T) {
	p := &peers{http: &http.Client{}, log: slog.New(slog.DiscardHandler)}
	p.mu.token = "new"
	p.setToken("newer", time.Now())
	peer := startSpy(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(PeerTokenHeader) != "new" {
			http.NotFound(w, r)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	resp, err := p.request(context.Background(), http.MethodGet, peer.srv.URL, "/v1/cluster/applied/1")
	if err != nil || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("within the grace period: %v %v, want 204", resp, err)
	}
	_ = resp.Body.Close()
	if n := peer.tokens.Load(); n != 2 {
		t.Fatalf("%d requests, want 2 (the new token, then the previous one)", n)
	}
	p.mu.prevUntil = time.Now().Add(-time.Second)
	resp, err = p.request(context.Background(), http.MethodGet, peer.srv.URL, "/v1/cluster/applied/1")
	if err != nil || resp.StatusCode != http.StatusNotFound {
		t.Fatalf("after the grace period: %v %v, want 404", resp, err)
	}
	_ = resp.Body.Close()
}

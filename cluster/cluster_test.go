package cluster

import (
	"bytes"
	"context"
	"crypto/sha256"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/errors"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/latent-node/latent-node/catalog"
	"github.com/latent-node/latent-node/internal/testutil/catalogtest"
	"github.com/latent-node/latent-node/internal/testutil/etcdtest"
	"github.com/latent-node/latent-node/vocab"
)

// member is one node of a test cluster: a catalog, its Cluster, and an
// HTTP server for the peer endpoints.
type member struct {
	id   string
	cat  *catalog.Catalog
	c    *Cluster
	srv  *httptest.Server
	stop func()
	// forge, when set, makes the artifact endpoint answer other bytes.
	forge bool
}

// startMember starts node id of the cluster at endpoint.
func startMember(t *testing.T, endpoint, id string) *member {
	t.Helper()
	return startMemberAt(t, []string{endpoint}, id, t.TempDir())
}

// startMemberAt starts node id on the catalog in dir (a restart when the
// directory holds one) with etcd at endpoints.
func startMemberAt(t *testing.T, endpoints []string, id, dir string) *member {
	t.Helper()
	return startMemberWith(t, endpoints, id, dir, "/test")
}

// startMemberWith is startMemberAt under another key prefix.
func startMemberWith(t *testing.T, endpoints []string, id, dir, prefix string) *member {
	t.Helper()
	return startMemberOpts(t, endpoints, id, dir, prefix, catalog.Config{})
}

// startMemberOpts is startMemberWith on a catalog with opts (its Dir and
// Inspector are the member's).
func startMemberOpts(t testing.TB, endpoints []string, id, dir, prefix string, opts catalog.Config, tune ...func(*Config)) *member {
	t.Helper()
	opts.Dir, opts.Inspector = dir, catalogtest.Inspector{}
	cat, err := catalog.Open(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	m := &member{id: id, cat: cat}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/cluster/artifacts/{digest}", func(w http.ResponseWriter, r *http.Request) {
		if !m.c.PeerAuthorized(r.Header.Get(PeerTokenHeader)) {
			http.NotFound(w, r)
			return
		}
		data, err := cat.Artifacts().Get(vocab.Digest(r.PathValue("digest")))
		if err != nil {
			http.NotFound(w, r)
			return
		}
		if m.forge {
			data = append([]byte("forged"), data...)
		}
		_, _ = w.Write(data)
	})
	mux.HandleFunc("POST /v1/cluster/replicate/{tenant}/{digest}", func(w http.ResponseWriter, r *http.Request) {
		if !m.c.PeerAuthorized(r.Header.Get(PeerTokenHeader)) {
			http.NotFound(w, r)
			return
		}
		if err := m.c.Replicate(r.Context(), vocab.TenantID(r.PathValue("tenant")), vocab.Digest(r.PathValue("digest"))); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("GET /v1/cluster/applied/{generation}", func(w http.ResponseWriter, r *http.Request) {
		gen, err := strconv.ParseUint(r.PathValue("generation"), 10, 64)
		if err != nil || !m.c.PeerAuthorized(r.Header.Get(PeerTokenHeader)) {
			http.NotFound(w, r)
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
		defer cancel()
		if !m.c.WaitApplied(ctx, vocab.Generation(gen)) {
			w.WriteHeader(http.StatusConflict)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	m.srv = httptest.NewServer(mux)
	cfg := Config{Endpoints: endpoints, Prefix: prefix, NodeID: id, AdvertiseURL: m.srv.URL,
		Version: "test", LeaseTTL: 2 * time.Second, Replication: 2, MaxStaleness: 10 * time.Second, OthersWait: 5 * time.Second, Catalog: cat}
	for _, f := range tune {
		f(&cfg)
	}
	m.c, err = New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = m.c.Run(ctx) }()
	var once sync.Once
	m.stop = func() {
		once.Do(func() {
			cancel()
			wg.Wait()
			m.srv.Close()
			_ = m.c.Close()
		})
	}
	t.Cleanup(m.stop)
	return m
}

// waitFor polls cond (bounded) until it holds.
func waitFor(t testing.TB, what string, within time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, within)
		}
		<-time.After(10 * time.Millisecond) // a bounded poll of the members' state
	}
}

func manifest(tenant, service string, d vocab.Digest, weight int64) vocab.Manifest {
	return vocab.Manifest{Tenant: vocab.TenantID(tenant), Service: vocab.ServiceName(service),
		Revisions: []vocab.ManifestRevision{{Name: "v1", Artifact: d, TrustClass: "untrusted",
			Ceiling: &vocab.ManifestCeiling{CPUFuel: 1_000_000, MemoryBytes: 32 << 20, WallTime: vocab.Duration(2e9)}}},
		Routes: []vocab.ManifestRoute{{Name: "run", Function: "_start",
			Targets: []vocab.ManifestTarget{{Revision: "v1", Weight: weight}}}}}
}

func upload(t *testing.T, m *member, tenant string, module []byte) vocab.Digest {
	t.Helper()
	d := vocab.DigestOf(sha256.Sum256(module))
	if err := m.cat.Artifacts().Put(context.Background(), vocab.TenantID(tenant), d, bytes.NewReader(module)); err != nil {
		t.Fatal(err)
	}
	return d
}

// TestCluster_deployReachesEveryMember: a deploy through one member is
// applied by all, artifacts included, at the same generation and catalog
// hash; a retried deploy of the same content makes no new generation; a
// delete reaches everyone too.
func TestCluster_deployReachesEveryMember(t *testing.T) {
	endpoint := etcdtest.Start(t, 1).ClientURLs()[0]
	deployScenario(t, []*member{startMember(t, endpoint, "a"), startMember(t, endpoint, "b"), startMember(t, endpoint, "c")})
}

// TestCluster_externalEtcd runs the same scenario against an etcd the
// caller started (LATENT_TEST_ETCD=http://host:port), such as Debian's
// etcd-server 3.4, under a fresh key prefix; skipped without it.
func TestCluster_externalEtcd(t *testing.T) {
	endpoint := os.Getenv("LATENT_TEST_ETCD")
	if endpoint == "" {
		t.Skip("set LATENT_TEST_ETCD to an etcd client URL to run against it")
	}
	prefix := "/latent-test-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	var ms []*member
	for _, id := range []string{"a", "b", "c"} {
		ms = append(ms, startMemberWith(t, []string{endpoint}, id, t.TempDir(), prefix))
	}
	deployScenario(t, ms)
}

// deployScenario: a deploy through one of three members is applied by all,
// artifacts included, at the same generation and catalog hash; a retried
// deploy of the same content makes no new generation; a delete reaches
// everyone too.
func deployScenario(t *testing.T, ms []*member) {
	t.Helper()
	ctx := context.Background()
	waitFor(t, "members fresh", 10*time.Second, func() bool {
		for _, m := range ms {
			if !m.c.Status().Fresh {
				return false
			}
		}
		members, err := ms[0].c.Members(ctx)
		return err == nil && len(members) == 3
	})
	d := upload(t, ms[0], "acme", []byte("module one"))
	res, err := ms[0].c.Deploy(ctx, manifest("acme", "svc", d, 1))
	if err != nil {
		t.Fatal(err)
	}
	if res.Members != 3 || res.Applied != 3 {
		t.Fatalf("applied on %d of %d", res.Applied, res.Members)
	}
	for _, m := range ms {
		pin := m.cat.Pin()
		if pin.Generation() != res.Generation || pin.Hash() != ms[0].cat.Pin().Hash() {
			t.Fatalf("%s at generation %d (want %d)", m.id, pin.Generation(), res.Generation)
		}
		if _, ok := pin.Deployment("acme", "svc"); !ok || !m.cat.Artifacts().Has("acme", d) {
			t.Fatalf("%s lacks the release or its artifact", m.id)
		}
	}
	again, err := ms[1].c.Deploy(ctx, manifest("acme", "svc", d, 1)) // through another member, same content
	if err != nil || again.Generation != res.Generation {
		t.Fatalf("retried deploy: generation %d (want %d), %v", again.Generation, res.Generation, err)
	}
	// New weights: a metadata-only change.
	next, err := ms[2].c.Deploy(ctx, manifest("acme", "svc", d, 2))
	if err != nil || next.Generation <= res.Generation || next.Applied != 3 {
		t.Fatalf("second deploy: %+v, %v", next, err)
	}
	del, err := ms[1].c.Delete(ctx, "acme", "svc")
	if err != nil || del.Applied != 3 {
		t.Fatalf("delete: %+v, %v", del, err)
	}
	for _, m := range ms {
		if _, ok := m.cat.Pin().Deployment("acme", "svc"); ok {
			t.Fatalf("%s still serves the deleted service", m.id)
		}
	}
	if _, err := ms[0].c.Delete(ctx, "acme", "svc"); !errors.Is(err, catalog.ErrServiceNotFound) {
		t.Fatalf("second delete: %v", err)
	}
}

// TestCluster_forgedArtifactSkipped: a holder answering other bytes is
// refused (the digest does not match) and the artifact is fetched from
// another holder.
func TestCluster_forgedArtifactSkipped(t *testing.T) {
	endpoint := etcdtest.Start(t, 1).ClientURLs()[0]
	a, b := startMember(t, endpoint, "a"), startMember(t, endpoint, "b")
	ctx := context.Background()
	waitFor(t, "members fresh", 10*time.Second, func() bool { return a.c.Status().Fresh && b.c.Status().Fresh })
	d := upload(t, a, "acme", []byte("module two"))
	if _, err := a.c.Deploy(ctx, manifest("acme", "svc", d, 1)); err != nil {
		t.Fatal(err)
	}
	// Both hold it now; a starts forging. A new member must still get it.
	a.forge = true
	c := startMember(t, endpoint, "c")
	waitFor(t, "c applied", 10*time.Second, func() bool {
		_, ok := c.cat.Pin().Deployment("acme", "svc")
		return ok
	})
	got, err := c.cat.Artifacts().Get(d)
	if err != nil || string(got) != "module two" {
		t.Fatalf("c's artifact %q, %v", got, err)
	}
	// Negative control: with every holder forging, a fresh member cannot
	// apply the release.
	b.forge = true
	e := startMember(t, endpoint, "e")
	c.forge = true
	<-time.After(2 * time.Second)
	if _, ok := e.cat.Pin().Deployment("acme", "svc"); ok {
		t.Fatal("a member applied a release with only forged artifacts available")
	}
	if st := e.c.Status(); st.Fresh || st.Err == nil {
		t.Fatalf("member with a forged artifact reports fresh=%v err=%v", st.Fresh, st.Err)
	}
}

// TestCluster_etcdDownFailsStatic: with etcd cut off (a partition: the
// proxy in front of it holds every byte) members keep their catalog, turn
// stale within staleAfter and refuse deploys; once etcd is reachable again
// they are fresh within a second and apply the next deploy.
func TestCluster_etcdDownFailsStatic(t *testing.T) {
	ec := etcdtest.Start(t, 1)
	te := ec.Members[0]
	proxy := etcdtest.StartProxy(t, strings.TrimPrefix(te.ClientURL, "http://"))
	a, b := startMember(t, proxy.URL(), "a"), startMember(t, proxy.URL(), "b")
	ctx := context.Background()
	waitFor(t, "members fresh", 10*time.Second, func() bool { return a.c.Status().Fresh && b.c.Status().Fresh })
	d := upload(t, a, "acme", []byte("module three"))
	res, err := a.c.Deploy(ctx, manifest("acme", "svc", d, 1))
	if err != nil {
		t.Fatal(err)
	}
	down := time.Now()
	proxy.Pause()
	waitFor(t, "members stale", staleAfter+checkInterval, func() bool { return !a.c.Status().Fresh && !b.c.Status().Fresh })
	t.Logf("stale %v after etcd was cut off", time.Since(down).Round(10*time.Millisecond))
	for _, m := range []*member{a, b} {
		if pin := m.cat.Pin(); pin.Generation() != res.Generation {
			t.Fatalf("%s went from generation %d to %d while etcd was cut off", m.id, res.Generation, pin.Generation())
		}
		if _, ok := m.cat.Pin().Deployment("acme", "svc"); !ok {
			t.Fatalf("%s stopped serving while etcd was cut off", m.id)
		}
	}
	if _, err := b.c.Deploy(ctx, manifest("acme", "svc", d, 3)); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("deploy while etcd is cut off: %v, want ErrUnavailable", err)
	}
	back := time.Now()
	proxy.Resume()
	waitFor(t, "members fresh again", 5*time.Second, func() bool { return a.c.Status().Fresh && b.c.Status().Fresh })
	t.Logf("fresh %v after etcd was reachable again", time.Since(back).Round(10*time.Millisecond))
	next, err := b.c.Deploy(ctx, manifest("acme", "svc", d, 3))
	if err != nil || next.Generation <= res.Generation {
		t.Fatalf("deploy after etcd returned: %+v, %v", next, err)
	}
	waitFor(t, "a applied", 5*time.Second, func() bool { return a.cat.Pin().Generation() == next.Generation })
}

// TestCluster_etcdRestarted: members survive etcd stopping and starting
// again on the same data (their watches and leases are re-established).
func TestCluster_etcdRestarted(t *testing.T) {
	if testing.Short() {
		t.Skip("stopping embedded etcd takes about 7 s")
	}
	ec := etcdtest.Start(t, 1)
	te := ec.Members[0]
	a, b := startMember(t, te.ClientURL, "a"), startMember(t, te.ClientURL, "b")
	ctx := context.Background()
	waitFor(t, "members fresh", 10*time.Second, func() bool { return a.c.Status().Fresh && b.c.Status().Fresh })
	d := upload(t, a, "acme", []byte("module four"))
	res, err := a.c.Deploy(ctx, manifest("acme", "svc", d, 1))
	if err != nil {
		t.Fatal(err)
	}
	te.Stop()
	te.Restart(t)
	waitFor(t, "members fresh again", 10*time.Second, func() bool { return a.c.Status().Fresh && b.c.Status().Fresh })
	next, err := b.c.Deploy(ctx, manifest("acme", "svc", d, 3))
	if err != nil || next.Generation <= res.Generation {
		t.Fatalf("deploy after the restart: %+v, %v", next, err)
	}
	waitFor(t, "a applied", 5*time.Second, func() bool { return a.cat.Pin().Generation() == next.Generation })
}

// TestCluster_deadMemberLeaves: a member that stops renewing its lease
// disappears from membership within the lease TTL plus a second; one that
// stops cleanly leaves at once.
func TestCluster_deadMemberLeaves(t *testing.T) {
	ec := etcdtest.Start(t, 1)
	te := ec.Members[0]
	a, b := startMember(t, te.ClientURL, "a"), startMember(t, te.ClientURL, "b")
	ctx := context.Background()
	count := func() int {
		ms, err := a.c.Members(ctx)
		if err != nil {
			return -1
		}
		return len(ms)
	}
	waitFor(t, "two members", 10*time.Second, func() bool { return count() == 2 })
	b.stop() // revokes its lease
	waitFor(t, "b gone", time.Second, func() bool { return count() == 1 })
	c := startMember(t, te.ClientURL, "c")
	waitFor(t, "c joined", 10*time.Second, func() bool { return count() == 2 })
	c.c.member.noRevoke = true // as if it crashed: the lease runs out
	stopped := time.Now()
	c.stop()
	waitFor(t, "c gone", 2*time.Second+time.Second, func() bool { return count() == 1 })
	t.Logf("a crashed member left after %v (lease TTL 2s)", time.Since(stopped).Round(10*time.Millisecond))
}

// TestCluster_compactedHistory: a member cut off while the history it
// missed is compacted lists again when it is back (its watch answers
// ErrCompacted) and swaps in the whole catalog.
func TestCluster_compactedHistory(t *testing.T) {
	ec := etcdtest.Start(t, 1)
	url := ec.ClientURLs()[0]
	proxy := etcdtest.StartProxy(t, strings.TrimPrefix(url, "http://"))
	a := startMember(t, url, "a")
	b := startMemberAt(t, []string{proxy.URL()}, "b", t.TempDir())
	ctx := context.Background()
	waitFor(t, "members fresh", 10*time.Second, func() bool { return a.c.Status().Fresh && b.c.Status().Fresh })
	d := upload(t, a, "acme", []byte("module five"))
	if _, err := a.c.Deploy(ctx, manifest("acme", "svc", d, 1)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "b applied", 5*time.Second, func() bool { _, ok := b.cat.Pin().Deployment("acme", "svc"); return ok })
	proxy.Pause()
	waitFor(t, "b stale", 5*time.Second, func() bool { return !b.c.Status().Fresh })
	// While b is away: more deploys, a delete, then the history is compacted.
	var last Result
	for w := int64(2); w <= 5; w++ {
		res, err := a.c.Deploy(ctx, manifest("acme", "svc"+strconv.FormatInt(w, 10), d, w))
		if err != nil {
			t.Fatal(err)
		}
		last = res
	}
	if _, err := a.c.Delete(ctx, "acme", "svc"); err != nil {
		t.Fatal(err)
	}
	resp, err := a.c.cli.Get(ctx, "compact-probe")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.c.cli.Compact(ctx, resp.Header.Revision); err != nil {
		t.Fatal(err)
	}
	proxy.Resume()
	waitFor(t, "b converged", 10*time.Second, func() bool {
		st := b.c.Status()
		return st.Fresh && st.CatalogHash == a.cat.Pin().Hash() && st.Generation == a.cat.Pin().Generation()
	})
	if _, ok := b.cat.Pin().Deployment("acme", "svc"); ok {
		t.Fatal("b still serves the service deleted while it was away")
	}
	if b.cat.Pin().Generation() <= last.Generation {
		t.Fatalf("b at %d, the last deploy was %d", b.cat.Pin().Generation(), last.Generation)
	}
}

// TestCluster_olderStoreRefused: a node whose catalog is newer than etcd's
// history (etcd restored from an older backup, here a new, emptier etcd)
// keeps its catalog, reports ErrBehind and stays stale.
func TestCluster_olderStoreRefused(t *testing.T) {
	first := etcdtest.Start(t, 1)
	dir := t.TempDir()
	a := startMemberAt(t, first.ClientURLs(), "a", dir)
	ctx := context.Background()
	waitFor(t, "a fresh", 10*time.Second, func() bool { return a.c.Status().Fresh })
	d := upload(t, a, "acme", []byte("module six"))
	var gen vocab.Generation
	for w := int64(1); w <= 5; w++ { // enough revisions to be ahead of a new store
		res, err := a.c.Deploy(ctx, manifest("acme", "svc", d, w))
		if err != nil {
			t.Fatal(err)
		}
		gen = res.Generation
	}
	hash := a.cat.Pin().Hash()
	a.stop()
	second := etcdtest.Start(t, 1)
	b := startMember(t, second.ClientURLs()[0], "b")
	waitFor(t, "b fresh", 10*time.Second, func() bool { return b.c.Status().Fresh })
	db := upload(t, b, "acme", []byte("module seven"))
	if _, err := b.c.Deploy(ctx, manifest("acme", "other", db, 1)); err != nil {
		t.Fatal(err)
	}
	a2 := startMemberAt(t, second.ClientURLs(), "a", dir)
	waitFor(t, "a reports the older store", 10*time.Second, func() bool { return errors.Is(a2.c.Status().Err, ErrBehind) })
	st := a2.c.Status()
	if st.Fresh || st.Generation != gen || st.CatalogHash != hash {
		t.Fatalf("a after meeting an older store: fresh %v, generation %d (had %d), hash changed %v", st.Fresh, st.Generation, gen, st.CatalogHash != hash)
	}
	if _, err := a2.c.Deploy(ctx, manifest("acme", "svc", d, 9)); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("deploy through a node behind an older store: %v", err)
	}
}

// TestCluster_readyFailsStatic: an apply failure makes the node stale at
// once but not unready: it stays ready until max_staleness after it was
// last fresh.
func TestCluster_readyFailsStatic(t *testing.T) {
	m := startMember(t, etcdtest.Start(t, 1).ClientURLs()[0], "a")
	waitFor(t, "fresh", 10*time.Second, func() bool { return m.c.Status().Fresh })
	// As if the node had started long ago: readiness must come from its
	// last fresh moment, not from its start.
	m.c.mu.Lock()
	m.c.started = time.Now().Add(-time.Hour)
	m.c.mu.Unlock()
	m.c.noteApplied(errors.Wrap(ErrUnavailable, "test: a failed listing"))
	st := m.c.Status()
	if st.Fresh || !st.Ready {
		t.Fatalf("after an apply failure: fresh %v ready %v, want stale and ready", st.Fresh, st.Ready)
	}
}

// TestCluster_tenantQuotaAcrossNodes: a tenant may have one service. a
// checks a new service against its catalog; before a commits, b deploys
// another new service of the tenant. a's commit finds the tenant's
// services changed since its check, catches up and checks again: refused
// with the quota, and etcd holds one service of the tenant. Without the
// census (the negative control) a's commit would land: two services.
// Replacing the existing service, and a new service once one is deleted,
// still pass.
func TestCluster_tenantQuotaAcrossNodes(t *testing.T) {
	ctx := context.Background()
	endpoint := etcdtest.Start(t, 1).ClientURLs()[0]
	opts := catalog.Config{MaxServicesPerTenant: 1}
	a := startMemberOpts(t, []string{endpoint}, "a", t.TempDir(), "/test", opts)
	b := startMemberOpts(t, []string{endpoint}, "b", t.TempDir(), "/test", opts)
	waitFor(t, "members fresh", 10*time.Second, func() bool { return a.c.Status().Fresh && b.c.Status().Fresh })
	da, db := upload(t, a, "acme", []byte("module a")), upload(t, b, "acme", []byte("module b"))

	var bErr error
	fired := false
	a.c.beforeCommit = func() {
		if fired {
			return
		}
		fired = true
		_, bErr = b.c.Deploy(ctx, manifest("acme", "from-b", db, 1))
	}
	_, err := a.c.Deploy(ctx, manifest("acme", "from-a", da, 1))
	a.c.beforeCommit = nil
	if bErr != nil {
		t.Fatalf("b's deploy: %v", bErr)
	}
	if qe := (*catalog.QuotaError)(nil); !errors.As(err, &qe) || qe.Dimension != catalog.QuotaServices {
		t.Fatalf("a's deploy after b's: %v, want the services quota", err)
	}
	services := func() []string {
		resp, err := a.c.cli.Get(ctx, a.c.k.services(), clientv3.WithPrefix(), clientv3.WithKeysOnly())
		if err != nil {
			t.Fatal(err)
		}
		var keys []string
		for _, kv := range resp.Kvs {
			keys = append(keys, string(kv.Key))
		}
		return keys
	}
	if got := services(); len(got) != 1 || got[0] != a.c.k.service("acme", "from-b") {
		t.Fatalf("etcd holds %v, want only acme/from-b", got)
	}

	// Replacing the tenant's one service passes through either member.
	if _, err := a.c.Deploy(ctx, manifest("acme", "from-b", db, 2)); err != nil {
		t.Fatalf("replace through a: %v", err)
	}
	// Deleted through b, a new one fits through a.
	if _, err := b.c.Delete(ctx, "acme", "from-b"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.c.Deploy(ctx, manifest("acme", "from-a", da, 1)); err != nil {
		t.Fatalf("new service after the delete: %v", err)
	}
	if got := services(); len(got) != 1 || got[0] != a.c.k.service("acme", "from-a") {
		t.Fatalf("etcd holds %v, want only acme/from-a", got)
	}
}

// TestCluster_uploadQuotaDoesNotBlockApply: a tenant fills its artifact
// quota on b with uploads of its own and then deploys, through a, a release
// with an artifact b lacks. b stores it anyway (the release was admitted on
// a; it counts towards the tenant's quota on b) and applies the release:
// one tenant's uploads cannot make a node stale for everyone. Storing it
// under the upload quota (the negative control) fails the deploy's
// replication.
func TestCluster_uploadQuotaDoesNotBlockApply(t *testing.T) {
	ctx := context.Background()
	endpoint := etcdtest.Start(t, 1).ClientURLs()[0]
	a := startMember(t, endpoint, "a")
	b := startMemberOpts(t, []string{endpoint}, "b", t.TempDir(), "/test", catalog.Config{MaxArtifactsPerTenant: 1})
	waitFor(t, "members fresh", 10*time.Second, func() bool {
		members, err := a.c.Members(ctx)
		return a.c.Status().Fresh && b.c.Status().Fresh && err == nil && len(members) == 2
	})
	upload(t, b, "acme", []byte("parked on b"))
	if err := b.cat.Artifacts().Put(ctx, "acme", vocab.DigestOf(sha256.Sum256([]byte("more"))), bytes.NewReader([]byte("more"))); err == nil {
		t.Fatal("b's upload quota took a second artifact")
	}
	d := upload(t, a, "acme", []byte("the release's module"))
	res, err := a.c.Deploy(ctx, manifest("acme", "svc", d, 1))
	if err != nil {
		t.Fatalf("deploy through a: %v", err)
	}
	if res.Applied != 2 || res.Members != 2 {
		t.Fatalf("applied on %d of %d members", res.Applied, res.Members)
	}
	if _, ok := b.cat.Pin().Deployment("acme", "svc"); !ok || !b.cat.Artifacts().Has("acme", d) || !b.c.Status().Fresh {
		t.Fatalf("b: release %v, artifact %v, fresh %v", ok, b.cat.Artifacts().Has("acme", d), b.c.Status().Fresh)
	}
}

// TestCluster_unhold: a member that deleted an artifact gives up its
// holding, so peers stop asking it for the bytes.
func TestCluster_unhold(t *testing.T) {
	ctx := context.Background()
	endpoint := etcdtest.Start(t, 1).ClientURLs()[0]
	a := startMember(t, endpoint, "a")
	waitFor(t, "a fresh", 10*time.Second, func() bool { return a.c.Status().Fresh })
	d := upload(t, a, "acme", []byte("held module"))
	if err := a.c.Replicate(ctx, "acme", d); err != nil { // records the holding
		t.Fatal(err)
	}
	held := func() int {
		resp, err := a.c.cli.Get(ctx, a.c.k.holder(d, "a"), clientv3.WithCountOnly())
		if err != nil {
			t.Fatal(err)
		}
		return int(resp.Count)
	}
	if held() != 1 {
		t.Fatal("no holding recorded")
	}
	if err := a.c.Unhold(ctx, d); err != nil || held() != 0 {
		t.Fatalf("after Unhold: %d holdings, %v", held(), err)
	}
}

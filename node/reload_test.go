package node

import (
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/errors"

	"github.com/latent-node/latent-node/node/auth"
	"github.com/latent-node/latent-node/node/config"
	"github.com/latent-node/latent-node/refusal"
)

// withKeys is the running configuration with the demo principal's API keys
// replaced by hashes.
func withKeys(cfg *config.Config, hashes ...string) *config.Config {
	next := *cfg
	next.Principals = slices.Clone(cfg.Principals)
	for i := range next.Principals {
		if next.Principals[i].Subject == "demo" {
			next.Principals[i].APIKeys = hashes
		}
	}
	return &next
}

// TestReload_keyRotation: a key added by a reload works at once, the old one
// keeps working until a reload removes it; while reloads happen, requests
// with a key valid throughout never fail (run with -race: the swap is
// atomic).
func TestReload_keyRotation(t *testing.T) {
	sn := startServed(t)
	base := sn.n.cfg
	oldHash := base.Principals[0].APIKeys[0]
	newKey, newHash, err := auth.Generate()
	if err != nil {
		t.Fatal(err)
	}
	var next atomic.Pointer[config.Config]
	sn.n.SetReloadSource(ReloadSource{Load: func() (*config.Config, error) { return next.Load(), nil }})

	// Requests with the old key go on while the new key is added.
	stop := make(chan struct{})
	var failures atomic.Int64
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if a := sn.do(t, "POST", "/v1/invoke/demo/hello/greet", sn.admin, nil, nil); a.status != 200 {
					failures.Add(1)
				}
			}
		}()
	}
	for range 20 {
		next.Store(withKeys(base, oldHash, newHash))
		if res, err := sn.n.Reload(); err != nil || !slices.Contains(res.Applied, "principals") && len(res.Applied) != 0 {
			t.Fatalf("reload: %+v, %v", res, err)
		}
		next.Store(withKeys(base, oldHash))
		if _, err := sn.n.Reload(); err != nil {
			t.Fatal(err)
		}
	}
	next.Store(withKeys(base, oldHash, newHash))
	if res, err := sn.n.Reload(); err != nil || !slices.Equal(res.Applied, []string{"principals"}) || len(res.RestartRequired) != 0 {
		t.Fatalf("reload adding a key: %+v, %v", res, err)
	}
	close(stop)
	wg.Wait()
	if n := failures.Load(); n > 0 {
		t.Fatalf("%d requests with a key valid throughout failed during the reloads", n)
	}
	if a := sn.do(t, "POST", "/v1/invoke/demo/hello/greet", newKey, nil, nil); a.status != 200 {
		t.Fatalf("new key after the reload: %d", a.status)
	}
	// The old key goes.
	next.Store(withKeys(base, newHash))
	if _, err := sn.n.Reload(); err != nil {
		t.Fatal(err)
	}
	if a := sn.do(t, "POST", "/v1/invoke/demo/hello/greet", sn.admin, nil, nil); a.status != http.StatusUnauthorized {
		t.Fatalf("old key after its removal: %d", a.status)
	}
	if a := sn.do(t, "POST", "/v1/invoke/demo/hello/greet", newKey, nil, nil); a.status != 200 {
		t.Fatalf("new key: %d", a.status)
	}
}

// TestReload_invalidAndRestart: an invalid file changes nothing; a table
// that cannot change live is named as requiring a restart while the rest
// applies; the HTTP endpoint answers the same.
func TestReload_invalidAndRestart(t *testing.T) {
	sn := startServed(t)
	base := sn.n.cfg
	_, newHash, _ := auth.Generate()
	var next *config.Config
	loadErr := error(nil)
	sn.n.SetReloadSource(ReloadSource{Load: func() (*config.Config, error) { return next, loadErr }})

	loadErr = &config.Error{Problems: []config.Problem{{Field: "node.listen", Problem: "must be host:port"}}}
	if _, err := sn.n.Reload(); !errors.As(err, new(*config.Error)) {
		t.Fatalf("invalid file: %v", err)
	}
	a := sn.do(t, "POST", "/v1/admin/reload", sn.admin, nil, nil)
	if a.status != http.StatusUnprocessableEntity || a.prob.Reason != refusal.ReasonInvalidConfiguration.String() {
		t.Fatalf("POST reload of an invalid file: %d %s", a.status, a.body)
	}
	if a := sn.do(t, "POST", "/v1/invoke/demo/hello/greet", sn.admin, nil, nil); a.status != 200 {
		t.Fatalf("after a refused reload: %d", a.status)
	}

	loadErr = nil
	changed := withKeys(base, base.Principals[0].APIKeys[0], newHash)
	changed.Node.Listen = "127.0.0.1:9"
	changed.Scheduler.MaxWait *= 2
	next = changed
	a = sn.do(t, "POST", "/v1/admin/reload", sn.admin, nil, nil)
	if a.status != 200 || string(a.body) == "" {
		t.Fatalf("POST reload: %d %s", a.status, a.body)
	}
	res, err := sn.n.Reload() // the same file again: only the restart-required tables differ
	if err != nil || len(res.Applied) != 0 || !slices.Equal(res.RestartRequired, []string{"node", "scheduler"}) {
		t.Fatalf("second reload: %+v, %v", res, err)
	}
}

// TestReload_notReloadable: a node without a configuration file (the demo)
// refuses a reload.
func TestReload_notReloadable(t *testing.T) {
	sn := startServed(t)
	if _, err := sn.n.Reload(); !errors.Is(err, ErrNotReloadable) {
		t.Fatalf("reload without a source: %v", err)
	}
	if a := sn.do(t, "POST", "/v1/admin/reload", sn.admin, nil, nil); a.status != http.StatusConflict || a.prob.Reason != refusal.ReasonNotReloadable.String() {
		t.Fatalf("POST reload: %d %s", a.status, a.body)
	}
	if a := sn.do(t, "POST", "/v1/admin/reload", sn.inv, nil, nil); a.status != http.StatusForbidden {
		t.Fatalf("POST reload without the admin role: %d", a.status)
	}
}

// TestReload_tenantLimits: a reload that lowers the demo tenant's live
// limit binds the next admission; one that changes the scheduler is
// reported as needing a restart while the limit still applies.
func TestReload_tenantLimits(t *testing.T) {
	sn := startServed(t)
	base := sn.n.cfg
	next := *base
	next.Tenants = maps.Clone(base.Tenants)
	demo := next.Tenants["demo"]
	demo.Limits.MaxLiveActivations = 0 // no capacity at all
	next.Tenants["demo"] = demo
	next.Scheduler.MaxWait *= 2
	sn.n.SetReloadSource(ReloadSource{Load: func() (*config.Config, error) { return &next, nil }})
	res, err := sn.n.Reload()
	if err != nil || !slices.Equal(res.Applied, []string{"tenants"}) || !slices.Equal(res.RestartRequired, []string{"scheduler"}) {
		t.Fatalf("reload: %+v, %v", res, err)
	}
	a := sn.do(t, "POST", "/v1/invoke/demo/hello/greet", sn.admin, nil, nil)
	if a.status != http.StatusTooManyRequests || a.prob.Scope != "tenant" {
		t.Fatalf("invoke under a zero live limit: %d %s", a.status, a.body)
	}
	view := sn.do(t, "GET", "/v1/admission", sn.admin, nil, nil)
	if !strings.Contains(string(view.body), `"max_live_activations": 0`) {
		t.Fatalf("the tenant view after the reload: %s", view.body)
	}
}

// TestReload_payloadBeyondIngress: a payload ceiling the running data pool
// cannot hold waits for a restart (the pools keep their sizes), while the
// rest of the node limits apply.
func TestReload_payloadBeyondIngress(t *testing.T) {
	sn := startServed(t)
	base := sn.n.cfg
	next := *base
	next.Node.Limits.MaxPayloadBytes = base.Ingress.Data.Bytes // above what the pool holds with the overhead
	next.Node.Limits.MaxLiveActivations--
	next.Ingress.Data.Bytes *= 2 // the new file is consistent
	sn.n.SetReloadSource(ReloadSource{Load: func() (*config.Config, error) { return &next, nil }})
	res, err := sn.n.Reload()
	if err != nil || !slices.Contains(res.Applied, "node.limits") || !slices.Contains(res.RestartRequired, "node.limits.max_payload_bytes") ||
		!slices.Contains(res.RestartRequired, "ingress") {
		t.Fatalf("reload: %+v, %v", res, err)
	}
	if got := sn.n.prov.MaxPayloadBytes(); got != base.Node.Limits.MaxPayloadBytes {
		t.Fatalf("payload ceiling %d after the reload, want the running %d", got, base.Node.Limits.MaxPayloadBytes)
	}
	if got := sn.n.prov.Policy().Limits.MaxLiveActivations; got != base.Node.Limits.MaxLiveActivations-1 {
		t.Fatalf("node live limit %d, want %d", got, base.Node.Limits.MaxLiveActivations-1)
	}
}

// TestReload_newTenantLogBucket: a tenant a reload configures gets an
// access-log bucket of its own (before, its lines shared the bucket of
// unconfigured tenants).
func TestReload_newTenantLogBucket(t *testing.T) {
	sn := startServed(t)
	base := sn.n.cfg
	next := *base
	next.Tenants = maps.Clone(base.Tenants)
	next.Tenants["fresh"] = base.Tenants["demo"]
	lim := sn.n.metrics.access
	if lim.OwnBucket("fresh") {
		t.Fatal("an unconfigured tenant has a bucket of its own")
	}
	sn.n.SetReloadSource(ReloadSource{Load: func() (*config.Config, error) { return &next, nil }})
	if res, err := sn.n.Reload(); err != nil || !slices.Contains(res.Applied, "tenants") {
		t.Fatalf("reload: %+v, %v", res, err)
	}
	if !lim.OwnBucket("fresh") || !lim.OwnBucket("demo") {
		t.Fatal("the reloaded tenant shares a bucket")
	}
}

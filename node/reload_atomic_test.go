package node

import (
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/latent-node/latent-node/internal/testcert"
	"github.com/latent-node/latent-node/node/auth"
	"github.com/latent-node/latent-node/node/config"
	"github.com/latent-node/latent-node/node/front"
)

// TestReload_failedTLSChangesNothing: a reload whose TLS files fail to load
// after the file validated (its key replaced by a mismatched one in
// between) changes nothing: the key the file adds does not authenticate,
// the tenant limit it lowers stays, the certificate in use stays; a later
// reload of the original file (with the key file repaired) does not leave
// the key of the failed file valid either.
//
// On 611fe67 the principals and admission were swapped before the TLS
// files were read: after the failed reload the added key authenticated and
// its invocation met the lowered limit (429 instead of 401), and the
// recorded configuration was never updated, so a revert would not have
// removed the key.
func TestReload_failedTLSChangesNothing(t *testing.T) {
	sn := startServed(t)
	base := sn.n.cfg
	dir := t.TempDir()
	ca := testcert.NewCA(t, "reload CA")
	good := ca.Issue(t, testcert.Spec{DNSNames: []string{"localhost"}})
	certFile, keyFile := good.Write(t, dir, "node")
	ts, err := front.NewServerTLS(config.NodeTLS{CertFile: certFile, KeyFile: keyFile})
	if err != nil {
		t.Fatal(err)
	}
	inUse := ts.Certificate()
	newKey, newHash, err := auth.Generate()
	if err != nil {
		t.Fatal(err)
	}
	// The file adds a key and lowers the demo tenant's live limit.
	added := withKeys(base, base.Principals[0].APIKeys[0], newHash)
	added.Tenants = maps.Clone(base.Tenants)
	demo := added.Tenants["demo"]
	demo.Limits.MaxLiveActivations = 0
	added.Tenants["demo"] = demo
	next := added
	sn.n.SetReloadSource(ReloadSource{Load: func() (*config.Config, error) { return next, nil }, TLS: ts})

	// The key file no longer matches the certificate when the reload reads it.
	_, otherKey := ca.Issue(t, testcert.Spec{DNSNames: []string{"localhost"}}).Write(t, t.TempDir(), "other")
	copyFile(t, otherKey, keyFile)
	if _, err := sn.n.Reload(); err == nil {
		t.Fatal("a reload with a mismatched key file succeeded")
	}
	if a := sn.do(t, "POST", "/v1/invoke/demo/hello/greet", newKey, nil, nil); a.status != http.StatusUnauthorized {
		t.Fatalf("the failed file's key: %d, want 401", a.status)
	}
	if a := sn.do(t, "POST", "/v1/invoke/demo/hello/greet", sn.admin, nil, nil); a.status != http.StatusOK {
		t.Fatalf("the running key after the failed reload: %d %s", a.status, a.body)
	}
	if live := sn.n.prov.Policy().Tenants["demo"].Limits.MaxLiveActivations; live != base.Tenants["demo"].Limits.MaxLiveActivations {
		t.Fatalf("demo's live limit %d after the failed reload, want the running %d", live,
			base.Tenants["demo"].Limits.MaxLiveActivations)
	}
	if ts.Certificate() != inUse {
		t.Fatal("the certificate in use changed")
	}
	if sn.n.reload.cfg != nil && sn.n.reload.cfg != base {
		t.Fatal("the failed reload recorded a configuration")
	}

	// The operator repairs the key and reverts the file.
	good.Write(t, dir, "node")
	next = base
	res, err := sn.n.Reload()
	if err != nil {
		t.Fatal(err)
	}
	if a := sn.do(t, "POST", "/v1/invoke/demo/hello/greet", newKey, nil, nil); a.status != http.StatusUnauthorized {
		t.Fatalf("the failed file's key after the revert: %d, want 401 (reload %+v)", a.status, res)
	}
	// Negative control: the same file with a readable key pair applies.
	next = added
	if _, err := sn.n.Reload(); err != nil {
		t.Fatal(err)
	}
	if a := sn.do(t, "GET", "/v1/admission", newKey, nil, nil); a.status != http.StatusOK {
		t.Fatalf("the added key once its reload applied: %d %s", a.status, a.body)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Clean(to), data, 0o600); err != nil {
		t.Fatal(err)
	}
}

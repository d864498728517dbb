package e2e

import (
	"crypto/tls"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/latent-node/latent-node/internal/testcert"
	"github.com/latent-node/latent-node/internal/testutil/nodeconf"
	"github.com/latent-node/latent-node/refusal"
)

// TestReload_sighupKeyRotation rotates an API key with SIGHUP while clients
// invoke: the new key is added (both work), the clients switch, the old key
// is removed (refused) — and no request fails in between. An invalid file
// changes nothing; POST /v1/admin/reload does the same as SIGHUP; SIGHUP no
// longer stops the node.
func TestReload_sighupKeyRotation(t *testing.T) {
	k, h := principalKeys(t)
	p := defaults(t)
	p.Hashes = h
	path := writeConfig(t, p)
	base, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n := &node{proc: serve(t, path, calm), keys: k}
	n.deploy(t, "alice", "acme", "greeter", rev{guest: "hello"})
	newKey, newHash := keygen(t)
	oldHash := h["alice"]
	write := func(text string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	withAlice := func(hashes string) string {
		out := strings.Replace(string(base), `api_keys = ["`+oldHash+`"]`, `api_keys = [`+hashes+`]`, 1)
		if out == string(base) {
			t.Fatal("the configuration has no api_keys line for alice")
		}
		return out
	}
	// hup sends SIGHUP and waits for the first log line containing want.
	hup := func(want string) {
		t.Helper()
		n.signal(t, syscall.SIGHUP)
		n.stderr.wait(t, 10*time.Second, func(s string) bool { return strings.Contains(s, want) })
	}

	var key atomic.Value
	key.Store(k["alice"])
	stop := make(chan struct{})
	var sent, failed atomic.Int64
	var firstFailure atomic.Value
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
				r, err := n.try("POST", "/v1/invoke/acme/greeter/run", "", strings.NewReader("ada"),
					map[string]string{"Authorization": "Bearer " + key.Load().(string)})
				sent.Add(1)
				if err != nil || r.status != 200 {
					failed.Add(1)
					firstFailure.CompareAndSwap(nil, r.status)
				}
			}
		}()
	}

	write(withAlice(`"` + oldHash + `", "` + newHash + `"`))
	hup(`"msg":"configuration reloaded"`)
	if r := n.do(t, "POST", "/v1/invoke/acme/greeter/run", "", strings.NewReader("ada"), map[string]string{"Authorization": "Bearer " + newKey}); r.status != 200 {
		t.Fatalf("new key after the first reload: %d %s", r.status, r.body)
	}
	key.Store(newKey)
	<-time.After(100 * time.Millisecond) // let requests in flight with the old key finish
	write(withAlice(`"` + newHash + `"`))
	n.signal(t, syscall.SIGHUP)
	waitFor := time.Now().Add(10 * time.Second)
	for {
		r := n.do(t, "POST", "/v1/invoke/acme/greeter/run", "alice", strings.NewReader("ada"), nil) // the old key
		if r.status == 401 {
			break
		}
		if time.Now().After(waitFor) {
			t.Fatalf("old key still accepted 10 s after the reload that removed it: %d", r.status)
		}
		<-time.After(20 * time.Millisecond) // a bounded poll until the reload applied
	}
	close(stop)
	wg.Wait()
	if f := failed.Load(); f > 0 {
		t.Fatalf("%d of %d requests failed during the rotation (first: %v)", f, sent.Load(), firstFailure.Load())
	}
	t.Logf("%d requests during two reloads, none failed", sent.Load())

	// An invalid file: refused, nothing changes, the node serves on.
	write(strings.Replace(withAlice(`"`+newHash+`"`), `[node]`, "[node]\ncolour = \"blue\"", 1))
	hup("configuration reload refused")
	if r := n.do(t, "POST", "/v1/invoke/acme/greeter/run", "", strings.NewReader("ada"), map[string]string{"Authorization": "Bearer " + newKey}); r.status != 200 {
		t.Fatalf("after a refused reload: %d", r.status)
	}
	r := n.do(t, "POST", "/v1/admin/reload", "root", nil, nil)
	if r.status != 422 || r.problem.Reason != refusal.ReasonInvalidConfiguration.String() || !strings.Contains(string(r.body), "node.colour") {
		t.Fatalf("POST reload of the invalid file: %d %s", r.status, r.body)
	}
	write(withAlice(`"` + newHash + `"`))
	if r := n.do(t, "POST", "/v1/admin/reload", "root", nil, nil); r.status != 200 || !strings.Contains(string(r.body), `"restart_required": []`) {
		t.Fatalf("POST reload: %d %s", r.status, r.body)
	}
}

// TestReload_tenantRemovedWithLiveWork: a reload that removes tenant beta
// (and its principal) while one of its activations runs: beta gets no new
// admissions, the running activation completes as it would have (its own
// deadline), acme is untouched, and the admin view no longer lists beta.
func TestReload_tenantRemovedWithLiveWork(t *testing.T) {
	k, h := principalKeys(t)
	p := defaults(t)
	p.Hashes = h
	path := writeConfig(t, p)
	n := &node{proc: serve(t, path, calm), keys: k}
	n.deploy(t, "bob", "beta", "sleep", rev{guest: "sleep"})
	n.deploy(t, "alice", "acme", "greeter", rev{guest: "hello"})
	running := n.async("bob", "beta/sleep/run", "", map[string]string{"Latent-Timeout-Ms": "1500"})
	n.waitUsage(t, "bob", func(live, _ uint64) bool { return live == 1 })

	cfg := harnessConfig(p)
	cfg.Tenants = slices.DeleteFunc(cfg.Tenants, func(t nodeconf.Tenant) bool { return t.Name == "beta" })
	cfg.Principals = slices.DeleteFunc(cfg.Principals, func(pr nodeconf.Principal) bool { return pr.Tenant == "beta" })
	if err := os.WriteFile(path, []byte(cfg.TOML()), 0o600); err != nil {
		t.Fatal(err)
	}
	r := n.do(t, "POST", "/v1/admin/reload", "root", nil, nil)
	if r.status != 200 || !strings.Contains(string(r.body), `"tenants"`) || !strings.Contains(string(r.body), `"principals"`) {
		t.Fatalf("reload: %d %s", r.status, r.body)
	}
	if r := n.invoke(t, "bob", "beta/sleep/run", "", nil); r.status != 401 {
		t.Fatalf("beta's principal after the reload: %d %s", r.status, r.body)
	}
	if r := n.invoke(t, "alice", "acme/greeter/run", "ada", nil); r.status != 200 {
		t.Fatalf("acme after the reload: %d %s", r.status, r.body)
	}
	done := await(t, running, 10*time.Second)
	if done.status != 504 || done.header.Get("Latent-Outcome") != "deadline-exceeded" {
		t.Fatalf("beta's running activation: %d %s (outcome %q), want its own 504 deadline-exceeded", done.status, done.body,
			done.header.Get("Latent-Outcome"))
	}
	admin := n.do(t, "GET", "/v1/admin/admission", "root", nil, nil)
	if strings.Contains(string(admin.body), `"name": "beta"`) {
		t.Fatalf("the admin view still lists beta: %s", admin.body)
	}
}

// TestReload_sighupCertificate: SIGHUP reads the [node.tls] files again —
// new connections get the new certificate; a key that does not match is an
// invalid configuration, so the old pair stays and the node serves on.
func TestReload_sighupCertificate(t *testing.T) {
	ca := testcert.NewCA(t, "latent-node test CA")
	first := ca.Issue(t, testcert.Spec{})
	p, dir, listen := startTLS(t, first)
	serial := func() string {
		t.Helper()
		conn, err := tls.Dial("tcp", listen, &tls.Config{RootCAs: ca.Pool(), ServerName: "127.0.0.1"})
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = conn.Close() }()
		return conn.ConnectionState().PeerCertificates[0].SerialNumber.String()
	}
	if got := serial(); got != first.Cert.SerialNumber.String() {
		t.Fatalf("serving serial %s, want the first certificate's", got)
	}
	second := ca.Issue(t, testcert.Spec{})
	_, key := second.Write(t, dir, "node") // the same files the node serves
	p.signal(t, syscall.SIGHUP)
	p.stderr.wait(t, 10*time.Second, func(s string) bool { return strings.Contains(s, `"msg":"configuration reloaded"`) })
	if got := serial(); got != second.Cert.SerialNumber.String() {
		t.Fatalf("after SIGHUP the node serves serial %s, want the second certificate's %s", got, second.Cert.SerialNumber)
	}
	// A key that does not belong to the certificate makes the file invalid
	// (the check reads the pair): nothing changes, the old pair stays.
	testcert.WriteFile(t, key, ca.Issue(t, testcert.Spec{}).KeyPEM)
	p.signal(t, syscall.SIGHUP)
	p.stderr.wait(t, 10*time.Second, func(s string) bool {
		return strings.Contains(s, "configuration reload refused") && strings.Contains(s, "private key does not match")
	})
	if got := serial(); got != second.Cert.SerialNumber.String() {
		t.Fatalf("after a bad reload the node serves serial %s, want the second certificate's", got)
	}
}

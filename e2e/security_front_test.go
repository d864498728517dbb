package e2e

import (
	"bufio"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/latent-node/latent-node/internal/testcert"
	"github.com/latent-node/latent-node/internal/testutil/nodeconf"
	"github.com/latent-node/latent-node/internal/testwasm"
	"github.com/latent-node/latent-node/refusal"
)

// The front door against the real binary: one authorization rule for every
// tenant-scoped route, cross-site refusals for ambient credentials, Host
// checks for the status page, atomic reloads and write deadlines.

// tenantAction is one tenant-scoped request: the rule applies to each.
type tenantAction struct {
	name, method, path string
	body               []byte
	ok                 int // the status an authorized principal gets
}

// tenantActions are upload, deploy, get, list, invoke, delete and the
// admission view for acme: service is deployed by the deploy and deleted by
// the delete; acme/echo must exist for get and invoke.
func tenantActions(t *testing.T, service string) []tenantAction {
	t.Helper()
	module := testwasm.Bytes(t, "echo")
	sum := sha256.Sum256(module)
	digest := "sha256:" + hex.EncodeToString(sum[:])
	manifest, err := json.Marshal(map[string]any{"tenant": "acme", "service": service,
		"revisions": []any{map[string]any{"name": "v1", "artifact": digest, "trust_class": "untrusted",
			"ceiling": map[string]any{"cpu_fuel": 1_000_000_000, "memory_bytes": "8MiB", "wall_time": "5s"}}},
		"routes": []any{map[string]any{"name": "run", "targets": []any{map[string]any{"revision": "v1", "weight": 1}}}}})
	if err != nil {
		t.Fatal(err)
	}
	return []tenantAction{
		{"upload", "PUT", "/v1/artifacts/" + digest, module, http.StatusCreated},
		{"deploy", "PUT", "/v1/deployments/acme/" + service, manifest, http.StatusOK},
		{"get", "GET", "/v1/deployments/acme/echo", nil, http.StatusOK},
		{"list", "GET", "/v1/deployments/acme", nil, http.StatusOK},
		{"invoke", "POST", "/v1/invoke/acme/echo/run", []byte("ping"), http.StatusOK},
		{"delete", "DELETE", "/v1/deployments/acme/" + service, nil, http.StatusOK},
		{"admission view", "GET", "/v1/admission", nil, http.StatusOK},
	}
}

// revocationConfig is the harness configuration with acme's subjects and
// kinds set, and ci, a service principal of acme (invoke, deploy).
func revocationConfig(p params, ciHash string, subjects, kinds []string) string {
	c := harnessConfig(p)
	c.Tenants[0].Subjects, c.Tenants[0].Kinds = subjects, kinds
	c.Principals = append(c.Principals, nodeconf.Principal{Subject: "ci", Kind: "service", ServiceIdentity: "ci",
		Tenant: "acme", Roles: []string{"invoke", "deploy"}, APIKeys: []string{ciHash}})
	return c.TOML()
}

// TestSecurityFront_revocation: a subject removed from
// tenants.acme.subjects (or a kind removed from tenants.acme.kinds) and
// reloaded is refused 403 principal-not-authorized on every tenant-scoped
// route: upload, deploy, get, list, invoke, delete and the admission view;
// the principals the file still allows do all of them.
//
// On 611fe67 only invoke was refused: after the revocation alice's upload
// answered 201, deploy 200, get 200, list 200, delete 200 and the
// admission view 200.
func TestSecurityFront_revocation(t *testing.T) {
	keys, hashes := principalKeys(t)
	ciKey, ciHash := keygen(t)
	p := defaults(t)
	p.Hashes = hashes
	path := filepath.Join(t.TempDir(), "node.toml")
	write := func(subjects, kinds []string) {
		if err := os.WriteFile(path, []byte(revocationConfig(p, ciHash, subjects, kinds)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write([]string{"alice", "mallory", "root", "ci"}, []string{"user", "service"})
	n := &node{proc: serve(t, path, calm), keys: map[string]string{"ci": ciKey}}
	for k, v := range keys {
		n.keys[k] = v
	}
	n.deploy(t, "alice", "acme", "echo", rev{guest: "echo"})
	reload := func() {
		t.Helper()
		r := n.do(t, "POST", "/v1/admin/reload", "root", nil, nil)
		var res struct {
			Applied []string `json:"applied"`
		}
		if err := json.Unmarshal(r.body, &res); r.status != http.StatusOK || err != nil || !slices.Contains(res.Applied, "tenants") {
			t.Fatalf("reload: %d %s", r.status, r.body)
		}
	}
	refused := func(t *testing.T, who string) {
		t.Helper()
		for _, a := range tenantActions(t, "by-"+who) {
			r := n.do(t, a.method, a.path, who, strings.NewReader(string(a.body)), nil)
			if r.status != http.StatusForbidden || r.problem.Reason != refusal.ReasonPrincipalNotAuthorized.String() || r.problem.Code != "permission-denied" {
				t.Errorf("%s by %s: %d %q, want 403 principal-not-authorized", a.name, who, r.status, r.problem.Reason)
			}
		}
	}
	allowed := func(t *testing.T, who string) {
		t.Helper()
		for _, a := range tenantActions(t, "by-"+who) {
			if r := n.do(t, a.method, a.path, who, strings.NewReader(string(a.body)), nil); r.status != a.ok {
				t.Errorf("%s by %s: %d %s, want %d", a.name, who, r.status, r.body, a.ok)
			}
		}
	}

	t.Run("subject", func(t *testing.T) {
		write([]string{"mallory", "root", "ci"}, []string{"user", "service"})
		reload()
		refused(t, "alice")
		allowed(t, "mallory") // negative control: a listed subject of acme
	})
	t.Run("kind", func(t *testing.T) {
		write([]string{"alice", "mallory", "root", "ci"}, []string{"service"})
		reload()
		refused(t, "mallory")
		allowed(t, "ci") // negative control: a service principal of acme
	})
	t.Run("reinstated", func(t *testing.T) {
		write([]string{"alice", "mallory", "root", "ci"}, []string{"user", "service"})
		reload()
		allowed(t, "alice")
	})
}

// slowReadNode serves the harness configuration with room for conns
// connections in total and per address, and node.write_timeout.
func slowReadNode(t *testing.T, conns int, writeTimeout string) *proc {
	t.Helper()
	_, h := principalKeys(t)
	p := defaults(t)
	p.Hashes = h
	cfg := harnessConfig(p)
	cfg.MaxConnections, cfg.MaxConnectionsPerAddress, cfg.WriteTimeout = conns, conns, writeTimeout
	path := filepath.Join(t.TempDir(), "node.toml")
	if err := os.WriteFile(path, []byte(cfg.TOML()), 0o600); err != nil {
		t.Fatal(err)
	}
	return serve(t, path, calm)
}

// healthzFrom sends GET /healthz from 127.0.0.x on a new connection.
func healthzFrom(addr string, x byte) error {
	d := net.Dialer{Timeout: 2 * time.Second, LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, x)}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		return err
	}
	defer func() { _ = c.Close() }()
	_ = c.SetDeadline(time.Now().Add(3 * time.Second))
	if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"); err != nil {
		return err
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return err
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return &net.AddrError{Err: resp.Status, Addr: "/healthz"}
	}
	return nil
}

// slowReaders are connections from 127.0.0.2 with a 1 KiB receive buffer
// that pipeline 404s (about 400 bytes of answer for 30 of request) and never
// read, each until the node closes it (or the test ends).
type slowReaders struct {
	conns   []net.Conn
	written []atomic.Int64 // bytes each has written
	closed  chan int       // the index of each connection the node closed
	wg      sync.WaitGroup
}

func startSlowReaders(t *testing.T, addr string, n int) *slowReaders {
	t.Helper()
	d := net.Dialer{Timeout: 2 * time.Second, LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)},
		Control: func(_, _ string, c syscall.RawConn) error {
			return c.Control(func(fd uintptr) { setRcvBuf(fd, 1024) })
		}}
	batch := strings.Repeat("GET /x HTTP/1.1\r\nHost: x\r\n\r\n", 1000)
	s := &slowReaders{written: make([]atomic.Int64, n), closed: make(chan int, n)}
	t.Cleanup(func() {
		for _, c := range s.conns {
			_ = c.Close()
		}
		s.wg.Wait()
	})
	for i := range n {
		c, err := d.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		s.conns = append(s.conns, c)
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			for {
				k, err := io.WriteString(c, batch)
				s.written[i].Add(int64(k))
				if err != nil {
					s.closed <- i
					return
				}
			}
		}()
	}
	return s
}

// stuck waits (at most within) until no connection has written anything
// for a second: the node stopped reading all of them.
func (s *slowReaders) stuck(t *testing.T, within time.Duration) {
	t.Helper()
	last := make([]int64, len(s.written))
	still := time.Now()
	if !poll(within, 100*time.Millisecond, func() bool {
		moved := false
		for i := range s.written {
			if w := s.written[i].Load(); w != last[i] {
				last[i], moved = w, true
			}
		}
		if moved {
			still = time.Now()
		}
		return time.Since(still) >= time.Second
	}) {
		t.Fatalf("the slow readers' connections still move after %v", within)
	}
}

// TestSecurityFront_writeDeadline: clients that pipeline requests and never
// read their answers take every connection the node allows
// (node.max_connections 8, all from 127.0.0.2); once their answers could
// not be written within node.write_timeout (500ms) the node closes them,
// and a new client from 127.0.0.3 is served /healthz. Negative control:
// /healthz answers before the attack, and from the attacker's own address
// once the attack is gone.
//
// On 611fe67 (no write deadline; measured with the deadline disabled, the
// key being new) the connections stayed open and busy, never shed: 30 s
// later none had been closed and the probe's connection was reset at once.
func TestSecurityFront_writeDeadline(t *testing.T) {
	const conns = 8
	n := slowReadNode(t, conns, "500ms")
	addr := strings.TrimPrefix(n.url, "http://")
	if err := healthzFrom(addr, 3); err != nil {
		t.Fatalf("/healthz before the attack: %v", err)
	}
	s := startSlowReaders(t, addr, conns)
	timeout := time.After(30 * time.Second)
	for i := range conns {
		select {
		case <-s.closed:
		case <-timeout:
			t.Fatalf("after 30s the node had closed %d of the %d non-reading connections; a new client: %v", i, conns,
				healthzFrom(addr, 3))
		}
	}
	if err := healthzFrom(addr, 3); err != nil {
		t.Fatalf("/healthz from a new client once the non-reading connections were closed: %v", err)
	}
	if err := healthzFrom(addr, 2); err != nil {
		t.Fatalf("/healthz from the attacker's address afterwards: %v", err)
	}
}

// TestSecurityFront_stalledShed: while clients that never read hold every
// connection the node allows, blocked in their answers' writes (the write
// deadline, 10m here, far away), a new client is still served: at the
// bound, a connection whose write has been blocked for a second is shed
// for it, as an idle one would be (the node closed a slow reader's
// connection).
//
// On 611fe67 (a connection serving a request was never shed; measured with
// the stalled-write shedding disabled) the new client's connection was
// reset at once.
func TestSecurityFront_stalledShed(t *testing.T) {
	const conns = 8
	n := slowReadNode(t, conns, "10m")
	addr := strings.TrimPrefix(n.url, "http://")
	s := startSlowReaders(t, addr, conns)
	s.stuck(t, 30*time.Second)
	// A new client is served once a write has been blocked for a second
	// (DefaultWriteStall; the slow readers' writes blocked at different
	// moments).
	for i := range 3 {
		var err error
		if !poll(5*time.Second, 100*time.Millisecond, func() bool { err = healthzFrom(addr, 3); return err == nil }) {
			t.Fatalf("/healthz %d from a new client while the slow readers hold every connection: %v", i+1, err)
		}
	}
	// The first new client took a slow reader's place; the others the
	// place each one before them left.
	if !poll(5*time.Second, 10*time.Millisecond, func() bool { return len(s.closed) >= 1 }) {
		t.Fatal("the node served new clients at its bound without closing a slow reader's connection")
	}
}

// browserNode is a node serving TLS with client CAs, where ops (admin)
// authenticates by the client certificate CN=ops,O=acme.
type browserNode struct {
	url        string
	cfgPath    string
	params     params
	extra      string // the TLS table and the ops principal
	dir        string // node.crt, node.key
	ca         *testcert.CA
	serverLeaf *testcert.Leaf
	cert, anon *http.Client // with and without the client certificate
}

func startBrowserNode(t *testing.T) *browserNode {
	t.Helper()
	_, hashes := principalKeys(t)
	b := &browserNode{dir: t.TempDir(), ca: testcert.NewCA(t, "front CA")}
	b.serverLeaf = b.ca.Issue(t, testcert.Spec{})
	certFile, keyFile := b.serverLeaf.Write(t, b.dir, "node")
	caFile := filepath.Join(b.dir, "ca.pem")
	testcert.WriteFile(t, caFile, b.ca.PEM)
	client := b.ca.Issue(t, testcert.Spec{Subject: pkix.Name{CommonName: "ops", Organization: []string{"acme"}}, Client: true})
	b.params = defaults(t)
	b.params.Hashes = hashes
	b.extra = "[node.tls]\ncert_file = \"" + certFile + "\"\nkey_file = \"" + keyFile + "\"\nclient_ca_file = \"" + caFile + "\"\n\n" +
		"[[principals]]\nsubject = \"ops\"\nkind = \"user\"\ntenant = \"acme\"\nroles = [\"admin\"]\n" +
		"client_certificate_subjects = [\"CN=ops,O=acme\"]\n"
	b.cfgPath = filepath.Join(t.TempDir(), "node.toml")
	b.write(t, nil)
	p := start(t, calm, "serve", "--config", b.cfgPath, "--listen", "127.0.0.1:0")
	line := p.stderr.wait(t, 30*time.Second, func(s string) bool { return strings.Contains(s, `"msg":"serving"`) })
	var rec struct {
		Listen string `json:"listen"`
	}
	if err := json.Unmarshal([]byte(line), &rec); err != nil || rec.Listen == "" {
		t.Fatalf("serving line %q: %v", line, err)
	}
	b.url = "https://" + rec.Listen
	tr := func(certs []tls.Certificate) *http.Client {
		return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
			RootCAs: b.ca.Pool(), Certificates: certs}}}
	}
	b.cert, b.anon = tr([]tls.Certificate{client.TLS(t)}), tr(nil)
	if !poll(10*time.Second, 10*time.Millisecond, func() bool {
		resp, err := b.anon.Get(b.url + "/readyz")
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}) {
		t.Fatal("/readyz never answered 200 over https")
	}
	return b
}

// write writes the configuration with more principals.
func (b *browserNode) write(t *testing.T, more []nodeconf.Principal) {
	t.Helper()
	c := harnessConfig(b.params)
	c.Principals = append(c.Principals, more...)
	c.Extra = b.extra
	if err := os.WriteFile(b.cfgPath, []byte(c.TOML()), 0o600); err != nil {
		t.Fatal(err)
	}
}

// do sends a request with the client (and the Host and headers given).
func (b *browserNode) do(t *testing.T, hc *http.Client, method, path, host string, headers map[string]string) reply {
	t.Helper()
	req, err := http.NewRequest(method, b.url+path, strings.NewReader("a=b"))
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	data, _ := io.ReadAll(resp.Body)
	r := reply{status: resp.StatusCode, header: resp.Header, body: data}
	_ = json.Unmarshal(data, &r.problem)
	return r
}

// TestSecurityFront_browsers: a client certificate is an ambient
// credential. A cross-site request that a browser sends with it (no
// Authorization header) is refused 403 cross-site-request; the same
// request from the node's own origin, or without browser headers, or with
// an Authorization header, is served. The status page answers only under
// node.ui_hosts or an address: a rebound name is refused 403
// host-not-allowed even with the admin key.
//
// On 611fe67: the cross-site POST /v1/admin/reload answered 200, and
// GET /ui/data under Host attacker.example answered 200.
func TestSecurityFront_browsers(t *testing.T) {
	keys, _ := principalKeys(t)
	b := startBrowserNode(t)
	own := strings.TrimPrefix(b.url, "https://")
	form := map[string]string{"Content-Type": "application/x-www-form-urlencoded"}
	with := func(kv ...string) map[string]string {
		h := map[string]string{"Content-Type": "application/x-www-form-urlencoded"}
		for i := 0; i+1 < len(kv); i += 2 {
			h[kv[i]] = kv[i+1]
		}
		return h
	}
	refused := []struct {
		name    string
		headers map[string]string
	}{
		{"a cross-site form", with("Origin", "https://evil.example", "Sec-Fetch-Site", "cross-site")},
		{"Sec-Fetch-Site cross-site", with("Sec-Fetch-Site", "cross-site")},
		{"Sec-Fetch-Site same-site", with("Sec-Fetch-Site", "same-site")},
		{"a foreign Origin", with("Origin", "https://evil.example")},
		{"an opaque Origin", with("Origin", "null")},
	}
	for _, tt := range refused {
		r := b.do(t, b.cert, "POST", "/v1/admin/reload", "", tt.headers)
		if r.status != http.StatusForbidden || r.problem.Reason != refusal.ReasonCrossSiteRequest.String() {
			t.Errorf("reload by certificate, %s: %d %s, want 403 cross-site-request", tt.name, r.status, r.body)
		}
	}
	// The same request is refused on other authenticated routes too.
	if r := b.do(t, b.cert, "GET", "/v1/admin/admission", "", with("Sec-Fetch-Site", "cross-site")); r.status != http.StatusForbidden {
		t.Errorf("admin admission by certificate, cross-site: %d", r.status)
	}
	// Negative controls.
	served := []struct {
		name    string
		client  *http.Client
		headers map[string]string
	}{
		{"certificate, no browser headers", b.cert, form},
		{"certificate, own origin", b.cert, with("Origin", "https://"+own, "Sec-Fetch-Site", "same-origin")},
		{"certificate, user navigation", b.cert, with("Sec-Fetch-Site", "none")},
		{"API key, cross-site", b.anon, with("Authorization", "Bearer "+keys["root"], "Origin", "https://evil.example",
			"Sec-Fetch-Site", "cross-site")},
	}
	for _, tt := range served {
		if r := b.do(t, tt.client, "POST", "/v1/admin/reload", "", tt.headers); r.status != http.StatusOK {
			t.Errorf("reload, %s: %d %s, want 200", tt.name, r.status, r.body)
		}
	}

	// DNS rebinding: the status page under a foreign name, with the admin
	// key a credential-injecting proxy would add.
	admin := map[string]string{"Authorization": "Bearer " + keys["root"]}
	for _, path := range []string{"/ui", "/ui/data"} {
		if r := b.do(t, b.anon, "GET", path, "attacker.example", admin); r.status != http.StatusForbidden ||
			r.problem.Reason != refusal.ReasonHostNotAllowed.String() {
			t.Errorf("%s under attacker.example: %d %q, want 403 host-not-allowed", path, r.status, r.problem.Reason)
		}
		for _, host := range []string{"localhost", own} {
			if r := b.do(t, b.anon, "GET", path, host, admin); r.status != http.StatusOK {
				t.Errorf("%s under %s: %d %s, want 200", path, host, r.status, r.body)
			}
		}
	}
}

// TestSecurityFront_failedReloadChangesNothing: a reload of a file that
// adds principal p2 while the node's key file does not match its
// certificate fails and changes nothing: p2's key does not authenticate,
// not after the failed reload nor after the operator repaired the key and
// reloaded the original file; the same file with a good key pair adds p2.
//
// This passes on 611fe67 too: the file's validation reads the TLS files,
// so the bad pair is refused before anything applies. The window this
// guards (files changed between validation and apply) is a race, covered
// without one by node's TestReload_failedTLSChangesNothing.
func TestSecurityFront_failedReloadChangesNothing(t *testing.T) {
	b := startBrowserNode(t)
	key2, hash2 := keygen(t)
	p2 := []nodeconf.Principal{{Subject: "p2", Tenant: "acme", Roles: []string{"deploy"}, APIKeys: []string{hash2}}}
	p2key := map[string]string{"Authorization": "Bearer " + key2}
	_, otherKey := b.ca.Issue(t, testcert.Spec{}).Write(t, t.TempDir(), "other")
	data, err := os.ReadFile(otherKey)
	if err != nil {
		t.Fatal(err)
	}
	b.write(t, p2)
	testcert.WriteFile(t, filepath.Join(b.dir, "node.key"), data)
	if r := b.do(t, b.cert, "POST", "/v1/admin/reload", "", nil); r.status == http.StatusOK {
		t.Fatalf("a reload with a mismatched key pair: %d %s", r.status, r.body)
	}
	if r := b.do(t, b.anon, "GET", "/v1/admission", "", p2key); r.status != http.StatusUnauthorized {
		t.Fatalf("p2 after the failed reload: %d, want 401", r.status)
	}
	b.serverLeaf.Write(t, b.dir, "node")
	b.write(t, nil)
	if r := b.do(t, b.cert, "POST", "/v1/admin/reload", "", nil); r.status != http.StatusOK {
		t.Fatalf("reload of the repaired original: %d %s", r.status, r.body)
	}
	if r := b.do(t, b.anon, "GET", "/v1/admission", "", p2key); r.status != http.StatusUnauthorized {
		t.Fatalf("p2 after the revert: %d, want 401", r.status)
	}
	// Negative control: the file with a good pair adds p2 (acme lists no
	// p2, so its tenant routes are refused 403, not 401).
	b.write(t, p2)
	if r := b.do(t, b.cert, "POST", "/v1/admin/reload", "", nil); r.status != http.StatusOK {
		t.Fatalf("reload adding p2: %d %s", r.status, r.body)
	}
	if r := b.do(t, b.anon, "GET", "/v1/admission", "", p2key); r.status != http.StatusForbidden {
		t.Fatalf("p2 once added: %d %s, want 403 (authenticated, not listed by acme)", r.status, r.body)
	}
}

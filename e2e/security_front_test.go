package e2e

import (
	"bufio"
	"crypto/sha256"
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
	"syscall"
	"testing"
	"time"

	"github.com/latent-node/latent-node/internal/testutil/nodeconf"
	"github.com/latent-node/latent-node/internal/testwasm"
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
			if r.status != http.StatusForbidden || r.problem.Reason != "principal-not-authorized" || r.problem.Code != "permission-denied" {
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

// TestSecurityFront_writeDeadline: clients that pipeline requests and never
// read their answers (a 1 KiB receive buffer) take every connection the node
// allows (node.max_connections 8, all from 127.0.0.2); once their answers
// could not be written within node.write_timeout (500ms) the node closes
// them, and a new client from 127.0.0.3 is served /healthz. Negative
// control: before the attack, and from the attacker's own address once
// the attack is gone, /healthz answers.
//
// On 611fe67 (no write deadline; measured with the deadline disabled, the
// key being new) the connections stayed open and busy, never shed: 30 s
// later none had been closed and the probe's connection was reset at once.
func TestSecurityFront_writeDeadline(t *testing.T) {
	const conns = 8
	_, h := principalKeys(t)
	p := defaults(t)
	p.Hashes = h
	cfg := harnessConfig(p)
	cfg.MaxConnections, cfg.MaxConnectionsPerAddress, cfg.WriteTimeout = conns, conns, "500ms"
	path := filepath.Join(t.TempDir(), "node.toml")
	if err := os.WriteFile(path, []byte(cfg.TOML()), 0o600); err != nil {
		t.Fatal(err)
	}
	n := serve(t, path, calm)
	addr := strings.TrimPrefix(n.url, "http://")
	healthz := func(from byte) error {
		d := net.Dialer{Timeout: 2 * time.Second, LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, from)}}
		c, err := d.Dial("tcp", addr)
		if err != nil {
			return err
		}
		defer func() { _ = c.Close() }()
		_ = c.SetDeadline(time.Now().Add(2 * time.Second))
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
	if err := healthz(3); err != nil {
		t.Fatalf("/healthz before the attack: %v", err)
	}

	// The attack: each connection pipelines 404s (about 400 bytes of answer
	// for 30 of request) until the node closes it.
	d := net.Dialer{Timeout: 2 * time.Second, LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)},
		Control: func(_, _ string, c syscall.RawConn) error {
			return c.Control(func(fd uintptr) { _ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 1024) })
		}}
	batch := strings.Repeat("GET /x HTTP/1.1\r\nHost: x\r\n\r\n", 1000)
	var wg sync.WaitGroup
	closed := make(chan struct{}, conns)
	var attack []net.Conn
	defer func() {
		for _, c := range attack {
			_ = c.Close()
		}
		wg.Wait()
	}()
	for range conns {
		c, err := d.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		attack = append(attack, c)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				if _, err := io.WriteString(c, batch); err != nil {
					closed <- struct{}{}
					return
				}
			}
		}()
	}
	timeout := time.After(30 * time.Second)
	for i := range conns {
		select {
		case <-closed:
		case <-timeout:
			t.Fatalf("after 30s the node had closed %d of the %d non-reading connections; a new client: %v", i, conns, healthz(3))
		}
	}
	if err := healthz(3); err != nil {
		t.Fatalf("/healthz from a new client once the non-reading connections were closed: %v", err)
	}
	if err := healthz(2); err != nil {
		t.Fatalf("/healthz from the attacker's address afterwards: %v", err)
	}
}

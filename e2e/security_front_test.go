package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

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

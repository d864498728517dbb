package e2e

import (
	"maps"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/latent-node/latent-node/internal/testutil/browsertest"
)

// TestStatusPage_browser opens the real binary's status page in headless
// Chromium as an operator would: it asks for a key, refuses a wrong one
// with a message, accepts root's admin key, and after traffic from two
// tenants and refusals its plots, fed by the node's own 5 s history
// points, show both tenants and the refusal reasons; when a reload revokes
// the key, the page says so and asks again. The console stays empty and
// no request leaves the node's origin.
func TestStatusPage_browser(t *testing.T) {
	keys, hashes := principalKeys(t)
	p := defaults(t)
	p.Hashes = maps.Clone(hashes)
	cfgPath := writeConfig(t, p)
	n := &node{proc: serve(t, cfgPath, nil), keys: keys}
	n.deploy(t, "alice", "acme", "echo", rev{guest: "echo"})
	n.deploy(t, "bob", "beta", "echo", rev{guest: "echo"})

	page := browsertest.Open(t, n.url, n.url+"/ui", 1280, 1024, 60*time.Second)
	page.Poll(t, "the page asks for a key", `!document.getElementById("signin").hidden`)
	page.SignIn(t, "lk_wrong")
	page.Poll(t, "a wrong key is refused", `document.getElementById("signin-error").textContent.includes("refused")`)
	page.SignIn(t, n.keys["root"])
	page.Poll(t, "root's key is accepted", `Number(document.getElementById("status").dataset.refreshes) > 0`)

	for range 10 {
		n.invoke(t, "alice", "acme/echo/run", "a", nil)
		n.invoke(t, "bob", "beta/echo/run", "b", nil)
		n.do(t, "POST", "/v1/invoke/acme/echo/run", "", strings.NewReader("x"), nil) // unauthenticated
	}
	// The node closes a point every 5 s and the page fetches every 5 s.
	page.Poll(t, "the plots show the traffic", `(() => {
		const f = id => document.getElementById(id);
		return f("plot-tenants") && f("plot-tenants").getAttribute("aria-label").includes("acme") &&
			f("plot-tenants").getAttribute("aria-label").includes("beta") &&
			f("plot-refusals").getAttribute("aria-label").includes("unauthenticated") &&
			document.querySelectorAll("#plots figure").length >= 8 &&
			Array.from(document.querySelectorAll("#plots figure")).every(g => Number(g.dataset.points) >= 1 &&
				g.querySelectorAll("path.series, circle.point").length > 0);
	})()`)

	// Revoked while signed in: a reload gives root another key; the
	// page's next refresh is refused, and it says so and asks again.
	_, newHash := keygen(t)
	p.Hashes["root"] = newHash
	if err := os.WriteFile(cfgPath, []byte(configTOML(p)), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := n.do(t, "POST", "/v1/admin/reload", "root", nil, nil); r.status != 200 {
		t.Fatalf("reload: %d %s", r.status, r.body)
	}
	page.Poll(t, "a revoked key signs the page out with a message", `!document.getElementById("signin").hidden &&
		document.getElementById("signin-error").textContent.includes("refused") && sessionStorage.length === 0`)

	if console, foreign := page.Messages(), page.Foreign(); len(console) != 0 || len(foreign) != 0 {
		t.Fatalf("console %q, requests to other origins %q", console, foreign)
	}
}

package e2e

import (
	"context"
	"encoding/json"
	"maps"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// TestStatusPage_browser opens the real binary's status page in headless
// Chromium as an operator would: it asks for a key, refuses a wrong one
// with a message, accepts root's admin key, and after traffic from two
// tenants and refusals its plots, fed by the node's own 5 s history
// points, show both tenants and the refusal reasons; when a reload revokes
// the key, the page says so and asks again. The console stays empty and
// no request leaves the node's origin.
func TestStatusPage_browser(t *testing.T) {
	exe := ""
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			exe = p
			break
		}
	}
	if exe == "" {
		t.Skip("no chromium, chromium-browser or google-chrome on PATH")
	}
	keys, hashes := principalKeys(t)
	p := defaults(t)
	p.Hashes = maps.Clone(hashes)
	cfgPath := writeConfig(t, p)
	n := &node{proc: serve(t, cfgPath, nil), keys: keys}
	n.deploy(t, "alice", "acme", "echo", rev{guest: "echo"})
	n.deploy(t, "bob", "beta", "echo", rev{guest: "echo"})

	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(exe), chromedp.NoSandbox,
		chromedp.Flag("disable-gpu", true), chromedp.UserDataDir(t.TempDir()))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	var (
		mu      sync.Mutex
		console []string
		foreign []string
	)
	if err := chromedp.Listen(ctx, func(ev any) {
		mu.Lock()
		defer mu.Unlock()
		switch e := ev.(type) {
		case *runtime.EventConsoleAPICalled:
			console = append(console, string(e.Type))
		case *runtime.EventExceptionThrown:
			console = append(console, "exception: "+e.ExceptionDetails.Text)
		case *cdplog.EventEntryAdded: // the browser's log: failed requests among them
			console = append(console, "log: "+e.Entry.Text)
		case *network.EventRequestWillBeSent:
			if !strings.HasPrefix(e.Request.URL, n.url+"/") {
				foreign = append(foreign, e.Request.URL)
			}
		}
	}); err != nil {
		t.Fatal(err)
	}
	deadline, stop := context.WithTimeout(ctx, 60*time.Second)
	defer stop()
	if _, err := chromedp.Call(deadline, network.Enable, network.EnableParams{}); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Call(deadline, cdplog.Enable, cdp.Empty{}); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(deadline, chromedp.Navigate(n.url+"/ui")); err != nil {
		t.Fatal(err)
	}
	poll := func(what, expr string) {
		t.Helper()
		if _, err := chromedp.Run(deadline, chromedp.Poll[bool](expr, chromedp.WithPollingInterval(50*time.Millisecond))); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	signIn := func(key string) {
		t.Helper()
		k, _ := json.Marshal(key)
		if _, err := chromedp.Run(deadline, chromedp.Evaluate[bool](`(() => { document.getElementById("key").value = `+string(k)+
			`; document.getElementById("signin").requestSubmit(); return true; })()`)); err != nil {
			t.Fatal(err)
		}
	}
	poll("the page asks for a key", `!document.getElementById("signin").hidden`)
	signIn("lk_wrong")
	poll("a wrong key is refused", `document.getElementById("signin-error").textContent.includes("refused")`)
	signIn(n.keys["root"])
	poll("root's key is accepted", `Number(document.getElementById("status").dataset.refreshes) > 0`)

	for range 10 {
		n.invoke(t, "alice", "acme/echo/run", "a", nil)
		n.invoke(t, "bob", "beta/echo/run", "b", nil)
		n.do(t, "POST", "/v1/invoke/acme/echo/run", "", strings.NewReader("x"), nil) // unauthenticated
	}
	// The node closes a point every 5 s and the page fetches every 5 s.
	poll("the plots show the traffic", `(() => {
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
	poll("a revoked key signs the page out with a message", `!document.getElementById("signin").hidden &&
		document.getElementById("signin-error").textContent.includes("refused") && sessionStorage.length === 0`)

	mu.Lock()
	defer mu.Unlock()
	if len(console) != 0 || len(foreign) != 0 {
		t.Fatalf("console %q, requests to other origins %q", console, foreign)
	}
}

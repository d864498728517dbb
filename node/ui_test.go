package node

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/latent-node/latent-node/admission"
	"github.com/latent-node/latent-node/internal/testutil/browsertest"
	"github.com/latent-node/latent-node/node/auth"
	"github.com/latent-node/latent-node/node/config"
	"github.com/latent-node/latent-node/node/front"
	"github.com/latent-node/latent-node/node/history"
	"github.com/latent-node/latent-node/node/status"
	"github.com/latent-node/latent-node/refusal"
	"github.com/latent-node/latent-node/vocab"
)

// evilTenant is a tenant name that is markup if the page fails to escape it.
const evilTenant = `<img_src=x_onerror=alert(1)>&"'`

// TestUI_access: the page and its assets are served without credentials
// (they hold no data); the data routes need the admin role.
func TestUI_access(t *testing.T) {
	sn := startServed(t)
	for _, path := range []string{"/ui", "/ui/assets/app.js", "/ui/assets/app.css"} {
		a := sn.do(t, "GET", path, "", nil, nil)
		if a.status != http.StatusOK || a.header.Get("X-Content-Type-Options") != "nosniff" || a.header.Get("Content-Security-Policy") == "" {
			t.Fatalf("%s without a key: %d %v", path, a.status, a.header)
		}
		wantProblem(t, sn.do(t, "POST", path, sn.admin, nil, nil), http.StatusMethodNotAllowed, refusal.ReasonMethodNotAllowed.String())
	}
	if a := sn.do(t, "GET", "/ui/assets/other.js", "", nil, nil); a.status != http.StatusNotFound {
		t.Fatalf("unknown asset: %d", a.status)
	}
	// The sign-in check answers 200 whatever the key, saying why not.
	for _, c := range []struct{ key, want string }{{"", `{"admin":false,"problem":{`}, {sn.inv, `"reason":"role-not-authorized"`},
		{"lk_nobody", `"reason":"unauthenticated"`}, {sn.admin, `{"admin":true}`}} {
		a := sn.do(t, "GET", "/ui/session", c.key, nil, nil)
		if a.status != http.StatusOK || !strings.Contains(string(a.body), c.want) || a.header.Get("WWW-Authenticate") != "" {
			t.Fatalf("session with %q: %d %v %s, want %s", c.key, a.status, a.header, a.body, c.want)
		}
		if c.key != sn.admin && !json.Valid(a.body) {
			t.Fatalf("session answer is not JSON: %s", a.body)
		}
	}
	for _, path := range []string{"/ui/data", "/ui/history"} {
		t.Run(strings.TrimPrefix(path, "/"), func(t *testing.T) {
			wantProblem(t, sn.do(t, "GET", path, "", nil, nil), http.StatusUnauthorized, "unauthenticated")
			wantProblem(t, sn.do(t, "GET", path, sn.inv, nil, nil), http.StatusForbidden, refusal.ReasonRoleNotAuthorized.String())
			wantProblem(t, sn.do(t, "POST", path, sn.admin, nil, nil), http.StatusMethodNotAllowed, refusal.ReasonMethodNotAllowed.String())
			a := sn.do(t, "GET", path, sn.admin, nil, nil)
			if a.status != http.StatusOK || a.header.Get("X-Content-Type-Options") != "nosniff" {
				t.Fatalf("admin: %d %v", a.status, a.header)
			}
		})
	}
	wantProblem(t, sn.do(t, "GET", "/ui/", sn.admin, nil, nil), http.StatusNotFound, refusal.ReasonUnknownPath.String())
}

// TestUI_page: the page is static, loads only this origin's script and
// style under a policy without inline code or other origins, and names no
// tenant; the data escapes tenant names and shows sizes in human units.
func TestUI_page(t *testing.T) {
	tn := startNodeWith(t, func(c *config.Config) {
		c.Tenants[evilTenant] = c.Tenants["demo"]
	})
	resp, body := tn.do(t, "GET", "/ui", "", nil, nil)
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("%d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	page := string(body)
	csp := resp.Header.Get("Content-Security-Policy")
	for _, want := range []string{"default-src 'none'", "script-src 'self'", "style-src 'self'", "connect-src 'self'", "frame-ancestors 'none'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("CSP %q lacks %q", csp, want)
		}
	}
	if strings.Contains(csp, "unsafe-") || strings.Contains(csp, "nonce-") || strings.Contains(csp, "http") {
		t.Errorf("CSP %q allows inline code or another origin", csp)
	}
	if strings.Contains(page, "<script>") || strings.Contains(page, "<style") || strings.Contains(page, " style=") ||
		strings.Contains(page, "http://") || strings.Contains(page, "https://") || strings.Contains(page, "demo") {
		t.Fatalf("the page has inline code, another origin or data:\n%s", page)
	}
	for _, want := range []string{`<script src="/ui/assets/app.js" defer>`, `href="/ui/assets/app.css"`, `id="signin"`, `type="password"`} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	_, js := tn.do(t, "GET", "/ui/assets/app.js", "", nil, nil)
	if !strings.Contains(string(js), "sessionStorage") || strings.Contains(string(js), "innerHTML") || strings.Contains(string(js), "localStorage") ||
		strings.Contains(string(js), "document.cookie") || regexp.MustCompile(`https?://(?:[^w]|w[^w]|ww[^w])`).MatchString(string(js)) {
		t.Fatal("the script must keep the key in sessionStorage only, write no markup and reach no other origin")
	}

	resp, body = tn.do(t, "GET", "/ui/data", tn.key, nil, nil)
	if resp.StatusCode != http.StatusOK || strings.Contains(string(body), "<img") {
		t.Fatalf("data: %d %s", resp.StatusCode, body)
	}
	var d status.Data
	if err := json.Unmarshal(body, &d); err != nil {
		t.Fatal(err)
	}
	rows := tableRows(d.Tables, "tenants")
	i := slices.IndexFunc(rows, func(r []string) bool { return r[0] == evilTenant })
	if i < 0 || rows[i][7] != "0" {
		t.Fatalf("tenant rows %q", rows)
	}
	demo := rows[slices.IndexFunc(rows, func(r []string) bool { return r[0] == "demo" })]
	if demo[7] == "0" {
		t.Fatalf("the demo tenant's services are not counted: %q", demo)
	}
	for _, r := range tableRows(d.Tables, "ingress") {
		if !strings.HasSuffix(r[4], "iB") && !strings.HasSuffix(r[4], " B") {
			t.Fatalf("ingress max bytes %q not in human units", r[4])
		}
	}
}

// TestBytes: sizes as the page shows them.
func TestBytes(t *testing.T) {
	for n, want := range map[uint64]string{0: "0 B", 1023: "1023 B", 1024: "1 KiB", 1536: "1.5 KiB", 1 << 30: "1 GiB",
		12<<20 + 512<<10: "12.5 MiB", 300 << 20: "300 MiB", 1<<40 + 1<<39: "1.5 TiB"} {
		if have := status.Bytes(n); have != want {
			t.Errorf("Bytes(%d) = %q, want %q", n, have, want)
		}
	}
}

// TestUI_history: invocations and refusals of two tenants show up in the
// next point of /ui/history, which ?since= leaves out once read.
func TestUI_history(t *testing.T) {
	sn := startServed(t)
	for range 3 {
		sn.do(t, "POST", "/v1/invoke/demo/hello/greet", sn.admin, strings.NewReader("ada"), nil)
	}
	sn.do(t, "POST", "/v1/invoke/demo/hello/greet", "lk_nobody", strings.NewReader("x"), nil)
	sn.n.views.History().Close(sn.n.views.Gauges())
	var h struct {
		IntervalMs int64
		Points     []history.Point
	}
	if err := json.Unmarshal(sn.do(t, "GET", "/ui/history", sn.admin, nil, nil).body, &h); err != nil {
		t.Fatal(err)
	}
	if len(h.Points) != 1 {
		t.Fatalf("%d points", len(h.Points))
	}
	p := h.Points[0]
	if p.Node.Answers == 0 || p.Reasons["unauthenticated"] == 0 || p.Outcomes["success"] == 0 || p.MemoryLimit == 0 {
		t.Fatalf("point %+v", p)
	}
	names := map[string]bool{}
	for _, tr := range p.Tenants {
		names[tr.Name] = true
	}
	if !names["demo"] || !names[history.Anonymous] {
		t.Fatalf("tenants %+v: want demo and the unauthenticated requests", p.Tenants)
	}
	if err := json.Unmarshal(sn.do(t, "GET", "/ui/history?since="+strconv.FormatInt(p.T, 10), sn.admin, nil, nil).body, &h); err != nil || len(h.Points) != 0 {
		t.Fatalf("since the last point: %d points (%v)", len(h.Points), err)
	}
}

// TestUI_refusals: a refused request shows up in the refusal table.
func TestUI_refusals(t *testing.T) {
	sn := startServed(t)
	count := func() string {
		var d status.Data
		if err := json.Unmarshal(sn.do(t, "GET", "/ui/data", sn.admin, nil, nil).body, &d); err != nil {
			t.Fatal(err)
		}
		for _, r := range tableRows(d.Tables, "refusals") {
			if r[1] == "unauthenticated" {
				return r[2]
			}
		}
		return "0"
	}
	before, _ := strconv.Atoi(count())
	sn.do(t, "GET", "/v1/admin/admission", "", nil, nil)
	sn.do(t, "GET", "/v1/admin/admission", "", nil, nil)
	if after, _ := strconv.Atoi(count()); after != before+2 {
		t.Fatalf("unauthenticated refusals %d, then %d", before, after)
	}
	// The table is read from the refusal counter alone: the page polls, and
	// the whole registry grows with the catalog (a series per route).
	fams, err := sn.n.metrics.refusals.Gather()
	if err != nil || len(fams) != 1 || fams[0].GetName() != "latent_rejections_total" {
		t.Fatalf("the status page gathers %d families (%v), want only latent_rejections_total", len(fams), err)
	}
}

func tableRows(ts []status.Table, id string) [][]string {
	for _, t := range ts {
		if t.Name == id {
			return t.Rows
		}
	}
	return nil
}

// TestUI_browser drives the page in headless Chromium: it asks for a key,
// refuses a wrong one and one without the admin role with a message,
// accepts the admin key, then shows the tables as /v1/admin/admission has
// them and, after traffic from two tenants and refusals, a plot with
// points for each series, the refusal reasons and human units; signing
// out forgets the key. The console stays empty, no request leaves the
// node's origin, and a screenshot is written (to $LATENT_UI_SCREENSHOT
// when set, for the docs).
func TestUI_browser(t *testing.T) {
	betaKey, betaHash, _ := auth.Generate()
	sn := startServedWith(t, func(c *config.Config) {
		beta := c.Tenants["demo"]
		beta.Subjects = append(slices.Clone(beta.Subjects), "beta-app")
		c.Tenants["beta"] = beta
		c.Principals = append(c.Principals, config.Principal{Subject: "beta-app", Kind: admission.KindUser, Tenant: "beta",
			Roles: config.RoleInvoke, APIKeys: []string{betaHash}})
	})

	page := browsertest.Open(t, sn.url, sn.url+"/ui", 1280, 1800, 40*time.Second)
	deadline := page.Ctx
	poll := func(what, expr string) { t.Helper(); page.Poll(t, what, expr) }
	text := func(expr string) string { t.Helper(); return browsertest.Eval[string](t, page, expr) }
	signIn := func(key string) { t.Helper(); page.SignIn(t, key) }

	poll("the page asks for a key", `!document.getElementById("signin").hidden && document.getElementById("dashboard").hidden`)
	signIn("lk_not-a-key")
	poll("a wrong key is refused", `document.getElementById("signin-error").textContent.includes("refused")`)
	signIn(sn.inv) // a valid key without the admin role
	poll("a key without the admin role is refused", `document.getElementById("signin-error").textContent.includes("role")`)
	if got := text(`String(sessionStorage.length)`); got != "0" {
		t.Fatalf("a refused key was kept: %s items", got)
	}
	signIn(sn.admin)
	poll("the admin key is accepted", `Number(document.getElementById("status").dataset.refreshes) > 0 && !document.getElementById("dashboard").hidden`)
	if text(`sessionStorage.getItem("latent-node.admin-key")`) != sn.admin || text(`document.cookie`) != "" || text(`location.href`) != sn.url+"/ui" {
		t.Fatal("the key must be in sessionStorage only, not in a cookie or the URL")
	}

	// The tables agree with /v1/admin/admission (the page's own poll holds
	// a control-pool request while it is read, so a mismatch is read
	// again after the next refresh).
	var diff string
	for attempt := 0; attempt < 3; attempt++ {
		n := text(`document.getElementById("status").dataset.refreshes`)
		poll("a refresh", `Number(document.getElementById("status").dataset.refreshes) > `+n)
		tables, err := chromedp.Run(deadline, chromedp.Evaluate[map[string][][]string](`Object.fromEntries(
			Array.from(document.querySelectorAll("#tables table")).map(t => [t.id,
				Array.from(t.tBodies[0].rows).map(r => Array.from(r.cells).map(c => c.textContent))]))`))
		if err != nil {
			t.Fatal(err)
		}
		var a status.AdminAdmission
		if err := json.Unmarshal(sn.do(t, "GET", "/v1/admin/admission", sn.admin, nil, nil).body, &a); err != nil {
			t.Fatal(err)
		}
		if diff = compareUI(tables, a); diff == "" {
			a.Tenants[0].Usage.Queued++ // negative control: a changed number is seen
			if compareUI(tables, a) == "" {
				t.Fatal("compareUI missed a changed queued count")
			}
			break
		}
	}
	if diff != "" {
		t.Fatalf("the page disagrees with /v1/admin/admission: %s", diff)
	}

	// Traffic from two tenants and refusals, in two points of history.
	for range 2 {
		for range 5 {
			sn.do(t, "POST", "/v1/invoke/demo/hello/greet", sn.admin, strings.NewReader("ada"), nil)
			sn.do(t, "POST", "/v1/invoke/beta/hello/greet", betaKey, strings.NewReader("bo"), nil) // beta has no such service
			sn.do(t, "POST", "/v1/invoke/demo/hello/greet", "lk_nobody", strings.NewReader("x"), nil)
		}
		sn.n.views.History().Close(sn.n.views.Gauges())
	}
	plots := text(`document.getElementById("status").dataset.plots`)
	poll("the plots are redrawn with the new points", `Number(document.getElementById("status").dataset.plots) > `+plots+
		` && Number(document.getElementById("plot-tenants").dataset.points) >= 2`)
	figs, err := chromedp.Run(deadline, chromedp.Evaluate[map[string]string](`Object.fromEntries(
		Array.from(document.querySelectorAll("#plots figure")).map(f => [f.id, f.dataset.points + "|" +
			f.querySelectorAll("path.series").length + " lines, " + f.querySelectorAll("circle.point").length + " dots|" + f.getAttribute("aria-label")]))`))
	if err != nil {
		t.Fatal(err)
	}
	if len(figs) < 8 {
		t.Fatalf("%d plots", len(figs))
	}
	for id, v := range figs {
		if n, _ := strconv.Atoi(strings.SplitN(v, "|", 2)[0]); n < 2 || strings.Contains(v, "|0 lines, 0 dots") {
			t.Errorf("plot %s: %q, want at least 2 points drawn", id, v)
		}
	}
	for id, want := range map[string][]string{
		"plot-refusals": {"unauthenticated", refusal.ReasonServiceNotFound.String()},
		"plot-tenants":  {"demo", "beta", "(unauthenticated)"},
		"plot-memory":   {"iB"},
		"plot-latency":  {"s"},
		"plot-outcomes": {"success", "/s"},
	} {
		for _, w := range want {
			if !strings.Contains(figs[id], w) {
				t.Errorf("plot %s says %q, want %q in it", id, figs[id], w)
			}
		}
	}
	if h := text(`document.getElementById("headline").textContent`); !strings.Contains(h, " of 2 GiB") || !strings.Contains(h, "/s") || !strings.Contains(h, " ms") {
		t.Errorf("headline %q not in human units", h)
	}
	shot := os.Getenv("LATENT_UI_SCREENSHOT")
	if shot == "" {
		shot = filepath.Join(t.TempDir(), "ui.png")
	}
	png, err := chromedp.Run(deadline, chromedp.FullScreenshot(100))
	if err != nil || len(png) == 0 {
		t.Fatalf("screenshot: %v", err)
	}
	if err := os.WriteFile(shot, png, 0o644); err != nil {
		t.Fatal(err)
	}

	// Signing out forgets the key and asks again.
	if _, err := chromedp.Run(deadline, chromedp.Evaluate[bool](`(() => { document.getElementById("signout").click(); return true; })()`)); err != nil {
		t.Fatal(err)
	}
	poll("signed out", `!document.getElementById("signin").hidden && sessionStorage.length === 0`)

	if got, out := page.Messages(), page.Foreign(); len(got) != 0 || len(out) != 0 {
		t.Fatalf("console messages %q, requests to other origins %q", got, out)
	}
	// Negative control: the console listener sees what the page writes.
	if _, err := chromedp.Run(deadline, chromedp.Evaluate[chromedp.Void](`console.error("probe")`)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-page.Seen():
	case <-deadline.Done():
		t.Fatal("the console listener missed console.error")
	}
}

// compareUI returns "" when the tables show the numbers of a, or what
// differs.
func compareUI(tables map[string][][]string, a status.AdminAdmission) string {
	u := func(v uint64) string { return strconv.FormatUint(v, 10) }
	var want [][2]string // {table/row/column, value}
	add := func(table, row string, col int, v string) {
		want = append(want, [2]string{table + "/" + row + "/" + strconv.Itoa(col), v})
	}
	for _, s := range a.Tenants {
		add("tenants", s.Name, 1, u(s.Usage.LiveActivations))
		add("tenants", s.Name, 2, u(s.Usage.Queued))
		add("tenants", s.Name, 3, u(s.Limits.MaxLiveActivations))
		add("tenants", s.Name, 4, u(s.Limits.MaxQueued))
		add("tenants", s.Name, 5, strconv.Itoa(a.Ingress[front.PoolData].Tenants[vocab.TenantID(s.Name)]))
		add("tenants", s.Name, 6, strconv.Itoa(a.Ingress[front.PoolControl].Tenants[vocab.TenantID(s.Name)]))
	}
	add("node", "node", 1, u(a.Node.Usage.LiveActivations))
	add("node", "node", 2, u(a.Node.Usage.Queued))
	add("node", "node", 3, u(a.Node.Limits.MaxLiveActivations))
	add("node", "node", 4, u(a.Node.Limits.MaxQueued))
	for _, q := range a.QueueClasses {
		add("queues", q.Name, 1, u(q.Queued))
		add("queues", q.Name, 2, u(q.MaxQueued))
	}
	for _, c := range a.CellClasses {
		add("cells", c.Name, 1, u(c.Parallelism))
		add("cells", c.Name, 8, u(c.Live))
	}
	for _, p := range []string{front.PoolData, front.PoolControl} {
		add("ingress", p, 1, strconv.Itoa(a.Ingress[p].Slots))
		add("ingress", p, 2, strconv.Itoa(a.Ingress[p].MaxSlots))
		add("ingress", p, 3, status.Bytes(a.Ingress[p].Bytes))
		add("ingress", p, 4, status.Bytes(a.Ingress[p].MaxBytes))
	}
	if len(a.Tenants) == 0 || len(a.CellClasses) == 0 || len(a.QueueClasses) == 0 {
		return "the admission snapshot is empty"
	}
	for _, w := range want {
		parts := strings.SplitN(w[0], "/", 3)
		col, _ := strconv.Atoi(parts[2])
		i := slices.IndexFunc(tables[parts[0]], func(r []string) bool { return len(r) > col && r[0] == parts[1] })
		if i < 0 {
			return fmt.Sprintf("%s: no row (tables %q)", w[0], tables[parts[0]])
		}
		if have := tables[parts[0]][i][col]; have != w[1] {
			return fmt.Sprintf("%s: page %q, admission %q", w[0], have, w[1])
		}
	}
	return ""
}

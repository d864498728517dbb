package node

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/latent-node/latent-node/node/config"
	"github.com/latent-node/latent-node/node/front"
	"github.com/latent-node/latent-node/node/status"
	"github.com/latent-node/latent-node/refusal"
	"github.com/latent-node/latent-node/vocab"
)

// evilTenant is a tenant name that is markup if the page fails to escape it.
const evilTenant = `<img_src=x_onerror=alert(1)>&"'`

func TestUI_access(t *testing.T) {
	sn := startServed(t)
	for _, path := range []string{"/ui", "/ui/data"} {
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

var nonceRE = regexp.MustCompile(`<(script|style) nonce="([^"]+)">`)

func TestUI_page(t *testing.T) {
	tn := startNodeWith(t, func(c *config.Config) {
		c.Tenants[evilTenant] = c.Tenants["demo"]
	})
	resp, body := tn.do(t, "GET", "/ui", tn.key, nil, nil)
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("%d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	page := string(body)
	csp := resp.Header.Get("Content-Security-Policy")
	nonces := nonceRE.FindAllStringSubmatch(page, -1)
	if len(nonces) != 2 {
		t.Fatalf("want a style and a script with a nonce, have %q", nonces)
	}
	for _, m := range nonces {
		if !strings.Contains(csp, "'nonce-"+m[2]+"'") {
			t.Fatalf("%s nonce %q not in CSP %q", m[1], m[2], csp)
		}
	}
	for _, want := range []string{"default-src 'self'", "script-src 'nonce-", "style-src 'nonce-", "frame-ancestors 'none'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("CSP %q lacks %q", csp, want)
		}
	}
	if strings.Contains(csp, "unsafe-inline") || strings.Contains(csp, "unsafe-eval") {
		t.Errorf("CSP %q allows unsafe sources", csp)
	}
	// A second answer has a fresh nonce.
	resp2, body2 := tn.do(t, "GET", "/ui", tn.key, nil, nil)
	if n2 := nonceRE.FindStringSubmatch(string(body2)); n2 == nil || n2[2] == nonces[0][2] ||
		resp2.Header.Get("Content-Security-Policy") == csp {
		t.Fatal("the nonce is reused across answers")
	}

	// The tenant name is text, never markup: escaped in the HTML, and
	// escaped by the JSON encoder in the data.
	if strings.Contains(page, "<img") || !strings.Contains(page, "&lt;img_src=x_onerror=alert(1)&gt;&amp;&#34;&#39;") {
		t.Fatalf("tenant name not escaped:\n%s", page)
	}
	for _, want := range []string{`<table id="cells">`, `<table id="queues">`, `<table id="tenants">`,
		`<table id="pressure">`, `<table id="refusals">`, "<td>demo</td>"} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
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

// browserPath finds a Chromium or Chrome binary, "" when there is none.
func browserPath() string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// TestUI_browser loads the page in headless Chromium with the admin key as
// an extra header, waits until its script refreshed the tables from
// /ui/data, and compares what the page shows with /v1/admin/admission. The
// page must write nothing to the console: a script blocked by the CSP, an
// exception or a failed request would.
func TestUI_browser(t *testing.T) {
	exe := browserPath()
	if exe == "" {
		t.Skip("no chromium, chromium-browser or google-chrome on PATH")
	}
	sn := startServed(t)

	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(exe), chromedp.NoSandbox,
		chromedp.Flag("disable-gpu", true), chromedp.UserDataDir(t.TempDir()))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()

	// The console is read by a goroutine the test waits for.
	var (
		mu       sync.Mutex
		messages []chromedp.ConsoleMessage
		seen     = make(chan struct{}, 64)
		wg       sync.WaitGroup
	)
	console := chromedp.Console(ctx)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for m, err := range console {
			if err != nil {
				return
			}
			mu.Lock()
			messages = append(messages, m)
			mu.Unlock()
			select {
			case seen <- struct{}{}:
			default:
			}
		}
	}()
	defer wg.Wait() // after cancel, which runs first
	defer cancel()

	deadline, stop := context.WithTimeout(ctx, 15*time.Second)
	defer stop()
	if _, err := chromedp.Call(deadline, network.Enable, network.EnableParams{}); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Call(deadline, network.SetExtraHTTPHeaders,
		network.SetExtraHTTPHeadersParams{Headers: network.Headers{"Authorization": "Bearer " + sn.admin}}); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(deadline, chromedp.Navigate(sn.url+"/ui")); err != nil {
		t.Fatal(err)
	}

	// What the page shows after its script refreshed it at least `after`
	// times.
	shown := func(after int) (int, map[string][][]string) {
		t.Helper()
		n, err := chromedp.Run(deadline, chromedp.Poll[int](fmt.Sprintf(
			`Number(document.getElementById("status").dataset.refreshes) > %d && Number(document.getElementById("status").dataset.refreshes)`, after),
			chromedp.WithPollingInterval(20*time.Millisecond)))
		if err != nil {
			mu.Lock()
			defer mu.Unlock()
			t.Fatalf("the page did not refresh: %v (console %v)", err, messages)
		}
		tables, err := chromedp.Run(deadline, chromedp.Evaluate[map[string][][]string](`Object.fromEntries(
			Array.from(document.querySelectorAll("table")).map(t => [t.id,
				Array.from(t.tBodies[0].rows).map(r => Array.from(r.cells).map(c => c.textContent))]))`))
		if err != nil {
			t.Fatal(err)
		}
		return n, tables
	}
	admin := func() status.AdminAdmission {
		var a status.AdminAdmission
		if err := json.Unmarshal(sn.do(t, "GET", "/v1/admin/admission", sn.admin, nil, nil).body, &a); err != nil {
			t.Fatal(err)
		}
		return a
	}

	// The page's own poll holds a control-pool request while it is read, as
	// the test's GET does while it is answered; they agree unless both run
	// at once, so a mismatch is read again after the next refresh.
	var diff string
	refreshes := 0
	for attempt := 0; attempt < 3; attempt++ {
		var tables map[string][][]string
		refreshes, tables = shown(refreshes)
		a := admin()
		if diff = compareUI(tables, a); diff == "" {
			t.Logf("after %d refreshes the page shows cells %q, tenants %q, ingress %q, pressure %q",
				refreshes, tables["cells"], tables["tenants"], tables["ingress"], tables["pressure"])
			// Negative control: the comparison sees a changed number.
			a.Tenants[0].Usage.Queued++
			if compareUI(tables, a) == "" {
				t.Fatal("compareUI missed a changed queued count")
			}
			break
		}
	}
	if diff != "" {
		t.Fatalf("the page disagrees with /v1/admin/admission: %s", diff)
	}

	mu.Lock()
	got := slices.Clone(messages)
	mu.Unlock()
	if len(got) != 0 {
		t.Fatalf("console messages: %v", got)
	}
	// Negative control: the console reader sees what the page writes.
	if _, err := chromedp.Run(deadline, chromedp.Evaluate[chromedp.Void](`console.error("probe")`)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-seen:
	case <-deadline.Done():
		t.Fatal("the console reader missed console.error")
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
		add("ingress", p, 3, u(a.Ingress[p].Bytes))
		add("ingress", p, 4, u(a.Ingress[p].MaxBytes))
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

package e2e

import (
	"bufio"
	"context"
	"encoding/hex"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/latent-node/latent-node/internal/testwasm"
)

// Observability under hostile input: a tenant's metric series are bounded
// by its budget, unauthenticated junk cannot flood the log or hide other
// clients' lines, and one tenant's request cannot make other tenants'
// spans disappear.

// TestSecurityObs_metricSeriesBudget: with node.max_metric_series_per_tenant
// = 8, acme invokes 10 (route, revision) pairs of one service over the
// hello module. Its own series stop at 8 (4 pairs: a fuel and a success
// series each); the other 6 activations count in its _other series and in
// latent_metrics_series_overflow_total. beta, under its budget, gets its own
// series (the negative control), and deleting acme's service gives its
// budget back.
//
// On 611fe67 (which has no budget; the test run there without the key):
// acme had 20 series, two for every pair it invoked, and no overflow
// series or counter: the series count grew with every pair.
func TestSecurityObs_metricSeriesBudget(t *testing.T) {
	t.Parallel()
	k, h := principalKeys(t)
	p := defaults(t)
	p.Hashes = h
	toml := configTOML(p)
	withBudget := strings.Replace(toml, "[node]\n", "[node]\nmax_metric_series_per_tenant = 8\n", 1)
	if withBudget == toml {
		t.Fatal("no [node] table in the harness configuration")
	}
	cfgPath := filepath.Join(t.TempDir(), "node.toml")
	if err := os.WriteFile(cfgPath, []byte(withBudget), 0o600); err != nil {
		t.Fatal(err)
	}
	n := &node{proc: serve(t, cfgPath, calm), keys: k}
	const pairs = 10
	n.deployRoutes(t, "alice", "acme", "many", pairs)
	n.deployRoutes(t, "bob", "beta", "few", 2)
	for i := range pairs {
		if r := n.invoke(t, "alice", "acme/many/r"+strconv.Itoa(i), "ada", nil); r.status != 200 {
			t.Fatalf("invoke r%d: %d %s", i, r.status, r.body)
		}
	}
	for i := range 2 {
		if r := n.invoke(t, "bob", "beta/few/r"+strconv.Itoa(i), "ada", nil); r.status != 200 {
			t.Fatalf("beta invoke r%d: %d %s", i, r.status, r.body)
		}
	}
	series := func(samples []sample, tenant string) (own, other int) {
		for _, s := range samples {
			if (s.name == "latent_activations_total" || s.name == "latent_fuel_consumed_total") && s.labels["tenant"] == tenant {
				if s.labels["revision"] == "_other" {
					other++
				} else {
					own++
				}
			}
		}
		return own, other
	}
	m := n.scrape(t)
	own, other := series(m, "acme")
	if own > 8 || other > 2 {
		t.Errorf("acme has %d own and %d overflow series, want at most 8 and 2", own, other)
	}
	if got := sum(m, "latent_metrics_series_overflow_total", map[string]string{"tenant": "acme"}); got != float64(pairs-own/2) {
		t.Errorf("overflow counter %v, want %d", got, pairs-own/2)
	}
	if got := sum(m, "latent_activations_total", map[string]string{"tenant": "acme"}); got != pairs {
		t.Errorf("acme's activations sum to %v, want %d (none lost)", got, pairs)
	}
	if own, other := series(m, "beta"); own != 4 || other != 0 {
		t.Errorf("beta has %d own and %d overflow series, want 4 and 0", own, other)
	}

	// Deleting the service drops its series and gives the budget back.
	if r := n.do(t, "DELETE", "/v1/deployments/acme/many", "alice", nil, nil); r.status != 200 {
		t.Fatalf("delete: %d %s", r.status, r.body)
	}
	n.deployRoutes(t, "alice", "acme", "next", 1)
	if r := n.invoke(t, "alice", "acme/next/r0", "ada", nil); r.status != 200 {
		t.Fatalf("invoke next: %d %s", r.status, r.body)
	}
	m = n.scrape(t)
	if got := sum(m, "latent_activations_total", map[string]string{"tenant": "acme", "service": "next"}); got != 1 {
		t.Errorf("acme/next has %v activations in its own series after the delete, want 1", got)
	}
	if got := sum(m, "latent_activations_total", map[string]string{"tenant": "acme", "service": "many"}); got != 0 {
		t.Errorf("the deleted service still has series (%v activations)", got)
	}
}

// deployRoutes deploys tenant/service over the hello module with routes
// r0…r(routes-1), all to revision v1.
func (n *node) deployRoutes(t *testing.T, who, tenant, service string, routes int) {
	t.Helper()
	ctx := context.Background()
	c := n.client(t, who)
	digest, err := c.UploadArtifact(ctx, testwasm.Bytes(t, "hello"))
	if err != nil {
		t.Fatal(err)
	}
	var rs []any
	for i := range routes {
		rs = append(rs, map[string]any{"name": "r" + strconv.Itoa(i), "targets": []any{map[string]any{"revision": "v1", "weight": 1}}})
	}
	manifest := map[string]any{"tenant": tenant, "service": service, "routes": rs, "revisions": []any{map[string]any{
		"name": "v1", "artifact": digest, "trust_class": "untrusted",
		"ceiling": map[string]any{"cpu_fuel": 1_000_000_000, "memory_bytes": "8MiB", "wall_time": "5s"}}}}
	if _, err := c.Deploy(ctx, tenant, service, manifest); err != nil {
		t.Fatalf("deploy %s/%s: %v", tenant, service, err)
	}
}

// TestSecurityObs_logFlood: one unauthenticated client sends 1000 requests
// over one keep-alive connection, each with a ~28 KB path of %FF segments
// and a ~28 KB Latent-Activation-Id of 0xFF bytes. The node's stderr grows
// by less than 1 MB and no line is longer than 2 KB; meanwhile other
// clients' 401s (from other loopback addresses) are still logged, and after
// it an authenticated invocation logs its full line (the negative control).
//
// On 611fe67: the flood (about 1 s) wrote 59 MB of log, lines of up to
// 230 KB (the raw names and id, each 0xFF byte as a 6-byte \ufffd), and
// of the other clients' 401s during the flood 35-38 % were logged: the one
// shared bucket was empty. (This run: 33 KB, lines of at most 333 bytes,
// every other client's 401 logged.)
func TestSecurityObs_logFlood(t *testing.T) {
	t.Parallel()
	n, _ := startNode(t, nil, calm)
	n.deploy(t, "alice", "acme", "echo", rev{guest: "echo"})
	before := stderrBytes(n.proc)

	junk := strings.Repeat("%FF", 9500)
	id := strings.Repeat("\xff", 28<<10)
	host := strings.TrimPrefix(n.url, "http://")
	stop := make(chan struct{})
	var wg sync.WaitGroup
	victims := []string{"127.0.0.2", "127.0.0.3", "127.0.0.4"}
	sent := make([][]string, len(victims))
	for i, addr := range victims {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tr := &http.Transport{DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(addr)}}).DialContext}
			defer tr.CloseIdleConnections()
			c := &http.Client{Transport: tr, Timeout: 10 * time.Second}
			for j := 0; ; j++ {
				select {
				case <-stop:
					return
				case <-time.After(20 * time.Millisecond): // a steady trickle while the flood runs
				}
				vid := "victim-" + strconv.Itoa(i) + "-" + strconv.Itoa(j)
				req, _ := http.NewRequest("POST", n.url+"/v1/invoke/acme/echo/run", nil)
				req.Header.Set("Latent-Activation-Id", vid)
				resp, err := c.Do(req)
				if err != nil {
					t.Errorf("victim %s: %v", addr, err)
					return
				}
				_ = resp.Body.Close()
				if resp.StatusCode == 401 {
					sent[i] = append(sent[i], vid)
				}
			}
		}()
	}

	conn, err := net.Dial("tcp", host)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	br := bufio.NewReader(conn)
	req := "POST /v1/invoke/" + junk + "/s/" + junk[:300] + " HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nLatent-Activation-Id: " + id + "\r\n\r\n"
	began := time.Now()
	for i := range 1000 {
		if _, err := conn.Write([]byte(req)); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("answer %d: %v", i, err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != 401 {
			t.Fatalf("answer %d: %d", i, resp.StatusCode)
		}
	}
	flood := time.Since(began)
	close(stop)
	wg.Wait()

	// Negative control: an authenticated invocation logs its full line.
	r := n.invoke(t, "alice", "acme/echo/run", "ada", nil)
	if r.status != 200 {
		t.Fatalf("invoke: %d %s", r.status, r.body)
	}
	aid := r.header.Get("Latent-Activation-Id")
	n.stderr.wait(t, 10*time.Second, func(s string) bool {
		return strings.Contains(s, `"id":"`+aid+`"`) && strings.Contains(s, `"tenant":"acme","service":"echo","route":"run"`) &&
			strings.Contains(s, `"outcome":"success"`)
	})

	grew, longest := stderrBytes(n.proc)-before, longestLine(n.proc)
	t.Logf("flood of 1000 requests took %v; stderr grew by %d bytes, longest line %d bytes", flood, grew, longest)
	if grew > 1<<20 {
		t.Errorf("stderr grew by %d bytes, want < 1 MiB", grew)
	}
	if longest > 2<<10 {
		t.Errorf("a line of %d bytes, want ≤ 2 KiB", longest)
	}
	logged := n.stderr.String()
	best := 0.0
	for i, ids := range sent {
		if len(ids) == 0 {
			continue
		}
		got := 0
		for _, vid := range ids {
			if strings.Contains(logged, `"id":"`+vid+`"`) {
				got++
			}
		}
		share := float64(got) / float64(len(ids))
		t.Logf("client %s: %d of %d 401s logged", victims[i], got, len(ids))
		best = max(best, share)
	}
	// Each victim address hashes to a shard of its own unless it collides
	// with the flood's or another victim's (about 1 in 340): at least one of three is
	// logged in full.
	if best < 0.9 {
		t.Errorf("at most %.0f%% of another client's 401s were logged during the flood, want ≥ 90%%", best*100)
	}
}

// stderrBytes is the bytes the process wrote to stderr so far (lines and
// their newlines).
func stderrBytes(p *proc) int {
	p.stderr.mu.Lock()
	defer p.stderr.mu.Unlock()
	total := 0
	for _, l := range p.stderr.all {
		total += len(l) + 1
	}
	return total
}

func longestLine(p *proc) int {
	p.stderr.mu.Lock()
	defer p.stderr.mu.Unlock()
	longest := 0
	for _, l := range p.stderr.all {
		longest = max(longest, len(l))
	}
	return longest
}

// TestSecurityObs_tracePoisoning: beta invokes with traceparent T1 while,
// in the same export batch, an acme principal sends POST
// /v1/invoke/acme/%FF/x with a sampled traceparent T2, and a request naming
// beta's service with T3. T1's span arrives with its attributes (the
// negative control: a normal invocation still exports its spans); T2 and
// T3 have no spans, and no span is attributed to beta but T1's.
//
// On 611fe67: T1's span never arrived; the %FF request's span put invalid
// UTF-8 in the span name, protobuf's UTF-8 check refused to marshal the
// whole batch, and the node logged the export error ("traces export: failed
// to marshal request body in protobuf: string field contains invalid
// UTF-8"). The request naming beta started a span with latent.tenant=beta.
func TestSecurityObs_tracePoisoning(t *testing.T) {
	t.Parallel()
	n, col := startTracedNode(t, "1s")
	n.deploy(t, "bob", "beta", "echo", rev{guest: "echo"})

	const t1, t2, t3 = "11111111111111111111111111111111", "22222222222222222222222222222222", "33333333333333333333333333333333"
	tp := func(id string) map[string]string {
		return map[string]string{"traceparent": "00-" + id + "-00f067aa0ba902b7-01"}
	}
	if r := n.invoke(t, "bob", "beta/echo/run", "ada", tp(t1)); r.status != 200 {
		t.Fatalf("beta invoke: %d %s", r.status, r.body)
	}
	if r := n.do(t, "POST", "/v1/invoke/acme/%FF/x", "alice", strings.NewReader("x"), tp(t2)); r.status != 400 {
		t.Fatalf("poison: %d %s", r.status, r.body)
	}
	if r := n.invoke(t, "alice", "beta/echo/run", "x", tp(t3)); r.status != 403 {
		t.Fatalf("another tenant's target: %d %s", r.status, r.body)
	}

	act := col.trace(t, t1, 10*time.Second, "activation")["activation"]
	for key, want := range map[string]string{"latent.tenant": "beta", "latent.service": "echo", "latent.route": "run",
		"http.response.status_code": "200", "latent.outcome": "success"} {
		if got := spanAttr(act, key); got != want {
			t.Errorf("T1's span %s = %q, want %q", key, got, want)
		}
	}
	// The batch that carried T1 was exported: anything of T2 and T3 was in it.
	col.mu.Lock()
	defer col.mu.Unlock()
	for _, s := range col.spans {
		switch tid := hex.EncodeToString(s.TraceId); {
		case tid == t2 || tid == t3:
			t.Errorf("span %q of trace %s exported", s.Name, tid)
		case spanAttr(s, "latent.tenant") == "beta" && tid != t1:
			t.Errorf("span %q of trace %s attributed to beta", s.Name, tid)
		}
	}
}

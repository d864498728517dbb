package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/latent-node/latent-node/internal/testwasm"
	"github.com/latent-node/latent-node/refusal"
)

// TestTenantIsolation: another tenant's key cannot invoke, deploy to, read
// the deployments of, or see the admission usage of tenant acme.
func TestTenantIsolation(t *testing.T) {
	t.Parallel()
	n, _ := startNode(t, nil, calm)
	n.deploy(t, "alice", "acme", "echo", rev{guest: "echo"})
	n.deploy(t, "bob", "beta", "echo", rev{guest: "echo"})

	checkRefusal(t, n.invoke(t, "bob", "acme/echo/run", "x", nil), 403, refusal.ReasonPrincipalNotAuthorized.String())
	manifest := `{"tenant":"acme","service":"echo","revisions":[],"routes":[]}`
	checkRefusal(t, n.do(t, "PUT", "/v1/deployments/acme/echo", "bob", strings.NewReader(manifest), nil), 403, refusal.ReasonPrincipalNotAuthorized.String())
	checkRefusal(t, n.do(t, "GET", "/v1/deployments/acme/echo", "bob", nil, nil), 403, refusal.ReasonPrincipalNotAuthorized.String())
	checkRefusal(t, n.do(t, "DELETE", "/v1/deployments/acme/echo", "bob", nil, nil), 403, refusal.ReasonPrincipalNotAuthorized.String())
	// A manifest naming another tenant under one's own path is refused too.
	r := n.do(t, "PUT", "/v1/deployments/beta/echo", "bob", strings.NewReader(manifest), nil)
	if r.status != 422 {
		t.Fatalf("manifest for another tenant under own path: %d %s", r.status, r.body)
	}

	// The caller's own snapshot shows its tenant only.
	r = n.do(t, "GET", "/v1/admission", "bob", nil, nil)
	var own struct {
		Name string `json:"name"`
	}
	if r.status != 200 || json.Unmarshal(r.body, &own) != nil || own.Name == "acme" || strings.Contains(string(r.body), "acme") {
		t.Fatalf("bob's admission: %d %s", r.status, r.body)
	}
	checkRefusal(t, n.do(t, "GET", "/v1/admin/admission", "bob", nil, nil), 403, refusal.ReasonRoleNotAuthorized.String())
	checkRefusal(t, n.do(t, "GET", "/v1/admin/admission", "alice", nil, nil), 403, refusal.ReasonRoleNotAuthorized.String())
	checkRefusal(t, n.do(t, "GET", "/v1/admin/admission", "", nil, nil), 401, "unauthenticated")
	r = n.do(t, "GET", "/v1/admin/admission", "root", nil, nil)
	if r.status != 200 || !strings.Contains(string(r.body), `"tenants"`) {
		t.Fatalf("admin admission: %d %s", r.status, r.body)
	}

	// acme is untouched and still works.
	r = n.do(t, "GET", "/v1/deployments/acme/echo", "alice", nil, nil)
	if r.status != 200 || !strings.Contains(string(r.body), `"release"`) {
		t.Fatalf("acme deployment after bob's attempts: %d %s", r.status, r.body)
	}
	if r := n.invoke(t, "alice", "acme/echo/run", "mine", nil); r.status != 200 || string(r.body) != "mine" {
		t.Fatalf("acme invoke: %d %s", r.status, r.body)
	}
	if r := n.invoke(t, "bob", "beta/echo/run", "his", nil); r.status != 200 || string(r.body) != "his" {
		t.Fatalf("beta invoke: %d %s", r.status, r.body)
	}
}

// TestQueueRefusals: one tiny cell, a batch queue of two and a 1 s max_wait
// make fair-share-of-waiting-slots and queue-wait-exceeded deterministic.
func TestQueueRefusals(t *testing.T) {
	t.Parallel()
	n, _ := startNode(t, func(p *params) { p.TinyParallel, p.BatchMaxQueued, p.MaxWait = 1, 2, "1s" }, calm)
	n.deploy(t, "alice", "acme", "sleep", rev{guest: "sleep"})
	n.deploy(t, "bob", "beta", "echo", rev{guest: "echo"})
	slow := func(ms int) map[string]string { return map[string]string{"Latent-Timeout-Ms": strconv.Itoa(ms)} }

	running := n.async("alice", "acme/sleep/run", "", slow(3000))
	n.waitUsage(t, "alice", func(live, queued uint64) bool { return live == 1 && queued == 0 })
	q1 := n.async("alice", "acme/sleep/run", "", slow(5000))
	n.waitUsage(t, "alice", func(_, queued uint64) bool { return queued == 1 })
	q2 := n.async("alice", "acme/sleep/run", "", slow(5000))
	n.waitUsage(t, "alice", func(_, queued uint64) bool { return queued == 2 })

	// bob holds no slot of the full batch queue: alice's newest waiter gives
	// its slot up.
	b := n.async("bob", "beta/echo/run", "x", slow(5000))
	checkRefusal(t, await(t, q2, 5*time.Second), 429, refusal.ReasonFairShareOfWaitingSlots.String())
	// The others wait their max_wait behind the sleeping guest.
	checkRefusal(t, await(t, q1, 5*time.Second), 429, refusal.ReasonQueueWaitExceeded.String())
	checkRefusal(t, await(t, b, 5*time.Second), 429, refusal.ReasonQueueWaitExceeded.String())
	if r := await(t, running, 10*time.Second); r.status != 504 {
		t.Fatalf("running: %d %s", r.status, r.body)
	}
	n.waitUsage(t, "alice", func(live, queued uint64) bool { return live == 0 && queued == 0 })
	if r := n.invoke(t, "bob", "beta/echo/run", "y", nil); r.status != 200 {
		t.Fatalf("after queue refusals: %d %s", r.status, r.body)
	}
}

// TestNodeOverloaded: a load source reporting full CPU pressure (the
// LATENT_NODE_LOAD_SOURCE testing aid) makes every invocation 503
// node-overloaded with Retry-After, while /healthz still answers.
func TestNodeOverloaded(t *testing.T) {
	t.Parallel()
	n, _ := startNode(t, nil, []string{"LATENT_NODE_LOAD_SOURCE=fixed:1,0.1"})
	n.deploy(t, "alice", "acme", "echo", rev{guest: "echo"})
	r := n.invoke(t, "alice", "acme/echo/run", "x", nil)
	checkRefusal(t, r, 503, refusal.ReasonNodeOverloaded.String())
	if r.problem.Dimension != "cpu" || strings.Contains(string(r.body), "1.0") {
		t.Fatalf("overloaded problem: %s", r.body)
	}
	if r := n.do(t, "GET", "/healthz", "", nil, nil); r.status != 200 {
		t.Fatalf("healthz: %d", r.status)
	}
}

// TestCheck: `latent-node check` names every bad key and exits 2; a good
// configuration exits 0.
func TestCheck(t *testing.T) {
	t.Parallel()
	_, h := principalKeys(t)
	p := defaults(t)
	p.Hashes = h
	good := configTOML(p)
	dir := t.TempDir()
	goodPath, badPath := filepath.Join(dir, "good.toml"), filepath.Join(dir, "bad.toml")
	bad := strings.Replace(good, "region = \"local\"", "region = \"local\"\nlisten_adress = \"x\"", 1)
	bad = strings.Replace(bad, "cpu_threshold = 1.0", "cpu_threshold = 2.5", 1)
	bad = strings.Replace(bad, "max_output_bytes = \"64KiB\"", "max_output_bytes = \"lots\"", 1)
	bad = strings.Replace(bad, "max_wait = \"10s\"", "max_wait = \"forever\"", 1)
	for path, data := range map[string]string{goodPath: good, badPath: bad} {
		if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	out, err := exec.Command(binary(t), "check", "--config", goodPath).CombinedOutput()
	if err != nil {
		t.Fatalf("check good: %v\n%s", err, out)
	}
	cmd := exec.Command(binary(t), "check", "--config", badPath)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	err = cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 {
		t.Fatalf("check bad: want exit 2, have %v\n%s", err, stderr.String())
	}
	for _, key := range []string{"node.listen_adress", "overload.cpu_threshold", "node.max_output_bytes", "scheduler.max_wait"} {
		if !strings.Contains(stderr.String(), key) {
			t.Errorf("check output does not name %s:\n%s", key, stderr.String())
		}
	}
	// serve runs the same validation and refuses to start.
	cmd = exec.Command(binary(t), "serve", "--config", badPath)
	if err := cmd.Run(); !errors.As(err, &ee) || ee.ExitCode() != 2 {
		t.Fatalf("serve bad config: want exit 2, have %v", err)
	}
}

// slowN makes the compute guest run for some milliseconds.
const slowN = "10000000"

// TestOverload: 200 concurrent callers against a slow guest on two tiny
// cells and a queue of eight get fast 200/429/503 answers, never a 500, and
// /healthz keeps answering throughout.
func TestOverload(t *testing.T) {
	n, _ := startNode(t, func(p *params) { p.BatchMaxQueued = 8 }, calm)
	n.deploy(t, "alice", "acme", "compute", rev{guest: "compute"})
	probe := n.invoke(t, "alice", "acme/compute/run", slowN, nil)
	if probe.status != 200 {
		t.Fatalf("probe: %d %s", probe.status, probe.body)
	}
	t.Logf("one slow activation: %s ms", probe.header.Get("Latent-Execution-Ms"))

	stop := make(chan struct{})
	var health []time.Duration
	var healthErr error
	healthDone := make(chan struct{})
	go func() {
		defer close(healthDone)
		// Its own connection, kept alive, as a liveness prober would have.
		hc := &http.Client{Timeout: time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
		defer hc.CloseIdleConnections()
		for {
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
			start := time.Now()
			resp, err := hc.Get(n.url + "/healthz")
			if err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
				if resp.StatusCode != 200 {
					err = errors.Newf("healthz status %d", resp.StatusCode)
				}
			}
			if err != nil {
				healthErr = err
				return
			}
			health = append(health, time.Since(start))
		}
	}()

	const callers, each = 200, 3
	var mu sync.Mutex
	statuses := map[int]int{}
	reasons := map[string]int{}
	var wg sync.WaitGroup
	begin := time.Now()
	for i := 0; i < callers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < each; j++ {
				r, err := n.try("POST", "/v1/invoke/acme/compute/run", "alice", strings.NewReader(slowN),
					map[string]string{"Latent-Timeout-Ms": "20000"})
				mu.Lock()
				if err != nil {
					statuses[-1]++
				} else {
					statuses[r.status]++
					reasons[r.problem.Reason]++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(begin)
	close(stop)
	<-healthDone
	t.Logf("%d requests in %v: statuses %v, reasons %v", callers*each, elapsed, statuses, reasons)
	for s := range statuses {
		if s != 200 && s != 429 && s != 503 {
			t.Errorf("status %d under overload (%d times)", s, statuses[s])
		}
	}
	if statuses[429]+statuses[503] == 0 {
		t.Errorf("no refusal under overload: %v", statuses)
	}
	if healthErr != nil {
		t.Fatalf("/healthz under overload: %v", healthErr)
	}
	if len(health) == 0 {
		t.Fatal("no /healthz probe completed")
	}
	slices.Sort(health)
	p99 := health[len(health)*99/100]
	t.Logf("/healthz: %d probes, p50 %v, p99 %v, max %v", len(health), health[len(health)/2], p99, health[len(health)-1])
	n.waitUsage(t, "alice", func(live, queued uint64) bool { return live == 0 && queued == 0 })
}

// TestSIGTERM: with one activation running and two queued, SIGTERM answers
// the queued ones 503 shutting-down at once, lets the running one finish,
// and the process exits 0.
func TestSIGTERM(t *testing.T) {
	t.Parallel()
	n, _ := startNode(t, func(p *params) { p.TinyParallel = 1 }, calm)
	n.deploy(t, "alice", "acme", "sleep", rev{guest: "sleep"})
	n.deploy(t, "alice", "acme", "compute", rev{guest: "compute"})
	running := n.async("alice", "acme/sleep/run", "", map[string]string{"Latent-Timeout-Ms": "1500"})
	n.waitUsage(t, "alice", func(live, queued uint64) bool { return live == 1 && queued == 0 })
	q1 := n.async("alice", "acme/compute/run", "1000", nil)
	q2 := n.async("alice", "acme/compute/run", "1000", nil)
	n.waitUsage(t, "alice", func(_, queued uint64) bool { return queued == 2 })

	sent := time.Now()
	n.signal(t, sigterm)
	for _, q := range []<-chan result{q1, q2} {
		r := await(t, q, 5*time.Second)
		checkRefusal(t, r, 503, refusal.ReasonShuttingDown.String())
	}
	r := await(t, running, 10*time.Second)
	if r.status != 504 || r.problem.Outcome != "deadline-exceeded" {
		t.Fatalf("running activation: %d %s", r.status, r.body)
	}
	if code := n.exit(t, 15*time.Second); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	t.Logf("exited %v after SIGTERM", time.Since(sent))
	n.stderr.wait(t, time.Second, func(s string) bool { return strings.Contains(s, `"msg":"shut down"`) })
}

// TestSIGTERM_graceExpires: a running activation longer than shutdown_grace
// is cancelled after the grace and its caller still gets a definite answer.
func TestSIGTERM_graceExpires(t *testing.T) {
	t.Parallel()
	n, _ := startNode(t, func(p *params) { p.Grace = "300ms" }, calm)
	n.deploy(t, "alice", "acme", "sleep", rev{guest: "sleep"})
	running := n.async("alice", "acme/sleep/run", "", map[string]string{"Latent-Timeout-Ms": "8000"})
	n.waitUsage(t, "alice", func(live, queued uint64) bool { return live == 1 && queued == 0 })
	sent := time.Now()
	n.signal(t, sigterm)
	r := await(t, running, 6*time.Second)
	checkRefusal(t, r, 503, refusal.ReasonShuttingDown.String())
	if r.problem.Outcome != "cancelled" || r.header.Get("Latent-Outcome") != "cancelled" {
		t.Fatalf("cancelled activation: %d %s", r.status, r.body)
	}
	if code := n.exit(t, 10*time.Second); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	if el := time.Since(sent); el > 6*time.Second {
		t.Fatalf("shutdown took %v with a 300ms grace", el)
	}
}

// retryOverloaded invokes, retrying a bounded number of times while a node
// with the host's real load source refuses with 503 node-overloaded.
func retryOverloaded(t *testing.T, n *node, who, target, input string) reply {
	t.Helper()
	var r reply
	for i := 0; i < 50; i++ {
		r = n.invoke(t, who, target, input, nil)
		if r.status != 503 || r.problem.Reason != refusal.ReasonNodeOverloaded.String() {
			return r
		}
		<-time.After(100 * time.Millisecond) // the next load sample
	}
	return r
}

// TestRestart: a release deployed with `latent-node deploy` survives a
// restart on the same data directory with the same release and revision ids.
// This node uses the host's real load source.
func TestRestart(t *testing.T) {
	t.Parallel()
	k, h := principalKeys(t)
	p := defaults(t)
	p.Hashes = h
	cfg := writeConfig(t, p)
	dir := t.TempDir()
	for _, g := range []string{"echo", "hello"} {
		data, err := os.ReadFile(testwasm.Path(g))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, g+".wasm"), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	release := filepath.Join(dir, "release.toml")
	if err := os.WriteFile(release, []byte(`tenant = "acme"
service = "greeter"

[[revisions]]
name = "v1"
module = "hello.wasm"
trust_class = "untrusted"
[revisions.ceiling]
cpu_fuel = 100_000_000
memory_bytes = "8MiB"
wall_time = "2s"

[[revisions]]
name = "v2"
module = "echo.wasm"
trust_class = "untrusted"
[revisions.ceiling]
cpu_fuel = 100_000_000
memory_bytes = "8MiB"
wall_time = "2s"

[[routes]]
name = "greet"
targets = [{ revision = "v1", weight = 1 }]

[[routes]]
name = "echo"
targets = [{ revision = "v2", weight = 1 }]
`), 0o600); err != nil {
		t.Fatal(err)
	}

	n1 := &node{proc: serve(t, cfg, nil), keys: k}
	out := deployCLI(t, n1.url, k["alice"], release)
	m := regexp.MustCompile(`(?m)^release (\S+) generation (\d+)\n  v1 (\S+)\n  v2 (\S+)$`).FindStringSubmatch(strings.TrimSpace(string(out)))
	if m == nil {
		t.Fatalf("deploy printed %q", out)
	}
	if r := retryOverloaded(t, n1, "alice", "acme/greeter/greet", "ada"); r.status != 200 || string(r.body) != "hello, ada\n" {
		t.Fatalf("before restart: %d %s", r.status, r.body)
	}
	before := n1.do(t, "GET", "/v1/deployments/acme/greeter", "alice", nil, nil)
	n1.signal(t, sigterm)
	if code := n1.exit(t, 15*time.Second); code != 0 {
		t.Fatalf("first run exit code %d", code)
	}

	n2 := &node{proc: serve(t, cfg, nil), keys: k}
	after := n2.do(t, "GET", "/v1/deployments/acme/greeter", "alice", nil, nil)
	var d struct {
		Release    string `json:"release"`
		Generation uint64 `json:"generation"`
		Revisions  []struct {
			Name string `json:"name"`
			ID   string `json:"id"`
		} `json:"revisions"`
	}
	if after.status != 200 || json.Unmarshal(after.body, &d) != nil {
		t.Fatalf("deployment after restart: %d %s", after.status, after.body)
	}
	if d.Release != m[1] || strconv.FormatUint(d.Generation, 10) != m[2] || len(d.Revisions) != 2 ||
		d.Revisions[0].ID != m[3] || d.Revisions[1].ID != m[4] {
		t.Fatalf("after restart %+v, deployed %q", d, m[1:])
	}
	if string(before.body) != string(after.body) {
		t.Fatalf("deployment changed across restart:\n%s\n%s", before.body, after.body)
	}
	r := retryOverloaded(t, n2, "alice", "acme/greeter/greet", "bob")
	if r.status != 200 || string(r.body) != "hello, bob\n" || r.header.Get("Latent-Revision") != m[3] {
		t.Fatalf("after restart: %d %s %v", r.status, r.body, r.header)
	}
	if r := retryOverloaded(t, n2, "alice", "acme/greeter/echo", "same"); r.status != 200 || r.header.Get("Latent-Revision") != m[4] {
		t.Fatalf("echo after restart: %d %s", r.status, r.body)
	}
}

// TestDemo: `serve --demo --listen` prints the demo key and a curl line; the
// equivalent request answers "hello, ada". It uses the host's load source.
func TestDemo(t *testing.T) {
	t.Parallel()
	addr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	p := start(t, nil, "serve", "--demo", "--listen", addr)
	keyLine := p.stdout.wait(t, 30*time.Second, func(s string) bool { return strings.HasPrefix(s, "demo api key: ") })
	key := strings.TrimPrefix(keyLine, "demo api key: ")
	curl := p.stdout.wait(t, 5*time.Second, func(s string) bool { return strings.Contains(s, "curl") })
	m := regexp.MustCompile(`curl .*-H 'Authorization: Bearer (\S+)' --data '([^']*)' (http://\S+)`).FindStringSubmatch(curl)
	if m == nil || m[1] != key || !strings.HasPrefix(m[3], "http://"+addr+"/v1/invoke/demo/hello/greet") {
		t.Fatalf("curl line %q (key %q)", curl, key)
	}
	waitReady(t, "http://"+addr)
	n := &node{proc: p, keys: map[string]string{"demo": key}}
	n.url = "http://" + addr
	r := retryOverloaded(t, n, "demo", "demo/hello/greet", m[2])
	if r.status != 200 || string(r.body) != "hello, "+m[2]+"\n" {
		t.Fatalf("demo invoke: %d %q", r.status, r.body)
	}
	p.signal(t, sigterm)
	if code := p.exit(t, 15*time.Second); code != 0 {
		t.Fatalf("demo exit code %d", code)
	}
}

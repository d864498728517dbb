package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The instance modes end to end: the examples' snapshot routes answer what
// their fresh routes answer (TestExamples calls checkSnapshotExample and
// checkSnapshotWAGI), and TestInstances checks with the state reactor what
// one activation can see of another in each mode.

// snapshotRoute is the route of an example's snapshot revision next to
// route ("run" → "run-snap", "web" → "web-snap"), and the request path
// below the service with it ("web/hello?x" → "web-snap/hello?x").
func snapshotRoute(path string) (route, snapRoute, snapPath string) {
	i := strings.IndexAny(path, "/?")
	if i < 0 {
		i = len(path)
	}
	route = path[:i]
	return route, route + "-snap", route + "-snap" + path[i:]
}

// comparable is an answer as the differential compares it: the activation
// id the answer carries (the Go examples echo it) and the snapshot route's
// name (the Go router links below its SCRIPT_NAME) replaced by placeholders;
// a problem by its outcome, exit status, trap kind and stderr.
func comparable(r reply, route string) string {
	if strings.HasPrefix(r.header.Get("Content-Type"), "application/problem+json") {
		code := "-"
		if r.problem.ExitCode != nil {
			code = strconv.Itoa(*r.problem.ExitCode)
		}
		return fmt.Sprintf("%d problem %s %s %s exit %s trap %q stderr %q", r.status, r.problem.Reason, r.problem.Code,
			r.problem.Outcome, code, r.problem.TrapKind, r.problem.Stderr)
	}
	body := string(r.body)
	if id := r.header.Get("Latent-Activation-Id"); id != "" {
		body = strings.ReplaceAll(body, id, "<activation>")
	}
	body = strings.ReplaceAll(body, "/"+route+"-snap", "/"+route)
	var h []string
	for name, v := range r.header {
		switch {
		case strings.HasPrefix(name, "Latent-"), name == "Date", name == "Server-Timing", name == "Content-Length", name == "Traceparent":
			continue
		}
		h = append(h, name+": "+strings.Join(v, ", "))
	}
	slices.Sort(h)
	return fmt.Sprintf("%d %s\n%s\n%s", r.status, r.header.Get("Latent-Outcome"), strings.Join(h, "\n"), body)
}

// checkSnapshotExample is the differential of one stdio case across modes:
// the example's snapshot route (its reactor build, initialised once at
// deploy) answers the case as its run route does: the same status, outcome,
// headers and body (or problem), and two snapshot activations with the same
// input use the same fuel.
func checkSnapshotExample(t *testing.T, n *node, ex example, c exampleCase) {
	t.Helper()
	service := "demo/" + ex.service + "/"
	fresh := n.invoke(t, "demo", service+"run", c.input, c.headers)
	snap := n.invoke(t, "demo", service+"run-snap", c.input, c.headers)
	if c.snapshot != nil {
		// The case differs by design in the snapshot mode.
		checkExample(t, snap, *c.snapshot)
		return
	}
	checkExample(t, snap, c)
	if f, s := comparable(fresh, "run"), comparable(snap, "run"); f != s {
		t.Fatalf("fresh and snapshot answers differ:\nfresh:    %s\nsnapshot: %s", f, s)
	}
	checkSameFuel(t, n, ex, "POST", "run-snap", c.input, c.headers)
}

// checkSnapshotWAGI is checkSnapshotExample for a WAGI case: the case holds
// on the snapshot route, and the fresh and snapshot answers are the same.
func checkSnapshotWAGI(t *testing.T, n *node, ex example, c wagiCase) {
	t.Helper()
	prefix := "demo/" + ex.service + "/"
	route, _, snapPath := snapshotRoute(c.path)
	fresh := n.do(t, c.method, "/v1/invoke/"+prefix+c.path, "demo", strings.NewReader(c.body), c.headers)
	sc := c
	sc.path = snapPath
	sc.contains = slices.Clone(c.contains)
	for i, s := range sc.contains {
		// The Go router's index links below its own route.
		sc.contains[i] = strings.ReplaceAll(s, "/"+route+"/", "/"+route+"-snap/")
	}
	checkWAGI(t, n, prefix, sc)
	snap := n.do(t, c.method, "/v1/invoke/"+prefix+snapPath, "demo", strings.NewReader(c.body), c.headers)
	if f, s := comparable(fresh, route), comparable(snap, route); f != s {
		t.Fatalf("fresh and snapshot answers differ:\nfresh:    %s\nsnapshot: %s", f, s)
	}
	if snap.header.Get("Latent-Outcome") != "" {
		checkSameFuel(t, n, ex, c.method, snapPath, c.body, c.headers)
	}
}

// checkSameFuel sends a request twice to the example's service (path below
// the service, a snapshot route): two snapshot activations with the same
// input start from the same state and use the same fuel. For an example
// whose fuel depends on the random bytes it draws (ex.randomFuel), the
// requests go to its copy with random = "deterministic"
// (deployDeterministic): with the secure source the Rust examples' two
// activations differ by a few hundred fuel (observed: 62407 and 62393 for
// one wordfreq body), as their fresh activations do.
func checkSameFuel(t *testing.T, n *node, ex example, method, path, body string, headers map[string]string) {
	t.Helper()
	service := ex.service
	if ex.randomFuel != "" {
		service += deterministicSuffix
	}
	var fuel, outcome [2]string
	for i := range fuel {
		r := n.do(t, method, "/v1/invoke/demo/"+service+"/"+path, "demo", strings.NewReader(body), headers)
		fuel[i], outcome[i] = r.header.Get("Latent-Fuel-Used"), r.header.Get("Latent-Outcome")
	}
	if fuel[0] == "" || fuel != [2]string{fuel[0], fuel[0]} || outcome != [2]string{outcome[0], outcome[0]} {
		t.Fatalf("two snapshot activations of %s with the same input: outcomes %q, fuel %q", service, outcome, fuel)
	}
}

// deterministicSuffix names the copy of an example's service that
// deployDeterministic deploys.
const deterministicSuffix = "-det"

// deployDeterministic deploys a copy of the example's release (the manifest
// at release, next to its modules) as service <service>-det whose snapshot
// revisions draw random = "deterministic" bytes.
func deployDeterministic(t *testing.T, n *node, key, release string, ex example) {
	t.Helper()
	b, err := os.ReadFile(release)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "service = "); ok && v == strconv.Quote(ex.service) {
			l = "service = " + strconv.Quote(ex.service+deterministicSuffix)
		}
		lines = append(lines, l)
		if strings.HasPrefix(l, `instance = "snapshot"`) {
			lines = append(lines, `random = "deterministic"`)
		}
	}
	copyPath := filepath.Join(filepath.Dir(release), "manifest-deterministic.toml")
	if err := os.WriteFile(copyPath, []byte(strings.Join(lines, "\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(binary(t), "deploy", "--node", n.url, "--key", key, copyPath).CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "release ") {
		t.Fatalf("deploy %s: %v\n%s", copyPath, err, out)
	}
}

// execMillis is the exec entry of an answer's Server-Timing.
func execMillis(t *testing.T, r reply) float64 {
	t.Helper()
	for _, part := range strings.Split(r.header.Get("Server-Timing"), ",") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(part), "exec;dur="); ok {
			ms, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("Server-Timing %q: %v", r.header.Get("Server-Timing"), err)
			}
			return ms
		}
	}
	t.Fatalf("no exec in Server-Timing %q", r.header.Get("Server-Timing"))
	return 0
}

// logExecTimes logs the median exec time (Server-Timing) of calls requests
// of c to its route and to the snapshot route next to it: figures for the
// log, not assertions (the machine is shared).
func logExecTimes(t *testing.T, n *node, prefix string, c wagiCase, calls int) {
	t.Helper()
	_, _, snapPath := snapshotRoute(c.path)
	median := func(path string) float64 {
		ms := make([]float64, calls)
		for i := range ms {
			r := n.do(t, c.method, "/v1/invoke/"+prefix+path, "demo", strings.NewReader(c.body), c.headers)
			if r.status != c.status {
				t.Fatalf("%s %s: %d %s", c.method, path, r.status, r.body)
			}
			ms[i] = execMillis(t, r)
		}
		slices.Sort(ms)
		return ms[calls/2]
	}
	fresh, snap := median(c.path), median(snapPath)
	t.Logf("%s %s%s: exec median of %d: fresh %.3f ms, snapshot %.3f ms", c.method, prefix, c.path, calls, fresh, snap)
}

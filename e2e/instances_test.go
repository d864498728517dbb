package e2e

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/cockroachdb/errors"

	"github.com/latent-node/latent-node/internal/testwasm"
	"github.com/latent-node/latent-node/refusal"
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
	deployCLI(t, n.url, key, copyPath)
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

// stateRev is one revision of a release of the state reactor.
type stateRev struct{ name, instance, init string }

// putRelease deploys tenant/service: the guest's module as the revisions,
// each on a route of its own name that calls function. It returns the
// answer to the PUT.
func (n *node) putRelease(t *testing.T, who, tenant, service, guest, function string, revs ...stateRev) reply {
	t.Helper()
	digest, err := n.client(t, who).UploadArtifact(context.Background(), testwasm.Bytes(t, guest))
	if err != nil {
		t.Fatal(err)
	}
	var revisions, routes []any
	for _, r := range revs {
		rv := map[string]any{"name": r.name, "artifact": digest, "trust_class": "untrusted", "instance": r.instance,
			"ceiling": map[string]any{"cpu_fuel": 10_000_000, "memory_bytes": "1MiB", "wall_time": "5s"}}
		if r.init != "" {
			rv["init"] = r.init
		}
		revisions = append(revisions, rv)
		routes = append(routes, map[string]any{"name": r.name, "function": function,
			"targets": []any{map[string]any{"revision": r.name, "weight": 1}}})
	}
	body, err := json.Marshal(map[string]any{"tenant": tenant, "service": service, "revisions": revisions, "routes": routes})
	if err != nil {
		t.Fatal(err)
	}
	return n.do(t, "PUT", "/v1/deployments/"+tenant+"/"+service, who, bytes.NewReader(body), nil)
}

// deployState deploys tenant/service with the state reactor (route
// function handle), one revision and route per name, all in mode.
func (n *node) deployState(t *testing.T, who, tenant, service, mode string, names ...string) {
	t.Helper()
	var revs []stateRev
	for _, name := range names {
		revs = append(revs, stateRev{name: name, instance: mode})
	}
	if r := n.putRelease(t, who, tenant, service, "state", "handle", revs...); r.status != 200 {
		t.Fatalf("deploy %s/%s (%s): %d %s", tenant, service, mode, r.status, r.body)
	}
}

// stateTarget is a route of the state reactor and the secrets sent to it:
// prefix (2 bytes) and a 6-digit number.
type stateTarget struct {
	who, target, prefix string
}

// untouched is the state reactor's answer from an instance no activation
// ran in before (after _initialize).
const untouched = "0 1 ........\n"

// callState sends secret to the target and returns the reactor's answer.
func (n *node) callState(t *testing.T, s stateTarget, secret string) string {
	t.Helper()
	r := n.invoke(t, s.who, s.target, secret, nil)
	if r.status != 200 || r.header.Get("Latent-Outcome") != "success" {
		t.Fatalf("%s: %d %s", s.target, r.status, r.body)
	}
	return string(r.body)
}

// interleave calls the targets in turn, rounds times each, sequentially:
// each target's warm instance (reuse mode) must answer with its own
// previous activation's secret and counter, and never another target's.
// Then workers goroutines per target call them all at once: every answer's
// secret is untouched or the target's own.
func interleave(t *testing.T, n *node, rounds, workers int, targets ...stateTarget) {
	t.Helper()
	prev := make([]string, len(targets))
	for r := 0; r < rounds; r++ {
		for i, s := range targets {
			secret := fmt.Sprintf("%s%06d", s.prefix, r)
			want := fmt.Sprintf("%d 1 %s\n", r%10, cmp.Or(prev[i], "........"))
			if have := n.callState(t, s, secret); have != want {
				t.Fatalf("round %d, %s: answer %q, want %q (the previous secret sent to it)", r, s.target, have, want)
			}
			prev[i] = secret
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, len(targets)*workers)
	for _, s := range targets {
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for r := 0; r < rounds; r++ {
					secret := fmt.Sprintf("%s%d%05d", s.prefix, w, r)
					res, err := n.try("POST", "/v1/invoke/"+s.target, s.who, strings.NewReader(secret), nil)
					switch {
					case err != nil:
						errs <- err
						return
					case res.status != 200:
						errs <- errors.Newf("%s: %d %s", s.target, res.status, res.body)
						return
					}
					f := strings.Fields(string(res.body))
					if len(f) != 3 || f[2] != "........" && !strings.HasPrefix(f[2], s.prefix) {
						errs <- errors.Newf("%s (secrets %s…) answered %q: another target's secret", s.target, s.prefix, res.body)
						return
					}
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestInstances checks with the state reactor (testdata/wasm/state.wat:
// handle answers "<counter> <inited> <secret>\n", then counts and keeps the
// first 8 bytes of its input as the secret) what an activation sees of the
// ones before it in each instance mode, on one node: fresh and snapshot
// activations see nothing; reuse activations see their revision's previous
// activation (the documented weaker isolation) and never another
// revision's, service's or tenant's. Then a snapshot whose initialisation
// fails refuses its deploy, and the metrics count the warm instances' work.
func TestInstances(t *testing.T) {
	t.Parallel()
	n, _ := startNode(t, func(p *params) { p.BetaLive = 4 }, calm)

	t.Run("fresh and snapshot activations start untouched", func(t *testing.T) {
		for _, mode := range []string{"fresh", "snapshot"} {
			n.deployState(t, "alice", "acme", "state-"+mode, mode, "v1")
			s := stateTarget{who: "alice", target: "acme/state-" + mode + "/v1"}
			for i := 0; i < 20; i++ {
				if have := n.callState(t, s, fmt.Sprintf("%s%06d", mode[:2], i)); have != untouched {
					t.Fatalf("%s, call %d: answer %q, want %q", mode, i, have, untouched)
				}
			}
			// Concurrently (two activations at once on the tiny cells).
			var wg sync.WaitGroup
			answers := make(chan string, 4*10)
			for w := 0; w < 4; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; i < 10; i++ {
						r, err := n.try("POST", "/v1/invoke/"+s.target, s.who, strings.NewReader(fmt.Sprintf("c%d%06d", w, i)), nil)
						if err != nil {
							answers <- err.Error()
							return
						}
						answers <- string(r.body)
					}
				}()
			}
			wg.Wait()
			close(answers)
			for a := range answers {
				if a != untouched {
					t.Fatalf("%s, concurrent: answer %q, want %q", mode, a, untouched)
				}
			}
		}
	})

	// The negative control: a reuse instance shows its previous activation,
	// counter and secret.
	t.Run("reuse activations see the one before", func(t *testing.T) {
		n.deployState(t, "alice", "acme", "state-reuse", "reuse", "v1")
		interleave(t, n, 12, 0, stateTarget{"alice", "acme/state-reuse/v1", "r:"})
	})

	t.Run("reuse instances are per revision", func(t *testing.T) {
		n.deployState(t, "alice", "acme", "two-revisions", "reuse", "a", "b")
		interleave(t, n, 12, 2, stateTarget{"alice", "acme/two-revisions/a", "a:"},
			stateTarget{"alice", "acme/two-revisions/b", "b:"})
	})

	t.Run("reuse instances are per service", func(t *testing.T) {
		n.deployState(t, "alice", "acme", "one", "reuse", "v1")
		n.deployState(t, "alice", "acme", "other", "reuse", "v1")
		interleave(t, n, 12, 2, stateTarget{"alice", "acme/one/v1", "1:"}, stateTarget{"alice", "acme/other/v1", "2:"})
	})

	t.Run("reuse instances are per tenant", func(t *testing.T) {
		// The same module bytes, service and revision names in two tenants.
		n.deployState(t, "alice", "acme", "shared", "reuse", "v1")
		n.deployState(t, "bob", "beta", "shared", "reuse", "v1")
		interleave(t, n, 12, 2, stateTarget{"alice", "acme/shared/v1", "A:"}, stateTarget{"bob", "beta/shared/v1", "B:"})
	})

	t.Run("a snapshot whose initialisation fails refuses the deploy", func(t *testing.T) {
		// trap_unreachable's _start traps: as the snapshot's
		// initialisation it fails at deploy, naming the revision's mode.
		r := n.putRelease(t, "alice", "acme", "init-traps", "trap_unreachable", "_start",
			stateRev{name: "v1", instance: "snapshot", init: "_start"})
		checkRefusal(t, r, 422, refusal.ReasonInvalidManifest.String())
		var p struct {
			Fields []struct{ Field, Problem string } `json:"invalid_fields"`
		}
		if err := json.Unmarshal(r.body, &p); err != nil || len(p.Fields) != 1 || p.Fields[0].Field != "revisions[0].instance" ||
			!strings.Contains(p.Fields[0].Problem, "_start") || !strings.Contains(p.Fields[0].Problem, "unreachable") {
			t.Fatalf("field problems: %s", r.body)
		}
		t.Logf("%s: %s", p.Fields[0].Field, p.Fields[0].Problem)
		if r := n.do(t, "GET", "/v1/deployments/acme/init-traps", "alice", nil, nil); r.status != 404 {
			t.Fatalf("the refused release was published: %d %s", r.status, r.body)
		}
		// The controls: the same module deploys fresh, and as a snapshot
		// without the initialisation (the instance before _start); both
		// trap in every activation instead.
		for _, rev := range []stateRev{{name: "fresh", instance: "fresh"}, {name: "snap", instance: "snapshot"}} {
			r := n.putRelease(t, "alice", "acme", "init-traps-"+rev.name, "trap_unreachable", "_start", rev)
			if r.status != 200 {
				t.Fatalf("%s: %d %s", rev.instance, r.status, r.body)
			}
			for i := 0; i < 2; i++ {
				r = n.invoke(t, "alice", "acme/init-traps-"+rev.name+"/"+rev.name, "", nil)
				if r.status != 502 || r.problem.Outcome != "trap" || r.problem.TrapKind != "unreachable" {
					t.Fatalf("%s, activation %d: %d %s", rev.instance, i, r.status, r.body)
				}
			}
		}
	})

	t.Run("metrics count the warm instances' work", func(t *testing.T) {
		n.deployState(t, "alice", "acme", "metrics-snap", "snapshot", "v1")
		n.deployState(t, "alice", "acme", "metrics-reuse", "reuse", "v1")
		if r := n.putRelease(t, "alice", "acme", "metrics-trap", "trap_unreachable", "_start",
			stateRev{name: "v1", instance: "snapshot"}); r.status != 200 {
			t.Fatalf("deploy: %d %s", r.status, r.body)
		}
		before := n.scrape(t)
		for i := 0; i < 5; i++ {
			n.callState(t, stateTarget{who: "alice", target: "acme/metrics-snap/v1"}, "")
		}
		for i := 0; i < 5; i++ {
			n.callState(t, stateTarget{who: "alice", target: "acme/metrics-reuse/v1"}, "")
		}
		for i := 0; i < 2; i++ {
			if r := n.invoke(t, "alice", "acme/metrics-trap/v1", "", nil); r.status != 502 {
				t.Fatalf("trap: %d %s", r.status, r.body)
			}
		}
		after := n.scrape(t)
		value := func(samples []sample, name string, labels ...string) float64 {
			want := map[string]string{}
			for i := 0; i+1 < len(labels); i += 2 {
				want[labels[i]] = labels[i+1]
			}
			return sum(samples, name, want)
		}
		// A new revision's first activation makes its instance (from the
		// snapshot, or a new reuse instance); the next ones take it back.
		// Each trapped activation's instance is recreated, then closed.
		for _, c := range []struct {
			mode, path string
			want       float64
		}{{"snapshot", "recreated", 1 + 2}, {"snapshot", "restored", 4}, {"reuse", "created", 1}, {"reuse", "reused", 4}} {
			d := value(after, "latent_instance_activations_total", "mode", c.mode, "path", c.path) -
				value(before, "latent_instance_activations_total", "mode", c.mode, "path", c.path)
			if d != c.want {
				t.Errorf("latent_instance_activations_total{mode=%q,path=%q} went up by %v, want %v", c.mode, c.path, d, c.want)
			}
		}
		// At least the two trapped instances closed (the pool may also
		// close its longest idle ones: it keeps 16).
		if d := value(after, "latent_instances_recycled_total") - value(before, "latent_instances_recycled_total"); d < 2 {
			t.Errorf("latent_instances_recycled_total went up by %v, want at least 2", d)
		}
		// metrics-snap's and metrics-reuse's instances wait; acme's state
		// snapshots share one 64 KiB image (one module, one tenant).
		if v := value(after, "latent_instances_idle"); v < 2 {
			t.Errorf("latent_instances_idle %v, want at least 2", v)
		}
		if v := value(after, "latent_snapshot_bytes"); v < 64<<10 {
			t.Errorf("latent_snapshot_bytes %v, want at least 65536", v)
		}
	})
}

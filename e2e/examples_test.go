package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/latent-node/latent-node/internal/testwasm"
)

// exampleCase is one invocation of an example and what it must answer.
type exampleCase struct {
	name     string
	input    string
	headers  map[string]string
	status   int
	outcome  string // Latent-Outcome
	body     string // the exact answer of a 200 ("" with check)
	check    func(t *testing.T, r reply)
	exitCode int    // of a declared-error
	stderr   string // a substring of the problem's stderr
	// snapshot is what the snapshot route answers when that differs by
	// design (nil: the same as the run route, checkSnapshotExample).
	snapshot *exampleCase
}

// example is one language of examples/: how it is built and deployed (its
// manifest deploys tenant demo's service with the stdio function on route
// "run" and the WAGI handler on route "web", and their reactor builds as
// snapshot revisions on routes "run-snap" and "web-snap") and what they
// answer.
type example struct {
	lang    string // examples/<lang>, the argument of examples/build.sh
	module  string // <module>.wasm, the manifest's stdio module
	wagi    string // <wagi>.wasm, the manifest's WAGI module
	service string
	cases   []exampleCase
	web     []wagiCase // requests to the service (wagi_test.go)
	// randomFuel says why the fuel of the snapshot routes depends on the
	// random bytes the guest draws: checkSnapshotExample then compares the
	// fuel of a copy of the release with random = "deterministic".
	randomFuel string
}

// bonjourAda checks the Go greeting of {"name":"Ada","language":"fr"}.
func bonjourAda(t *testing.T, r reply) {
	var a struct{ Greeting, Activation string }
	if err := json.Unmarshal(r.body, &a); err != nil || a.Greeting != "bonjour, Ada" {
		t.Fatalf("answer %q: %v", r.body, err)
	}
	// The guest echoes LATENT_ACTIVATION_ID from its environment.
	if id := r.header.Get("Latent-Activation-Id"); id == "" || a.Activation != id {
		t.Fatalf("answer's activation %q, header %q", a.Activation, id)
	}
}

var examples = []example{
	{lang: "go", module: "greet", wagi: "router", service: "greet-go", web: goRouterCases, cases: []exampleCase{
		{name: "greeting", input: `{"name":"Ada","language":"fr"}`, status: 200, outcome: "success", check: bonjourAda},
		{name: "not JSON", input: "Ada", status: 502, outcome: "declared-error", exitCode: 2, stderr: "greet: the body must be a JSON object"},
		{name: "unknown language", input: `{"name":"Ada","language":"la"}`, status: 502, outcome: "declared-error", exitCode: 2, stderr: `unknown language "la"`},
		// A negative control: below the Go runtime's start-up cost the
		// same request cannot succeed.
		{name: "budget too small", input: `{"name":"Ada"}`, headers: map[string]string{"Latent-Budget": "fuel=100000"}, status: 502, outcome: "fuel-exhausted"},
		// The snapshot's point: its activation starts after the runtime's
		// initialisation (about 150 thousand fuel where the command's start
		// takes 1.3 million), so a budget too small for run suffices.
		{name: "budget for the snapshot only", input: `{"name":"Ada","language":"fr"}`, headers: map[string]string{"Latent-Budget": "fuel=400000"},
			status: 502, outcome: "fuel-exhausted", snapshot: &exampleCase{status: 200, outcome: "success", check: bonjourAda}},
	}},
	{lang: "rust", module: "wordfreq", wagi: "count", service: "wordfreq-rust", web: rustCountCases,
		randomFuel: "Rust's HashMap seeds its hasher from random_get at its first use, in the activation", cases: []exampleCase{
			{name: "counts", input: "The cat and the hat; THE bat, and a cat.", status: 200, outcome: "success", body: "3 the\n2 and\n2 cat\n1 a\n1 bat\n1 hat\n"},
			{name: "no words", input: " ,;. ", status: 502, outcome: "declared-error", exitCode: 2, stderr: "wordfreq: the body has no words"},
			{name: "not UTF-8", input: "caf\xe9", status: 502, outcome: "declared-error", exitCode: 2, stderr: "not UTF-8"},
		}},
	{lang: "c", module: "upper", wagi: "case", service: "upper-c", web: cCaseCases, cases: []exampleCase{
		{name: "shout", input: "hello, Ada 42\n", status: 200, outcome: "success", body: "HELLO, ADA 42\n"},
		{name: "larger than the buffer", input: strings.Repeat("abc", 5000), status: 200, outcome: "success", body: strings.Repeat("ABC", 5000)},
		{name: "empty", input: "", status: 502, outcome: "declared-error", exitCode: 2, stderr: "upper: the body is empty"},
	}},
}

// TestExamples builds the guests of each language of examples/ whose
// toolchain is on this machine with examples/build.sh (the script `make
// examples` runs), deploys them to a demo node with their own manifest
// through the CLI and checks the answers of the stdio function and of the
// WAGI handler, and that their snapshot routes (the reactor builds) answer
// the same (instances_test.go). An example whose toolchain is missing is
// skipped, naming what to install.
func TestExamples(t *testing.T) {
	t.Parallel()
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skipf("no sh to run examples/build.sh: %v", err)
	}
	addr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	p := start(t, calm, "serve", "--demo", "--listen", addr)
	keyLine := p.stdout.wait(t, 30*time.Second, func(s string) bool { return strings.HasPrefix(s, "demo api key: ") })
	key := strings.TrimPrefix(keyLine, "demo api key: ")
	p.url = "http://" + addr
	waitReady(t, p.url)
	n := &node{proc: p, keys: map[string]string{"demo": key}}

	for _, ex := range examples {
		t.Run(ex.lang, func(t *testing.T) {
			dir := t.TempDir()
			if err := buildExample(sh, ex.lang, dir); err != nil {
				var skip skipError
				if errors.As(err, &skip) {
					t.Skip(string(skip))
				}
				t.Fatal(err)
			}
			// The manifest names its module relative to itself: deploy a
			// copy next to the module just built.
			manifest, err := os.ReadFile(filepath.Join("..", "examples", ex.lang, "manifest.toml"))
			if err != nil {
				t.Fatal(err)
			}
			release := filepath.Join(dir, "manifest.toml")
			if err := os.WriteFile(release, manifest, 0o600); err != nil {
				t.Fatal(err)
			}
			for _, m := range []string{ex.module, ex.wagi, ex.module + "-reactor", ex.wagi + "-reactor"} {
				if _, err := os.Stat(filepath.Join(dir, m+".wasm")); err != nil {
					t.Fatalf("build.sh did not write the manifest's module: %v", err)
				}
			}
			deployCLI(t, n.url, key, release)
			if ex.randomFuel != "" {
				deployDeterministic(t, n, key, release, ex)
			}
			target := "demo/" + ex.service + "/run"
			for _, c := range ex.cases {
				t.Run(c.name, func(t *testing.T) {
					r := n.invoke(t, "demo", target, c.input, c.headers)
					checkExample(t, r, c)
				})
				t.Run("snapshot "+c.name, func(t *testing.T) { checkSnapshotExample(t, n, ex, c) })
			}
			for _, c := range ex.web {
				t.Run("wagi "+c.name, func(t *testing.T) {
					checkWAGI(t, n, "demo/"+ex.service+"/", c)
				})
				t.Run("wagi snapshot "+c.name, func(t *testing.T) { checkSnapshotWAGI(t, n, ex, c) })
			}
			logExecTimes(t, n, "demo/"+ex.service+"/", ex.web[0], 20)
		})
	}
}

// checkExample checks one answer against its case.
func checkExample(t *testing.T, r reply, c exampleCase) {
	t.Helper()
	if r.status != c.status || r.header.Get("Latent-Outcome") != c.outcome {
		t.Fatalf("want %d %s, have %d %s: %s", c.status, c.outcome, r.status, r.header.Get("Latent-Outcome"), r.body)
	}
	fuel, err := strconv.ParseUint(r.header.Get("Latent-Fuel-Used"), 10, 64)
	if err != nil || fuel == 0 {
		t.Fatalf("Latent-Fuel-Used %q", r.header.Get("Latent-Fuel-Used"))
	}
	switch {
	case c.check != nil:
		c.check(t, r)
	case c.status == 200 && string(r.body) != c.body:
		t.Fatalf("answer %q, want %q", r.body, c.body)
	}
	if c.outcome == "declared-error" {
		if r.problem.ExitCode == nil || *r.problem.ExitCode != c.exitCode || !strings.Contains(r.problem.Stderr, c.stderr) {
			t.Fatalf("want exit code %d and stderr with %q, have %s", c.exitCode, c.stderr, r.body)
		}
	}
}

// skipError is build.sh's message that the example's toolchain is missing.
type skipError string

func (e skipError) Error() string { return string(e) }

// buildExample runs examples/build.sh for lang into dir. Its exit status 3
// (the toolchain is missing) is a skipError with the script's message.
func buildExample(sh, lang, dir string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, sh, filepath.Join("..", "examples", "build.sh"), lang, dir)
	var out []byte
	err := testwasm.WithBuildLock(func() (err error) { out, err = cmd.CombinedOutput(); return err })
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.ExitCode() == 3 {
		return skipError(strings.TrimSpace(string(out)))
	}
	if err != nil {
		return errors.Wrapf(err, "examples/build.sh %s: %s", lang, out)
	}
	return nil
}

// deployCLI runs the binary's deploy of manifest into the node at url and
// returns its stdout (the release and revisions); its stderr (progress
// while the node compiles) is shown only when the deploy fails.
func deployCLI(t *testing.T, url, key, manifest string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(binary(t), "deploy", "--node", url, "--key", key, manifest)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil || !strings.HasPrefix(stdout.String(), "release ") {
		t.Fatalf("deploy %s: %v\n%s%s", manifest, err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

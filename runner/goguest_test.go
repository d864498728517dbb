//go:build !race

// The tests that compile the 3.5 MB Go test guest with wazero's compiler:
// under the race detector that compile takes 20-30 s of a 2-core machine,
// so make test runs them in its second step, without it (see the
// Makefile); the runner's other tests cover the same code under -race with
// small guests.

package runner

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/latent-node/latent-node/admission"
	"github.com/latent-node/latent-node/internal/testwasm"
	"github.com/latent-node/latent-node/vocab"
)

// TestRun_goGuest: the Go guest sorts its input, sees its entrypoint and
// the two documented variables, and exits 3 on bad input.
func TestRun_goGuest(t *testing.T) {
	e := newEnv(t)
	e.deploy("go", testwasm.BuildGoGuest(t), ceiling(1<<40, 256<<20, 30*time.Second))
	x := e.permit("go", admission.BudgetRequest{})
	out := e.r.Run(context.Background(), x, plainCell{}, []byte(`{"words":["b","a","b"]}`))
	_ = x.Release()
	if out.Kind != Success || !strings.Contains(string(out.Stdout), `"sorted"`) {
		t.Fatalf("go guest: %s %q %v stderr %q", out.Kind, out.Stdout, out.Err, out.StderrTail)
	}
	// The guest sees its entrypoint as its only argument and exactly the
	// two documented variables (the Go runtime reads both lists at start).
	want := fmt.Sprintf(`goguest: {"args":["_start"],"env":["LATENT_ACTIVATION_ID=%s","LATENT_REVISION=%s"]}`,
		x.ID(), x.Obligations().Revision)
	if first, _, _ := strings.Cut(string(out.StderrTail), "\n"); first != want {
		t.Fatalf("go guest args and environment:\nhave %s\nwant %s", first, want)
	}
	out = e.run("go", `not json`, admission.BudgetRequest{})
	if out.Kind != DeclaredError || out.ExitCode != 3 || len(out.StderrTail) == 0 {
		t.Fatalf("go guest bad input: %s %d %q", out.Kind, out.ExitCode, out.StderrTail)
	}
}

// TestRun_goGuestRandom: a Go guest's crypto/rand (which reads random_get)
// differs in every activation by default and repeats, with the output and
// the fuel, under random = "deterministic".
func TestRun_goGuestRandom(t *testing.T) {
	e := newEnv(t)
	wasm := testwasm.BuildGoGuest(t)
	c := ceiling(1<<40, 256<<20, 30*time.Second)
	e.deployRevision("go", wasm, vocab.ManifestRevision{Ceiling: &c})
	e.deployRevision("go-replay", wasm, vocab.ManifestRevision{Ceiling: &c, Random: "deterministic"})
	randomLine := regexp.MustCompile(`(?m)^goguest: random [0-9a-f]{16}$`)
	run := func(service string) (Outcome, string) {
		t.Helper()
		out := e.run(service, `{"words":["b","a","b"]}`, admission.BudgetRequest{})
		r := randomLine.Find(out.StderrTail)
		if out.Kind != Success || r == nil {
			t.Fatalf("%s: %s %v stderr %q", service, out.Kind, out.Err, out.StderrTail)
		}
		return out, string(r)
	}
	n := 1000
	if testing.Short() {
		n = 20
	}
	var lines []string
	fuel := map[uint64]bool{}
	for range n {
		out, r := run("go")
		lines = append(lines, r)
		fuel[out.FuelUsed] = true
	}
	t.Logf("%d activations used %d distinct fuel amounts", n, len(fuel))
	if d := distinct(lines); d != n {
		t.Fatalf("%d activations of the Go guest printed %d distinct crypto/rand values", n, d)
	}
	first, r1 := run("go-replay")
	second, r2 := run("go-replay")
	if r1 != r2 || string(first.Stdout) != string(second.Stdout) || first.FuelUsed != second.FuelUsed {
		t.Fatalf("replayed Go guest differs: %s fuel %d, then %s fuel %d", r1, first.FuelUsed, r2, second.FuelUsed)
	}
}

package runner

import (
	"encoding/hex"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/latent-node/latent-node/admission"
	"github.com/latent-node/latent-node/internal/testwasm"
	"github.com/latent-node/latent-node/vocab"
)

// distinct counts the different strings in lines.
func distinct(lines []string) int {
	seen := make(map[string]bool, len(lines))
	for _, l := range lines {
		seen[l] = true
	}
	return len(seen)
}

// TestRun_random: random_get is a fresh stream in every activation by
// default; a revision with random = "deterministic" reads the stream its
// revision id seeds, the same in every activation.
func TestRun_random(t *testing.T) {
	e := newEnv(t)
	wasm := testwasm.Bytes(t, "random")
	c := ceiling(1<<30, 1<<20, 10*time.Second)
	e.deployRevision("random", wasm, vocab.ManifestRevision{Ceiling: &c})
	e.deployRevision("replay", wasm, vocab.ManifestRevision{Ceiling: &c, Random: "deterministic"})
	e.deployRevision("replay-other", wasm, vocab.ManifestRevision{Ceiling: &c, Random: "deterministic"})
	line := regexp.MustCompile(`^[0-9a-f]{64}\n$`)
	run := func(service string) Outcome {
		t.Helper()
		out := e.run(service, "", admission.BudgetRequest{})
		if out.Kind != Success || !line.Match(out.Stdout) {
			t.Fatalf("%s: %s %q %v", service, out.Kind, out.Stdout, out.Err)
		}
		if s := string(out.Stdout); s[:32] == s[32:64] {
			t.Fatalf("%s: the second random_get repeated the first: %s", service, s)
		}
		return out
	}

	// Deterministic activations run in between, on the same pooled
	// bindings: the secure ones after them still get fresh streams.
	const n = 1000
	var secure, replay []string
	for i := range n {
		secure = append(secure, string(run("random").Stdout))
		if i%100 == 0 {
			replay = append(replay, string(run("replay").Stdout))
		}
	}
	if d := distinct(secure); d != n {
		t.Fatalf("%d activations read %d distinct random streams", n, d)
	}
	// Negative control: the same count sees the replaying revision's
	// activations as one stream.
	if d := distinct(replay); d != 1 {
		t.Fatalf("%d deterministic activations read %d distinct streams, want 1", len(replay), d)
	}

	// Replay: same input, same output and fuel; the stream is the one
	// deterministicSeed of the revision id gives.
	first, second := run("replay"), run("replay")
	if string(first.Stdout) != string(second.Stdout) || first.FuelUsed != second.FuelUsed {
		t.Fatalf("replay differs: %q fuel %d, then %q fuel %d", first.Stdout, first.FuelUsed, second.Stdout, second.FuelUsed)
	}
	rev, err := e.cat.Pin().Resolve(vocab.Target{Tenant: "acme", Service: "replay", Route: "run"}, "")
	if err != nil {
		t.Fatal(err)
	}
	want := make([]byte, 32)
	_, _ = rand.NewChaCha8(deterministicSeed(rev.Revision)).Read(want)
	if have := strings.TrimSuffix(string(first.Stdout), "\n"); have != hex.EncodeToString(want) {
		t.Fatalf("replay stream %s, want %x (seeded by revision %s)", have, want, rev.Revision)
	}
	// Another revision that opted in replays another stream.
	if other := run("replay-other"); string(other.Stdout) == string(first.Stdout) {
		t.Fatal("two revisions replay the same random stream")
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

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

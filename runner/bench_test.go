package runner

import (
	"context"
	"testing"
	"time"

	"github.com/latent-node/latent-node/admission"
	"github.com/latent-node/latent-node/cellpool"
	"github.com/latent-node/latent-node/internal/testwasm"
	"github.com/latent-node/latent-node/vocab"
)

// BenchmarkRun_trivial is one tiny activation on a pooled cell: lease, Run
// (instantiate, _start, classify, close), release. The permit is admitted
// once and reused, so this measures the runner and the pool only.
func BenchmarkRun_trivial(b *testing.B) {
	benchRun(b, "trivial", vocab.ManifestRevision{})
}

// BenchmarkRun_random is BenchmarkRun_trivial for the random guest (two
// random_get calls of 16 bytes): what seeding the activation's stream costs,
// from crypto/rand by default or from the revision id when deterministic.
func BenchmarkRun_random(b *testing.B) {
	for _, random := range []string{"secure", "deterministic"} {
		b.Run(random, func(b *testing.B) {
			benchRun(b, "random", vocab.ManifestRevision{Random: random})
		})
	}
}

// benchRun deploys fixture guest as a revision like rev and runs it on a
// pooled cell b.N times under one permit.
func benchRun(b *testing.B, guest string, rev vocab.ManifestRevision) {
	e := newEnv(b)
	c := ceiling(1<<40, 1<<20, time.Hour)
	rev.Ceiling = &c
	e.deployRevision(guest, testwasm.Bytes(b, guest), rev)
	pool, err := cellpool.New(cellpool.Config{Classes: map[vocab.CellClass]cellpool.ClassConfig{
		vocab.CellStandard: {Parallelism: 1, MemoryBytes: 16 << 20}}})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = pool.Close() }()
	x := e.permit(guest, admission.BudgetRequest{})
	defer func() { _ = x.Release() }()
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		lease, err := pool.TryLease(vocab.CellStandard)
		if err != nil {
			b.Fatal(err)
		}
		out := e.r.Run(ctx, x, lease, nil)
		if out.Kind != Success {
			b.Fatal(out.Kind, out.Err)
		}
		if err := lease.Release(cellpool.Reuse); err != nil {
			b.Fatal(err)
		}
	}
}

package runner

import (
	"context"
	"testing"
	"time"

	"github.com/latent-node/latent-node/admission"
	"github.com/latent-node/latent-node/catalog"
	"github.com/latent-node/latent-node/cellpool"
	"github.com/latent-node/latent-node/internal/testwasm"
)

// BenchmarkRun_trivial is one tiny activation on a pooled cell: lease, Run
// (instantiate, _start, classify, close), release. The permit is admitted
// once and reused, so this measures the runner and the pool only.
func BenchmarkRun_trivial(b *testing.B) {
	e := newEnv(b)
	e.deploy("trivial", testwasm.Bytes(b, "trivial"), ceiling(1<<40, 1<<20, time.Hour))
	pool, err := cellpool.New(cellpool.Config{Classes: map[catalog.CellClass]cellpool.ClassConfig{
		catalog.CellStandard: {Parallelism: 1, MemoryBytes: 16 << 20}}})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = pool.Close() }()
	x := e.permit("trivial", admission.BudgetRequest{})
	defer func() { _ = x.Release() }()
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		lease, err := pool.TryLease(catalog.CellStandard)
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

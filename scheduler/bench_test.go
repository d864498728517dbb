package scheduler

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/latent-node/latent-node/admission"
	"github.com/latent-node/latent-node/vocab"
)

// BenchmarkCore_cycle measures one activation's way through the core
// (Enqueue, Next, Done) with 64 tenants × 4 principals backlogged on 8 cells.
func BenchmarkCore_cycle(b *testing.B) {
	c, err := NewCore(simConfig(8, FairnessFuel, 1<<20))
	if err != nil {
		b.Fatal(err)
	}
	const tenants, principals, depth = 64, 4, 4
	items := make([]Item, tenants*principals*depth)
	for i := range items {
		items[i] = Item{Tenant: vocab.TenantID("t" + strconv.Itoa(i%tenants)),
			Principal: "p" + strconv.Itoa(i/tenants%principals), Cell: simCell}
	}
	now := simEpoch
	for i := range items[:len(items)/2] {
		if err := c.Enqueue(now, &items[i]); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		it, ok := c.Next(now, simCell)
		if !ok {
			b.Fatal("nothing to dispatch")
		}
		if err := c.Done(now, it, 1000, time.Millisecond); err != nil {
			b.Fatal(err)
		}
		*it = Item{Tenant: it.Tenant, Principal: it.Principal, Cell: simCell}
		if err := c.Enqueue(now, it); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkScheduler_do measures one activation's way through the driver on
// its caller's goroutine: admission, then Do (enqueue, dispatch, execute,
// release, deliver) with an executor that at once returns a struct outcome made from the
// job's input.
func BenchmarkScheduler_do(b *testing.B) {
	e := newEnv(b, execFunc(func(_ context.Context, job *testJob, _ *admission.ExecutionPermit, _ Cell) testCompletion {
		return testCompletion{FuelUsed: 1, Outcome: outcome{note: job.Input()}}
	}), envOptions{})
	e.run()
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		p, err := e.admit("acme", "alice", 0)
		if err != nil {
			b.Fatal(err)
		}
		_, r, err := e.s.Do(ctx, p, "alice", time.Time{})
		if err != nil || r.Err != nil || r.Completion.Outcome.note != "alice" {
			b.Fatal(err, r.Err)
		}
	}
	b.StopTimer()
	e.stop()
}

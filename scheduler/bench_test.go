package scheduler

import (
	"strconv"
	"testing"
	"time"

	"github.com/latent-node/latent-node/catalog"
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
		items[i] = Item{Tenant: catalog.TenantID("t" + strconv.Itoa(i%tenants)),
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

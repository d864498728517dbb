package history

import (
	"fmt"
	"math"
	"runtime"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/latent-node/latent-node/internal/testutil"
	"github.com/latent-node/latent-node/vocab"
)

func newTest(cfg Config) (*History, *testutil.Clock) {
	c := testutil.NewClock(time.Unix(1_700_000_000, 0))
	cfg.Clock = c
	return New(cfg), c
}

// TestClose_rates: a point holds the interval's rates by outcome, reason
// and tenant, the busiest tenants by name and the rest as others, and the
// gauges it was closed with.
func TestClose_rates(t *testing.T) {
	h, clock := newTest(Config{Tenants: 2})
	for range 30 {
		h.Observe(Obs{Tenant: "a", Outcome: "success", Took: time.Millisecond, Fuel: 100})
	}
	for range 20 {
		h.Observe(Obs{Tenant: "b", Outcome: "trap", Took: 2 * time.Millisecond})
	}
	for range 5 {
		h.Observe(Obs{Tenant: "c", Reason: "capacity-exhausted"})
		h.Observe(Obs{Tenant: "d", Reason: "unauthenticated"})
	}
	clock.Advance(5 * time.Second)
	h.Close(Gauges{MemoryAdmitted: 1 << 20, MemoryLimit: 1 << 30, PressureCPU: 0.25})
	ps := h.Points()
	if len(ps) != 1 {
		t.Fatalf("%d points", len(ps))
	}
	p := ps[0]
	if p.Node.Answers != 10 || p.Node.Refusals != 2 || p.Node.Fuel != 600 {
		t.Fatalf("node rates %+v", p.Node)
	}
	if p.Outcomes["success"] != 6 || p.Outcomes["trap"] != 4 || p.Reasons["capacity-exhausted"] != 1 || p.Reasons["unauthenticated"] != 1 {
		t.Fatalf("outcomes %v reasons %v", p.Outcomes, p.Reasons)
	}
	names := []string{}
	for _, tr := range p.Tenants {
		names = append(names, tr.Name)
	}
	if !slices.Equal(names, []string{"a", "b", Others}) || p.Tenants[2].Refusals != 2 {
		t.Fatalf("tenants %+v", p.Tenants)
	}
	if p.MemoryLimit != 1<<30 || p.PressureCPU != 0.25 || p.T != clock.Now().UnixMilli() {
		t.Fatalf("gauges %+v", p.Gauges)
	}
	// The next interval starts empty.
	clock.Advance(5 * time.Second)
	h.Close(Gauges{})
	if q := h.Points()[1]; q.Node.Answers != 0 || len(q.Tenants) != 0 || len(q.Outcomes) != 0 {
		t.Fatalf("second point %+v", q)
	}
}

// TestQuantile_oracle: p50 and p99 of random latencies are within the
// histogram's factor √2 above the exact quantiles.
func TestQuantile_oracle(t *testing.T) {
	for seed := range 20 {
		var h hist
		var all []time.Duration
		x := uint64(seed*7919 + 1)
		for range 1000 + seed*50 {
			x ^= x << 13
			x ^= x >> 7
			x ^= x << 17
			d := time.Duration(x%uint64(200*time.Millisecond)) + 10*time.Microsecond
			all = append(all, d)
			h.add(d)
		}
		sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
		for _, q := range []float64{0.5, 0.99} {
			exact := float64(all[int(math.Ceil(q*float64(len(all))))-1].Microseconds()) / 1000
			got := h.quantile(q)
			if got < exact || got > exact*math.Sqrt2*1.0001 {
				t.Fatalf("seed %d q %.2f: got %.3f ms, exact %.3f ms", seed, q, got, exact)
			}
		}
	}
	var empty hist
	if empty.quantile(0.5) != 0 {
		t.Fatal("empty quantile")
	}
}

// TestBounds: the ring keeps Points points, and however many tenants send
// traffic an interval tells MaxTracked apart and a point names Tenants.
func TestBounds(t *testing.T) {
	h, clock := newTest(Config{Points: 4, Tenants: 3, MaxTracked: 16})
	for i := range 10 {
		for j := range 1000 {
			h.Observe(Obs{Tenant: vocab.TenantID(fmt.Sprintf("t%04d", j)), Outcome: "success"})
		}
		if len(h.byName) != 16 || len(h.free) != 0 {
			t.Fatalf("tracked %d, free %d", len(h.byName), len(h.free))
		}
		clock.Advance(time.Second)
		h.Close(Gauges{Live: uint64(i)})
	}
	ps := h.Points()
	if len(ps) != 4 || ps[0].Live != 6 || ps[3].Live != 9 {
		t.Fatalf("points %d, live %d..%d", len(ps), ps[0].Live, ps[len(ps)-1].Live)
	}
	for _, p := range ps {
		if len(p.Tenants) != 4 || p.Tenants[3].Name != Others || p.Tenants[3].Answers != 997 {
			t.Fatalf("tenants %+v", p.Tenants)
		}
	}
}

// BenchmarkHistory_tenants: a full ring after intervals in which 10,000
// tenants each sent traffic; reports the heap the History holds
// (retained-bytes), which must not grow with the tenants.
func BenchmarkHistory_tenants(b *testing.B) {
	for _, tenants := range []int{10, 10_000} {
		b.Run(fmt.Sprintf("tenants=%d", tenants), func(b *testing.B) {
			names := make([]vocab.TenantID, tenants)
			for i := range names {
				names[i] = vocab.TenantID(fmt.Sprintf("tenant-%05d", i))
			}
			var retained float64
			for range b.N {
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				h, clock := newTest(Config{})
				for range DefaultPoints {
					for _, n := range names {
						h.Observe(Obs{Tenant: n, Outcome: "success", Took: time.Millisecond, Queue: time.Microsecond, Fuel: 1})
					}
					h.Observe(Obs{Tenant: names[0], Reason: "capacity-exhausted"})
					clock.Advance(DefaultInterval)
					h.Close(Gauges{})
				}
				runtime.GC()
				runtime.ReadMemStats(&after)
				retained = float64(after.HeapAlloc) - float64(before.HeapAlloc)
				runtime.KeepAlive(h)
			}
			b.ReportMetric(retained, "retained-bytes")
		})
	}
}

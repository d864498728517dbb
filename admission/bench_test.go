package admission

import (
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/latent-node/latent-node/refusal"
	"github.com/latent-node/latent-node/vocab"
)

// realClock is the production clock shape (the node wires time.Now).
type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func benchHarness(b *testing.B) (*harness, Controller) {
	p := testPolicy()
	p.Limits.MaxLiveActivations, p.Limits.MaxQueued = 1<<20, 1<<20
	// The one sample published below must not go stale however long a
	// loaded machine takes to run the benchmark (it refused every admit).
	p.Overload.MaxObservationAge = time.Hour
	h := newHarness(b, p)
	prov, err := NewLocalQuotaProvider(p, Options{Clock: realClock{}, Load: h.load, QueueDelay: h})
	if err != nil {
		b.Fatal(err)
	}
	h.prov = prov
	h.load.Publish(loadSampleNow()) //nolint:errcheck // a fresh real-time sample
	return h, prov.WithPolicySource(h.cat.Pin())
}

// BenchmarkAdmit measures admission through every scope with the real clock:
//
//	accept-release: Admit then Release (the full reservation round trip)
//	reject-ledger:  the queue class is full, so every check runs and the
//	                ledger refuses under its lock (the slowest refusal)
//	reject-early:   an unknown principal, refused first
//	parallel:       accept-release from GOMAXPROCS goroutines on one ledger
func BenchmarkAdmit(b *testing.B) {
	b.Run("accept-release", func(b *testing.B) {
		h, c := benchHarness(b)
		req := h.request("a", "acme", "images")
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			p, err := c.Admit(req)
			if err != nil {
				b.Fatal(err)
			}
			if err := p.Release(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("reject-ledger", func(b *testing.B) {
		h, c := benchHarness(b)
		var held []*Permit
		for i := 0; i < 4; i++ { // batch holds 4 queued
			p, err := c.Admit(h.request("held"+strconv.Itoa(i), "acme", "images"))
			if err != nil {
				b.Fatal(err)
			}
			held = append(held, p)
		}
		req := h.request("a", "acme", "images")
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if _, err := c.Admit(req); err == nil || err.(*Rejection).Reason != refusal.ReasonCapacityExhausted {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		for _, p := range held {
			_ = p.Release()
		}
	})
	b.Run("reject-early", func(b *testing.B) {
		h, c := benchHarness(b)
		req := h.request("a", "acme", "images")
		req.Principal.Subject = "mallory"
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if _, err := c.Admit(req); err != rejPrincipal {
				b.Fatal(err)
			}
		}
	})
	b.Run("parallel", func(b *testing.B) {
		h, c := benchHarness(b)
		p := testPolicy()
		_ = p
		var n atomic.Int64
		b.ReportAllocs()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			req := h.request("p"+strconv.FormatInt(n.Add(1), 10), "acme", "images")
			req.Principal.Tenant = "acme"
			for pb.Next() {
				pm, err := c.Admit(req)
				if err != nil {
					b.Fatal(err)
				}
				if err := pm.Release(); err != nil {
					b.Fatal(err)
				}
			}
		})
	})
}

type leakProbe struct{ a [40]uint64 }

var probeSink atomic.Uint64

func probeFinalizer(p *leakProbe) { probeSink.Add(p.a[0]) }

func probeCleanup(v uint64) { probeSink.Add(v) }

// BenchmarkSafetyNet compares the two garbage-collection hooks a permit can
// use. Each iteration allocates one probe, so allocs/op is 1 plus what the
// hook allocates (SetFinalizer 1, AddCleanup 3). RATIONALE.md records why
// admission uses SetFinalizer.
func BenchmarkSafetyNet(b *testing.B) {
	b.Run("SetFinalizer", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			p := &leakProbe{}
			runtime.SetFinalizer(p, probeFinalizer)
			runtime.SetFinalizer(p, nil)
		}
	})
	b.Run("AddCleanup", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			p := &leakProbe{}
			c := runtime.AddCleanup(p, probeCleanup, uint64(i))
			c.Stop()
		}
	})
}

// TestAdmit_heapBoundedByRejections: 100k distinct rejected service targets
// (and distinct activation ids) leave the live heap within 256 KiB.
func TestAdmit_heapBoundedByRejections(t *testing.T) {
	h := newHarness(t, testPolicy())
	c := h.prov.WithPolicySource(h.cat.Pin())
	base := h.request("x", "acme", "images")
	n := 100_000
	if testing.Short() {
		n = 20_000
	}
	measure := func() uint64 {
		var ms runtime.MemStats
		runtime.GC()
		runtime.GC()
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	before := measure()
	for i := 0; i < n; i++ {
		req := *base
		req.ActivationID = "act-" + strconv.Itoa(i)
		req.Revision.Service = vocab.ServiceName("svc-" + strconv.Itoa(i))
		if _, err := c.Admit(&req); err != rejRevision {
			t.Fatalf("want revision-not-available, have %v", err)
		}
	}
	after := measure()
	growth := int64(after) - int64(before)
	t.Logf("live heap growth after %d rejected targets: %d bytes", n, growth)
	if growth > 256<<10 {
		t.Fatalf("live heap grew by %d bytes", growth)
	}
	if s := formatSnapshot(h.prov.Snapshot()); s != "empty" {
		t.Fatalf("rejections left state:\n%s", s)
	}
}

// BenchmarkLifecycle is a permit's whole life on the node's path: admit,
// EnsureSchedulable, StartExecution, release the execution permit.
func BenchmarkLifecycle(b *testing.B) {
	h, c := benchHarness(b)
	req := h.request("a", "acme", "images")
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		p, err := c.Admit(req)
		if err != nil {
			b.Fatal(err)
		}
		if err := p.EnsureSchedulable(); err != nil {
			b.Fatal(err)
		}
		x, err := p.StartExecution()
		if err != nil {
			b.Fatal(err)
		}
		if err := x.Release(); err != nil {
			b.Fatal(err)
		}
	}
}

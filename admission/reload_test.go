package admission

import (
	"strconv"
	"sync"
	"testing"

	"github.com/cockroachdb/errors"

	"github.com/latent-node/latent-node/refusal"
	"github.com/latent-node/latent-node/vocab"
)

// TestReload_limitsAndTenants: a reload's limits bind the next admissions
// while the counters of live permits carry over; a removed tenant gets no
// new admissions, its live permit releases as before and its counters come
// back to zero; a tenant added by a reload is admitted.
func TestReload_limitsAndTenants(t *testing.T) {
	h := newHarness(t, testPolicy())
	var permits []*Permit
	for i := range 2 {
		p, err := h.admit(h.request("a"+strconv.Itoa(i), "acme", "images"))
		if err != nil {
			t.Fatal(err)
		}
		permits = append(permits, p)
	}
	// Lower acme's live limit to 2: the two live permits count against it.
	lower := testPolicy()
	acme := lower.Tenants["acme"]
	acme.Limits.MaxLiveActivations = 2
	lower.Tenants["acme"] = acme
	if err := h.prov.Reload(lower); err != nil {
		t.Fatal(err)
	}
	var rej *Rejection
	if _, err := h.admit(h.request("a2", "acme", "images")); !errors.As(err, &rej) || rej.Scope != refusal.ScopeTenant {
		t.Fatalf("third admission under the lowered limit: %v", err)
	}
	if v, _ := h.prov.TenantSnapshot("acme"); v.Usage.LiveActivations != 2 || v.Limits.MaxLiveActivations != 2 {
		t.Fatalf("acme after the reload: %+v", v)
	}
	// Remove acme (beta keeps its services): new admissions are refused, the
	// live permits release into the same counters.
	without := testPolicy()
	delete(without.Tenants, "acme")
	if err := h.prov.Reload(without); err != nil {
		t.Fatal(err)
	}
	if _, err := h.admit(h.request("a3", "acme", "images")); !errors.As(err, &rej) || rej.Reason != refusal.ReasonPrincipalNotAuthorized {
		t.Fatalf("admission of a removed tenant: %v", err)
	}
	if _, ok := h.prov.TenantSnapshot("acme"); ok {
		t.Fatal("the removed tenant still has a view")
	}
	node := h.prov.Snapshot().Node.Usage.LiveActivations
	for _, p := range permits {
		p.Release()
	}
	if after := h.prov.Snapshot().Node.Usage.LiveActivations; after != node-2 {
		t.Fatalf("node live %d after releasing the removed tenant's permits, want %d", after, node-2)
	}
	// acme comes back: same counters (zero now), admitted again.
	if err := h.prov.Reload(testPolicy()); err != nil {
		t.Fatal(err)
	}
	p, err := h.admit(h.request("a4", "acme", "images"))
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := h.prov.TenantSnapshot("acme"); v.Usage.LiveActivations != 1 {
		t.Fatalf("acme live %d after its return, want 1", v.Usage.LiveActivations)
	}
	p.Release()
}

// TestReload_needsRestart: queue and cell classes do not change by reload;
// the refusal changes nothing.
func TestReload_needsRestart(t *testing.T) {
	h := newHarness(t, testPolicy())
	q := testPolicy()
	q.QueueClasses[0].MaxQueued++
	c := testPolicy()
	tiny := c.CellClasses[vocab.CellTiny]
	tiny.Parallelism++
	c.CellClasses[vocab.CellTiny] = tiny
	for name, pol := range map[string]Policy{"queue classes": q, "cell classes": c} {
		if err := h.prov.Reload(pol); !errors.Is(err, ErrReloadNeedsRestart) {
			t.Fatalf("%s: %v", name, err)
		}
	}
	if got := h.prov.Policy().QueueClasses[0].MaxQueued; got != testPolicy().QueueClasses[0].MaxQueued {
		t.Fatalf("a refused reload changed the queue classes: %d", got)
	}
	bad := testPolicy()
	bad.Limits.MaxPriority = 99 // no queue class covers it
	if err := h.prov.Reload(bad); err == nil {
		t.Fatal("an invalid policy was reloaded")
	}
}

// TestReload_concurrent: admissions and releases race reloads (run with
// -race); every permit releases and the counters return to zero.
func TestReload_concurrent(t *testing.T) {
	h := newHarness(t, testPolicy())
	other := testPolicy()
	acme := other.Tenants["acme"]
	acme.Limits.MaxLiveActivations = 3
	other.Tenants["acme"] = acme
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				p, err := h.admit(h.request("c"+strconv.Itoa(g)+"-"+strconv.Itoa(i), "acme", "images"))
				if err == nil {
					p.Release()
				}
			}
		}()
	}
	for i := range 200 {
		pol := testPolicy()
		if i%2 == 1 {
			pol = other
		}
		if err := h.prov.Reload(pol); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	if u := h.prov.Snapshot().Node.Usage; u.LiveActivations != 0 || u.ReservedFuel != 0 {
		t.Fatalf("counters after every release: %+v", u)
	}
}

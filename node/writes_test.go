package node

import "testing"

// TestTenantWrites: a tenant gets max slots, another tenant is
// not held back by it, and an ended write frees its slot (and its entry).
func TestTenantWrites(t *testing.T) {
	tw := tenantWrites{max: 2}
	for i := range tw.max {
		if !tw.begin("acme") {
			t.Fatalf("write %d refused under the bound", i)
		}
	}
	if tw.begin("acme") {
		t.Fatal("a write over the bound was admitted")
	}
	if !tw.begin("beta") {
		t.Fatal("another tenant was held back")
	}
	tw.end("acme")
	if !tw.begin("acme") {
		t.Fatal("an ended write did not free its slot")
	}
	for range tw.max {
		tw.end("acme")
	}
	tw.end("beta")
	if len(tw.inFlight) != 0 {
		t.Fatalf("entries left: %v", tw.inFlight)
	}
}

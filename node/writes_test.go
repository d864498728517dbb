package node

import "testing"

// TestTenantWrites: a tenant gets MaxTenantWrites slots, another tenant is
// not held back by it, and an ended write frees its slot (and its entry).
func TestTenantWrites(t *testing.T) {
	var tw tenantWrites
	for i := range MaxTenantWrites {
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
	for range MaxTenantWrites {
		tw.end("acme")
	}
	tw.end("beta")
	if len(tw.inFlight) != 0 {
		t.Fatalf("entries left: %v", tw.inFlight)
	}
}

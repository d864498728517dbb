package admission

import (
	"testing"

	"github.com/cockroachdb/errors"
)

// TestAuthorize: the rule of every tenant-scoped route follows the current
// policy's subject and kind allowlists, and a reload that drops a subject
// refuses it at once, as Admit does.
func TestAuthorize(t *testing.T) {
	h := newHarness(t, testPolicy())
	revoked := testPolicy()
	acme := revoked.Tenants["acme"]
	acme.Subjects, acme.Kinds = []string{"thumbnailer"}, []PrincipalKind{KindService}
	revoked.Tenants["acme"] = acme
	tests := []struct {
		name      string
		policy    Policy
		principal Principal
		allowed   bool
	}{
		{"listed user", testPolicy(), Principal{Subject: "alice", Kind: KindUser, Tenant: "acme"}, true},
		{"listed service", testPolicy(), Principal{Subject: "thumbnailer", Kind: KindService, Tenant: "acme"}, true},
		{"unlisted subject", testPolicy(), Principal{Subject: "mallory", Kind: KindUser, Tenant: "acme"}, false},
		{"subject of another tenant", testPolicy(), Principal{Subject: "bob", Kind: KindUser, Tenant: "acme"}, false},
		{"kind not allowed", testPolicy(), Principal{Subject: "bob", Kind: KindService, Tenant: "beta"}, false},
		{"unknown kind", testPolicy(), Principal{Subject: "alice", Kind: KindService + 1, Tenant: "acme"}, false},
		{"unknown tenant", testPolicy(), Principal{Subject: "alice", Kind: KindUser, Tenant: "gamma"}, false},
		{"empty subject", testPolicy(), Principal{Kind: KindUser, Tenant: "acme"}, false},
		{"subject revoked by a reload", revoked, Principal{Subject: "alice", Kind: KindUser, Tenant: "acme"}, false},
		{"kind revoked by a reload", revoked, Principal{Subject: "thumbnailer", Kind: KindUser, Tenant: "acme"}, false},
		{"kept by the reload", revoked, Principal{Subject: "thumbnailer", Kind: KindService, Tenant: "acme"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := h.prov.Reload(tt.policy); err != nil {
				t.Fatal(err)
			}
			err := h.prov.Authorize(&tt.principal)
			if have := err == nil; have != tt.allowed {
				t.Fatalf("Authorize(%+v) = %v, want allowed %v", tt.principal, err, tt.allowed)
			}
			if err != nil && !errors.Is(err, ErrPrincipalNotAuthorized) {
				t.Fatalf("refusal %v does not match ErrPrincipalNotAuthorized", err)
			}
		})
	}
	// Admit refuses the revoked subject with the same rejection.
	if err := h.prov.Reload(revoked); err != nil {
		t.Fatal(err)
	}
	_, admitErr := h.admit(h.request("r1", "acme", "images"))
	authErr := h.prov.Authorize(&Principal{Subject: "alice", Kind: KindUser, Tenant: "acme"})
	if admitErr == nil || admitErr != authErr { //nolint:errorlint // the same prebuilt rejection
		t.Fatalf("Admit: %v, Authorize: %v; want the same rejection", admitErr, authErr)
	}
}

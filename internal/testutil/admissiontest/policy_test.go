package admissiontest

import (
	"testing"
	"time"

	"github.com/latent-node/latent-node/admission"
	"github.com/latent-node/latent-node/internal/testutil"
	"github.com/latent-node/latent-node/loadsource"
	"github.com/latent-node/latent-node/vocab"
)

func TestPolicy(t *testing.T) {
	tests := []struct {
		name string
		spec Spec
	}{
		{"defaults", Spec{}},
		{"tiny cell, two tenants", Spec{Cell: vocab.CellTiny, Parallelism: 2, MaxPriority: 9,
			Tenants: map[vocab.TenantID][]string{"a": {"x"}, "b": {"y", "z"}}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := Policy(tc.spec)
			clock := testutil.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
			_, err := admission.NewLocalQuotaProvider(p, admission.Options{Clock: clock, Load: loadsource.NewState(time.Hour)})
			if err != nil {
				t.Fatalf("Policy(%+v) is not valid: %v", tc.spec, err)
			}
		})
	}
	t.Run("fresh maps", func(t *testing.T) {
		a, b := Policy(Spec{}), Policy(Spec{})
		delete(a.Tenants, "acme")
		if _, ok := b.Tenants["acme"]; !ok {
			t.Fatal("two policies share their tenants")
		}
	})
	t.Run("negative control", func(t *testing.T) {
		p := Policy(Spec{})
		p.CellClasses = nil
		_, err := admission.NewLocalQuotaProvider(p, admission.Options{Clock: testutil.NewClock(time.Time{}),
			Load: loadsource.NewState(time.Hour)})
		if err == nil {
			t.Fatal("a policy without cell classes was accepted")
		}
	})
}

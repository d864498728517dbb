package admission

import (
	"strings"
	"testing"
	"time"

	"github.com/latent-node/latent-node/vocab"
)

// TestCheckRevision: each rule names the manifest field and what the node
// allows; a revision that fits has no problem (the negative control).
func TestCheckRevision(t *testing.T) {
	pol := testPolicy()
	pol.TrustClasses["untrusted"] = TrustClassPolicy{CellClasses: pol.TrustClasses["untrusted"].CellClasses,
		Limits: Limits{MaxLiveActivations: 6, MaxQueued: 5, MaxReservedFuel: 800_000_000, MaxReservedMemory: 4096 * mib}}
	std := pol.CellClasses[vocab.CellStandard] // no cell class offers shared threading or threads
	std.Threading, std.Features = []vocab.Threading{vocab.ThreadingSingle}, pol.CellClasses[vocab.CellTiny].Features
	pol.CellClasses[vocab.CellStandard] = std
	acme := pol.Tenants["acme"]
	acme.Limits.MaxReservedMemory = 200 * mib
	pol.Tenants["acme"] = acme
	h := harnessWith(t, pol, nil)
	fits := vocab.RevisionPolicy{TrustClass: "untrusted", Requirements: vocab.Requirements{Threading: vocab.ThreadingSingle},
		Ceiling: vocab.Budget{CPUFuel: 100_000_000, MemoryBytes: 32 * mib, WallTime: 2 * time.Second}}
	at := vocab.FieldPath("revisions").Index(1)
	tests := []struct {
		name   string
		tenant vocab.TenantID
		mod    func(*vocab.RevisionPolicy)
		want   []string // "field: problem substring"
	}{
		{"fits", "acme", nil, nil},
		{"trust class unknown", "acme", func(r *vocab.RevisionPolicy) { r.TrustClass = "gold" },
			[]string{"revisions[1].trust_class: names a trust class this node does not have (want one of: untrusted)"}},
		{"trust class not the tenant's", "acme", func(r *vocab.RevisionPolicy) { r.TrustClass = "trusted" },
			[]string{"revisions[1].trust_class: names a trust class the tenant may not use (want one of: untrusted)"}},
		{"fuel above node", "acme", func(r *vocab.RevisionPolicy) { r.Ceiling.CPUFuel = 2_000_000_000 },
			[]string{"revisions[1].ceiling.cpu_fuel: exceeds the node's budget ceiling (1000000000)"}},
		{"memory above node", "beta", func(r *vocab.RevisionPolicy) { r.Ceiling.MemoryBytes = 600 * mib; r.TrustClass = "trusted" },
			[]string{"revisions[1].ceiling.memory_bytes: exceeds the node's budget ceiling (512MiB)"}},
		{"wall time above node", "acme", func(r *vocab.RevisionPolicy) { r.Ceiling.WallTime = time.Minute },
			[]string{"revisions[1].ceiling.wall_time: exceeds the node's budget ceiling (30s)"}},
		{"memory above the tenant's cells", "acme", func(r *vocab.RevisionPolicy) { r.Ceiling.MemoryBytes = 300 * mib },
			[]string{"revisions[1].ceiling.memory_bytes: no cell class the tenant may use has 300MiB (largest: 256MiB)"}},
		{"memory below a page", "acme", func(r *vocab.RevisionPolicy) { r.Ceiling.MemoryBytes = 1000 },
			[]string{"revisions[1].ceiling.memory_bytes: must be at least 64KiB"}},
		{"below the module's minimum", "acme", func(r *vocab.RevisionPolicy) {
			r.Capsule = vocab.Capsule{MinMemoryBytes: 64 * mib, MaxMemoryBytes: 128 * mib}
		}, []string{"revisions[1].ceiling.memory_bytes: is below the module's minimum memory (64MiB)"}},
		{"fuel above the trust class's reservation", "acme", func(r *vocab.RevisionPolicy) { r.Ceiling.CPUFuel = 900_000_000 },
			[]string{"revisions[1].ceiling.cpu_fuel: exceeds what trust class untrusted may reserve (800000000)"}},
		{"memory above the tenant's reservation", "acme", func(r *vocab.RevisionPolicy) { r.Ceiling.MemoryBytes = 250 * mib },
			[]string{"revisions[1].ceiling.memory_bytes: exceeds what the tenant may reserve (200MiB)"}},
		{"threading nowhere", "acme", func(r *vocab.RevisionPolicy) {
			r.Requirements = vocab.Requirements{Threading: vocab.ThreadingShared, Features: vocab.FeatureSetOf(vocab.FeatureThreads)}
			r.Ceiling.MemoryBytes = 8 * mib
		}, []string{"revisions[1].threading: no cell class of this node offers threading shared"}},
		{"feature nowhere", "acme", func(r *vocab.RevisionPolicy) {
			r.Requirements.Features = vocab.FeatureSetOf(vocab.FeatureThreads)
		}, []string{"revisions[1].features: no cell class of this node offers every feature of threads"}},
		{"placement", "acme", func(r *vocab.RevisionPolicy) {
			r.Placement = vocab.NewPlacement([]string{"aarch64"}, []string{"local"}, []string{"eu-1"})
		}, []string{"revisions[1].placement.architectures: does not include this node's architecture (x86_64)",
			"revisions[1].placement.zones: does not include this node's zone (local-a)"}},
		{"one problem per field", "acme", func(r *vocab.RevisionPolicy) { r.Ceiling.MemoryBytes = 4096 * mib },
			[]string{"revisions[1].ceiling.memory_bytes: exceeds the node's budget ceiling (512MiB)"}},
		{"unknown tenant", "nobody", nil, []string{"tenant: names a tenant this node does not have"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rev := fits
			if tt.mod != nil {
				tt.mod(&rev)
			}
			got := h.prov.CheckRevision(tt.tenant, at, rev)
			if len(got) != len(tt.want) {
				t.Fatalf("want %d problems %q, have %q", len(tt.want), tt.want, got)
			}
			for i, w := range tt.want {
				if !strings.HasPrefix(got[i].String(), w) {
					t.Errorf("problem %d: want %q, have %q", i, w, got[i])
				}
			}
		})
	}
}

// TestCheckRevision_sameAsAdmit: for every deployed test service, the check
// finds a problem exactly when an unrestricted request on an idle node is
// refused, leaving aside the node's budget ceiling, which Admit applies by
// lowering the grant.
func TestCheckRevision_sameAsAdmit(t *testing.T) {
	h := newHarness(t, testPolicy())
	pin := h.cat.Pin()
	refusedSome, admittedSome := false, false
	for _, s := range testServices {
		t.Run(string(s.tenant)+"/"+string(s.name), func(t *testing.T) {
			req := h.request("a-"+string(s.name), s.tenant, s.name)
			req.Principal = Principal{Subject: "alice", Kind: KindUser, Tenant: s.tenant}
			if s.tenant == "beta" {
				req.Principal.Subject = "bob"
			}
			pol, err := pin.Policy(req.Revision)
			if err != nil {
				t.Fatal(err)
			}
			var problems []vocab.FieldError
			for _, p := range h.prov.CheckRevision(s.tenant, "", pol) {
				if !strings.Contains(p.Problem, "node's budget ceiling") {
					problems = append(problems, p)
				}
			}
			permit, err := h.admit(req)
			if err == nil {
				admittedSome = true
				if err := permit.Release(); err != nil {
					t.Fatal(err)
				}
			} else {
				refusedSome = true
			}
			if (err != nil) != (len(problems) > 0) {
				t.Fatalf("admit: %v; check: %q", err, problems)
			}
		})
	}
	if !refusedSome || !admittedSome {
		t.Fatalf("the services must include both kinds (refused %v, admitted %v)", refusedSome, admittedSome)
	}
}

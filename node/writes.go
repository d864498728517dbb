package node

// Bounds on each tenant's uploads and deploys in flight, and the check
// that a release could run on this node.

import (
	"sync"
	"time"

	"github.com/latent-node/latent-node/node/api"
	"github.com/latent-node/latent-node/refusal"
	"github.com/latent-node/latent-node/vocab"
)

// How many uploads and deploys one tenant may have in flight at once.
// Inspection runs compile_concurrency modules at a time for the whole node;
// with one deploy per tenant in flight, tenants take turns at it instead of
// one tenant's queue of deploys delaying everyone else's. Uploads only
// write a file, but bounding them keeps one tenant from filling the disk
// with temporary files before any quota counts them.
const (
	MaxTenantUploads = 2
	MaxTenantDeploys = 1
)

// writeRetryAfter is the Retry-After of a write refused for its bound.
const writeRetryAfter = time.Second

// tenantWrites counts each tenant's writes of one kind in flight, at most
// max. Its keys are configured tenants (callers are authenticated first), so
// it is bounded by the configuration.
type tenantWrites struct {
	max      int
	mu       sync.Mutex
	inFlight map[vocab.TenantID]int
}

// begin takes a slot for tenant; false when the tenant has max in flight.
// end gives it back.
func (tw *tenantWrites) begin(tenant vocab.TenantID) bool {
	tw.mu.Lock()
	defer tw.mu.Unlock()
	if tw.inFlight == nil {
		tw.inFlight = map[vocab.TenantID]int{}
	}
	if tw.inFlight[tenant] >= tw.max {
		return false
	}
	tw.inFlight[tenant]++
	return true
}

func (tw *tenantWrites) end(tenant vocab.TenantID) {
	tw.mu.Lock()
	defer tw.mu.Unlock()
	if tw.inFlight[tenant]--; tw.inFlight[tenant] <= 0 {
		delete(tw.inFlight, tenant)
	}
}

// writesBusy is the refusal of an upload or deploy over its bound:
// retryable, the tenant's own concurrency.
func writesBusy() api.Problem {
	return api.Refusal(refusal.Refusal{Code: refusal.CodeResourceExhausted, Reason: refusal.ReasonCapacityExhausted,
		Scope: refusal.ScopeTenant, Dimension: refusal.DimCatalogWrites, Retryable: true})
}

// checkRelease refuses a release that could never run on this node: after
// the catalog's own validation of m, every revision as declared goes through
// admission's CheckRevision (the rules Admit applies, on the grant of a
// request that restricts nothing). The problems name the manifest's fields,
// so the answer is the catalog's *ValidationError. What only inspection
// knows (the module's memory, the features it uses) is checked by Admit.
func (d *deployments) checkRelease(m vocab.Manifest) error {
	if err := vocab.ValidateManifest(m); err != nil {
		return err
	}
	var problems []vocab.FieldError
	for i, r := range m.Revisions {
		problems = append(problems, d.prov.CheckRevision(m.Tenant, vocab.FieldPath("revisions").Index(i), declaredPolicy(r))...)
	}
	if len(problems) > 0 {
		return &vocab.ValidationError{Problems: problems}
	}
	return nil
}

// declaredPolicy is the policy a validated manifest revision declares,
// before inspection: no capsule, and only the declared features (shared
// threading requires threads, as the catalog has it).
func declaredPolicy(r vocab.ManifestRevision) vocab.RevisionPolicy {
	pol := vocab.RevisionPolicy{TrustClass: r.TrustClass, Requirements: vocab.Requirements{Threading: vocab.ThreadingSingle}}
	if r.Threading != "" {
		pol.Requirements.Threading, _ = vocab.ParseThreading(r.Threading) // validated
	}
	for _, name := range r.Features {
		f, _ := vocab.ParseFeature(name) // validated
		pol.Requirements.Features |= vocab.FeatureSetOf(f)
	}
	if pol.Requirements.Threading == vocab.ThreadingShared {
		pol.Requirements.Features |= vocab.FeatureSetOf(vocab.FeatureThreads)
	}
	if c := r.Ceiling; c != nil {
		pol.Ceiling = vocab.Budget{CPUFuel: c.CPUFuel, MemoryBytes: uint64(c.MemoryBytes), WallTime: time.Duration(c.WallTime)}
	}
	if p := r.Placement; p != nil {
		pol.Placement = vocab.NewPlacement(p.Architectures, p.Regions, p.Zones)
	}
	return pol
}

package admission

// Controller and the admission path: Admit (identifiers, grant, cell-class
// selection, the ledger's reservation) and Authorize, the rule of every
// tenant-scoped action.

import (
	"time"

	"github.com/latent-node/latent-node/catalog"
	"github.com/latent-node/latent-node/loadsource"
	"github.com/latent-node/latent-node/refusal"
	"github.com/latent-node/latent-node/vocab"
)

// Controller admits activations against one pinned catalog view and the
// node's one ledger. It is a small value: derive one per request with
// LocalQuotaProvider.WithPolicySource(pin), using the same pin that resolved
// the request's revision.
type Controller struct {
	p   *LocalQuotaProvider
	pin catalog.Pin
}

// Admit checks req and, when every check passes, reserves its queue slot,
// concurrency, fuel and memory in every scope and returns the permit that
// owns the reservation. The order of checks: identifiers and metadata,
// authorization, request budget dimensions, priority, payload, the pinned
// revision, trust class, placement, the budget grant, cell class, the
// deadline, then, under the ledger lock with time sampled again, load,
// duplicate activation id (ids are per tenant: another tenant's live id is
// not a duplicate), every capacity limit and deadline feasibility.
// Nothing is retained before the last check passes; a refusal returns a
// *Rejection and allocates nothing.
func (c Controller) Admit(req *Request) (*Permit, error) {
	p := c.p
	v := p.view.Load() // one view for the whole admission
	pol := &v.policy

	// Bounded identifiers and metadata, before anything else.
	if rej := p.checkIdentifiers(v, req); rej != nil {
		return nil, rej
	}

	// Authorization: exact tenant equality and allowlists (the rule the
	// HTTP layer applies to every tenant-scoped route too; see Authorize).
	pr := &req.Principal
	tenant := v.authorized(pr)
	if tenant == nil || pr.Tenant != req.Revision.Tenant {
		return nil, rejPrincipal
	}
	if pr.Kind == KindService && vocab.ValidateNameWithin(pr.ServiceIdentity, pol.Metadata.MaxIdentifierBytes) != nil {
		return nil, rejServiceIdentity
	}

	// Later-phase budget dimensions must be zero.
	switch b := &req.Budget; {
	case b.NetworkEgressBytes != 0:
		return nil, rejNetworkDimension
	case b.StorageBytes != 0:
		return nil, rejStorageDimension
	case b.Accelerators != 0:
		return nil, rejAccelDimension
	}

	// Priority: node and tenant ceilings, then the one queue class.
	if req.Priority > pol.Limits.MaxPriority {
		return nil, rejPriorityNode
	}
	if req.Priority > tenant.limits.MaxPriority {
		return nil, rejPriorityTenant
	}
	queue := v.prioToQueue[req.Priority]

	// Payload: node and tenant ceilings, equality accepted.
	if req.PayloadBytes > pol.Limits.MaxPayloadBytes {
		return nil, rejPayloadNode
	}
	if req.PayloadBytes > tenant.limits.MaxPayloadBytes {
		return nil, rejPayloadTenant
	}

	// The pinned revision, verified as a whole tuple. Attributes are ignored.
	rev, err := c.pin.Policy(req.Revision)
	if err != nil {
		return nil, rejRevision
	}
	trust, ok := v.trust[rev.TrustClass]
	if !ok {
		return nil, rejTrustClass
	}
	if _, ok := tenant.trust[rev.TrustClass]; !ok {
		return nil, rejTrustClass
	}
	if !rev.Placement.Allows(pol.Placement.Architecture, pol.Placement.Region, pol.Placement.Zone) {
		return nil, rejPlacement
	}

	// The grant: request ∩ capsule ∩ deployment ∩ node.
	budget, rej := grant(&req.Budget, &rev, pol.BudgetCeiling)
	if rej != nil {
		return nil, rej
	}
	cell, rej := p.selectCell(v, budget.MemoryBytes, rev.Requirements, tenant.cellMask&trust.cellMask)
	if rej != nil {
		return nil, rej
	}

	// The deadline, bound once: the relative grant from now, shortened by the
	// caller's absolute deadline.
	now := p.opts.Clock.Now()
	deadline := now.Add(budget.WallTime)
	if !req.Deadline.IsZero() && req.Deadline.Before(deadline) {
		deadline = now.Add(req.Deadline.Sub(now))
	}
	if !deadline.After(now) {
		return nil, rejDeadline
	}

	res := reservation{state: stateQueued, tenant: tenant.index, trust: trust.index, queue: queue, cell: cell,
		fuel: budget.CPUFuel, memory: budget.MemoryBytes}

	p.mu.Lock()
	seq, rej := p.admitLocked(v, req.ActivationID, res, tenant, trust, deadline)
	p.mu.Unlock()
	if rej != nil {
		return nil, rej
	}
	permit := &Permit{permitCore: permitCore{
		p: p, id: req.ActivationID, tenant: tenant.index, seq: seq, budget: budget, deadline: deadline, admittedAt: now,
		obligations: Obligations{
			Tenant: rev.Tenant, Subject: pr.Subject, Service: rev.Service, Route: req.Revision.Route,
			Function: req.Revision.Function, Revision: rev.ID, Release: rev.Release, Artifact: rev.Artifact,
			CellClass: cell, QueueClass: v.queueClasses[queue].Name, QueueIndex: queue, TrustClass: rev.TrustClass,
			Priority: req.Priority, Threading: rev.Requirements.Threading, Features: rev.Requirements.Features,
			Random: rev.Random, ABI: rev.ABI, Instance: rev.Instance, Init: rev.Init, Outbound: rev.Outbound,
		},
	}}
	permit.track()
	return permit, nil
}

// Authorize is the authorization rule of every tenant-scoped action
// (upload, deploy, read, list, delete, the tenant's admission view,
// invoke): under the current policy (a reload changes it for the next
// call) the principal's tenant exists, its subjects allowlist names the
// principal's subject and its kinds allowlist the principal's kind. It
// returns nil or a *Rejection matching ErrPrincipalNotAuthorized, the
// refusal Admit returns for the same principal.
func (p *LocalQuotaProvider) Authorize(pr *Principal) error {
	if p.view.Load().authorized(pr) == nil {
		return rejPrincipal
	}
	return nil
}

// authorized returns the tenant pr acts for when the view's allowlists
// admit pr, else nil.
func (v *view) authorized(pr *Principal) *tenantState {
	tenant, ok := v.tenants[pr.Tenant]
	if !ok || pr.Subject == "" || pr.Kind > KindService || tenant.kinds&(1<<pr.Kind) == 0 {
		return nil
	}
	if _, ok := tenant.subjects[pr.Subject]; !ok {
		return nil
	}
	return tenant
}

// admitLocked runs the checks that must see the ledger and a fresh clock
// sample, then reserves, all under the view v the admission started with
// (tenant and trust come from it).
//
// REQUIRES: p.mu held.
func (p *LocalQuotaProvider) admitLocked(v *view, id string, res reservation, tenant *tenantState, trust *trustState, deadline time.Time) (uint64, *Rejection) {
	// Resample after lock contention; the deadline does not move.
	now := p.opts.Clock.Now()
	remaining := deadline.Sub(now)
	if remaining <= 0 {
		return 0, rejDeadline
	}
	sample, err := p.opts.Load.Read(now)
	if err != nil {
		return 0, unavailable(loadsource.Reason(err))
	}
	if now.Sub(sample.TakenAt) > v.policy.Overload.MaxObservationAge {
		return 0, rejUnavailable[refusal.ReasonLoadSampleStale] // the policy's bound holds whatever the source's
	}
	if sample.CPU >= v.policy.Overload.CPUThreshold {
		return 0, rejOverloadCPU
	}
	if sample.Memory >= v.policy.Overload.MemoryThreshold {
		return 0, rejOverloadMemory
	}
	if _, dup := p.mu.live[liveKey{tenant.index, id}]; dup {
		return 0, rejDuplicate
	}
	// Feasibility: max(floor(n/p)·est, observed) + min_exec + margin < remaining.
	d := &v.policy.Deadline
	wait, ok := queueWait(p.mu.cells[res.cell], v.cells[res.cell].parallelism, d.EstimatedServiceTime)
	if !ok {
		return 0, rejInfeasible
	}
	if p.opts.QueueDelay != nil {
		wait = max(wait, p.opts.QueueDelay.ObservedQueueDelay(res.cell))
	}
	required, ok := addDurations(wait, d.MinimumExecutionTime, d.SafetyMargin)
	if !ok || remaining <= required {
		return 0, rejInfeasible
	}
	if rej := p.reserveLocked(v, liveKey{tenant.index, id}, res, tenant, trust); rej != nil {
		return 0, rej
	}
	return p.mu.seq, nil
}

func (p *LocalQuotaProvider) checkIdentifiers(v *view, req *Request) *Rejection {
	m := &v.policy.Metadata
	if vocab.ValidateNameWithin(req.ActivationID, m.MaxIdentifierBytes) != nil {
		return rejActivationID
	}
	if vocab.ValidateNameWithin(req.Principal.Subject, m.MaxIdentifierBytes) != nil {
		return rejSubject
	}
	r := &req.Revision
	for _, s := range [...]string{string(r.Tenant), string(r.Service), string(r.Route), string(r.Function)} {
		if vocab.ValidateNameWithin(s, m.MaxIdentifierBytes) != nil {
			return rejTargetName
		}
	}
	// Generated ids have their own bound; the pin then matches them exactly.
	if len(r.Revision) > vocab.MaxGeneratedIDBytes || len(r.Release) > vocab.MaxGeneratedIDBytes {
		return rejGeneratedID
	}
	entries, size := 0, 0
	for _, list := range [...][]vocab.Attribute{req.Principal.Claims, req.Attributes, r.Attributes} {
		entries += len(list)
		if entries > m.MaxEntries {
			return rejMetadataEntries
		}
		for _, a := range list {
			if vocab.ValidateNameWithin(a.Key, m.MaxIdentifierBytes) != nil {
				return rejMetadataKey
			}
			size += len(a.Key) + len(a.Value)
			if size > m.MaxBytes {
				return rejMetadataBytes
			}
		}
	}
	return nil
}

// grant intersects the request, the capsule, the deployment ceiling and the
// node ceiling. Memory is rounded down to whole 64 KiB Wasm pages, since linear
// memory grows in pages; a grant below the module's initial memory, or a
// zero dimension, is infeasible and not retryable.
func grant(req *BudgetRequest, rev *vocab.RevisionPolicy, node vocab.Budget) (vocab.Budget, *Rejection) {
	fuel := min(node.CPUFuel, rev.Ceiling.CPUFuel)
	mem := min(node.MemoryBytes, rev.Ceiling.MemoryBytes, rev.Capsule.MaxMemoryBytes)
	wall := min(node.WallTime, rev.Ceiling.WallTime)
	if req.HasCPUFuel {
		fuel = min(fuel, req.CPUFuel)
	}
	if req.HasMemoryBytes {
		mem = min(mem, req.MemoryBytes)
	}
	if req.HasWallTime {
		wall = min(wall, req.WallTime)
	}
	mem &^= vocab.WasmPageBytes - 1
	switch {
	case fuel == 0:
		return vocab.Budget{}, rejZeroFuel
	case mem == 0:
		return vocab.Budget{}, rejZeroMemory
	case wall <= 0:
		return vocab.Budget{}, rejZeroWall
	case mem < rev.Capsule.MinMemoryBytes:
		return vocab.Budget{}, rejMemoryBelowMin
	}
	return vocab.Budget{CPUFuel: fuel, MemoryBytes: mem, WallTime: wall}, nil
}

// selectCell picks the smallest configured class, in the fixed tiny-to-xlarge
// order, that holds the granted memory, offers the threading model and every
// required feature, and is in allowed (tenant ∩ trust class). When none
// qualifies, the rejection names the requirement no configured class meets,
// or says that the compatible classes are not authorized.
func (p *LocalQuotaProvider) selectCell(v *view, mem uint64, req vocab.Requirements, allowed uint8) (vocab.CellClass, *Rejection) {
	var threadingOK, featuresOK, compatible bool
	for _, c := range vocab.CellClasses {
		cs := &v.cells[c]
		if !cs.configured || cs.threading&(1<<req.Threading) == 0 {
			continue
		}
		threadingOK = true
		if !req.Features.SubsetOf(cs.features) {
			continue
		}
		featuresOK = true
		if cs.memory < mem {
			continue
		}
		compatible = true
		if allowed&(1<<c) != 0 {
			return c, nil
		}
	}
	switch {
	case !threadingOK:
		return 0, rejThreading
	case !featuresOK:
		return 0, rejFeatures
	case !compatible:
		return 0, rejNoCell
	}
	return 0, rejCellClass
}

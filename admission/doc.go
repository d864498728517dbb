// Package admission refuses invalid, unauthorized, incompatible, infeasible
// and overloaded work before any cell is touched, and hands the work it
// accepts an affine permit that owns its reservation.
//
// # What it decides
//
// Controller.Admit checks, in this order, and stops at the first refusal:
// bounded identifiers and metadata (aggregated across principal claims,
// request attributes and revision attributes); authorization (a configured
// tenant, exact equality of the principal's tenant and the target's, the
// subject and kind allowlists, a non-anonymous subject, a service identity
// for service principals); that later-phase budget dimensions are zero; the
// priority against the node and tenant ceilings, mapped to its one queue
// class; the payload against the node and tenant ceilings (equality
// accepted); the revision, verified as a whole tuple against the same
// catalog.Pin that resolved it; the trust class; placement; the budget grant
// (request ∩ capsule ∩ deployment ∩ node, memory in whole pages; an omitted
// request dimension adds no restriction, the node ceiling always applies, a
// caller's absolute deadline can only shorten the relative grant); the
// smallest compatible cell class allowed by tenant and trust class; the
// deadline. Then, under the ledger's one mutex and with time sampled again
// (so lock contention counts against the deadline, which never moves): the
// load sample (missing, malformed, future, out-of-order or stale samples fail
// closed as `unavailable`; pressure at or above a threshold is
// `node-overloaded`), a duplicate live activation id of the same tenant
// (activation ids are per tenant: the ledger keys live reservations by tenant
// and id, so one tenant never learns whether another's id is live), every
// capacity limit of the node, tenant, trust-class and queue-class scopes with
// checked arithmetic, and deadline feasibility:
//
//	required = max(floor(n/p)·estimated_service_time, observed_queue_delay)
//	           + minimum_execution_time + safety_margin
//
// where n is the cell class's live reservations and p its parallelism; the
// request is refused when the remaining time is ≤ required, or when the
// arithmetic overflows. Only when everything passes is the reservation
// recorded: a queue slot, a live activation, the granted fuel and memory, in
// every scope. Every admission reserves a queue slot, even when a cell is
// free. Zero in a limit grants nothing.
//
// # Permits
//
// Go has no affine types, so permits are pointers to structs with unexported
// fields that only this package fills (a compile-fail test proves code
// outside cannot); their zero values are inert. Permit owns a queued
// reservation; StartExecution consumes it (returning the queue slot, keeping
// the rest) and returns the ExecutionPermit, which the owner holds until the
// guest stopped and its cell was released or quarantined, then Releases.
// Consuming or releasing twice is an error, and the ledger, not the permit,
// is the authority: a copied or stale permit can never release a reservation
// that is not its own, even under a reused activation id. A permit dropped
// without either is reclaimed by a garbage-collector safety net and counted
// (LeakedPermits).
//
// # Errors
//
// Every refusal is a *Rejection with a platform code, a stable reason, a
// scope and a dimension, and Retryable set only for occupied capacity, node
// overload, queue infeasibility and source unavailability (never for an
// oversized payload or an intrinsically infeasible budget). Messages are
// built from those fields alone, so they never echo principals, tenants,
// attributes, payloads, paths, counters or load numbers. Rejections are
// shared package values: refusing allocates nothing. errors.Is matches them
// against the exported sentinels by code and reason.
//
// # Non-goals
//
// Admission does not queue, order, or schedule (the scheduler does), does
// not lease cells or grow pools, does not measure consumption (the runner
// does), and is not a rate limiter: its counters are concurrent
// reservations, so snapshots have no reset time.
//
// # Internal organization
//
//   - policy.go: Policy and its one-time validation.
//   - ledger.go: LocalQuotaProvider, the one mutex over every scope's
//     counters and the live-reservation map (bounded by the node's
//     MaxLiveActivations); snapshots.
//   - controller.go: Controller.Admit, the grant, cell selection.
//   - deploy.go: LocalQuotaProvider.CheckRevision, the deploy-time check
//     that a revision could ever be admitted (the grant and cell selection
//     of Admit, for a request that restricts nothing).
//   - permit.go: Permit, ExecutionPermit, the safety net.
//   - errors.go: Rejection, the sentinels, the prebuilt refusals.
//   - request.go: Request, Principal, BudgetRequest, Obligations, and the
//     interfaces admission consumes (Clock, LoadSource, QueueDelaySource).
//
// Lock order: LocalQuotaProvider.mu is a leaf. Under it admission calls only
// the clock, the load source and the queue-delay source, which must not block.
//
// # Usage
//
//	prov, err := admission.NewLocalQuotaProvider(policy, admission.Options{
//		Clock: clock, Load: loadState, QueueDelay: scheduler})
//	// per request, with the pin that resolved the target:
//	pin := cat.Pin()
//	rev, err := pin.Resolve(target, routingKey)
//	permit, err := prov.WithPolicySource(pin).Admit(&admission.Request{…, Revision: rev})
//	// scheduler: before leasing a cell
//	err = permit.EnsureSchedulable()
//	exec, err := permit.StartExecution()
//	// … run the guest, release or quarantine the cell …
//	exec.Release()
package admission

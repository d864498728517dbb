package admission

// Permit and ExecutionPermit: an admitted activation's reservation from the
// queue to execution, its release, and the safety net for leaked permits.

import (
	"runtime"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/latent-node/latent-node/refusal"
	"github.com/latent-node/latent-node/vocab"
)

// Permit errors (programming errors of the owner, not rejections).
var (
	// ErrPermitUsed: the permit was already consumed by StartExecution or released.
	ErrPermitUsed = errors.New("admission: permit already consumed or released")
	// ErrPermitInvalid: the permit was not issued by admission (a zero value).
	ErrPermitInvalid = errors.New("admission: permit not issued by admission")
)

// rejDeadlineInQueue refuses a queued permit whose deadline passed before
// execution started.
var rejDeadlineInQueue = &Rejection{refusal.CodeDeadlineExceeded, refusal.ReasonDeadlineExceeded, refusal.ScopeQueueClass,
	refusal.DimWallTime, false}

// noCopy makes go vet's copylocks check flag copies of permits.
type noCopy struct{}

func (*noCopy) Lock()   {}
func (*noCopy) Unlock() {}

// permitCore is the immutable identity and obligations of an admitted
// activation, shared by its admission and execution permits.
type permitCore struct {
	p           *LocalQuotaProvider
	id          string
	tenant      int    // the tenant's ledger index: with id, the key of the reservation
	seq         uint64 // the ledger's sequence number of this reservation
	budget      vocab.Budget
	deadline    time.Time
	admittedAt  time.Time
	obligations Obligations
}

// ID returns the activation id (unique among the tenant's live activations).
func (c *permitCore) ID() string { return c.id }

// key is the ledger key of the reservation.
func (c *permitCore) key() liveKey { return liveKey{c.tenant, c.id} }

// Budget returns the effective budget: the granted fuel, memory and relative
// wall time. Initialize execution accounting from it; never reset the wall
// time at dequeue.
func (c *permitCore) Budget() vocab.Budget { return c.budget }

// Deadline returns the monotonic deadline bound at admission.
func (c *permitCore) Deadline() time.Time { return c.deadline }

// AdmittedAt returns the admission time (for queue-wait accounting).
func (c *permitCore) AdmittedAt() time.Time { return c.admittedAt }

// Obligations returns what the activation must be executed with.
func (c *permitCore) Obligations() Obligations { return c.obligations }

// Permit owns an admitted activation's reservation while it is
// queued: a queue slot, a live activation, its fuel and its memory, in every
// scope. Only admission issues permits; the zero value is inert. Transfer it
// with the queued work; then exactly one of StartExecution or Release
// consumes it. A permit dropped without either is reclaimed by a
// garbage-collection safety net and counted in LeakedPermits: that is a bug in
// its owner, never the intended path.
type Permit struct {
	_ noCopy
	permitCore
	used atomic.Bool // consumed by StartExecution or Release
	// started and execReleased follow the execution permit, so that this
	// permit's safety net also covers it (see track).
	started      atomic.Bool
	execReleased atomic.Bool
}

// ExecutionPermit owns the reservation of an executing activation (live,
// fuel, memory; the queue slot was returned at StartExecution). Hold it until
// the guest has stopped, accounting is final and the cell was released or
// quarantined; then Release it, once.
type ExecutionPermit struct {
	_ noCopy
	// a is the admission permit it came from: its identity and obligations
	// are this permit's, holding it keeps a's safety net from running while
	// this permit is reachable, and the release is recorded there.
	a *Permit
}

// core returns the shared identity and obligations (zero for a zero permit).
func (e *ExecutionPermit) core() *permitCore {
	if e.a == nil {
		return &permitCore{}
	}
	return &e.a.permitCore
}

// ID returns the activation id.
func (e *ExecutionPermit) ID() string { return e.core().ID() }

// Budget returns the effective budget (see Permit.Budget).
func (e *ExecutionPermit) Budget() vocab.Budget { return e.core().Budget() }

// Deadline returns the monotonic deadline bound at admission.
func (e *ExecutionPermit) Deadline() time.Time { return e.core().Deadline() }

// AdmittedAt returns the admission time.
func (e *ExecutionPermit) AdmittedAt() time.Time { return e.core().AdmittedAt() }

// Obligations returns what the activation must be executed with.
func (e *ExecutionPermit) Obligations() Obligations { return e.core().Obligations() }

// The safety net uses runtime.SetFinalizer rather than runtime.AddCleanup:
// AddCleanup allocates its argument and a closure per call (two allocations
// on the admission hot path), SetFinalizer none (BenchmarkSafetyNet: 3
// allocs/op against 1, the one being the probe each iteration allocates). One finalizer, on the admission permit, covers both permits: the
// execution permit points at the admission permit, so the finalizer can only
// run once neither is reachable, and it reclaims the reservation in
// whichever state was abandoned. It is set at admission and cleared by the
// final release, so StartExecution does not touch it. It only reads the
// permits' immutable fields and flags. See RATIONALE.md.

func (a *Permit) track() { runtime.SetFinalizer(a, reclaimAdmission) }

func reclaimAdmission(a *Permit) {
	switch {
	case !a.used.Load():
		a.p.reclaim(a.key(), a.seq, stateQueued)
	case a.started.Load() && !a.execReleased.Load():
		a.p.reclaim(a.key(), a.seq, stateExecuting)
	}
}

func (p *LocalQuotaProvider) reclaim(id liveKey, seq uint64, state uint8) {
	p.mu.Lock()
	ok := p.releaseLocked(id, seq, state)
	p.mu.Unlock()
	if ok {
		p.leaked.Add(1)
	}
}

func (a *Permit) take() error {
	if a.p == nil {
		return ErrPermitInvalid
	}
	if !a.used.CompareAndSwap(false, true) {
		return ErrPermitUsed
	}
	return nil
}

// EnsureSchedulable reports whether the queued activation may still be handed
// to a cell: its deadline has not passed. Call it immediately before leasing
// a cell, after checking the caller's cancellation. It consumes nothing.
func (a *Permit) EnsureSchedulable() error {
	switch {
	case a.p == nil:
		return ErrPermitInvalid
	case a.used.Load():
		return ErrPermitUsed
	case !a.deadline.After(a.p.opts.Clock.Now()):
		return rejDeadlineInQueue
	}
	return nil
}

// StartExecution consumes the permit once a cell was leased: time is sampled
// again under the ledger lock, and if the deadline has not passed only the
// queue slot is returned and the rest of the reservation moves to the
// returned ExecutionPermit. On error the whole reservation is released, and
// the caller must release or quarantine its lease.
func (a *Permit) StartExecution() (*ExecutionPermit, error) {
	if err := a.take(); err != nil {
		return nil, err
	}
	p := a.p
	p.mu.Lock()
	if !a.deadline.After(p.opts.Clock.Now()) {
		p.releaseLocked(a.key(), a.seq, stateQueued)
		p.mu.Unlock()
		runtime.SetFinalizer(a, nil)
		return nil, rejDeadlineInQueue
	}
	ok := p.startLocked(a.key(), a.seq)
	p.mu.Unlock()
	if !ok {
		runtime.SetFinalizer(a, nil)
		return nil, ErrPermitUsed // a copy of this permit released or started it
	}
	a.started.Store(true)
	return &ExecutionPermit{a: a}, nil
}

// startLocked moves a queued reservation to executing and returns its queue slot.
//
// REQUIRES: p.mu held.
func (p *LocalQuotaProvider) startLocked(id liveKey, seq uint64) bool {
	r, ok := p.mu.live[id]
	if !ok || r.seq != seq || r.state != stateQueued {
		return false
	}
	r.state = stateExecuting
	p.mu.live[id] = r
	p.mu.node.queued--
	p.mu.tenants[r.tenant].queued--
	p.mu.trust[r.trust].queued--
	p.mu.queues[r.queue]--
	return true
}

// Release returns the whole reservation of a queued activation (enqueue
// failure, cancellation, expiry, shutdown). It may be called once.
func (a *Permit) Release() error {
	if err := a.take(); err != nil {
		return err
	}
	runtime.SetFinalizer(a, nil)
	if !a.p.release(a.key(), a.seq, stateQueued) {
		return ErrPermitUsed // a copy of this permit released or started it
	}
	return nil
}

// Release returns the whole reservation of an executed activation, whatever
// it consumed. Call it after the guest stopped and the cell was released or
// quarantined. It may be called once.
func (e *ExecutionPermit) Release() error {
	if e.a == nil {
		return ErrPermitInvalid
	}
	if !e.a.execReleased.CompareAndSwap(false, true) {
		return ErrPermitUsed
	}
	runtime.SetFinalizer(e.a, nil)
	if !e.a.p.release(e.a.key(), e.a.seq, stateExecuting) {
		return ErrPermitUsed // a copy of this permit released it
	}
	return nil
}

func (p *LocalQuotaProvider) release(id liveKey, seq uint64, state uint8) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.releaseLocked(id, seq, state)
}

package scheduler

// Error, the scheduler's refusal of work it had accepted, and its sentinels.

import "github.com/latent-node/latent-node/refusal"

// Error is the scheduler's refusal of work it had accepted: a refusal.Refusal
// (a platform code, a stable reason, the limiting scope and dimension, and
// whether retrying the same request later can succeed) — the value
// admission.Rejection is too, so the node maps both to one problem document.
// Messages are built from these fields (and, for ErrCancelled, the caller's
// context error), never from tenants, principals or payloads.
//
// Compare with errors.Is against the exported sentinels (by reason);
// errors.As retrieves the *Error. A cancellation wraps the context's cause,
// so errors.Is(err, context.Canceled) also holds.
type Error struct {
	r     refusal.Refusal
	cause error
}

// Sentinels of the scheduler's refusals.
var (
	// ErrQueueWaitExceeded: the item waited Config.MaxWait (HTTP 429).
	ErrQueueWaitExceeded = &Error{r: refusal.Refusal{Code: refusal.CodeResourceExhausted, Reason: refusal.ReasonQueueWaitExceeded,
		Scope: refusal.ScopeQueueClass, Dimension: refusal.DimWaitTime, Retryable: true}}
	// ErrFairShare: the item was the newest waiter of the principal holding
	// the most pending slots of a full queue class, and gave its slot to a
	// principal holding fewer than its share (HTTP 429).
	ErrFairShare = &Error{r: refusal.Refusal{Code: refusal.CodeResourceExhausted, Reason: refusal.ReasonFairShareOfWaitingSlots,
		Scope: refusal.ScopeQueueClass, Dimension: refusal.DimQueued, Retryable: true}}
	// ErrShuttingDown: the scheduler stopped accepting or dropped queued work
	// because it is shutting down (HTTP 503).
	ErrShuttingDown = &Error{r: refusal.Refusal{Code: refusal.CodeUnavailable, Reason: refusal.ReasonShuttingDown,
		Scope: refusal.ScopeNode, Retryable: true}}
	// ErrCancelled: the caller went away (its context ended) while the item
	// was queued. It wraps the context's cause.
	ErrCancelled = &Error{r: refusal.Refusal{Code: refusal.CodeCancelled, Reason: refusal.ReasonCancelled, Scope: refusal.ScopeRequest}}
	// ErrExecutorPanicked: the executor panicked; the cell was quarantined
	// and the permit released (HTTP 500, platform failure).
	ErrExecutorPanicked = &Error{r: refusal.Internal.WithDimension(refusal.DimExecutor)}
)

// Error renders "scheduler: code/reason", plus the cause if any.
func (e *Error) Error() string {
	s := "scheduler: " + e.r.Code.String() + "/" + e.r.Reason.String()
	if e.cause != nil {
		s += ": " + e.cause.Error()
	}
	return s
}

// Refusal is the refusal the error stands for.
func (e *Error) Refusal() refusal.Refusal { return e.r }

// Code is the platform code (resource-exhausted, unavailable, cancelled, internal).
func (e *Error) Code() refusal.Code { return e.r.Code }

// Reason is the stable reason (queue-wait-exceeded, fair-share-of-waiting-slots,
// shutting-down, cancelled, platform-failure).
func (e *Error) Reason() refusal.Reason { return e.r.Reason }

// Scope is the limiting scope (queue-class, node, request).
func (e *Error) Scope() refusal.Scope { return e.r.Scope }

// Dimension is the limiting dimension, if any.
func (e *Error) Dimension() refusal.Dimension { return e.r.Dimension }

// Retryable reports whether the same request may succeed later.
func (e *Error) Retryable() bool { return e.r.Retryable }

// Unwrap returns the cause (the context's error for ErrCancelled).
func (e *Error) Unwrap() error { return e.cause }

// Is matches the sentinel of the same reason.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.r.Reason == e.r.Reason
}

// withCause returns a copy of the sentinel e wrapping cause.
func (e *Error) withCause(cause error) *Error {
	c := *e
	c.cause = cause
	return &c
}

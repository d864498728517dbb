package scheduler

// Error is the scheduler's refusal of work it had accepted: a platform code,
// a stable reason, the limiting scope and dimension, and whether retrying
// the same request later can succeed — the same vocabulary as
// admission.Rejection, so the node maps both to one problem document.
// Messages are built from these fields (and, for ErrCancelled, the caller's
// context error), never from tenants, principals or payloads.
//
// Compare with errors.Is against the exported sentinels (by reason);
// errors.As retrieves the *Error. A cancellation wraps the context's cause,
// so errors.Is(err, context.Canceled) also holds.
type Error struct {
	code, reason, scope, dimension string
	retryable                      bool
	cause                          error
}

// Sentinels of the scheduler's refusals.
var (
	// ErrQueueWaitExceeded: the item waited Config.MaxWait (HTTP 429).
	ErrQueueWaitExceeded = &Error{code: "resource-exhausted", reason: "queue-wait-exceeded",
		scope: "queue-class", dimension: "wait-time", retryable: true}
	// ErrFairShare: the item was the newest waiter of the principal holding
	// the most pending slots of a full queue class, and gave its slot to a
	// principal holding fewer than its share (HTTP 429).
	ErrFairShare = &Error{code: "resource-exhausted", reason: "fair-share-of-waiting-slots",
		scope: "queue-class", dimension: "queued", retryable: true}
	// ErrShuttingDown: the scheduler stopped accepting or dropped queued work
	// because it is shutting down (HTTP 503).
	ErrShuttingDown = &Error{code: "unavailable", reason: "shutting-down", scope: "node", retryable: true}
	// ErrCancelled: the caller went away (its context ended) while the item
	// was queued. It wraps the context's cause.
	ErrCancelled = &Error{code: "cancelled", reason: "cancelled", scope: "request"}
	// ErrExecutorPanicked: the executor panicked; the cell was quarantined
	// and the permit released (HTTP 500, platform failure).
	ErrExecutorPanicked = &Error{code: "internal", reason: "platform-failure", scope: "node", dimension: "executor"}
)

// Error renders "scheduler: code/reason", plus the cause if any.
func (e *Error) Error() string {
	s := "scheduler: " + e.code + "/" + e.reason
	if e.cause != nil {
		s += ": " + e.cause.Error()
	}
	return s
}

// Code is the platform code (resource-exhausted, unavailable, cancelled, internal).
func (e *Error) Code() string { return e.code }

// Reason is the stable reason (queue-wait-exceeded, fair-share-of-waiting-slots,
// shutting-down, cancelled, platform-failure).
func (e *Error) Reason() string { return e.reason }

// Scope is the limiting scope (queue-class, node, request).
func (e *Error) Scope() string { return e.scope }

// Dimension is the limiting dimension, if any.
func (e *Error) Dimension() string { return e.dimension }

// Retryable reports whether the same request may succeed later.
func (e *Error) Retryable() bool { return e.retryable }

// Unwrap returns the cause (the context's error for ErrCancelled).
func (e *Error) Unwrap() error { return e.cause }

// Is matches the sentinel of the same reason.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.reason == e.reason
}

// withCause returns a copy of the sentinel e wrapping cause.
func (e *Error) withCause(cause error) *Error {
	c := *e
	c.cause = cause
	return &c
}

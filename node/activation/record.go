package activation

// Record, the one record of a request the front serves: filled as the
// request goes (the front, authentication, the activation manager) and read
// by the activation metrics once its guest ran and by the rest once it is
// answered (the access log, the refusal counters, the invocation's trace
// span), never re-read from the wire.

import (
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"time"

	"github.com/latent-node/latent-node/refusal"
	"github.com/latent-node/latent-node/vocab"
)

// Record is what the node knows of one request. For an invocation it is the
// activation's record: its id, target, revision, where its time went and
// what the guest did, or the refusal that answered it.
type Record struct {
	// ID is an invocation's activation id: the caller's Latent-Activation-Id
	// or one the front made (empty for other requests).
	ID string
	// Tenant is the authenticated principal's tenant ("" before
	// authentication); Peer is set once a cluster peer presented the peer
	// token.
	Tenant vocab.TenantID
	Peer   bool

	// Ingress is the request's reservation in its ingress pool (nil when it
	// passed no governor): what the request holds beyond its body is
	// charged to it before it is held (Reservation).
	Ingress Reservation

	// Target is an invocation's target as its path names it (the front's
	// router parsed it, nothing validated it yet), PathRest the path's
	// suffix after the route, unescaped ("" without one).
	Target   vocab.Target
	PathRest string

	// Revision is the revision an invocation resolved to ("" before).
	Revision vocab.RevisionID
	// Executed is set once a guest ran; the fields below are its.
	Executed        bool
	Outcome         refusal.Outcome
	FuelUsed        uint64
	MemoryPeakBytes uint64
	CellClass       vocab.CellClass
	QueueClass      string // the name of the queue class it was admitted to
	Timing          Timing
	// Execution is the guest's own time as the runner measured it (the
	// pauses for newcomers taken out): Latent-Execution-Ms.
	Execution time.Duration
	Stderr    []byte

	// Answered is set once the request's answer is known to be a problem
	// (Answer); Refusal is then its refusal, valid only then. For an
	// executed activation that failed it is the outcome's (code
	// execution-failed, the outcome as the reason): a failure, not a
	// refusal (Refused).
	Answered bool
	Refusal  refusal.Refusal

	// vals holds the values of the answer headers set through the record
	// (SetHeader): room for an invocation's id, activation headers,
	// Content-Type and Content-Length, one array instead of a slice each.
	vals  [12]string
	nvals int
}

// Answer records that the request is answered with the problem of ref.
// The front's answer writer records every problem it writes; the
// activation manager records its own before it writes, so the trace span
// can end before the answer's bytes go out.
func (r *Record) Answer(ref refusal.Refusal) { r.Answered, r.Refusal = true, ref }

// Refused reports whether the request was refused: answered with a problem
// before any guest ran.
func (r *Record) Refused() bool { return r.Answered && !r.Executed }

// OutcomeName is the executed activation's outcome, "" when no guest ran.
func (r *Record) OutcomeName() string {
	if !r.Executed {
		return ""
	}
	return r.Outcome.String()
}

// ReasonName is the refusal's reason, "" when the request was not refused.
func (r *Record) ReasonName() string {
	if !r.Refused() {
		return ""
	}
	return r.Refusal.Reason.String()
}

// Reservation is a request's hold on the node's memory for requests in
// flight (the front's ingress ticket). Grow adds n bytes, or says which
// limit they do not fit.
type Reservation interface {
	Grow(n uint64) (refusal.Refusal, bool)
}

// Timing is where an executed activation's time went, from the moment its
// request's headers were read: Front (reading the body, resolving,
// admitting, queuing), Queue (waiting for dispatch, and for newcomers a
// paused guest let go first), Exec (the scheduler's execution, from cell
// lease to release) and Back (from the result's delivery until the
// handler ran again): Server-Timing.
type Timing struct{ Front, Queue, Exec, Back time.Duration }

// QueueWait is the time before the guest ran: front and queue.
func (t Timing) QueueWait() time.Duration { return t.Front + t.Queue }

// Holder is an answer writer that holds its request's record: the front's
// access writer.
type Holder interface{ Record() *Record }

// Of returns the record held by w, or by a writer w wraps (Unwrap, as
// http.ResponseController finds the connection's), or a record nobody
// reads when the request did not pass the front (direct calls in tests).
// The record travels with the answer writer, so that neither the request
// nor its context is copied to carry it.
func Of(w http.ResponseWriter) *Record {
	for w != nil {
		if h, ok := w.(Holder); ok {
			return h.Record()
		}
		u, ok := w.(interface{ Unwrap() http.ResponseWriter })
		if !ok {
			break
		}
		w = u.Unwrap()
	}
	return &Record{}
}

// NewID returns a fresh activation id: 16 random bytes in hex.
func NewID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go ≥ 1.24)
	return hex.EncodeToString(b[:])
}

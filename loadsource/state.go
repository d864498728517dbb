package loadsource

// State, the shared load observation admission reads: Publish, Read (fail
// closed on a stale or malformed Sample) and Snapshot.

import (
	"sync/atomic"
	"time"

	"github.com/cockroachdb/errors"
)

// FutureTolerance is how far a sample's TakenAt may lie after the reader's
// now and still be read. The node's sampler and admission read the same
// monotonic clock, so the only legitimate skew is the race between admission
// taking now and loading the state while the sampler publishes in between
// (microseconds; milliseconds when the reader is preempted). A few
// milliseconds absorb that race without spurious rejections; anything beyond
// is a broken producer. A sample accepted inside the tolerance can stay fresh
// at most FutureTolerance longer than maxAge.
const FutureTolerance = 5 * time.Millisecond

// Sample is one observation of host (or cgroup) pressure.
type Sample struct {
	// CPU is the fraction of usable CPU capacity in use, in [0,1].
	CPU float64
	// Memory is the fraction of usable memory in use, in [0,1].
	Memory float64
	// TakenAt is when the observation was made; never zero. Use times from
	// time.Now (they carry a monotonic reading, so wall-clock steps do not
	// reorder samples) or from the same fake clock as the reader.
	TakenAt time.Time
}

// record is the immutable value behind State's pointer. last is the last
// accepted sample (valid only when has); err, when non-nil, is the poison
// that reads return until a later valid sample is accepted.
type record struct {
	last Sample
	has  bool
	err  error
}

// State is the shared, externally updated load observation that admission
// reads on its hot path. Publish and Read are safe for concurrent use; Read
// is lock-free and does not allocate. A State starts nothing.
type State struct {
	maxAge time.Duration
	cur    atomic.Pointer[record]

	accepted          atomic.Uint64
	refusedMalformed  atomic.Uint64
	refusedOutOfOrder atomic.Uint64
}

// NewState returns an empty State whose reads fail closed (missing) until a
// valid sample is published. Samples older than maxAge are stale.
// REQUIRES: maxAge > 0 (configuration validation guarantees it); NewState
// panics otherwise.
func NewState(maxAge time.Duration) *State {
	if maxAge <= 0 {
		panic(errors.AssertionFailedf("loadsource: maximum observation age must be positive"))
	}
	return &State{maxAge: maxAge}
}

// MaxAge returns the maximum age configured at construction.
func (s *State) MaxAge() time.Duration { return s.maxAge }

// Publish offers a sample. A valid sample strictly later than the last
// accepted one replaces it and clears any poison. Otherwise the sample is
// refused and the state is poisoned (reads fail closed) until a later valid
// sample arrives:
//   - malformed (a pressure NaN, infinite or outside [0,1], or a zero
//     TakenAt): the error matches ErrSampleMalformed;
//   - out-of-order (TakenAt not after the last accepted sample's; equal counts
//     as out-of-order): the error matches ErrSampleOutOfOrder.
//
// A refused sample never moves the ordering watermark: the next sample must
// be later than the last accepted one. See the package documentation for why
// a refusal poisons instead of being ignored.
func (s *State) Publish(x Sample) error {
	field := malformed(x)
	var next *record
	for {
		cur := s.cur.Load()
		next = transition(cur, x, field != "")
		if s.cur.CompareAndSwap(cur, next) {
			break
		}
		// Another publisher won: judge x against its result.
	}
	switch next.err {
	case nil:
		s.accepted.Add(1)
		return nil
	case ErrSampleMalformed:
		s.refusedMalformed.Add(1)
		return errors.Wrapf(ErrSampleMalformed, "loadsource: publish: %s", errors.Safe(field))
	default:
		s.refusedOutOfOrder.Add(1)
		return errors.Wrap(ErrSampleOutOfOrder, "loadsource: publish: not after the last accepted sample")
	}
}

// transition returns the record that follows cur when x is published.
func transition(cur *record, x Sample, malformed bool) *record {
	if cur == nil {
		cur = &record{}
	}
	switch {
	case malformed:
		return &record{last: cur.last, has: cur.has, err: ErrSampleMalformed}
	case cur.has && !x.TakenAt.After(cur.last.TakenAt):
		return &record{last: cur.last, has: cur.has, err: ErrSampleOutOfOrder}
	}
	return &record{last: x, has: true}
}

// malformed names what is wrong with x, or returns "".
func malformed(x Sample) string {
	switch {
	case !isPressure(x.CPU):
		return "cpu pressure is NaN, infinite or out of range"
	case !isPressure(x.Memory):
		return "memory pressure is NaN, infinite or out of range"
	case x.TakenAt.IsZero():
		return "zero sample time"
	}
	return ""
}

// isPressure reports whether v is in [0,1]; NaN and infinities fail.
func isPressure(v float64) bool { return v >= 0 && v <= 1 }

// Read returns the current sample if it may be trusted at now, and otherwise
// fails closed with one of the ErrSample* sentinels (all matching
// ErrUnavailable), checked in this order:
//   - ErrSampleMissing: nothing was ever published;
//   - ErrSampleMalformed, ErrSampleOutOfOrder: the state is poisoned;
//   - ErrSampleFuture: TakenAt is more than FutureTolerance after now
//     (TakenAt == now+FutureTolerance is still read);
//   - ErrSampleStale: now − TakenAt > maxAge (an age of exactly maxAge is
//     still fresh: only samples older than the maximum age fail).
//
// now comes from the caller's clock. Read is lock-free and allocation-free.
func (s *State) Read(now time.Time) (Sample, error) {
	r := s.cur.Load()
	if err := check(r, now, s.maxAge); err != nil {
		return Sample{}, err
	}
	return r.last, nil
}

func check(r *record, now time.Time, maxAge time.Duration) error {
	switch {
	case r == nil:
		return ErrSampleMissing
	case r.err != nil:
		return r.err
	}
	age := now.Sub(r.last.TakenAt)
	switch {
	case age < -FutureTolerance:
		return ErrSampleFuture
	case age > maxAge:
		return ErrSampleStale
	}
	return nil
}

// Snapshot is a point-in-time view of a State for metrics and readiness.
// It contains load numbers: it is a trusted-local surface, never part of a
// rejection.
type Snapshot struct {
	// Last is the last accepted sample, the zero Sample if none.
	Last Sample
	// Age is now − Last.TakenAt (negative when future-dated), 0 if none.
	Age time.Duration
	// Reason is the wire name of Reason(err) for the error Read(now) would
	// return: "" when the
	// sample is usable.
	Reason string
	// Accepted counts samples accepted by Publish.
	Accepted uint64
	// RefusedMalformed and RefusedOutOfOrder count refused publishes.
	RefusedMalformed  uint64
	RefusedOutOfOrder uint64
}

// Snapshot returns the current view of s at now.
func (s *State) Snapshot(now time.Time) Snapshot {
	r := s.cur.Load()
	snap := Snapshot{
		Reason:            Reason(check(r, now, s.maxAge)).String(),
		Accepted:          s.accepted.Load(),
		RefusedMalformed:  s.refusedMalformed.Load(),
		RefusedOutOfOrder: s.refusedOutOfOrder.Load(),
	}
	if r != nil && r.has {
		snap.Last = r.last
		snap.Age = now.Sub(r.last.TakenAt)
	}
	return snap
}

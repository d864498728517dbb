package loadsource

// The fail-closed errors of the load source (ErrUnavailable and its cases)
// and Reason, their stable reason for admission.

import (
	"github.com/cockroachdb/errors"

	"github.com/latent-node/latent-node/refusal"
)

// ErrUnavailable is the umbrella sentinel: errors.Is(err, ErrUnavailable)
// holds for every error that State.Read returns and every refusal of
// State.Publish. Admission maps it to the platform code
// `unavailable` and forwards Reason(err) to the caller.
var ErrUnavailable = errors.New("loadsource: load source unavailable")

// The fail-closed cases. Each matches ErrUnavailable and has a stable
// reason string (see Reason). Their messages never contain load numbers,
// timestamps or paths: admission forwards the reason to callers.
var (
	// ErrSampleMissing: nothing has been published yet.
	ErrSampleMissing = newUnavailable(refusal.ReasonLoadSampleMissing)
	// ErrSampleMalformed: the latest publish carried a pressure that is NaN,
	// infinite or outside [0,1], or a zero TakenAt.
	ErrSampleMalformed = newUnavailable(refusal.ReasonLoadSampleMalformed)
	// ErrSampleOutOfOrder: the latest publish carried a TakenAt that is not
	// after the last accepted sample's.
	ErrSampleOutOfOrder = newUnavailable(refusal.ReasonLoadSampleOutOfOrder)
	// ErrSampleFuture: the sample is dated more than FutureTolerance after the
	// reader's now.
	ErrSampleFuture = newUnavailable(refusal.ReasonLoadSampleFuture)
	// ErrSampleStale: the sample is older than the State's maximum age.
	ErrSampleStale = newUnavailable(refusal.ReasonLoadSampleStale)
)

// ErrSourceMalformed matches, under errors.Is, every error a Source returns
// because a file it reads is malformed (unparsable, out of range, a
// cumulative counter going backwards) or, for PSISource, because its Clock did
// not advance between two readings. It is a Source error, not a State one:
// the Sampler publishes nothing and the State fails closed by age.
var ErrSourceMalformed = errors.New("loadsource: source file malformed")

// reasonUnavailable is the reason of any other error.
const reasonUnavailable = refusal.ReasonLoadSourceUnavailable

// unavailableError is one fail-closed case. It is a type of its own, not
// errors.Mark(…, ErrUnavailable): a mark makes every marked error equivalent
// to every other one under errors.Is, and the cases must stay distinct.
type unavailableError struct{ reason refusal.Reason }

func newUnavailable(reason refusal.Reason) error { return &unavailableError{reason: reason} }

func (e *unavailableError) Error() string { return "loadsource: " + e.reason.String() }

// Is makes errors.Is(err, ErrUnavailable) hold for every case.
func (e *unavailableError) Is(target error) bool { return target == ErrUnavailable }

// Reason returns the stable, sanitized reason of err: ReasonNone for nil, one of
// load-sample-missing, load-sample-malformed, load-sample-out-of-order,
// load-sample-future or load-sample-stale for the sentinels above (also when
// wrapped), and load-source-unavailable for any other error.
func Reason(err error) refusal.Reason {
	if err == nil {
		return refusal.ReasonNone
	}
	var e *unavailableError
	if errors.As(err, &e) {
		return e.reason
	}
	return reasonUnavailable
}

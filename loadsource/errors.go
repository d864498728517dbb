package loadsource

import "github.com/cockroachdb/errors"

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
	ErrSampleMissing = newUnavailable("load-sample-missing")
	// ErrSampleMalformed: the latest publish carried a pressure that is NaN,
	// infinite or outside [0,1], or a zero TakenAt.
	ErrSampleMalformed = newUnavailable("load-sample-malformed")
	// ErrSampleOutOfOrder: the latest publish carried a TakenAt that is not
	// after the last accepted sample's.
	ErrSampleOutOfOrder = newUnavailable("load-sample-out-of-order")
	// ErrSampleFuture: the sample is dated more than FutureTolerance after the
	// reader's now.
	ErrSampleFuture = newUnavailable("load-sample-future")
	// ErrSampleStale: the sample is older than the State's maximum age.
	ErrSampleStale = newUnavailable("load-sample-stale")
)

// ErrSourceMalformed matches, under errors.Is, every error a Source returns
// because a file it reads is malformed (unparsable, out of range, a
// cumulative counter going backwards) or, for PSISource, because its Clock did
// not advance between two readings. It is a Source error, not a State one:
// the Sampler publishes nothing and the State fails closed by age.
var ErrSourceMalformed = errors.New("loadsource: source file malformed")

// reasonUnavailable is the reason of any other error.
const reasonUnavailable = "load-source-unavailable"

// unavailableError is one fail-closed case. It is a type of its own, not
// errors.Mark(…, ErrUnavailable): a mark makes every marked error equivalent
// to every other one under errors.Is, and the cases must stay distinct.
type unavailableError struct{ reason string }

func newUnavailable(reason string) error { return &unavailableError{reason: reason} }

func (e *unavailableError) Error() string { return "loadsource: " + e.reason }

// Is makes errors.Is(err, ErrUnavailable) hold for every case.
func (e *unavailableError) Is(target error) bool { return target == ErrUnavailable }

// Reason returns the stable, sanitized reason of err: "" for nil, one of
// load-sample-missing, load-sample-malformed, load-sample-out-of-order,
// load-sample-future or load-sample-stale for the sentinels above (also when
// wrapped), and load-source-unavailable for any other error.
func Reason(err error) string {
	if err == nil {
		return ""
	}
	var e *unavailableError
	if errors.As(err, &e) {
		return e.reason
	}
	return reasonUnavailable
}

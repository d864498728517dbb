package loadsource

// Sampler, the actor that samples a Source periodically and publishes to a
// State, with its configuration and counters.

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/latent-node/latent-node/vocab"
)

// SamplerConfig configures a Sampler. NewSampler validates it.
type SamplerConfig struct {
	// State receives the samples. Required.
	State *State
	// Source measures pressure. Required.
	Source Source
	// Interval is the time between samples; positive. Keep it well below the
	// State's maximum age, or reads go stale between samples.
	Interval time.Duration
	// Clock stamps TakenAt when a Source call returns. Default: the system
	// clock (vocab.WallClock).
	Clock vocab.Clock
	// OnAttempt, when set, is called after every attempt with nil (a sample
	// was published) or the error (a Source error, a recovered panic, a
	// refused publish). It runs on Run's goroutine and must not block; the
	// node logs with it, tests synchronise on it.
	OnAttempt func(error)
}

// Sampler is the actor that feeds a State: it takes a sample immediately and
// then every Interval. A Source error or panic publishes nothing, so the
// State goes stale and fails closed by age; both are counted. It is the
// driver: the one part of the package that keeps real time (a time.Ticker,
// and vocab.WallClock by default).
type Sampler struct {
	cfg     SamplerConfig
	running atomic.Bool

	attempts, published, sourceErrors, panics, refused atomic.Uint64
}

// SamplerStats counts what a Sampler did, for metrics.
type SamplerStats struct {
	// Attempts counts Source calls (including ones that failed).
	Attempts uint64
	// Published counts samples the State accepted.
	Published uint64
	// SourceErrors counts errors returned by the Source.
	SourceErrors uint64
	// Panics counts panics recovered from the Source.
	Panics uint64
	// Refused counts samples the State refused (malformed or out of order).
	Refused uint64
}

// NewSampler returns a Sampler for cfg, or an error naming the invalid field.
// Don't forget to Run it: NewSampler starts nothing.
func NewSampler(cfg SamplerConfig) (*Sampler, error) {
	switch {
	case cfg.State == nil:
		return nil, errors.New("loadsource: sampler: State is required")
	case cfg.Source == nil:
		return nil, errors.New("loadsource: sampler: Source is required")
	case cfg.Interval <= 0:
		return nil, errors.New("loadsource: sampler: Interval must be positive")
	}
	if cfg.Clock == nil {
		cfg.Clock = vocab.WallClock
	}
	return &Sampler{cfg: cfg}, nil
}

// Run samples until ctx is done, then returns nil. It starts no goroutine.
// A Sampler runs at most once at a time; a concurrent second Run returns an
// error at once.
func (s *Sampler) Run(ctx context.Context) error {
	if !s.running.CompareAndSwap(false, true) {
		return errors.AssertionFailedf("loadsource: sampler is already running")
	}
	defer s.running.Store(false)
	t := time.NewTicker(s.cfg.Interval)
	defer t.Stop()
	for {
		if ctx.Err() != nil {
			return nil
		}
		s.attempt(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// attempt takes and publishes one sample.
func (s *Sampler) attempt(ctx context.Context) {
	s.attempts.Add(1)
	cpu, memory, panicked, err := s.sample(ctx)
	switch {
	case panicked:
		s.panics.Add(1)
	case err != nil && ctx.Err() != nil:
		return // shutting down: the Source gave up with ctx, not a failure
	case err != nil:
		s.sourceErrors.Add(1)
	default:
		err = s.cfg.State.Publish(Sample{CPU: cpu, Memory: memory, TakenAt: s.cfg.Clock.Now()})
		if err != nil {
			s.refused.Add(1)
		} else {
			s.published.Add(1)
		}
	}
	if s.cfg.OnAttempt != nil {
		s.cfg.OnAttempt(err)
	}
}

// sample calls the Source, turning a panic into an error.
func (s *Sampler) sample(ctx context.Context) (cpu, memory float64, panicked bool, err error) {
	defer func() {
		if r := recover(); r != nil {
			cpu, memory, panicked = 0, 0, true
			err = errors.Newf("loadsource: source panicked: %v", r)
		}
	}()
	cpu, memory, err = s.cfg.Source.Sample(ctx)
	return cpu, memory, false, err
}

// Stats returns the sampler's counters.
func (s *Sampler) Stats() SamplerStats {
	return SamplerStats{
		Attempts:     s.attempts.Load(),
		Published:    s.published.Load(),
		SourceErrors: s.sourceErrors.Load(),
		Panics:       s.panics.Load(),
		Refused:      s.refused.Load(),
	}
}

// systemClock is the real clock: the one wall-clock read of this package.

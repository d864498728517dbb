package loadsource

import (
	"context"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/errors"
	"go.uber.org/goleak"

	"github.com/latent-node/latent-node/internal/testutil"
)

// sourceFunc adapts a function of the call number (1, 2, …) to Source.
type sourceFunc struct {
	calls atomic.Int64
	fn    func(ctx context.Context, call int) (float64, float64, error)
}

func (s *sourceFunc) Sample(ctx context.Context) (float64, float64, error) {
	return s.fn(ctx, int(s.calls.Add(1)))
}

func newSource(fn func(ctx context.Context, call int) (float64, float64, error)) *sourceFunc {
	return &sourceFunc{fn: fn}
}

func steady(context.Context, int) (float64, float64, error) { return 0.5, 0.25, nil }

// started is a running Sampler; attempts receives OnAttempt's argument for
// the first attempts (later ones are dropped rather than blocking Run).
type started struct {
	s        *Sampler
	attempts chan error
	cancel   context.CancelFunc
	done     chan error
}

func start(t *testing.T, cfg SamplerConfig) *started {
	t.Helper()
	r := &started{attempts: make(chan error, 64), done: make(chan error, 1)}
	cfg.OnAttempt = func(err error) {
		select {
		case r.attempts <- err:
		default:
		}
	}
	s, err := NewSampler(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r.s = s
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() { r.done <- s.Run(ctx) }()
	return r
}

// next waits for the next attempt.
func (r *started) next(t *testing.T) error {
	t.Helper()
	select {
	case err := <-r.attempts:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("no attempt within 10s")
		return nil
	}
}

// stop cancels Run and checks that it returns nil.
func (r *started) stop(t *testing.T) {
	t.Helper()
	r.cancel()
	select {
	case err := <-r.done:
		if err != nil {
			t.Fatalf("Run returned %v, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return within 10s of cancellation")
	}
}

func TestNewSampler(t *testing.T) {
	state, src := NewState(maxAge), newSource(steady)
	tests := []struct {
		name string
		cfg  SamplerConfig
		want string
	}{
		{"valid", SamplerConfig{State: state, Source: src, Interval: time.Second}, ""},
		{"no state", SamplerConfig{Source: src, Interval: time.Second}, "State"},
		{"no source", SamplerConfig{State: state, Interval: time.Second}, "Source"},
		{"zero interval", SamplerConfig{State: state, Source: src}, "Interval"},
		{"negative interval", SamplerConfig{State: state, Source: src, Interval: -1}, "Interval"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := NewSampler(tc.cfg)
			if tc.want == "" {
				if err != nil || s == nil {
					t.Fatalf("want a sampler, have %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("want an error naming %s, have %v", tc.want, err)
			}
		})
	}
}

func TestSampler_firstSampleImmediately(t *testing.T) {
	defer goleak.VerifyNone(t)
	state := NewState(maxAge)
	r := start(t, SamplerConfig{State: state, Source: newSource(steady), Interval: time.Hour, Clock: testutil.NewClock(t0, testutil.WithStep(time.Second))})
	if err := r.next(t); err != nil {
		t.Fatal(err)
	}
	r.stop(t)
	have, err := state.Read(t0)
	if want := (Sample{CPU: 0.5, Memory: 0.25, TakenAt: t0}); err != nil || have != want {
		t.Fatalf("want %+v, have %+v, %v", want, have, err)
	}
	if have, want := r.s.Stats(), (SamplerStats{Attempts: 1, Published: 1}); have != want {
		t.Fatalf("want %+v, have %+v", want, have)
	}
}

func TestSampler_everyInterval(t *testing.T) {
	defer goleak.VerifyNone(t)
	state := NewState(maxAge)
	r := start(t, SamplerConfig{State: state, Source: newSource(steady), Interval: time.Millisecond, Clock: testutil.NewClock(t0, testutil.WithStep(time.Second))})
	for i := 0; i < 3; i++ {
		if err := r.next(t); err != nil {
			t.Fatalf("attempt %d: %v", i, err)
		}
	}
	r.stop(t)
	snap := state.Snapshot(t0)
	if snap.Accepted < 3 || snap.RefusedOutOfOrder != 0 || snap.Last.TakenAt.Before(at(2*time.Second)) {
		t.Fatalf("want 3 or more in-order samples, have %+v", snap)
	}
}

func TestSampler_defaultClock(t *testing.T) {
	defer goleak.VerifyNone(t)
	state := NewState(maxAge)
	r := start(t, SamplerConfig{State: state, Source: newSource(steady), Interval: time.Hour})
	if err := r.next(t); err != nil {
		t.Fatal(err)
	}
	r.stop(t)
	last := state.Snapshot(t0).Last
	if last.TakenAt.IsZero() {
		t.Fatal("no sample published")
	}
	if _, err := state.Read(last.TakenAt); err != nil {
		t.Fatal(err)
	}
}

// A Source error publishes nothing: the last sample stays and goes stale.
func TestSampler_sourceError(t *testing.T) {
	defer goleak.VerifyNone(t)
	state := NewState(maxAge)
	boom := errors.New("boom")
	src := newSource(func(_ context.Context, call int) (float64, float64, error) {
		if call == 1 {
			return 0.5, 0.5, nil
		}
		return 0.5, 0.5, boom // values with an error are ignored
	})
	r := start(t, SamplerConfig{State: state, Source: src, Interval: time.Millisecond, Clock: testutil.NewClock(t0, testutil.WithStep(time.Second))})
	if err := r.next(t); err != nil {
		t.Fatal(err)
	}
	if err := r.next(t); !errors.Is(err, boom) {
		t.Fatalf("want the source error, have %v", err)
	}
	r.stop(t)
	stats := r.s.Stats()
	if stats.Published != 1 || stats.SourceErrors == 0 || stats.Published+stats.SourceErrors != stats.Attempts {
		t.Fatalf("want one publish and only source errors after it, have %+v", stats)
	}
	if _, err := state.Read(at(maxAge)); err != nil {
		t.Fatalf("the first sample is still fresh: %v", err)
	}
	if _, err := state.Read(at(maxAge + 1)); err != ErrSampleStale {
		t.Fatalf("want stale, have %v", err)
	}
}

func TestSampler_sourceErrorFirst(t *testing.T) {
	defer goleak.VerifyNone(t)
	state := NewState(maxAge)
	src := newSource(func(context.Context, int) (float64, float64, error) { return 0, 0, errors.New("boom") })
	r := start(t, SamplerConfig{State: state, Source: src, Interval: time.Hour, Clock: testutil.NewClock(t0, testutil.WithStep(time.Second))})
	if err := r.next(t); err == nil {
		t.Fatal("want the source error")
	}
	r.stop(t)
	if _, err := state.Read(t0); err != ErrSampleMissing {
		t.Fatalf("want missing, have %v", err)
	}
}

func TestSampler_panicRecovered(t *testing.T) {
	defer goleak.VerifyNone(t)
	state := NewState(maxAge)
	src := newSource(func(_ context.Context, call int) (float64, float64, error) {
		if call == 1 {
			panic("source bug")
		}
		return 0.5, 0.25, nil
	})
	r := start(t, SamplerConfig{State: state, Source: src, Interval: time.Millisecond, Clock: testutil.NewClock(t0, testutil.WithStep(time.Second))})
	if err := r.next(t); err == nil || !strings.Contains(err.Error(), "panicked") {
		t.Fatalf("want the recovered panic, have %v", err)
	}
	if err := r.next(t); err != nil {
		t.Fatalf("the sampler must continue after a panic: %v", err)
	}
	r.stop(t)
	stats := r.s.Stats()
	if stats.Panics != 1 || stats.SourceErrors != 0 || stats.Published == 0 {
		t.Fatalf("want one panic and a publish, have %+v", stats)
	}
	// The 1ms ticker may run more attempts before stop, each a second later
	// on the fake clock: read at the last published sample's time.
	last := state.Snapshot(t0).Last.TakenAt
	if last.IsZero() {
		t.Fatal("no sample published")
	}
	if _, err := state.Read(last); err != nil {
		t.Fatal(err)
	}
}

func TestSampler_refusedSample(t *testing.T) {
	defer goleak.VerifyNone(t)
	state := NewState(maxAge)
	src := newSource(func(context.Context, int) (float64, float64, error) { return math.NaN(), 0.5, nil })
	r := start(t, SamplerConfig{State: state, Source: src, Interval: time.Hour, Clock: testutil.NewClock(t0, testutil.WithStep(time.Second))})
	if err := r.next(t); !errors.Is(err, ErrSampleMalformed) {
		t.Fatalf("want malformed, have %v", err)
	}
	r.stop(t)
	if have, want := r.s.Stats(), (SamplerStats{Attempts: 1, Refused: 1}); have != want {
		t.Fatalf("want %+v, have %+v", want, have)
	}
	if _, err := state.Read(t0); err != ErrSampleMalformed {
		t.Fatalf("want malformed, have %v", err)
	}
}

// Cancelling ctx while the Source is blocked returns nil, and the Source's
// ctx error is neither counted nor reported.
func TestSampler_cancelDuringSample(t *testing.T) {
	defer goleak.VerifyNone(t)
	entered := make(chan struct{})
	src := newSource(func(ctx context.Context, _ int) (float64, float64, error) {
		close(entered)
		<-ctx.Done()
		return 0, 0, ctx.Err()
	})
	r := start(t, SamplerConfig{State: NewState(maxAge), Source: src, Interval: time.Hour})
	<-entered
	r.stop(t)
	if have, want := r.s.Stats(), (SamplerStats{Attempts: 1}); have != want {
		t.Fatalf("want %+v, have %+v", want, have)
	}
	if len(r.attempts) != 0 {
		t.Fatalf("OnAttempt was called for a cancelled attempt: %v", <-r.attempts)
	}
}

func TestSampler_cancelledBeforeRun(t *testing.T) {
	defer goleak.VerifyNone(t)
	s, err := NewSampler(SamplerConfig{State: NewState(maxAge), Source: newSource(steady), Interval: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Run(ctx); err != nil {
		t.Fatalf("want nil, have %v", err)
	}
	if have := s.Stats().Attempts; have != 0 {
		t.Fatalf("want no attempt, have %d", have)
	}
}

func TestSampler_runTwice(t *testing.T) {
	defer goleak.VerifyNone(t)
	entered := make(chan struct{})
	var once sync.Once
	src := newSource(func(ctx context.Context, _ int) (float64, float64, error) {
		once.Do(func() { close(entered) })
		return 0.5, 0.5, nil
	})
	r := start(t, SamplerConfig{State: NewState(maxAge), Source: src, Interval: time.Hour})
	<-entered
	if err := r.s.Run(context.Background()); err == nil {
		t.Fatal("a second concurrent Run must fail")
	}
	r.stop(t)
	// After Run returned, the sampler may run again.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := r.s.Run(ctx); err != nil {
		t.Fatal(err)
	}
}

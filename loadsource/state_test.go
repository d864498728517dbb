package loadsource

import (
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/latent-node/latent-node/internal/testutil"
	"github.com/latent-node/latent-node/refusal"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

const maxAge = 2 * time.Second

func at(d time.Duration) time.Time { return t0.Add(d) }

func sampleAt(d time.Duration) Sample { return Sample{CPU: 0.5, Memory: 0.25, TakenAt: at(d)} }

func TestNewState(t *testing.T) {
	if have := NewState(time.Nanosecond).MaxAge(); have != time.Nanosecond {
		t.Fatalf("MaxAge: want 1ns, have %v", have)
	}
	for _, d := range []time.Duration{0, -time.Second} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("NewState(%v): want a panic", d)
				}
			}()
			NewState(d)
		}()
	}
}

// TestState_Read publishes a sequence of samples and reads once, covering
// every fail-closed case at its exact boundary.
func TestState_Read(t *testing.T) {
	type publish struct {
		s    Sample
		want error // nil, ErrSampleMalformed or ErrSampleOutOfOrder
	}
	ok := func(s Sample) publish { return publish{s, nil} }
	nan, inf := math.NaN(), math.Inf(1)
	tests := []struct {
		name     string
		publish  []publish
		now      time.Time
		want     error
		wantTime time.Time // TakenAt of the sample read, when want is nil
	}{
		{name: "missing", now: t0, want: ErrSampleMissing},
		{name: "taken at now", publish: []publish{ok(sampleAt(0))}, now: t0, wantTime: t0},
		{name: "pressure bounds 0 and 1", publish: []publish{ok(Sample{CPU: 0, Memory: 1, TakenAt: t0})}, now: t0, wantTime: t0},
		{name: "pressure bounds 1 and 0", publish: []publish{ok(Sample{CPU: 1, Memory: 0, TakenAt: t0})}, now: t0, wantTime: t0},

		// Future: TakenAt − now ≤ FutureTolerance is read.
		{name: "future 1ns", publish: []publish{ok(sampleAt(time.Nanosecond))}, now: t0, wantTime: at(time.Nanosecond)},
		{name: "future at tolerance", publish: []publish{ok(sampleAt(FutureTolerance))}, now: t0, wantTime: at(FutureTolerance)},
		{name: "future beyond tolerance", publish: []publish{ok(sampleAt(FutureTolerance + time.Nanosecond))}, now: t0, want: ErrSampleFuture},
		{name: "far future", publish: []publish{ok(sampleAt(time.Hour))}, now: t0, want: ErrSampleFuture},

		// Stale: now − TakenAt > maxAge fails; equality is fresh.
		{name: "age below max", publish: []publish{ok(sampleAt(0))}, now: at(maxAge - time.Nanosecond), wantTime: t0},
		{name: "age equals max", publish: []publish{ok(sampleAt(0))}, now: at(maxAge), wantTime: t0},
		{name: "age max plus 1ns", publish: []publish{ok(sampleAt(0))}, now: at(maxAge + time.Nanosecond), want: ErrSampleStale},
		{name: "newer sample is fresh again", publish: []publish{ok(sampleAt(0)), ok(sampleAt(time.Second))}, now: at(maxAge + time.Second), wantTime: at(time.Second)},

		// Malformed samples are refused and poison, also a first sample.
		{name: "cpu NaN", publish: []publish{{Sample{CPU: nan, Memory: 0.1, TakenAt: t0}, ErrSampleMalformed}}, now: t0, want: ErrSampleMalformed},
		{name: "memory NaN", publish: []publish{ok(sampleAt(0)), {Sample{CPU: 0.1, Memory: nan, TakenAt: at(1)}, ErrSampleMalformed}}, now: at(1), want: ErrSampleMalformed},
		{name: "cpu +Inf", publish: []publish{ok(sampleAt(0)), {Sample{CPU: inf, Memory: 0.1, TakenAt: at(1)}, ErrSampleMalformed}}, now: at(1), want: ErrSampleMalformed},
		{name: "memory -Inf", publish: []publish{ok(sampleAt(0)), {Sample{CPU: 0.1, Memory: -inf, TakenAt: at(1)}, ErrSampleMalformed}}, now: at(1), want: ErrSampleMalformed},
		{name: "cpu below 0", publish: []publish{ok(sampleAt(0)), {Sample{CPU: -1e-9, Memory: 0.1, TakenAt: at(1)}, ErrSampleMalformed}}, now: at(1), want: ErrSampleMalformed},
		{name: "memory above 1", publish: []publish{ok(sampleAt(0)), {Sample{CPU: 0.1, Memory: math.Nextafter(1, 2), TakenAt: at(1)}, ErrSampleMalformed}}, now: at(1), want: ErrSampleMalformed},
		{name: "zero TakenAt", publish: []publish{ok(sampleAt(0)), {Sample{CPU: 0.1, Memory: 0.1}, ErrSampleMalformed}}, now: at(1), want: ErrSampleMalformed},
		{name: "recovery after malformed", publish: []publish{ok(sampleAt(0)), {Sample{CPU: nan, TakenAt: at(1)}, ErrSampleMalformed}, ok(sampleAt(1))}, now: at(1), wantTime: at(1)},
		{name: "recovery after malformed first sample", publish: []publish{{Sample{CPU: nan, TakenAt: at(5)}, ErrSampleMalformed}, ok(sampleAt(1))}, now: at(1), wantTime: at(1)},

		// Out-of-order: TakenAt must be strictly after the last accepted one.
		{name: "out of order equal", publish: []publish{ok(sampleAt(0)), {sampleAt(0), ErrSampleOutOfOrder}}, now: t0, want: ErrSampleOutOfOrder},
		{name: "out of order earlier", publish: []publish{ok(sampleAt(time.Second)), {sampleAt(time.Second - 1), ErrSampleOutOfOrder}}, now: at(time.Second), want: ErrSampleOutOfOrder},
		{name: "after by 1ns is in order", publish: []publish{ok(sampleAt(0)), ok(sampleAt(1))}, now: at(1), wantTime: at(1)},
		{name: "recovery after out of order", publish: []publish{ok(sampleAt(10)), {sampleAt(5), ErrSampleOutOfOrder}, ok(sampleAt(11))}, now: at(11), wantTime: at(11)},
		{
			name:    "refused sample does not move the watermark",
			publish: []publish{ok(sampleAt(10)), {sampleAt(5), ErrSampleOutOfOrder}, {sampleAt(10), ErrSampleOutOfOrder}, ok(sampleAt(11))},
			now:     at(11), wantTime: at(11),
		},
		{
			name:    "malformed sample does not move the watermark",
			publish: []publish{ok(sampleAt(10)), {Sample{CPU: 2, TakenAt: at(20)}, ErrSampleMalformed}, ok(sampleAt(11))},
			now:     at(11), wantTime: at(11),
		},
		{name: "out of order after malformed stays poisoned", publish: []publish{ok(sampleAt(10)), {Sample{CPU: nan, TakenAt: at(11)}, ErrSampleMalformed}, {sampleAt(9), ErrSampleOutOfOrder}}, now: at(10), want: ErrSampleOutOfOrder},
		{name: "poison wins over staleness", publish: []publish{ok(sampleAt(0)), {sampleAt(0), ErrSampleOutOfOrder}}, now: at(time.Hour), want: ErrSampleOutOfOrder},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := NewState(maxAge)
			for i, p := range tc.publish {
				err := s.Publish(p.s)
				if (err == nil) != (p.want == nil) || (p.want != nil && !errors.Is(err, p.want)) {
					t.Fatalf("publish %d: want %v, have %v", i, p.want, err)
				}
				if err != nil && !errors.Is(err, ErrUnavailable) {
					t.Fatalf("publish %d: %v is not marked ErrUnavailable", i, err)
				}
			}
			have, err := s.Read(tc.now)
			if tc.want != nil {
				if err != tc.want {
					t.Fatalf("read: want %v, have %v", tc.want, err)
				}
				if have != (Sample{}) {
					t.Fatalf("read: want the zero sample with an error, have %+v", have)
				}
				return
			}
			if err != nil {
				t.Fatalf("read: %v", err)
			}
			if !have.TakenAt.Equal(tc.wantTime) {
				t.Fatalf("read: want sample taken at %v, have %v", tc.wantTime, have.TakenAt)
			}
		})
	}
}

func TestState_Publish_returnsSample(t *testing.T) {
	s := NewState(maxAge)
	want := Sample{CPU: 0.125, Memory: 0.75, TakenAt: t0}
	if err := s.Publish(want); err != nil {
		t.Fatal(err)
	}
	have, err := s.Read(t0)
	if err != nil || have != want {
		t.Fatalf("want %+v, nil; have %+v, %v", want, have, err)
	}
}

func TestState_Publish_errorsHaveNoNumbers(t *testing.T) {
	s := NewState(maxAge)
	for _, x := range []Sample{
		{CPU: 0.97, Memory: 1.5, TakenAt: t0},
		{CPU: 0.97, Memory: math.NaN(), TakenAt: t0},
		{CPU: 0.97, Memory: 0.5},
		{CPU: 1.75, Memory: 0.5, TakenAt: t0},
	} {
		err := s.Publish(x)
		if err == nil || strings.ContainsAny(err.Error(), "0123456789") {
			t.Errorf("Publish(%+v) = %v: want an error without numbers", x, err)
		}
	}
	if err := s.Publish(sampleAt(time.Second)); err != nil {
		t.Fatal(err)
	}
	err := s.Publish(Sample{CPU: 0.33, Memory: 0.44, TakenAt: t0})
	if err == nil || strings.ContainsAny(err.Error(), "0123456789") {
		t.Errorf("out-of-order Publish = %v: want an error without numbers", err)
	}
}

func TestState_Read_allocs(t *testing.T) {
	s := NewState(maxAge)
	check := func(name string, now time.Time, want error) {
		t.Helper()
		var err error
		allocs := testing.AllocsPerRun(100, func() { _, err = s.Read(now) })
		if allocs != 0 {
			t.Errorf("%s: Read allocates %v times per call", name, allocs)
		}
		if err != want {
			t.Errorf("%s: want %v, have %v", name, want, err)
		}
	}
	check("missing", t0, ErrSampleMissing)
	if err := s.Publish(sampleAt(0)); err != nil {
		t.Fatal(err)
	}
	check("fresh", t0, nil)
	check("stale", at(time.Hour), ErrSampleStale)
	check("future", at(-time.Hour), ErrSampleFuture)
	_ = s.Publish(sampleAt(0))
	check("poisoned", t0, ErrSampleOutOfOrder)
}

func TestState_Snapshot(t *testing.T) {
	s := NewState(maxAge)
	if have, want := s.Snapshot(t0), (Snapshot{Reason: refusal.ReasonLoadSampleMissing.String()}); have != want {
		t.Fatalf("empty: want %+v, have %+v", want, have)
	}
	x := sampleAt(0)
	_ = s.Publish(x)
	_ = s.Publish(x)                                    // out of order
	_ = s.Publish(Sample{CPU: 3, TakenAt: at(1)})       // malformed
	_ = s.Publish(Sample{CPU: math.NaN(), TakenAt: t0}) // malformed
	y := sampleAt(time.Second)
	_ = s.Publish(y)
	want := Snapshot{Last: y, Age: 1500 * time.Millisecond, Accepted: 2, RefusedMalformed: 2, RefusedOutOfOrder: 1}
	if have := s.Snapshot(at(2500 * time.Millisecond)); have != want {
		t.Fatalf("want %+v, have %+v", want, have)
	}
	want.Age, want.Reason = maxAge+time.Nanosecond, refusal.ReasonLoadSampleStale.String()
	if have := s.Snapshot(at(time.Second + maxAge + time.Nanosecond)); have != want {
		t.Fatalf("stale: want %+v, have %+v", want, have)
	}
	_ = s.Publish(y) // poison: Last stays the last accepted sample
	want.Age, want.Reason, want.RefusedOutOfOrder = 0, refusal.ReasonLoadSampleOutOfOrder.String(), 2
	if have := s.Snapshot(at(time.Second)); have != want {
		t.Fatalf("poisoned: want %+v, have %+v", want, have)
	}
}

// TestState_hammer runs publishers and readers concurrently (meaningful under
// -race). Publishers take timestamps from one counter, so they race each
// other and some samples arrive out of order; every publish is counted once,
// and a reader only ever sees valid samples whose TakenAt never goes back.
func TestState_hammer(t *testing.T) {
	publishers, readers, perPublisher := 4, 4, 2000
	if testing.Short() {
		perPublisher = 500
	}
	s := NewState(time.Hour)
	var clock atomic.Int64
	var readersWG sync.WaitGroup
	done := make(chan struct{})
	for r := 0; r < readers; r++ {
		readersWG.Add(1)
		go func() {
			defer readersWG.Done()
			var last time.Time
			for {
				select {
				case <-done:
					return
				default:
				}
				x, err := s.Read(at(time.Duration(clock.Load())))
				if err != nil {
					if !errors.Is(err, ErrUnavailable) {
						t.Errorf("read: unmarked error %v", err)
						return
					}
					continue
				}
				if !isPressure(x.CPU) || !isPressure(x.Memory) || x.TakenAt.Before(last) {
					t.Errorf("read: invalid or reordered sample %+v after %v", x, last)
					return
				}
				last = x.TakenAt
			}
		}()
	}
	var errs atomic.Uint64
	err := testutil.Hammer(publishers, perPublisher, func(_, i int) error {
		x := sampleAt(time.Duration(clock.Add(1)))
		if i%100 == 99 {
			x.CPU = math.NaN()
		}
		if err := s.Publish(x); err != nil {
			errs.Add(1)
		}
		return nil
	})
	close(done)
	readersWG.Wait()
	if err != nil {
		t.Fatal(err)
	}
	snap := s.Snapshot(at(time.Duration(clock.Load())))
	total := uint64(publishers * perPublisher)
	if have := snap.Accepted + snap.RefusedMalformed + snap.RefusedOutOfOrder; have != total {
		t.Fatalf("want %d publishes counted, have %+v", total, snap)
	}
	if have, want := snap.RefusedMalformed+snap.RefusedOutOfOrder, errs.Load(); have != want {
		t.Fatalf("counted %d refusals, publishers saw %d", have, want)
	}
	if want := uint64(publishers * perPublisher / 100); snap.RefusedMalformed != want {
		t.Fatalf("want %d malformed, have %d", want, snap.RefusedMalformed)
	}
	// A final in-order sample clears any poison.
	if err := s.Publish(sampleAt(time.Duration(clock.Add(1)))); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Read(at(time.Duration(clock.Load()))); err != nil {
		t.Fatal(err)
	}
}

func TestReason(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want refusal.Reason
	}{
		{"nil", nil, refusal.ReasonNone},
		{"missing", ErrSampleMissing, refusal.ReasonLoadSampleMissing},
		{"malformed", ErrSampleMalformed, refusal.ReasonLoadSampleMalformed},
		{"out of order", ErrSampleOutOfOrder, refusal.ReasonLoadSampleOutOfOrder},
		{"future", ErrSampleFuture, refusal.ReasonLoadSampleFuture},
		{"stale", ErrSampleStale, refusal.ReasonLoadSampleStale},
		{"wrapped", errors.Wrap(ErrSampleStale, "admission: load"), refusal.ReasonLoadSampleStale},
		{"umbrella", ErrUnavailable, refusal.ReasonLoadSourceUnavailable},
		{"unknown", errors.New("boom"), refusal.ReasonLoadSourceUnavailable},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if have := Reason(tc.err); have != tc.want {
				t.Fatalf("want %q, have %q", tc.want, have)
			}
		})
	}
}

func TestSentinels(t *testing.T) {
	all := []error{ErrSampleMissing, ErrSampleMalformed, ErrSampleOutOfOrder, ErrSampleFuture, ErrSampleStale}
	for i, a := range all {
		if !errors.Is(a, ErrUnavailable) {
			t.Errorf("%v is not marked ErrUnavailable", a)
		}
		if strings.ContainsAny(a.Error(), "0123456789") {
			t.Errorf("%v: message contains a number", a)
		}
		for j, b := range all {
			if (i == j) != errors.Is(a, b) {
				t.Errorf("errors.Is(%v, %v) = %v", a, b, i != j)
			}
		}
	}
	if errors.Is(ErrUnavailable, ErrSampleStale) {
		t.Error("the umbrella must not match a specific case")
	}
}

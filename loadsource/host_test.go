package loadsource

import (
	"context"
	"strings"
	"testing"

	"github.com/cockroachdb/errors"
)

// TestHostSource_machine runs against the real machine: it checks only that
// values are pressures and that a second call (with a window too short for
// the counters to move, usually) works too.
func TestHostSource_machine(t *testing.T) {
	h := NewHostSource()
	for i := 0; i < 2; i++ {
		cpu, memory, err := h.Sample(context.Background())
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		if !isPressure(cpu) || !isPressure(memory) {
			t.Fatalf("call %d: cpu %v, memory %v not in [0,1]", i, cpu, memory)
		}
	}
}

// fakeHost returns a HostSource whose CPU counters come from times, one
// reading per call, and whose memory is total/available.
func fakeHost(times []cpuTimes, total, available uint64) *HostSource {
	h := NewHostSource()
	h.baseline = 0
	h.times = func(context.Context) (cpuTimes, error) {
		if len(times) == 0 {
			return cpuTimes{}, errors.New("no more readings")
		}
		t := times[0]
		times = times[1:]
		return t, nil
	}
	h.memory = func(context.Context) (uint64, uint64, error) { return total, available, nil }
	return h
}

func TestHostSource_Sample(t *testing.T) {
	type want struct {
		cpu, memory float64
		err         string // substring; "" for success
	}
	tests := []struct {
		name             string
		times            []cpuTimes
		total, available uint64
		calls            []want
	}{
		{
			name:  "first call takes a baseline",
			times: []cpuTimes{{busy: 10, idle: 10}, {busy: 13, idle: 11}},
			total: 1000, available: 250,
			calls: []want{{cpu: 0.75, memory: 0.75}},
		},
		{
			name:  "consecutive calls",
			times: []cpuTimes{{busy: 10, idle: 10}, {busy: 11, idle: 13}, {busy: 12, idle: 14}},
			total: 1000, available: 1000,
			calls: []want{{cpu: 0.25, memory: 0}, {cpu: 0.5, memory: 0}},
		},
		{
			name:  "counters that did not move are measured again",
			times: []cpuTimes{{busy: 1, idle: 1}, {busy: 2, idle: 2}, {busy: 2, idle: 2}, {busy: 3, idle: 2}},
			total: 1000, available: 0,
			calls: []want{{cpu: 0.5, memory: 1}, {cpu: 1, memory: 1}},
		},
		{
			name:  "no cpu time elapsed across the baseline",
			times: []cpuTimes{{busy: 1, idle: 1}, {busy: 1, idle: 1}},
			total: 1000, available: 0,
			calls: []want{{err: "no cpu time elapsed"}},
		},
		{
			name:  "busy going backwards, then recovery",
			times: []cpuTimes{{busy: 10, idle: 10}, {busy: 11, idle: 11}, {busy: 5, idle: 12}, {busy: 6, idle: 15}},
			total: 1000, available: 500,
			calls: []want{{cpu: 0.5, memory: 0.5}, {err: "went backwards"}, {cpu: 0.25, memory: 0.5}},
		},
		{
			name:  "idle going backwards counts as no idle",
			times: []cpuTimes{{busy: 10, idle: 10}, {busy: 11, idle: 9}},
			total: 1000, available: 500,
			calls: []want{{cpu: 1, memory: 0.5}},
		},
		{
			name:  "counter error",
			times: nil,
			total: 1000, available: 500,
			calls: []want{{err: "no more readings"}},
		},
		{
			name:  "counter error after the baseline",
			times: []cpuTimes{{busy: 1, idle: 1}},
			total: 1000, available: 500,
			calls: []want{{err: "no more readings"}},
		},
		{
			name:  "zero memory total",
			times: []cpuTimes{{busy: 1, idle: 1}, {busy: 2, idle: 2}},
			total: 0, available: 0,
			calls: []want{{err: "zero total"}},
		},
		{
			name:  "available exceeds total",
			times: []cpuTimes{{busy: 1, idle: 1}, {busy: 2, idle: 2}},
			total: 10, available: 11,
			calls: []want{{err: "available exceeds total"}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := fakeHost(tc.times, tc.total, tc.available)
			for i, w := range tc.calls {
				cpu, memory, err := h.Sample(context.Background())
				if w.err != "" {
					if err == nil || !strings.Contains(err.Error(), w.err) {
						t.Fatalf("call %d: want an error containing %q, have %v", i, w.err, err)
					}
					continue
				}
				if err != nil || cpu != w.cpu || memory != w.memory {
					t.Fatalf("call %d: want %v, %v; have %v, %v, %v", i, w.cpu, w.memory, cpu, memory, err)
				}
			}
		})
	}
}

func TestHostSource_memoryError(t *testing.T) {
	h := fakeHost([]cpuTimes{{busy: 1, idle: 1}, {busy: 2, idle: 2}}, 0, 0)
	boom := errors.New("boom")
	h.memory = func(context.Context) (uint64, uint64, error) { return 0, 0, boom }
	if _, _, err := h.Sample(context.Background()); !errors.Is(err, boom) {
		t.Fatalf("want %v, have %v", boom, err)
	}
}

func TestHostSource_cancelledBaseline(t *testing.T) {
	h := fakeHost([]cpuTimes{{busy: 1, idle: 1}, {busy: 2, idle: 2}}, 1, 1)
	h.baseline = defaultBaseline
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := h.Sample(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("want context.Canceled, have %v", err)
	}
}

func TestBusyFraction(t *testing.T) {
	if _, err := busyFraction(cpuTimes{busy: 1, idle: 1}, cpuTimes{busy: 1, idle: 0.5}); err == nil {
		t.Fatal("want an error for a window without cpu time")
	}
}

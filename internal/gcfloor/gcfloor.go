// Package gcfloor keeps the Go heap goal of a process from falling below a
// floor.
//
// A node's Go heap is small: guest memory lives in the cell pool's mappings,
// outside it, and what a request allocates is garbage once its answer is
// written. With a live heap of about 1 MiB, Go's default (GOGC=100, a
// minimum goal of 4 MiB) collects every 3 MiB of allocation: around a
// hundred collections a second under a flood of small requests, each
// with its fixed costs (starting the mark workers, scanning every
// goroutine's stack, write barriers while it runs). A floor of a few tens
// of MiB makes those collections rare for a bounded amount of memory; a
// heap whose live part is large enough keeps Go's default.
package gcfloor

import (
	"context"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// DefaultFloor is the heap goal a node keeps at least: 64 MiB.
const DefaultFloor = 64 << 20

// minHeap is Go's minimum heap goal at GOGC=100 (it scales with GOGC).
const minHeap = 4 << 20

// Percent is the GOGC that gives a heap goal of about floor bytes, and no
// less than Go's default, for a live heap of live bytes. Go's goal is the
// larger of live × (1 + GOGC/100) and 4 MiB × GOGC/100; both are kept at
// or under floor unless the default (GOGC=100) is above it.
func Percent(live, floor uint64) int {
	byMin := floor * 100 / minHeap // the minimum goal reaches the floor
	byLive := uint64(100)
	switch {
	case live == 0: // no collection yet
		byLive = byMin
	case floor > 2*live:
		byLive = (floor - live) * 100 / live // live × (1 + p/100) = floor
	}
	return int(max(100, min(byMin, byLive)))
}

// Tuner sets GOGC from the live heap every tick.
type Tuner struct {
	floor   uint64
	live    func() uint64
	set     func(int) int // debug.SetGCPercent
	percent int           // what it set last (0: nothing yet)
}

// New returns a tuner of this process for floor bytes.
func New(floor uint64) *Tuner {
	return &Tuner{floor: floor, live: LiveHeap, set: debug.SetGCPercent}
}

// Tune sets GOGC for the live heap now (when it changed) and returns it.
func (t *Tuner) Tune() int {
	p := Percent(t.live(), t.floor)
	if p != t.percent {
		t.set(p)
		t.percent = p
	}
	return p
}

// Run tunes at once and then every interval until ctx ends; it puts GOGC
// back to 100 and returns nil.
func (t *Tuner) Run(ctx context.Context, every time.Duration) error {
	t.Tune()
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			t.set(100)
			return nil
		case <-tick.C:
			t.Tune()
		}
	}
}

// LiveHeap is the heap the last collection marked live, in bytes (0 before
// the first collection).
func LiveHeap() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}

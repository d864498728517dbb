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
// of MiB makes those collections rare for a bounded amount of memory. A
// heap whose live part is above the floor (a large catalog) gets a headroom
// of the floor or half the live part, whichever is larger (Percent).
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

// Percent is the GOGC for a live heap of live bytes and a floor. Go's goal
// is the larger of live × (1 + GOGC/100) and 4 MiB × GOGC/100.
//
//   - A small live heap (under half the floor) gets a goal of about floor
//     bytes: collections stay rare for a bounded amount of memory.
//   - Up to the floor, Go's default (GOGC=100): a goal of twice the live
//     heap.
//   - Above the floor (a catalog of many services is most of such a heap),
//     the headroom over the live heap is the floor or half the live heap,
//     whichever is larger: GOGC between 100 and 50. A node with 100 MB of
//     catalog then holds about 1.6 bytes per live byte instead of 2, and
//     collects every 64 MiB or more of allocation, which at tens of KB per
//     request is every few thousand requests.
func Percent(live, floor uint64) int {
	byMin := floor * 100 / minHeap // the minimum goal reaches the floor
	switch {
	case floor == 0: // no floor: Go's default
		return 100
	case live == 0: // no collection yet
		return int(max(100, byMin))
	case floor > 2*live:
		return int(max(100, min(byMin, (floor-live)*100/live))) // live × (1 + p/100) = floor
	case live <= floor:
		return 100
	}
	return int(max(floor, live/2) * 100 / live)
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

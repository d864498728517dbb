package cellpool

// Pool.Run, the driver that replaces quarantined cells with fresh
// reservations, one cell per class each ReplaceInterval.

import (
	"context"

	"github.com/cockroachdb/errors"
)

// Run replaces quarantined cells with fresh ones (a new reservation of the
// class's MemoryBytes, under the quarantined cell's index) until ctx is done
// or the pool is closed; then it returns nil. A quarantine wakes it; with
// nothing quarantined it waits without polling. It replaces at most one cell
// per class, then pauses Config.ReplaceInterval before the next round, so
// each class gets at most one new cell per interval however fast cells are
// quarantined. A failed reservation (mmap) is counted in
// ClassStats.ReplaceFailures and retried after the same pause. While Run
// runs, a depleted class is not final: Lease waits for its replacement.
// It starts no goroutine. A Pool has at most one Run at a time; a second
// concurrent Run returns an error at once.
func (p *Pool) Run(ctx context.Context) error {
	if !p.running.CompareAndSwap(false, true) {
		return errors.AssertionFailedf("cellpool: Run is already running")
	}
	defer p.running.Store(false)
	p.setDriving(true)
	defer p.setDriving(false)
	for {
		if ctx.Err() != nil || p.closed.Load() {
			return nil
		}
		if !p.replaceRound() {
			if p.onIdle != nil {
				p.onIdle()
			}
			select {
			case <-ctx.Done():
				return nil
			case <-p.wake:
			}
			continue
		}
		select {
		case <-ctx.Done():
			return nil
		case <-p.clock.After(p.interval):
		}
	}
}

// setDriving tells the classes whether depletion is final. Starting, it
// reopens the wait of a class depleted before (Lease waits for Run again);
// stopping, it closes the wait of every depleted class so that its waiters
// get ErrDepleted instead of waiting for a replacement that will not come.
func (p *Pool) setDriving(on bool) {
	p.driving.Store(on)
	for _, cp := range p.classes {
		if cp == nil {
			continue
		}
		cp.mu.Lock()
		switch {
		case on && cp.mu.goneClosed && !cp.mu.closed:
			cp.mu.gone, cp.mu.goneClosed = make(chan struct{}), false
		case !on && cp.usableLocked() == 0:
			cp.closeGoneLocked()
		}
		cp.mu.Unlock()
	}
}

// replaceRound replaces one quarantined cell of each class that has one. It
// reports whether any class had one (replaced or failed): then the caller
// pauses before the next round.
func (p *Pool) replaceRound() bool {
	worked := false
	for _, cp := range p.classes {
		if cp != nil && cp.replaceOne(p.reserve) {
			worked = true
		}
	}
	return worked
}

// replaceOne reserves a fresh cell for the oldest quarantined index of the
// class and puts it into service. It reports whether it tried.
func (cp *classPool) replaceOne(reserve func(uint64) (region, error)) bool {
	cp.mu.Lock()
	if cp.mu.closed || len(cp.mu.vacant) == 0 {
		cp.mu.Unlock()
		return false
	}
	index := cp.mu.vacant[0]
	cp.mu.Unlock()

	r, err := reserve(cp.cfg.MemoryBytes) // outside the lock: mmap may be slow

	cp.mu.Lock()
	defer cp.mu.Unlock()
	if err != nil {
		cp.mu.failures++
		return true
	}
	if cp.mu.closed {
		_ = r.release() // Close raced: the fresh region was never in service
		return true
	}
	c := &cell{class: cp.class, index: index, region: r}
	cp.mu.vacant = cp.mu.vacant[1:]
	cp.mu.cells[index] = c
	cp.mu.quarantined--
	cp.mu.replaced++
	if cp.mu.goneClosed && !cp.mu.closed {
		cp.mu.gone, cp.mu.goneClosed = make(chan struct{}), false
	}
	cp.free <- c // never blocks: usable <= Parallelism
	return true
}

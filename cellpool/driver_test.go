package cellpool

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/errors"
	"go.uber.org/goleak"

	"github.com/latent-node/latent-node/vocab"
)

// fakeClock hands Run channels that fire only when the test says so, and
// tells the test each time Run starts a pause.
type fakeClock struct {
	mu      sync.Mutex
	waiters []chan time.Time
	paused  chan time.Duration
}

func newFakeClock() *fakeClock { return &fakeClock{paused: make(chan time.Duration, 1024)} }

func (c *fakeClock) After(d time.Duration) <-chan time.Time {
	ch := make(chan time.Time, 1)
	c.mu.Lock()
	c.waiters = append(c.waiters, ch)
	c.mu.Unlock()
	c.paused <- d
	return ch
}

// fire ends every pause started so far.
func (c *fakeClock) fire() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, w := range c.waiters {
		w <- time.Time{}
	}
	c.waiters = nil
}

// driver is a Pool's Run on its own goroutine, with signals for the test.
type driver struct {
	clock *fakeClock
	idle  chan struct{} // Run waits for a wake-up
	stop  context.CancelFunc
	done  chan error
}

// startDriver installs a fake clock and starts Run. It must be called before
// the pool is shared.
func startDriver(t *testing.T, p *Pool, interval time.Duration) *driver {
	t.Helper()
	d := &driver{clock: newFakeClock(), idle: make(chan struct{}, 1024), done: make(chan error, 1)}
	p.clock, p.interval = d.clock, interval
	p.onIdle = func() { d.idle <- struct{}{} }
	ctx, cancel := context.WithCancel(context.Background())
	d.stop = cancel
	go func() { d.done <- p.Run(ctx) }()
	t.Cleanup(func() { d.shutdown(t) })
	return d
}

// pause waits until Run starts its pause after a round and checks its length.
func (d *driver) pause(t *testing.T, want time.Duration) {
	t.Helper()
	select {
	case have := <-d.clock.paused:
		if have != want {
			t.Fatalf("Run paused %v, want %v", have, want)
		}
	case <-time.After(failAfter):
		t.Fatal("Run did not pause")
	}
}

func (d *driver) waitIdle(t *testing.T) {
	t.Helper()
	select {
	case <-d.idle:
	case <-time.After(failAfter):
		t.Fatal("Run did not go idle")
	}
}

// failAfter turns a missing event into a failure instead of a hang; no
// test waits for it to pass.
const failAfter = 10 * time.Second

func (d *driver) shutdown(t *testing.T) {
	t.Helper()
	if d.stop == nil {
		return
	}
	d.stop()
	d.stop = nil
	if err := <-d.done; err != nil {
		t.Errorf("Run: %v", err)
	}
}

func quarantineAll(t *testing.T, p *Pool, class vocab.CellClass, n int) {
	t.Helper()
	var ls []*Lease
	for i := 0; i < n; i++ {
		ls = append(ls, mustLease(t, p, class))
	}
	for _, l := range ls {
		if err := l.Release(Quarantine); err != nil {
			t.Fatal(err)
		}
	}
}

func TestPool_replace(t *testing.T) {
	defer goleak.VerifyNone(t)
	const interval = 250 * time.Millisecond
	p := newTestPool(t, map[vocab.CellClass]ClassConfig{tiny: {3, PageSize}, small: {1, PageSize}})
	quarantineAll(t, p, tiny, 3)
	if p.Capacity(tiny) != 0 || !p.Degraded() {
		t.Fatalf("after quarantining every cell: capacity %d, degraded %v", p.Capacity(tiny), p.Degraded())
	}
	// Negative control: without Run nothing comes back.
	if _, err := p.Lease(context.Background(), tiny); !errors.Is(err, ErrDepleted) {
		t.Fatalf("Lease of a depleted class without Run: want ErrDepleted, have %v", err)
	}

	d := startDriver(t, p, interval)
	// One cell per round, a pause of the interval after each.
	for want := 1; want <= 3; want++ {
		d.pause(t, interval)
		if have := p.Capacity(tiny); have != want {
			t.Fatalf("after round %d: capacity %d", want, have)
		}
		d.clock.fire()
	}
	d.waitIdle(t) // nothing left to replace: Run waits without a timer
	wantStats(t, p, tiny, ClassStats{Parallelism: 3, Usable: 3, Replaced: 3})
	wantStats(t, p, small, ClassStats{Parallelism: 1, Usable: 1})
	if p.Degraded() {
		t.Fatal("degraded after every cell was replaced")
	}
	// The fresh cells take the quarantined cells' indices and work.
	seen := map[int]bool{}
	for i := 0; i < 3; i++ {
		l, err := p.Lease(context.Background(), tiny)
		if err != nil {
			t.Fatal(err)
		}
		mem := l.MemoryAllocator(PageSize).Allocate(PageSize, PageSize)
		b := mem.Reallocate(PageSize)
		b[0] = 1
		mem.Free()
		seen[l.Cell()] = true
		defer func() { _ = l.Release(Reuse) }()
	}
	if len(seen) != 3 || !seen[0] || !seen[1] || !seen[2] {
		t.Fatalf("cell indices %v", seen)
	}

	// A quarantine wakes the idle driver: the cell comes back at once.
	l := mustLease(t, p, small)
	if err := l.Release(Quarantine); err != nil {
		t.Fatal(err)
	}
	d.pause(t, interval)
	wantStats(t, p, small, ClassStats{Parallelism: 1, Usable: 1, Replaced: 1})
	d.clock.fire()
	d.waitIdle(t)
	d.shutdown(t)
}

// TestPool_replaceWakesWaiter: a Lease waiting on a depleted class while Run
// runs gets the replaced cell instead of ErrDepleted.
func TestPool_replaceWakesWaiter(t *testing.T) {
	defer goleak.VerifyNone(t)
	p := onePool(t, 1, PageSize)
	d := startDriver(t, p, time.Second)
	d.waitIdle(t)
	held := mustLease(t, p, tiny)
	type result struct {
		l   *Lease
		err error
	}
	got := make(chan result, 1)
	go func() {
		l, err := p.Lease(context.Background(), tiny)
		got <- result{l, err}
	}()
	if err := held.Release(Quarantine); err != nil {
		t.Fatal(err)
	}
	r := <-got
	if r.err != nil || r.l.Cell() != 0 {
		t.Fatalf("waiter: %v, %v", r.l, r.err)
	}
	wantStats(t, p, tiny, ClassStats{Parallelism: 1, Usable: 1, Leased: 1, Replaced: 1})
	if err := r.l.Release(Reuse); err != nil {
		t.Fatal(err)
	}
	d.pause(t, time.Second)
	d.shutdown(t)
}

// TestPool_replaceFailure: a failed reservation is counted and retried one
// interval later, never in a loop; a waiter waits through it while Run
// runs and gets ErrDepleted once Run stops.
func TestPool_replaceFailure(t *testing.T) {
	defer goleak.VerifyNone(t)
	var mu sync.Mutex
	calls, failFrom, failUntil := 0, 2, 4 // the 2nd and 3rd reservations fail
	reserveFn := func(size uint64) (region, error) {
		mu.Lock()
		defer mu.Unlock()
		calls++
		if calls >= failFrom && calls < failUntil {
			return nil, errors.New("mmap: cannot allocate memory")
		}
		return &fakeRegion{mem: make([]byte, size)}, nil
	}
	p, err := newPool(Config{Classes: map[vocab.CellClass]ClassConfig{tiny: {1, PageSize}}}, reserveFn)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = p.Close() }()
	quarantineAll(t, p, tiny, 1)
	d := startDriver(t, p, time.Second)
	for failures := 1; failures <= 2; failures++ {
		d.pause(t, time.Second)
		wantStats(t, p, tiny, ClassStats{Parallelism: 1, Quarantined: 1, ReplaceFailures: failures})
		mu.Lock()
		if calls != 1+failures {
			t.Fatalf("%d reservations after %d failed rounds", calls, failures)
		}
		mu.Unlock()
		d.clock.fire()
	}
	d.pause(t, time.Second)
	wantStats(t, p, tiny, ClassStats{Parallelism: 1, Usable: 1, Replaced: 1, ReplaceFailures: 2})
	d.clock.fire()
	d.waitIdle(t)

	// Depleted again, and every reservation fails from now on.
	mu.Lock()
	failFrom, failUntil = calls+1, 1<<30
	mu.Unlock()
	quarantineAll(t, p, tiny, 1)
	d.pause(t, time.Second)
	got := make(chan error, 1)
	go func() {
		_, err := p.Lease(context.Background(), tiny)
		got <- err
	}()
	d.shutdown(t)
	if err := <-got; !errors.Is(err, ErrDepleted) {
		t.Fatalf("waiter after Run stopped: want ErrDepleted, have %v", err)
	}
}

func TestPool_RunStops(t *testing.T) {
	defer goleak.VerifyNone(t)
	t.Run("close", func(t *testing.T) {
		p := onePool(t, 1, PageSize)
		d := startDriver(t, p, time.Second)
		d.waitIdle(t)
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
		if err := <-d.done; err != nil {
			t.Fatalf("Run after Close: %v", err)
		}
		d.stop()
		d.stop = nil
	})
	t.Run("second Run", func(t *testing.T) {
		p := onePool(t, 1, PageSize)
		d := startDriver(t, p, time.Second)
		d.waitIdle(t)
		if err := p.Run(context.Background()); err == nil {
			t.Fatal("a second concurrent Run was accepted")
		}
	})
	t.Run("negative interval", func(t *testing.T) {
		_, err := New(Config{Classes: map[vocab.CellClass]ClassConfig{tiny: {1, PageSize}}, ReplaceInterval: -1})
		if !errors.Is(err, ErrInvalidConfig) {
			t.Fatalf("want ErrInvalidConfig, have %v", err)
		}
	})
}

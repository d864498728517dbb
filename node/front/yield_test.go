package front

import (
	"context"
	"net"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/latent-node/latent-node/internal/testutil"
)

// startYield runs a Yield's sentinel until the test ends.
func startYield(t *testing.T, interval time.Duration) *Yield {
	t.Helper()
	f, err := NewYield(interval)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx) }()
	for { // Run is reading once it marked itself live
		f.mu.Lock()
		live := f.live
		f.mu.Unlock()
		if live {
			break
		}
		runtime.Gosched()
	}
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
		f.Close()
	})
	return f
}

// spin is a guest that never blocks: it only gives up its processor in
// yield. It stops when stop is set.
func spin(stop *atomic.Bool, yield func()) {
	for !stop.Load() {
		deadline := time.Now().Add(200 * time.Microsecond)
		for time.Now().Before(deadline) {
		}
		yield()
	}
}

// TestFrontYield_readsTheNetwork: with one Go processor held by a guest
// that never blocks, a connection's request is read and answered only
// because the guest yields; without yields (the negative control) Go's
// monitor polls the network at most every 10ms, so the round trips take
// far longer.
func TestFrontYield_readsTheNetwork(t *testing.T) {
	t.Cleanup(func() { goleak.VerifyNone(t) }) // after the sentinel stopped
	roundTrips := func(t *testing.T, yield func()) time.Duration {
		prev := runtime.GOMAXPROCS(1)
		defer runtime.GOMAXPROCS(prev)
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { // the front: echo one byte per read
			defer wg.Done()
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
			var b [1]byte
			for {
				if _, err := c.Read(b[:]); err != nil {
					return
				}
				if _, err := c.Write(b[:]); err != nil {
					return
				}
			}
		}()
		var stop atomic.Bool
		wg.Add(1)
		go func() { defer wg.Done(); spin(&stop, yield) }()
		defer func() { stop.Store(true); wg.Wait() }()
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		trips := make([]time.Duration, 0, 40)
		var b [1]byte
		for i := 0; i < 40; i++ {
			start := time.Now()
			if _, err := c.Write(b[:]); err != nil {
				t.Fatal(err)
			}
			if _, err := c.Read(b[:]); err != nil {
				t.Fatal(err)
			}
			trips = append(trips, time.Since(start))
		}
		slices.Sort(trips)
		return trips[len(trips)/2] // the median: a loaded machine delays single trips either way
	}
	f := startYield(t, 100*time.Microsecond)
	with := roundTrips(t, f.Maybe)
	without := roundTrips(t, func() {})
	t.Logf("median round trip: %v with yields, %v without", with, without)
	if with*3 > without {
		t.Fatalf("yields should make the front far faster: %v with, %v without", with, without)
	}
}

// TestFrontYield_passesWithoutSentinel: before Run and after it returned,
// maybe never waits.
func TestFrontYield_passesWithoutSentinel(t *testing.T) {
	t.Cleanup(func() { goleak.VerifyNone(t) }) // after the sentinel stopped
	f, err := NewYield(0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	f.Maybe() // not running yet: returns
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx) }()
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	f.Maybe() // stopped: returns
}

// TestFrontYield_concurrent: many goroutines yielding at once are all
// released, and the interval gates yields node-wide.
func TestFrontYield_concurrent(t *testing.T) {
	t.Cleanup(func() { goleak.VerifyNone(t) }) // after the sentinel stopped
	f := startYield(t, 0)
	err := testutil.Hammer(8, 200, func(int, int) error {
		f.Maybe()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if f.Yields() == 0 {
		t.Fatal("no yield counted")
	}
	g := startYield(t, time.Hour)
	g.Maybe()
	g.Maybe()
	if n := g.Yields(); n != 1 {
		t.Fatalf("want one yield within the interval, have %d", n)
	}
}

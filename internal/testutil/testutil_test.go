package testutil

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/errors"
)

var start = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func TestClock(t *testing.T) {
	t.Run("manual", func(t *testing.T) {
		c := NewClock(start)
		if have := c.Now(); !have.Equal(start) {
			t.Fatalf("Now: want %v, have %v", start, have)
		}
		if have := c.Now(); !have.Equal(start) {
			t.Fatalf("Now moved without a step: %v", have)
		}
		if have, want := c.Advance(time.Second), start.Add(time.Second); !have.Equal(want) || !c.Now().Equal(want) {
			t.Fatalf("Advance: want %v, have %v", want, have)
		}
		c.Set(start)
		if have := c.Now(); !have.Equal(start) {
			t.Fatalf("Set: want %v, have %v", start, have)
		}
	})
	t.Run("step", func(t *testing.T) {
		c := NewClock(start, WithStep(time.Millisecond))
		for i := range 3 {
			if have, want := c.Now(), start.Add(time.Duration(i)*time.Millisecond); !have.Equal(want) {
				t.Fatalf("reading %d: want %v, have %v", i, want, have)
			}
		}
		c.SetStep(0)
		if a, b := c.Now(), c.Now(); !a.Equal(b) {
			t.Fatalf("SetStep(0): %v then %v", a, b)
		}
	})
	t.Run("concurrent", func(t *testing.T) {
		c := NewClock(start, WithStep(time.Nanosecond))
		err := Hammer(4, 100, func(int, int) error {
			c.Advance(time.Nanosecond)
			_ = c.Now()
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if have, want := c.Now(), start.Add(800*time.Nanosecond); !have.Equal(want) {
			t.Fatalf("want %v, have %v", want, have)
		}
	})
}

func TestHammer(t *testing.T) {
	t.Run("every call once", func(t *testing.T) {
		var seen [3][5]atomic.Int32
		if err := Hammer(3, 5, func(g, i int) error { seen[g][i].Add(1); return nil }); err != nil {
			t.Fatal(err)
		}
		for g := range seen {
			for i := range seen[g] {
				if n := seen[g][i].Load(); n != 1 {
					t.Fatalf("fn(%d, %d) ran %d times", g, i, n)
				}
			}
		}
	})
	t.Run("concurrent", func(t *testing.T) {
		// The calls run at the same time: each waits for the last to start,
		// which would deadlock if Hammer ran them one after another.
		const n = 4
		var started atomic.Int32
		ready := make(chan struct{}, n)
		err := Hammer(n, 1, func(int, int) error {
			if started.Add(1) == n {
				close(ready)
			}
			<-ready
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	})
	t.Run("errors are collected and stop their goroutine", func(t *testing.T) {
		var calls atomic.Int32
		sentinel := errors.New("boom")
		err := Hammer(2, 10, func(g, i int) error {
			calls.Add(1)
			if i == 3 {
				return sentinel
			}
			return nil
		})
		if !errors.Is(err, sentinel) {
			t.Fatalf("want the sentinel, have %v", err)
		}
		if !strings.Contains(err.Error(), "goroutine 0, iteration 3") || !strings.Contains(err.Error(), "goroutine 1, iteration 3") {
			t.Fatalf("want both goroutines named, have %v", err)
		}
		if n := calls.Load(); n != 8 {
			t.Fatalf("want 8 calls (4 per goroutine), have %d", n)
		}
	})
}

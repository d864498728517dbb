package testutil

// Clock, a manual clock for tests.

import (
	"sync"
	"time"
)

// Clock is a manual clock, safe for concurrent use. It moves only when told
// (Advance, Set), and, when made with WithStep, by a fixed step after every
// Now, so that successive readings differ.
type Clock struct {
	mu   sync.Mutex
	now  time.Time
	step time.Duration
}

// ClockOption configures a Clock.
type ClockOption func(*Clock)

// WithStep makes every Now return the current time and then move the clock
// by step: start, start+step, start+2·step, …
func WithStep(step time.Duration) ClockOption {
	return func(c *Clock) { c.step = step }
}

// NewClock returns a Clock that reads start.
func NewClock(start time.Time, opts ...ClockOption) *Clock {
	c := &Clock{now: start}
	for _, o := range opts {
		o(c)
	}
	return c
}

// Now returns the clock's time, then applies the step (zero by default).
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.now
	c.now = c.now.Add(c.step)
	return t
}

// Advance moves the clock by d and returns the new time.
func (c *Clock) Advance(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	return c.now
}

// Set moves the clock to t, which may be earlier than its time.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

// SetStep changes the step that Now applies after each reading.
func (c *Clock) SetStep(step time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.step = step
}

package vocab

// Clock, the one time source of the packages that take time from their
// caller: admission, the scheduler, the catalog, the load sampler and the
// node's front all read it, and tests inject internal/testutil's manual
// clock.

import "time"

// Clock tells the time. Implementations must not block.
type Clock interface {
	Now() time.Time
}

// WallClock is the production Clock: the system's wall clock (with Go's
// monotonic reading, so durations between two readings are safe). It is
// the one place those packages read it.
var WallClock Clock = wallClock{}

type wallClock struct{}

func (wallClock) Now() time.Time { return time.Now() }

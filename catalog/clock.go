package catalog

import "time"

// Clock tells the catalog the time; it stamps artifact uploads
// (Options.Clock).
type Clock interface {
	Now() time.Time
}

// wallClock is the default Clock: the one wall-clock read of this package.
type wallClock struct{}

func (wallClock) Now() time.Time { return time.Now() }

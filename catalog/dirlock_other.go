//go:build !unix

// The flock of LockDir where the system has none: no lock.

package catalog

import "os"

// flockExclusive does nothing where flock is not available: the data
// directory is not protected against a second process.
func flockExclusive(*os.File) error { return nil }

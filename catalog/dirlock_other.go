//go:build !unix

package catalog

import "os"

// flockExclusive does nothing where flock is not available: the data
// directory is not protected against a second process.
func flockExclusive(*os.File) error { return nil }

//go:build !linux

// Swapping a record with its directory's spare file where renameat2 is
// missing: a rename, and no syncfs (writeBulk fsyncs each file).

package catalog

import "os"

// exchange makes the file spare the file name by renaming it (Linux swaps
// the two instead: exchange_linux.go).
func exchange(spare, name string) error { return os.Rename(spare, name) }

// syncfsAvailable: writeBulk fsyncs each file as it writes it.
const syncfsAvailable = false

func syncfs(string) error { return nil }

//go:build !linux

package catalog

import "os"

// exchange makes the file spare the file name by renaming it (Linux swaps
// the two instead: exchange_linux.go).
func exchange(spare, name string) error { return os.Rename(spare, name) }

// syncAll makes the files durable, one fsync each.
func syncAll(files []tempFile) error { return syncEach(files) }

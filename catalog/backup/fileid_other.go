//go:build !unix

package backup

import "os"

// devIno is 0, 0 where os.FileInfo carries no inode (Windows): a file's
// identity is then its size and modification time (nanoseconds) only.
func devIno(os.FileInfo) (dev, ino uint64) { return 0, 0 }

//go:build unix

package backup

import (
	"os"
	"syscall"
)

// devIno is the device and inode of fi.
func devIno(fi os.FileInfo) (dev, ino uint64) {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Dev), uint64(st.Ino) //nolint:unconvert // Dev is uint32 on some platforms
	}
	return 0, 0
}

//go:build unix

package front

import (
	"context"
	"syscall"
	"time"

	"github.com/cockroachdb/errors"
)

// Run is the sentinel: it releases yielding guests until ctx ends, then
// lets every guest pass without yielding. It returns nil when ctx ended
// and an error if the pipe failed (guests pass without yielding then too).
//
// It waits for the pipe through the runtime's poller without reading
// ahead: each wake reads what the guests wrote once and waits again, where
// a plain Read loop would also read the empty pipe (EAGAIN) before every
// wait, a system call per yield for nothing.
func (f *Yield) Run(ctx context.Context) error {
	rc, err := f.r.SyscallConn()
	if err != nil {
		return errors.Wrap(err, "node: front yield pipe")
	}
	f.mu.Lock()
	f.live = true
	f.mu.Unlock()
	stop := context.AfterFunc(ctx, func() { _ = f.r.SetReadDeadline(time.Unix(1, 0)) })
	defer stop()
	var buf [512]byte
	err = rc.Read(func(fd uintptr) bool {
		for { // empty the pipe: one byte per yield since the last wake
			n, err := syscall.Read(int(fd), buf[:])
			if err != syscall.EINTR && (err != nil || n < len(buf)) {
				break
			}
		}
		f.release(true) // the yields' guests (none on the first call or a spurious wake)
		return false    // wait for the next readiness; only the deadline ends this
	})
	f.release(false)
	if ctx.Err() != nil {
		return nil
	}
	return errors.Wrap(err, "node: front yield pipe")
}

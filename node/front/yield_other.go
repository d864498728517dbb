//go:build !unix

package front

import (
	"context"

	"github.com/cockroachdb/errors"
)

// Run is the sentinel: it releases yielding guests until ctx ends, then
// lets every guest pass without yielding. It returns nil when ctx ended
// and an error if the pipe failed (guests pass without yielding then too).
//
// Where pipes are not pollable (Windows) it reads the pipe with blocking
// reads on a thread of its own, and wakes the last read with a byte of
// its own when ctx ends.
func (f *Yield) Run(ctx context.Context) error {
	f.mu.Lock()
	f.live = true
	f.mu.Unlock()
	stop := context.AfterFunc(ctx, func() { _, _ = f.w.Write(yieldByte[:]) })
	defer stop()
	var buf [512]byte
	var err error
	for ctx.Err() == nil {
		if _, err = f.r.Read(buf[:]); err != nil {
			break
		}
		f.release(true)
	}
	f.release(false)
	if ctx.Err() != nil {
		return nil
	}
	return errors.Wrap(err, "node: front yield pipe")
}

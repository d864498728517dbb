package front

// Yield, how guests give their processor to the network front now and then.

import (
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/errors"
)

// YieldInterval is how often, at most, a guest gives its processor to
// the network front: when an activation ends and at the guest's fuel checks
// (every fuel slice), if no guest yielded for this long.
const YieldInterval = 100 * time.Microsecond

// Yield lets the front read the network while guests hold every Go
// processor. Go polls the network only when a processor runs out of
// runnable goroutines (or from its 10ms monitor), and while guests are
// queued one always remains runnable: requests would wait unread in their
// sockets, and be read in batches in arrival order, not per tenant.
//
// A yielding guest writes a byte to a pipe whose read end a sentinel
// goroutine waits on through the runtime's poller, and parks until the
// sentinel read it. The runtime's poller reports the pipe in the same poll
// as every connection that became readable meanwhile, so by the time the
// guest runs again their goroutines were readied; it lets them run first
// (one Gosched). Requests that arrived are so read, authenticated, admitted
// and queued, and finished answers written, before the next guest is
// chosen. No timer, no other thread: a yield costs two system calls and a
// poll, a few microseconds.
type Yield struct {
	epoch    time.Time
	interval time.Duration
	last     atomic.Int64 // since epoch, of the last yield
	yields   atomic.Uint64
	r, w     *os.File

	mu      sync.Mutex
	live    bool // Run is reading
	waiting []chan struct{}
	spare   []chan struct{} // the array release emptied last, for waiting next
	free    []chan struct{}
}

func NewYield(interval time.Duration) (*Yield, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, errors.Wrap(err, "node: front yield pipe")
	}
	f := &Yield{epoch: time.Now(), interval: interval, r: r, w: w}
	f.last.Store(-int64(interval)) // the first may yield at once
	return f, nil
}

// Yields counts the yields so far.
func (f *Yield) Yields() uint64 { return f.yields.Load() }

// release wakes the guests waiting now; with live false no guest waits
// again.
func (f *Yield) release(live bool) {
	f.mu.Lock()
	w := f.waiting
	f.waiting, f.spare = f.spare, nil // the spare array: yields append without allocating
	f.live = live
	f.mu.Unlock()
	for _, c := range w {
		c <- struct{}{}
	}
	clear(w)
	f.mu.Lock()
	f.spare = w[:0]
	f.mu.Unlock()
}

// yieldByte is what a guest writes to the pipe to yield (never changed;
// a package variable, so that a yield allocates nothing).
var yieldByte = [1]byte{1}

// Maybe yields the caller's processor to the front if no guest did for the
// interval. It returns at once while Run is not running.
func (f *Yield) Maybe() {
	if f == nil {
		return
	}
	now := int64(time.Since(f.epoch))
	last := f.last.Load()
	if now-last < int64(f.interval) || !f.last.CompareAndSwap(last, now) {
		return
	}
	f.mu.Lock()
	if !f.live {
		f.mu.Unlock()
		return
	}
	var c chan struct{}
	if n := len(f.free); n > 0 {
		c, f.free = f.free[n-1], f.free[:n-1]
	} else {
		c = make(chan struct{}, 1)
	}
	f.waiting = append(f.waiting, c)
	f.mu.Unlock()
	f.yields.Add(1)
	if _, err := f.w.Write(yieldByte[:]); err != nil {
		f.release(true) // cannot happen while the pipe is open; never wait for nothing
	}
	<-c
	runtime.Gosched() // the goroutines the same poll readied run first
	f.mu.Lock()
	f.free = append(f.free, c)
	f.mu.Unlock()
}

// close closes the pipe (after Run returned).
func (f *Yield) Close() {
	_ = f.r.Close()
	_ = f.w.Close()
}

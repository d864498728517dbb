//go:build !linux

package cellpool

// The region of a cell off Linux: a plain Go byte slice.

// heapRegion is the portable fallback off Linux: a Go byte slice, zeroed by
// reset. There are no guard pages (every byte of the reservation is always
// accessible to Go code) and the whole reservation is committed, so it is
// for development only; the node runs on Linux.
type heapRegion struct {
	mem []byte
}

func reserve(size uint64) (region, error) {
	return &heapRegion{mem: make([]byte, size)}, nil
}

func (r *heapRegion) bytes() []byte { return r.mem }

func (r *heapRegion) grant(_, _ uint64) error { return nil }

func (r *heapRegion) reset(n uint64) error {
	clear(r.mem[:n])
	return nil
}

func (r *heapRegion) release() error {
	r.mem = nil
	return nil
}

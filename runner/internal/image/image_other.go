//go:build !linux

// The portable fallback: the image is a Go byte slice copied into each
// memory.

package image

// heapBacking keeps a copy of the image's bytes.
type heapBacking struct {
	data []byte
}

func newBacking(data []byte) (backing, error) {
	return &heapBacking{data: append([]byte(nil), data...)}, nil
}

// reserve allocates max bytes (committed lazily by the OS, if at all) and
// copies the image in: no sharing and no copy-on-write, for development
// only.
func (b *heapBacking) reserve(max uint64) (region, error) {
	mem := make([]byte, max)
	copy(mem, b.data)
	return &heapRegion{mem: mem, image: b.data}, nil
}

func (b *heapBacking) size() (uint64, error) { return uint64(len(b.data)), nil }

func (b *heapBacking) close() error { return nil }

// heapRegion is one memory: a Go byte slice, reset by copying the image
// back and zeroing the rest.
type heapRegion struct {
	mem   []byte
	image []byte
}

func (r *heapRegion) bytes() []byte { return r.mem }

func (r *heapRegion) grant(_, _ uint64) error { return nil }

func (r *heapRegion) reset(imageLen, to uint64) error {
	copy(r.mem[:imageLen], r.image)
	clear(r.mem[imageLen:to])
	return nil
}

func (r *heapRegion) restore(imageLen, to uint64) (uint64, error) {
	return imageLen, r.reset(imageLen, to)
}

func (r *heapRegion) release() error {
	r.mem, r.image = nil, nil
	return nil
}

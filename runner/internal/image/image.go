// Image and Memory: the platform-independent part of the copy-on-write
// linear memory (life cycle, locking, the wazero allocator contract).

package image

import (
	"os"
	"sync"

	"github.com/cockroachdb/errors"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
)

// PageSize is the WebAssembly page size: an image's length and the sizes
// wazero asks for are multiples of it.
const PageSize = 65536

// osPageSize is the granularity of mprotect and madvise.
var osPageSize = uint64(os.Getpagesize())

var (
	// ErrClosed is returned by NewMemory after Image.Close and by every
	// method of a Memory after Memory.Close.
	ErrClosed = errors.New("image: closed")
	// ErrGrown is returned by Reset when the memory is longer than the image
	// (the guest grew it). Its contents are reset anyway, but wazero's length
	// cannot shrink: discard the module instance and start a new one from a
	// new Memory.
	ErrGrown = errors.New("image: memory grew beyond the image")
	// ErrInUse is returned by Close while wazero may still hold the memory:
	// Allocate handed it out and Free was not called.
	ErrInUse = errors.New("image: memory still held by a module instance")
)

// Image is the linear memory of a guest after its initialisation, shared
// read-only by every Memory made from it. It is safe for concurrent use.
//
// Ownership: whoever called New owns the Image and closes it when no new
// Memory is wanted (the revision is gone). Closing does not invalidate
// memories already made: each keeps its own reference to the backing (on
// Linux the kernel keeps the memfd alive for as long as any mapping of it
// exists), and the backing is freed when the last Memory is closed.
type Image struct {
	n  uint64 // Len(), a multiple of PageSize
	mu struct {
		sync.RWMutex // NewMemory holds it shared, Close exclusively
		closed       bool
		b            backing
	}
}

// backing is what holds an image's bytes. Implementations: memfdBacking
// (image_linux.go) and heapBacking (image_other.go).
type backing interface {
	// reserve returns a region of max bytes (max >= the image's length)
	// whose first bytes read as the image.
	reserve(max uint64) (region, error)
	// size is the memory the backing occupies, in bytes.
	size() (uint64, error)
	close() error
}

// region is one Memory's address space. Implementations: mmapRegion
// (image_linux.go) and heapRegion (image_other.go).
type region interface {
	// bytes returns the whole reservation. Its address never changes.
	bytes() []byte
	// grant makes [from, to) readable and writable; both are multiples of
	// the OS page size. [0, image length) is readable and writable from the
	// start.
	grant(from, to uint64) error
	// reset returns [0, imageLen) to the image and zeroes [imageLen, to).
	reset(imageLen, to uint64) error
	// restore is reset that keeps the pages mapped: it copies the image
	// back over the pages of [0, imageLen) that the memory has privately
	// (every other page still maps the image) and zeroes [imageLen, to).
	// It returns how many bytes it copied.
	restore(imageLen, to uint64) (uint64, error)
	release() error
}

// New makes an image of data, the bytes of a linear memory (so its length
// is a multiple of PageSize; an empty image is allowed). data is copied: the
// caller may reuse it at once.
func New(data []byte) (*Image, error) {
	n := uint64(len(data))
	if n%PageSize != 0 {
		return nil, errors.AssertionFailedf("image: length %d is not a multiple of %d", n, PageSize)
	}
	b, err := newBacking(data)
	if err != nil {
		return nil, errors.Wrapf(err, "image: new image of %d bytes", n)
	}
	img := &Image{n: n}
	img.mu.b = b
	return img, nil
}

// Len returns the image's length in bytes, a multiple of PageSize.
func (img *Image) Len() uint64 { return img.n }

// Size returns the memory the image itself occupies, in bytes. On Linux
// this is the memfd's page cache (pages of the image that are all zero are
// left as holes and cost nothing until a memory reads them); it is shared by
// every Memory, which adds only the pages its guest writes. Off Linux it is
// Len().
func (img *Image) Size() (uint64, error) {
	img.mu.RLock()
	defer img.mu.RUnlock()
	if img.mu.closed {
		return 0, ErrClosed
	}
	s, err := img.mu.b.size()
	return s, errors.Wrap(err, "image: size")
}

// Close releases the owner's reference. NewMemory fails afterwards with
// ErrClosed; memories already made keep working until they are closed. A
// second Close is a no-op.
func (img *Image) Close() error {
	img.mu.Lock()
	defer img.mu.Unlock()
	if img.mu.closed {
		return nil
	}
	img.mu.closed = true
	return errors.Wrap(img.mu.b.close(), "image: close")
}

// NewMemory returns a memory for one module instance: max bytes of address
// space (the cap on its growth; at least Len()) whose first Len() bytes read
// as the image and are private to this memory when written. It is wazero's
// allocator through experimental.WithMemoryAllocator(ctx, m); the caller
// owns it and closes it after the module instance is closed.
func (img *Image) NewMemory(max uint64) (*Memory, error) {
	if max < img.n {
		return nil, errors.AssertionFailedf("image: memory cap %d is below the image length %d", max, img.n)
	}
	img.mu.RLock()
	defer img.mu.RUnlock()
	if img.mu.closed {
		return nil, ErrClosed
	}
	r, err := img.mu.b.reserve(max)
	if err != nil {
		return nil, errors.Wrapf(err, "image: reserve %d bytes", max)
	}
	m := &Memory{imageLen: img.n, max: max}
	m.mu.r = r
	m.mu.rw = img.n
	return m, nil
}

// Memory is a copy-on-write linear memory over an Image, and wazero's
// experimental.MemoryAllocator and experimental.LinearMemory for one module
// instance. It is safe for concurrent use (wazero calls Reallocate from the
// guest's goroutine).
//
// Life cycle: NewMemory → Allocate (wazero, once: a second Allocate gets a
// memory that refuses every size) → Reallocate (wazero: the minimum, then
// each memory.grow) → Attach → [activation → Reset] … → Free (wazero, when
// the module closes) → Close.
type Memory struct {
	imageLen uint64
	max      uint64
	mu       struct {
		sync.Mutex
		r         region
		rw        uint64 // bytes from the start that are readable and writable
		length    uint64 // the largest size handed to wazero (its length cannot shrink)
		allocated bool
		freed     bool
		closed    bool
	}
}

var (
	_ experimental.MemoryAllocator = (*Memory)(nil)
	_ experimental.LinearMemory    = (*Memory)(nil)
)

// Allocate implements experimental.MemoryAllocator. The first call returns
// m; every later call (a second module, a second memory) returns a memory
// that refuses every size, and so does a call after Close. The hints are
// ignored: the cap is NewMemory's max.
func (m *Memory) Allocate(_, _ uint64) experimental.LinearMemory {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.mu.allocated || m.mu.closed {
		return refusing{}
	}
	m.mu.allocated = true
	return m
}

// Reallocate implements experimental.LinearMemory: it returns the first size
// bytes of the memory (capacity size) after making any pages beyond the image
// that it now needs readable and writable. The base address never changes
// and nothing is copied. It returns nil (memory.grow returns -1) beyond the
// cap, after Free or Close, or if mprotect fails.
func (m *Memory) Reallocate(size uint64) []byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.mu.allocated || m.mu.freed || m.mu.closed || size > m.max {
		return nil
	}
	if size > m.mu.rw {
		to := min(roundUp(size, osPageSize), uint64(len(m.mu.r.bytes())))
		if err := m.mu.r.grant(m.mu.rw, to); err != nil {
			return nil
		}
		m.mu.rw = to
	}
	m.mu.length = max(m.mu.length, size)
	return m.mu.r.bytes()[:size:size]
}

// Free implements experimental.LinearMemory: wazero calls it when it closes
// the module instance. It only records that wazero let go of the memory (it
// may run while a guest call still executes on another goroutine). After an
// InstantiateModule that failed without closing the instance (wazero does not
// call Free then), the caller calls Free itself before Close.
func (m *Memory) Free() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.mu.freed = true
}

// Len returns the memory's length as wazero knows it: the largest size
// Reallocate handed out.
func (m *Memory) Len() uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.mu.length
}

// Attach brings a module instance's memory, which is m, to the image: it
// grows mem to the image's length (a module's minimum is usually below the
// size its memory reached during initialisation) and resets it, which also
// undoes the module's data segments that wazero wrote at instantiation.
// Call it once after InstantiateModule (with no start function: the image
// already holds the initialised state) and before the first activation.
// Globals and tables are the caller's to restore.
func (m *Memory) Attach(mem api.Memory) error {
	if mem == nil {
		return errors.AssertionFailedf("image: attach: the module has no memory")
	}
	have := uint64(mem.Size())
	if have < m.imageLen {
		if _, ok := mem.Grow(uint32((m.imageLen - have) / PageSize)); !ok {
			return errors.Newf("image: attach: growing the memory from %d to %d bytes was refused", have, m.imageLen)
		}
	}
	if l := m.Len(); l != uint64(mem.Size()) {
		return errors.AssertionFailedf("image: attach: the module's memory (%d bytes) is not this memory (%d bytes)", mem.Size(), l)
	}
	return m.Reset()
}

// Reset returns the memory to the image between activations: every byte of
// [0, Len()) reads as the image again, and pages beyond the image (if the
// guest grew the memory) read as zero. On Linux it drops the private
// copy-on-write pages with madvise(MADV_DONTNEED); its cost grows with the
// pages written, and the next activation takes a minor page fault for each
// page it touches.
//
// It returns ErrGrown when wazero's length now exceeds the image (the guest
// grew the memory): the contents are reset, but the module instance must be
// replaced. Any other error leaves the memory's contents unknown: discard
// the instance and the memory.
func (m *Memory) Reset() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.mu.closed {
		return ErrClosed
	}
	// The guest can have written [0, length) and rw is length rounded up to
	// an OS page (or the image's length, if larger): the whole image is reset,
	// and every page handed out beyond it is zeroed.
	if err := m.mu.r.reset(m.imageLen, max(m.mu.rw, m.imageLen)); err != nil {
		return errors.Wrap(err, "image: reset")
	}
	if m.mu.length > m.imageLen {
		return ErrGrown
	}
	return nil
}

// Restore is Reset for a guest that writes many pages per activation: the
// same result (every byte of [0, Len()) reads as the image, pages beyond it
// as zero; ErrGrown and other errors as for Reset), reached without
// unmapping. On Linux it finds the pages the memory holds privately (every
// page any activation wrote since the memory was made) in
// /proc/self/pagemap and copies the image's bytes back over them with
// pread from the memfd. The pages stay mapped and writable, so the next
// activation takes no page fault for them; the price is that its cost grows
// with every page ever written (a copy each), not with the pages written
// since the last reset, and those pages stay resident. It returns the bytes
// copied.
func (m *Memory) Restore() (uint64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.mu.closed {
		return 0, ErrClosed
	}
	n, err := m.mu.r.restore(m.imageLen, max(m.mu.rw, m.imageLen))
	if err != nil {
		return n, errors.Wrap(err, "image: restore")
	}
	if m.mu.length > m.imageLen {
		return n, ErrGrown
	}
	return n, nil
}

// Close unmaps the memory. It returns ErrInUse, and keeps the mapping, if
// wazero got the memory from Allocate and has not called Free: a module
// instance may still reference it. A second Close is a no-op.
func (m *Memory) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case m.mu.closed:
		return nil
	case m.mu.allocated && !m.mu.freed:
		return ErrInUse
	}
	m.mu.closed = true
	err := m.mu.r.release()
	m.mu.r = nil
	return errors.Wrap(err, "image: close memory")
}

// refusing is the memory of every Allocate after a Memory's first: it never
// hands out bytes.
type refusing struct{}

func (refusing) Reallocate(uint64) []byte { return nil }
func (refusing) Free()                    {}

func roundUp(n, to uint64) uint64 { return (n + to - 1) / to * to }

// The Linux backing: a sealed memfd mapped MAP_PRIVATE into each memory.

package image

import (
	"bytes"
	"encoding/binary"
	"os"
	"sync"
	"unsafe"

	"github.com/cockroachdb/errors"
	"golang.org/x/sys/unix"
)

// memfdBacking holds the image in a memfd, written once and sealed against
// any further change of contents or size. All-zero OS pages of the image
// are not written: they stay holes of the file (which read as zero).
type memfdBacking struct {
	fd int
	n  uint64
}

// seals make the memfd immutable: no write (write(2) or a shared writable
// mapping), no resize, no further change of seals. MAP_PRIVATE mappings
// with PROT_WRITE stay allowed: their writes are private copies.
const seals = unix.F_SEAL_SHRINK | unix.F_SEAL_GROW | unix.F_SEAL_WRITE | unix.F_SEAL_SEAL

func newBacking(data []byte) (backing, error) {
	fd, err := unix.MemfdCreate("latent-image", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, errors.Wrap(err, "memfd_create")
	}
	b := &memfdBacking{fd: fd, n: uint64(len(data))}
	if err := b.fill(data); err != nil {
		_ = unix.Close(fd)
		return nil, err
	}
	return b, nil
}

// fill sizes the file, writes every run of OS pages that is not all zero,
// and seals it.
func (b *memfdBacking) fill(data []byte) error {
	if err := unix.Ftruncate(b.fd, int64(len(data))); err != nil {
		return errors.Wrap(err, "ftruncate")
	}
	ps := int(osPageSize)
	for off := 0; off < len(data); {
		if isZero(data[off : off+ps]) {
			off += ps
			continue
		}
		end := off + ps
		for end < len(data) && !isZero(data[end:end+ps]) {
			end += ps
		}
		if err := pwriteAll(b.fd, data[off:end], int64(off)); err != nil {
			return err
		}
		off = end
	}
	if _, err := unix.FcntlInt(uintptr(b.fd), unix.F_ADD_SEALS, seals); err != nil {
		return errors.Wrap(err, "seal")
	}
	return nil
}

func pwriteAll(fd int, p []byte, off int64) error {
	for len(p) > 0 {
		n, err := unix.Pwrite(fd, p, off)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return errors.Wrap(err, "pwrite")
		}
		p, off = p[n:], off+int64(n)
	}
	return nil
}

var zeroPage = make([]byte, 64<<10)

func isZero(p []byte) bool {
	for len(p) > 0 {
		n := min(len(p), len(zeroPage))
		if !bytes.Equal(p[:n], zeroPage[:n]) {
			return false
		}
		p = p[n:]
	}
	return true
}

// reserve maps max bytes PROT_NONE, MAP_PRIVATE|MAP_ANONYMOUS|MAP_NORESERVE
// (address space only), then maps the memfd MAP_PRIVATE|MAP_FIXED,
// PROT_READ|PROT_WRITE over the first n bytes: copy-on-write.
func (b *memfdBacking) reserve(max uint64) (region, error) {
	// The memory's own descriptor, for Restore: the image's may be closed
	// first. An empty image has nothing to restore: its memories hold no
	// descriptor.
	fd := -1
	if b.n > 0 {
		var err error
		if fd, err = unix.FcntlInt(uintptr(b.fd), unix.F_DUPFD_CLOEXEC, 0); err != nil {
			return nil, errors.Wrap(err, "dup memfd")
		}
	}
	// An empty image's reservation is mapped readable and writable at once
	// (wazero checks every access against the memory's length, so pages
	// past it need no protection): one mapping, and growing it never calls
	// mprotect, which fails once the process has vm.max_map_count mappings.
	prot := unix.PROT_NONE
	if b.n == 0 {
		prot = unix.PROT_READ | unix.PROT_WRITE
	}
	mem, err := unix.Mmap(-1, 0, int(max), prot, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_NORESERVE)
	if err != nil {
		if fd >= 0 {
			_ = unix.Close(fd)
		}
		return nil, errors.Wrap(err, "mmap reservation")
	}
	if b.n > 0 {
		if _, err := unix.MmapPtr(fd, 0, unsafe.Pointer(unsafe.SliceData(mem)), uintptr(b.n), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_FIXED); err != nil {
			_ = unix.Munmap(mem)
			_ = unix.Close(fd)
			return nil, errors.Wrap(err, "mmap image")
		}
	}
	return &mmapRegion{mem: mem, fd: fd, open: b.n == 0}, nil
}

func (b *memfdBacking) size() (uint64, error) {
	var st unix.Stat_t
	if err := unix.Fstat(b.fd, &st); err != nil {
		return 0, errors.Wrap(err, "fstat")
	}
	return uint64(st.Blocks) * 512, nil
}

func (b *memfdBacking) close() error {
	return errors.Wrap(unix.Close(b.fd), "close memfd")
}

// mmapRegion is one memory's reservation: [0, image length) a private
// mapping of the memfd, the rest anonymous, PROT_NONE until granted.
type mmapRegion struct {
	mem     []byte // as returned by unix.Mmap (unix.Munmap needs it)
	fd      int    // a duplicate of the image's memfd (-1 for an empty image)
	pagemap []byte // restore's scratch: one pagemap entry per OS page
	open    bool   // mapped readable and writable whole (an empty image)
}

func (r *mmapRegion) bytes() []byte { return r.mem }

func (r *mmapRegion) grant(from, to uint64) error {
	if r.open {
		return nil
	}
	return errors.Wrap(unix.Mprotect(r.mem[from:to], unix.PROT_READ|unix.PROT_WRITE), "mprotect")
}

// reset drops the private pages of [0, to): over the memfd mapping the
// range reads as the image again, over the anonymous part as zero.
func (r *mmapRegion) reset(_, to uint64) error {
	if to == 0 {
		return nil
	}
	return errors.Wrap(unix.Madvise(r.mem[:to], unix.MADV_DONTNEED), "madvise")
}

// restore copies the image back over the private pages of [0, imageLen)
// (pread from the memfd, one call per run of private pages) and drops
// [imageLen, to).
func (r *mmapRegion) restore(imageLen, to uint64) (uint64, error) {
	var copied uint64
	if imageLen > 0 {
		pages := imageLen / osPageSize
		if uint64(len(r.pagemap)) < 8*pages {
			r.pagemap = make([]byte, 8*pages)
		}
		entries := r.pagemap[:8*pages]
		if err := readPagemap(uintptr(unsafe.Pointer(unsafe.SliceData(r.mem))), entries); err != nil {
			return 0, err
		}
		for p := uint64(0); p < pages; {
			if !private(entries, p) {
				p++
				continue
			}
			end := p + 1
			for end < pages && private(entries, end) {
				end++
			}
			from, to := p*osPageSize, end*osPageSize
			if err := preadAll(r.fd, r.mem[from:to], int64(from)); err != nil {
				return copied, err
			}
			copied += to - from
			p = end
		}
	}
	if to > imageLen {
		if err := unix.Madvise(r.mem[imageLen:to], unix.MADV_DONTNEED); err != nil {
			return copied, errors.Wrap(err, "madvise")
		}
	}
	return copied, nil
}

// Bits of a /proc/self/pagemap entry (Documentation/admin-guide/mm/pagemap.rst).
const (
	pmPresent = 1 << 63
	pmSwapped = 1 << 62
	pmFile    = 1 << 61 // a page of the page cache (here: the image) or shared anonymous
)

// private reports whether OS page p of a private file mapping holds a page
// of its own: a copy made by a write (present or swapped out, and not the
// file's page). A page that is not mapped reads as the file.
func private(entries []byte, p uint64) bool {
	e := binary.NativeEndian.Uint64(entries[8*p:])
	return e&(pmPresent|pmSwapped) != 0 && e&pmFile == 0
}

// pagemap is /proc/self/pagemap, opened once per process.
var pagemap struct {
	once sync.Once
	f    *os.File
	err  error
}

// readPagemap fills entries with the pagemap entries of the OS pages from
// addr on.
func readPagemap(addr uintptr, entries []byte) error {
	pagemap.once.Do(func() { pagemap.f, pagemap.err = os.Open("/proc/self/pagemap") })
	if pagemap.err != nil {
		return errors.Wrap(pagemap.err, "open pagemap")
	}
	off := int64(uint64(addr) / osPageSize * 8)
	for len(entries) > 0 {
		n, err := pagemap.f.ReadAt(entries, off)
		if err != nil {
			return errors.Wrap(err, "read pagemap")
		}
		entries, off = entries[n:], off+int64(n)
	}
	return nil
}

func preadAll(fd int, p []byte, off int64) error {
	for len(p) > 0 {
		n, err := unix.Pread(fd, p, off)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return errors.Wrap(err, "pread image")
		}
		if n == 0 {
			return errors.AssertionFailedf("pread image: end of file at %d", off)
		}
		p, off = p[n:], off+int64(n)
	}
	return nil
}

func (r *mmapRegion) release() error {
	err := unix.Munmap(r.mem)
	if r.fd >= 0 {
		if cerr := unix.Close(r.fd); err == nil {
			err = cerr
		}
	}
	return errors.Wrap(err, "munmap")
}

package cellpool

// The Linux region of a cell: an mmap reservation granted and reset with
// mprotect and madvise.

import (
	"github.com/cockroachdb/errors"
	"golang.org/x/sys/unix"
)

// mmapRegion is a private anonymous mapping reserved PROT_NONE with
// MAP_NORESERVE: address space only, no commit charge. Granted pages become
// PROT_READ|PROT_WRITE and are populated on first touch; reset drops them
// with MADV_DONTNEED (a private anonymous page reads as zero afterwards).
// Pages stay readable and writable up to the highest size ever granted (rw),
// so a reused cell costs one madvise per activation instead of two mprotect
// calls more: the guest still cannot reach them, since wazero only ever
// holds the slice of its current size, and pages above rw stay PROT_NONE.
type mmapRegion struct {
	mem []byte // as returned by unix.Mmap (unix.Munmap needs it)
	rw  uint64 // bytes from the start that are PROT_READ|PROT_WRITE
}

func reserve(size uint64) (region, error) {
	mem, err := unix.Mmap(-1, 0, int(size), unix.PROT_NONE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_NORESERVE)
	if err != nil {
		return nil, errors.Wrap(err, "mmap")
	}
	return &mmapRegion{mem: mem}, nil
}

func (r *mmapRegion) bytes() []byte { return r.mem }

func (r *mmapRegion) grant(from, to uint64) error {
	from = max(from, r.rw)
	if to <= from {
		return nil
	}
	if err := unix.Mprotect(r.mem[from:to], unix.PROT_READ|unix.PROT_WRITE); err != nil {
		return errors.Wrap(err, "mprotect")
	}
	r.rw = to
	return nil
}

func (r *mmapRegion) reset(n uint64) error {
	if n == 0 {
		return nil
	}
	if n <= clearLimit {
		// A small memory is cheaper to zero in place than to drop and fault
		// back in page by page on the next activation (a syscall and a page
		// fault each cost microseconds in a VM).
		clear(r.mem[:n])
		return nil
	}
	return errors.Wrap(unix.Madvise(r.mem[:n], unix.MADV_DONTNEED), "madvise")
}

// clearLimit is the largest used memory reset by zeroing in place; larger
// ones are dropped with MADV_DONTNEED (which also returns them to the OS).
const clearLimit = 4 * PageSize

func (r *mmapRegion) release() error {
	return errors.Wrap(unix.Munmap(r.mem), "munmap")
}

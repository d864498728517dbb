// Linux specifics: the memfd is sealed, zero pages are holes, and pages
// beyond what wazero was handed stay inaccessible.

package image

import (
	"bytes"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/latent-node/latent-node/internal/testutil"
)

// TestImage_sealed: the memfd refuses writes, resizes and new seals, so
// nothing can change an image after New; a private writable mapping (what a
// Memory is) is still allowed.
func TestImage_sealed(t *testing.T) {
	img := mustImage(t, make([]byte, PageSize))
	fd := img.mu.b.(*memfdBacking).fd
	have, err := unix.FcntlInt(uintptr(fd), unix.F_GET_SEALS, 0)
	if err != nil {
		t.Fatal(err)
	}
	if have != seals {
		t.Fatalf("seals %#x, want %#x", have, seals)
	}
	if _, err := unix.Pwrite(fd, []byte{1}, 0); err != unix.EPERM {
		t.Fatalf("pwrite to the image: %v, want EPERM", err)
	}
	if err := unix.Ftruncate(fd, 2*PageSize); err != unix.EPERM {
		t.Fatalf("ftruncate of the image: %v, want EPERM", err)
	}
	if _, err := unix.Mmap(fd, 0, PageSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED); err != unix.EPERM {
		t.Fatalf("shared writable mapping of the image: %v, want EPERM", err)
	}
	// Negative control: the private writable mapping a Memory uses works.
	_, b := mustMemory(t, img, PageSize)
	b[0] = 1
}

// TestImage_size: Size is the memfd's page cache; all-zero OS pages are left
// as holes and cost nothing.
func TestImage_size(t *testing.T) {
	tests := []struct {
		name string
		fill func([]byte)
		want uint64
	}{
		{"all zero", func([]byte) {}, 0},
		{"one byte", func(b []byte) { b[PageSize+1] = 1 }, osPageSize},
		{"first and last byte", func(b []byte) { b[0], b[len(b)-1] = 1, 1 }, 2 * osPageSize},
		{"all set", func(b []byte) {
			for i := range b {
				b[i] = 0xff
			}
		}, 4 * PageSize},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			data := make([]byte, 4*PageSize)
			tc.fill(data)
			img := mustImage(t, data)
			have, err := img.Size()
			if err != nil {
				t.Fatal(err)
			}
			if have != tc.want {
				t.Fatalf("Size %d, want %d", have, tc.want)
			}
			// The holes read as zero through a memory.
			_, b := mustMemory(t, img, img.Len())
			if d := firstDiff(b, data); d != "" {
				t.Fatal(d)
			}
		})
	}
}

// TestMemory_protection: the image part is a private writable mapping, the
// reservation beyond it is inaccessible until wazero is handed it, and the
// whole reservation is gone after Close.
func TestMemory_protection(t *testing.T) {
	img := mustImage(t, make([]byte, 2*PageSize))
	m, err := img.NewMemory(8 * PageSize)
	if err != nil {
		t.Fatal(err)
	}
	base := uintptr(unsafe.Pointer(unsafe.SliceData(m.mu.r.bytes())))
	at := func(page uintptr) string { return testutil.Protection(t, base+page*PageSize) }
	for page, want := range []string{"rw-p", "rw-p", "---p", "---p", "---p", "---p", "---p", "---p"} {
		if have := at(uintptr(page)); have != want {
			t.Fatalf("page %d: %q, want %q", page, have, want)
		}
	}
	m.Allocate(0, 0)
	m.Reallocate(3 * PageSize)
	if at(2) != "rw-p" || at(3) != "---p" {
		t.Fatalf("after growing to 3 pages: page 2 %q, page 3 %q", at(2), at(3))
	}
	m.Free()
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	for page := range uintptr(8) {
		if have := at(page); have != "" {
			t.Fatalf("page %d still mapped (%q) after Close", page, have)
		}
	}
}

// TestMemory_restoreKeepsPages: Restore copies back exactly the pages the
// memory holds privately and leaves them mapped (the next activation takes
// no fault on them), where Reset unmaps them. Pages only read stay the
// image's and are not copied.
func TestMemory_restoreKeepsPages(t *testing.T) {
	data := bytes.Repeat([]byte{0x3c}, 2*PageSize)
	img := mustImage(t, data)
	m, b := mustMemory(t, img, img.Len())
	base := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	entries := make([]byte, 8*len(b)/int(osPageSize))
	privatePages := func() (n int) {
		t.Helper()
		if err := readPagemap(base, entries); err != nil {
			t.Fatal(err)
		}
		for p := range uint64(len(b)) / osPageSize {
			if private(entries, p) {
				n++
			}
		}
		return n
	}
	var sink byte
	for i := 0; i < len(b); i += int(osPageSize) {
		sink += b[i] // read every page: maps the image, copies nothing
	}
	_ = sink
	written := []int{0, 5 * int(osPageSize), 17*int(osPageSize) + 9, len(b) - 1}
	for _, at := range written {
		b[at] = 0
	}
	if have := privatePages(); have != len(written) {
		t.Fatalf("%d private pages after %d writes", have, len(written))
	}
	copied, err := m.Restore()
	if err != nil {
		t.Fatal(err)
	}
	if want := uint64(len(written)) * osPageSize; copied != want {
		t.Fatalf("Restore copied %d bytes, want %d", copied, want)
	}
	if d := firstDiff(b, data); d != "" {
		t.Fatal(d)
	}
	if have := privatePages(); have != len(written) {
		t.Fatalf("%d private pages after Restore, want them kept (%d)", have, len(written))
	}
	// Negative control: Reset drops them.
	if err := m.Reset(); err != nil {
		t.Fatal(err)
	}
	if have := privatePages(); have != 0 {
		t.Fatalf("%d private pages after Reset, want 0", have)
	}
}

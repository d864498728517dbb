// Tests of the platform-independent contract: the reset property, growth,
// the allocator life cycle, and ownership of Image and Memory.

package image

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/cockroachdb/errors"
)

// randomImage returns pages wasm pages of which roughly a third are zero, a
// third random, and a third a repeating pattern, so the zero-page holes of
// the Linux backing and their neighbours are exercised.
func randomImage(rng *rand.Rand, pages int) []byte {
	data := make([]byte, pages*PageSize)
	for p := 0; p < pages; p++ {
		page := data[p*PageSize : (p+1)*PageSize]
		switch rng.IntN(3) {
		case 0:
		case 1:
			for i := range page {
				page[i] = byte(rng.Uint32())
			}
		default:
			// Mostly zero with a few bytes set, in a random OS page.
			for range 8 {
				page[rng.IntN(len(page))] = byte(rng.IntN(255) + 1)
			}
		}
	}
	return data
}

func mustImage(t testing.TB, data []byte) *Image {
	t.Helper()
	img, err := New(data)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = img.Close() })
	return img
}

// mustMemory returns an allocated memory of img grown to the image's length,
// closed (after a Free) at the end of the test.
func mustMemory(t testing.TB, img *Image, max uint64) (*Memory, []byte) {
	t.Helper()
	m, err := img.NewMemory(max)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		m.Free()
		if err := m.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	if m.Allocate(0, 0) != m {
		t.Fatal("first Allocate did not return the memory")
	}
	b := m.Reallocate(img.Len())
	if uint64(len(b)) != img.Len() {
		t.Fatalf("Reallocate(%d) returned %d bytes", img.Len(), len(b))
	}
	return m, b
}

// firstDiff describes the first byte where have and want differ, or "".
func firstDiff(have, want []byte) string {
	if len(have) != len(want) {
		return fmt.Sprintf("length %d, want %d", len(have), len(want))
	}
	for i := range have {
		if have[i] != want[i] {
			return fmt.Sprintf("byte %d (page %d) is %#x, want %#x", i, i/PageSize, have[i], want[i])
		}
	}
	return ""
}

func TestNew_length(t *testing.T) {
	tests := []struct {
		name string
		n    int
		ok   bool
	}{
		{"empty", 0, true},
		{"one page", PageSize, true},
		{"three pages", 3 * PageSize, true},
		{"unaligned", PageSize + 1, false},
		{"an OS page", 4096, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			img, err := New(make([]byte, tc.n))
			if have := err == nil; have != tc.ok {
				t.Fatalf("New(%d bytes): err %v, want ok=%v", tc.n, err, tc.ok)
			}
			if err == nil {
				if img.Len() != uint64(tc.n) {
					t.Fatalf("Len %d, want %d", img.Len(), tc.n)
				}
				_ = img.Close()
			}
		})
	}
}

// TestMemory_resetProperty is the differential property: whatever a guest
// writes anywhere in [0, Len()), Reset makes the whole memory byte-equal to
// the image again, and no write ever reaches the image (a second memory of
// the same image, live throughout, reads the original bytes). Rounds of
// random writes of random shapes (single bytes, runs across OS-page
// boundaries, whole pages, every page) run on the same memory, so dropped
// pages are also re-dirtied and dropped again.
//
// Negative control: before each Reset the memory is checked to differ from
// the image whenever a write changed a byte, so the comparison after Reset
// cannot pass vacuously (a Reset that did nothing fails it: see
// TestMemory_resetProperty_control).
func TestMemory_resetProperty(t *testing.T) {
	for _, s := range strategies {
		t.Run(s.name, func(t *testing.T) { testResetProperty(t, s.reset) })
	}
}

// strategies are the two ways back to the image, which every property must
// hold for.
var strategies = []struct {
	name  string
	reset func(*Memory) error
}{
	{"Reset", (*Memory).Reset},
	{"Restore", func(m *Memory) error { _, err := m.Restore(); return err }},
}

func testResetProperty(t *testing.T, reset func(*Memory) error) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	iterations, rounds := 20, 8
	if testing.Short() {
		iterations, rounds = 8, 5
	}
	for it := range iterations {
		pages := 1 + rng.IntN(8)
		want := randomImage(rng, pages)
		img := mustImage(t, want)
		m, b := mustMemory(t, img, img.Len()+uint64(rng.IntN(4))*PageSize)
		_, other := mustMemory(t, img, img.Len())
		for round := range rounds {
			changed := scribble(rng, b)
			if changed && bytes.Equal(b, want) {
				t.Fatalf("iteration %d round %d: writes changed bytes but the memory equals the image", it, round)
			}
			if d := firstDiff(other, want); d != "" {
				t.Fatalf("iteration %d round %d: a write reached the image: the other memory's %s", it, round, d)
			}
			if err := reset(m); err != nil {
				t.Fatalf("reset: %v", err)
			}
			if d := firstDiff(b, want); d != "" {
				t.Fatalf("iteration %d round %d (%d pages): after the reset %s", it, round, pages, d)
			}
		}
	}
}

// scribble writes to b in one of several shapes and reports whether any
// byte changed value.
func scribble(rng *rand.Rand, b []byte) bool {
	before := bytes.Clone(b)
	switch rng.IntN(5) {
	case 0: // scattered single bytes
		for range 1 + rng.IntN(64) {
			b[rng.IntN(len(b))] = byte(rng.Uint32())
		}
	case 1: // a run that may cross OS-page and wasm-page boundaries
		at := rng.IntN(len(b))
		end := min(len(b), at+1+rng.IntN(3*int(osPageSize)))
		for i := at; i < end; i++ {
			b[i] = byte(rng.Uint32())
		}
	case 2: // a whole wasm page
		p := rng.IntN(len(b) / PageSize)
		for i := p * PageSize; i < (p+1)*PageSize; i++ {
			b[i] = ^b[i]
		}
	case 3: // every byte
		for i := range b {
			b[i] = ^b[i]
		}
	default: // the first and the last byte
		b[0], b[len(b)-1] = ^b[0], ^b[len(b)-1]
	}
	return !bytes.Equal(before, b)
}

// TestMemory_resetProperty_control shows the property test's oracle bites:
// the same comparison without Reset (or after writes to a memory that Reset
// ignores) finds the difference.
func TestMemory_resetProperty_control(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	want := randomImage(rng, 2)
	img := mustImage(t, want)
	_, b := mustMemory(t, img, img.Len())
	b[PageSize+17] ^= 0xff
	if firstDiff(b, want) == "" {
		t.Fatal("a changed byte went unnoticed")
	}
}

// TestMemory_growth: pages beyond the image are anonymous and zero, growth
// stops at the cap, and Reset (or Restore) after growth resets everything
// but says the instance must be replaced (ErrGrown).
func TestMemory_growth(t *testing.T) {
	for _, s := range strategies {
		t.Run(s.name, func(t *testing.T) { testGrowth(t, s.reset) })
	}
}

func testGrowth(t *testing.T, reset func(*Memory) error) {
	want := bytes.Repeat([]byte{0xA5}, 2*PageSize)
	img := mustImage(t, want)
	m, _ := mustMemory(t, img, 5*PageSize)

	if err := reset(m); err != nil {
		t.Fatalf("reset at the image's length: %v", err)
	}
	b := m.Reallocate(4 * PageSize)
	if len(b) != 4*PageSize || cap(b) != 4*PageSize {
		t.Fatalf("Reallocate(4 pages): len %d cap %d", len(b), cap(b))
	}
	if d := firstDiff(b[2*PageSize:], make([]byte, 2*PageSize)); d != "" {
		t.Fatalf("grown pages are not zero: %s", d)
	}
	for i := range b {
		b[i] = 0x5A
	}
	if have := m.Reallocate(5*PageSize + 1); have != nil {
		t.Fatal("Reallocate beyond the cap succeeded")
	}
	if m.Len() != 4*PageSize {
		t.Fatalf("Len %d after growth", m.Len())
	}
	err := reset(m)
	if !errors.Is(err, ErrGrown) {
		t.Fatalf("reset after growth: %v, want ErrGrown", err)
	}
	if d := firstDiff(b[:2*PageSize], want); d != "" {
		t.Fatalf("image part after Reset: %s", d)
	}
	if d := firstDiff(b[2*PageSize:], make([]byte, 2*PageSize)); d != "" {
		t.Fatalf("grown part after Reset: %s", d)
	}
	// The base address never changes.
	if b2 := m.Reallocate(5 * PageSize); &b2[0] != &b[0] {
		t.Fatal("the memory moved")
	}
}

// TestMemory_lifecycle pins the allocator contract.
func TestMemory_lifecycle(t *testing.T) {
	img := mustImage(t, make([]byte, PageSize))
	m, err := img.NewMemory(2 * PageSize)
	if err != nil {
		t.Fatal(err)
	}
	if m.Reallocate(PageSize) != nil {
		t.Fatal("Reallocate before Allocate succeeded")
	}
	if err := m.Close(); err != nil {
		t.Fatalf("Close of a memory never handed out: %v", err)
	}
	if m.Allocate(0, 0) == m {
		t.Fatal("Allocate after Close handed out the memory")
	}
	if err := m.Reset(); !errors.Is(err, ErrClosed) {
		t.Fatalf("Reset after Close: %v, want ErrClosed", err)
	}
	if _, err := m.Restore(); !errors.Is(err, ErrClosed) {
		t.Fatalf("Restore after Close: %v, want ErrClosed", err)
	}

	m, err = img.NewMemory(2 * PageSize)
	if err != nil {
		t.Fatal(err)
	}
	if m.Allocate(0, 0) != m {
		t.Fatal("first Allocate")
	}
	second := m.Allocate(0, 0)
	if second == m || second.Reallocate(0) != nil || second.Reallocate(PageSize) != nil {
		t.Fatal("second Allocate handed out memory")
	}
	if m.Reallocate(PageSize) == nil {
		t.Fatal("Reallocate after Allocate failed")
	}
	if err := m.Close(); !errors.Is(err, ErrInUse) {
		t.Fatalf("Close while wazero holds the memory: %v, want ErrInUse", err)
	}
	m.Free()
	if m.Reallocate(PageSize) != nil {
		t.Fatal("Reallocate after Free succeeded")
	}
	if err := m.Close(); err != nil {
		t.Fatalf("Close after Free: %v", err)
	}
	if err := m.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}

	if _, err := img.NewMemory(PageSize - 1); err == nil {
		t.Fatal("NewMemory with a cap below the image succeeded")
	}
}

// TestImage_close: closing the image stops new memories, and memories made
// before keep reading and resetting to the image.
func TestImage_close(t *testing.T) {
	want := randomImage(rand.New(rand.NewPCG(3, 4)), 3)
	img, err := New(want)
	if err != nil {
		t.Fatal(err)
	}
	m, b := mustMemory(t, img, img.Len())
	if err := img.Close(); err != nil {
		t.Fatal(err)
	}
	if err := img.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := img.NewMemory(img.Len()); !errors.Is(err, ErrClosed) {
		t.Fatalf("NewMemory after Close: %v, want ErrClosed", err)
	}
	if _, err := img.Size(); !errors.Is(err, ErrClosed) {
		t.Fatalf("Size after Close: %v, want ErrClosed", err)
	}
	for _, s := range strategies {
		for i := range b {
			b[i]++
		}
		if err := s.reset(m); err != nil {
			t.Fatal(err)
		}
		if d := firstDiff(b, want); d != "" {
			t.Fatalf("after the image closed, %s: %s", s.name, d)
		}
	}
}

// TestImage_copiesData: New copies its argument.
func TestImage_copiesData(t *testing.T) {
	data := bytes.Repeat([]byte{7}, PageSize)
	img := mustImage(t, data)
	data[0] = 8
	_, b := mustMemory(t, img, img.Len())
	if b[0] != 7 {
		t.Fatalf("the image follows the caller's slice: byte 0 is %d", b[0])
	}
}

// TestImage_empty: an empty image gives a memory that is all anonymous.
func TestImage_empty(t *testing.T) {
	img := mustImage(t, nil)
	m, _ := mustMemory(t, img, 2*PageSize)
	b := m.Reallocate(PageSize)
	b[5] = 1
	if err := m.Reset(); !errors.Is(err, ErrGrown) {
		t.Fatalf("Reset: %v, want ErrGrown", err)
	}
	if b[5] != 0 {
		t.Fatal("Reset did not zero a page beyond the (empty) image")
	}
}

package testutil

import "io"

// Pattern is a reader of n bytes of a fixed pattern: a large body that
// neither side of a test holds, and that a second Pattern of the same n
// reproduces to compare with.
func Pattern(n int64) io.Reader { return &pattern{n: n} }

type pattern struct{ n, off int64 }

func (p *pattern) Read(b []byte) (int, error) {
	if p.off >= p.n {
		return 0, io.EOF
	}
	k := min(int64(len(b)), p.n-p.off)
	for i := range k {
		b[i] = byte((p.off + i) * 31 >> 3)
	}
	p.off += k
	return int(k), nil
}

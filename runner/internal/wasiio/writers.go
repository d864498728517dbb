package wasiio

// The guest's stdout, kept up to its cap, and the tail of its stderr.

import "github.com/cockroachdb/errors"

// Stdout keeps a guest's stdout up to Cap bytes; a write past the cap
// fails (the guest sees EIO) and sets Overflow. It charges nothing: the
// runner charges what it is given to write.
type Stdout struct {
	Buf      []byte
	Cap      int
	Overflow bool
}

func (w *Stdout) Write(p []byte) (int, error) {
	if len(w.Buf)+len(p) > w.Cap {
		w.Overflow = true
		n := w.Cap - len(w.Buf)
		w.Buf = append(w.Buf, p[:n]...)
		return n, errors.New("runner: output limit exceeded")
	}
	w.Buf = append(w.Buf, p...)
	return len(p), nil
}

// StderrTail keeps the last TailBytes bytes of a guest's stderr. Its
// buffer is allocated on the first write: most guests write nothing there.
type StderrTail struct {
	buf []byte // nil until the first write; then TailBytes long
	n   int    // bytes written in total
}

// TailBytes is how much of stderr a StderrTail keeps.
const TailBytes = 4096

func (w *StderrTail) Write(p []byte) (int, error) {
	total := len(p)
	if w.buf == nil {
		w.buf = make([]byte, TailBytes)
	}
	if len(p) > TailBytes {
		w.n += len(p) - TailBytes
		p = p[len(p)-TailBytes:]
	}
	for len(p) > 0 {
		k := copy(w.buf[w.n%TailBytes:], p)
		w.n += k
		p = p[k:]
	}
	return total, nil
}

// Bytes returns the retained tail in order.
func (w *StderrTail) Bytes() []byte {
	if w.n <= TailBytes {
		return append([]byte(nil), w.buf[:w.n]...)
	}
	start := w.n % TailBytes
	return append(append([]byte(nil), w.buf[start:]...), w.buf[:start]...)
}

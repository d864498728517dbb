package fuel

import (
	"unicode/utf8"

	"github.com/cockroachdb/errors"
)

// reader decodes the primitive encodings of the binary format from b. base is
// the offset of b[0] in the whole module, so error messages name module
// offsets. Every method reports a malformed or truncated input as an error
// marked ErrInvalid.
type reader struct {
	b    []byte
	pos  int
	base int
}

func (r *reader) offset() int { return r.base + r.pos }

func (r *reader) eof() bool { return r.pos >= len(r.b) }

// errorf returns an error for malformed bytes at the current offset.
func (r *reader) errorf(format string, args ...any) error {
	err := errors.Wrapf(ErrInvalid, "offset %#x: "+format, append([]any{r.offset()}, args...)...)
	return errors.Mark(err, errMalformed)
}

// errMalformed marks errors for bytes that no decoder may accept
// (truncation, bad LEB128, vector lengths beyond the input). Tests use it:
// wazero can exhaust memory on such input, so they do not ask it.
var errMalformed = errors.New("fuel: malformed binary")

func (r *reader) byte() (byte, error) {
	if r.pos >= len(r.b) {
		return 0, r.errorf("unexpected end")
	}
	c := r.b[r.pos]
	r.pos++
	return c, nil
}

func (r *reader) bytes(n int) ([]byte, error) {
	if n < 0 || n > len(r.b)-r.pos {
		return nil, r.errorf("unexpected end (want %d bytes)", n)
	}
	s := r.b[r.pos : r.pos+n]
	r.pos += n
	return s, nil
}

// u32 reads an unsigned LEB128 value of at most 32 bits.
func (r *reader) u32() (uint32, error) {
	v, err := r.uleb(32)
	return uint32(v), err
}

func (r *reader) uleb(bits uint) (uint64, error) {
	var v uint64
	for shift := uint(0); ; shift += 7 {
		c, err := r.byte()
		if err != nil {
			return 0, err
		}
		if shift+7 > bits { // the last byte allowed
			if c&0x80 != 0 {
				return 0, r.errorf("integer representation too long")
			}
			if c>>(bits-shift) != 0 {
				return 0, r.errorf("integer too large")
			}
		}
		v |= uint64(c&0x7f) << shift
		if c&0x80 == 0 {
			return v, nil
		}
	}
}

// sleb reads a signed LEB128 value of at most bits bits (32, 33 or 64).
func (r *reader) sleb(bits uint) (int64, error) {
	var v int64
	for shift := uint(0); ; shift += 7 {
		c, err := r.byte()
		if err != nil {
			return 0, err
		}
		if shift+7 >= bits { // the last byte allowed
			if c&0x80 != 0 {
				return 0, r.errorf("integer representation too long")
			}
			// The bits from the sign bit up must be a sign extension.
			sh := bits - 1 - shift
			if rem := (c & 0x7f) >> sh; rem != 0 && rem != 0x7f>>sh {
				return 0, r.errorf("integer too large")
			}
		}
		v |= int64(c&0x7f) << shift
		if c&0x80 == 0 {
			if shift+7 < 64 && c&0x40 != 0 {
				v |= -1 << (shift + 7)
			}
			return v, nil
		}
	}
}

// name reads a length-prefixed UTF-8 string.
func (r *reader) name() (string, error) {
	n, err := r.u32()
	if err != nil {
		return "", err
	}
	b, err := r.bytes(int(n))
	if err != nil {
		return "", err
	}
	if !utf8.Valid(b) {
		return "", r.errorf("name is not valid UTF-8")
	}
	return string(b), nil
}

// writer appends the primitive encodings of the binary format.
type writer struct {
	b []byte
}

func (w *writer) byte(c byte) { w.b = append(w.b, c) }

func (w *writer) raw(b []byte) { w.b = append(w.b, b...) }

func (w *writer) u32(v uint32) { w.b = appendU32(w.b, v) }

func (w *writer) s64(v int64) { w.b = appendS64(w.b, v) }

func (w *writer) name(s string) {
	w.u32(uint32(len(s)))
	w.b = append(w.b, s...)
}

// section appends section id with the contents body.
func (w *writer) section(id byte, body []byte) {
	w.byte(id)
	w.u32(uint32(len(body)))
	w.raw(body)
}

func appendU32(b []byte, v uint32) []byte {
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}

func appendS64(b []byte, v int64) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if (v == 0 && c&0x40 == 0) || (v == -1 && c&0x40 != 0) {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

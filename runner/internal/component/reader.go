package component

// The bounded byte reader of the decoder.

import (
	"unicode/utf8"
)

// reader reads a component binary. The first failure sticks in err, and
// every read after it returns zero values: callers check err once per
// construct.
type reader struct {
	b   []byte
	pos int
	err error
}

func (r *reader) fail(reason, key, format string, args ...any) {
	if r.err == nil {
		r.err = newError(reason, key, format, args...)
	}
}

func (r *reader) malformed(format string, args ...any) {
	r.fail(ReasonMalformed, "", "offset %#x: "+format, append([]any{r.pos}, args...)...)
}

func (r *reader) done() bool { return r.err != nil || r.pos >= len(r.b) }

func (r *reader) left() int { return len(r.b) - r.pos }

func (r *reader) byte() byte {
	if r.err != nil {
		return 0
	}
	if r.pos >= len(r.b) {
		r.malformed("unexpected end")
		return 0
	}
	c := r.b[r.pos]
	r.pos++
	return c
}

func (r *reader) peek() byte {
	if r.err != nil || r.pos >= len(r.b) {
		return 0
	}
	return r.b[r.pos]
}

// u32 reads an unsigned LEB128 of at most 32 bits.
func (r *reader) u32() uint32 {
	var v uint64
	for shift := uint(0); ; shift += 7 {
		c := r.byte()
		if r.err != nil {
			return 0
		}
		if shift == 28 && c&0x70 != 0 {
			r.malformed("integer too large")
			return 0
		}
		v |= uint64(c&0x7f) << shift
		if c&0x80 == 0 {
			return uint32(v)
		}
	}
}

// count reads a vector length, at most the bytes left (every element takes
// one byte at least), so that no allocation is sized by a lie.
func (r *reader) count() int {
	n := r.u32()
	if r.err == nil && int64(n) > int64(r.left()) {
		r.malformed("vector of %d elements in %d bytes", n, r.left())
		return 0
	}
	return int(n)
}

func (r *reader) bytes(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || n > r.left() {
		r.malformed("length %d beyond the end", n)
		return nil
	}
	b := r.b[r.pos : r.pos+n]
	r.pos += n
	return b
}

// name reads a length-prefixed UTF-8 string.
func (r *reader) name() string {
	n := r.u32()
	b := r.bytes(int(min(n, 1<<31-1)))
	if r.err == nil && !utf8.Valid(b) {
		r.malformed("name is not UTF-8")
	}
	return string(b)
}

// externName reads an importname' or exportname': a form byte (0x00, or
// 0x01 with a version suffix that follows) and the name.
func (r *reader) externName() string {
	switch form := r.byte(); form {
	case 0x00:
		return r.name()
	case 0x01:
		n := r.name()
		r.name() // the version suffix
		return n
	default:
		r.malformed("name form %#x", form)
		return ""
	}
}

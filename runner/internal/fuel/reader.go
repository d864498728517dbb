package fuel

// The reader of the binary format, which keeps its first error, and the
// writer.

import (
	"math"
	"unicode/utf8"

	"github.com/cockroachdb/errors"
	"github.com/tetratelabs/wazero/api"
)

// Value types that wazero's api package does not name. The others are
// api.ValueTypeI32, api.ValueTypeI64, api.ValueTypeF32, api.ValueTypeF64 and
// api.ValueTypeExternref.
const (
	valV128    = 0x7b
	valFuncref = 0x70
)

// reader decodes the primitive encodings of the binary format from b. base is
// the offset of b[0] in the whole module, so error messages name module
// offsets.
//
// A reader keeps the first error it meets in err: malformed or truncated
// input (marked ErrInvalid and errMalformed), or a construct a method
// refuses (ErrUnsupported, ErrInvalid, ErrLimit). The input then ends where
// the error was found, so every later read returns zero values. Callers read
// a whole unit (a section entry, a function body's header) and check err once
// at its end, or before a value read would index something.
type reader struct {
	b    []byte
	pos  int
	base int
	err  error
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

// fail records err unless the reader has failed already, and ends the input
// at the current position.
func (r *reader) fail(err error) {
	if r.err == nil {
		r.err = err
	}
	r.b = r.b[:r.pos]
}

// failf records an error for malformed bytes at the current offset (see
// errorf and fail).
func (r *reader) failf(format string, args ...any) {
	if r.err == nil {
		r.fail(r.errorf(format, args...))
	}
}

// invalidAt records an error marked ErrInvalid at module offset at: the bytes
// decode, but break a rule of the format (an index out of range, a flag).
func (r *reader) invalidAt(at int, format string, args ...any) {
	if r.err == nil {
		r.fail(errors.Wrapf(ErrInvalid, "offset %#x: "+format, append([]any{at}, args...)...))
	}
}

// unsupportedAt records an error marked ErrUnsupported at module offset at.
func (r *reader) unsupportedAt(at int, format string, args ...any) {
	if r.err == nil {
		r.fail(errors.Wrapf(ErrUnsupported, "offset %#x: "+format, append([]any{at}, args...)...))
	}
}

// failEnd records that the input ends where a value was expected. It is
// not inlined, so that byte is.
//
//go:noinline
func (r *reader) failEnd() { r.failf("unexpected end") }

func (r *reader) byte() byte {
	if r.pos >= len(r.b) {
		r.failEnd()
		return 0
	}
	c := r.b[r.pos]
	r.pos++
	return c
}

func (r *reader) bytes(n int) []byte {
	if n < 0 || n > len(r.b)-r.pos {
		r.failf("unexpected end (want %d bytes)", n)
		return nil
	}
	s := r.b[r.pos : r.pos+n]
	r.pos += n
	return s
}

// sub returns a reader over the next n bytes. If fewer remain, the error
// names what and index ("section 3", "function body 7") unless what is
// empty.
func (r *reader) sub(n uint32, what string, index uint32) reader {
	at := r.offset()
	if what != "" && r.err == nil && int64(n) > int64(len(r.b)-r.pos) {
		r.fail(errors.Wrapf(r.errorf("unexpected end (want %d bytes)", n), "%s %d", what, index))
	}
	return reader{b: r.bytes(int(n)), base: at}
}

// section reads a section header (an id and a size) and returns the id and
// a reader over the section's contents.
func (r *reader) section() (byte, reader) {
	id := r.byte()
	return id, r.sub(r.u32(), "section", uint32(id))
}

// u32 reads an unsigned LEB128 value of at most 32 bits.
func (r *reader) u32() uint32 {
	return uint32(r.uleb(32))
}

func (r *reader) uleb(bits uint) uint64 {
	var v uint64
	for shift := uint(0); ; shift += 7 {
		if r.pos >= len(r.b) {
			r.failEnd()
			return 0
		}
		c := r.b[r.pos]
		r.pos++
		if shift+7 > bits { // the last byte allowed
			if c&0x80 != 0 {
				r.failf("integer representation too long")
				return 0
			}
			if c>>(bits-shift) != 0 {
				r.failf("integer too large")
				return 0
			}
		}
		v |= uint64(c&0x7f) << shift
		if c&0x80 == 0 {
			return v
		}
	}
}

// sleb reads a signed LEB128 value of at most bits bits (32, 33 or 64).
func (r *reader) sleb(bits uint) int64 {
	var v int64
	for shift := uint(0); ; shift += 7 {
		if r.pos >= len(r.b) {
			r.failEnd()
			return 0
		}
		c := r.b[r.pos]
		r.pos++
		if shift+7 >= bits { // the last byte allowed
			if c&0x80 != 0 {
				r.failf("integer representation too long")
				return 0
			}
			// The bits from the sign bit up must be a sign extension.
			sh := bits - 1 - shift
			if rem := (c & 0x7f) >> sh; rem != 0 && rem != 0x7f>>sh {
				r.failf("integer too large")
				return 0
			}
		}
		v |= int64(c&0x7f) << shift
		if c&0x80 == 0 {
			if shift+7 < 64 && c&0x40 != 0 {
				v |= -1 << (shift + 7)
			}
			return v
		}
	}
}

// name reads a length-prefixed UTF-8 string.
func (r *reader) name() string {
	b := r.bytes(int(r.u32()))
	if r.err != nil {
		return ""
	}
	if !utf8.Valid(b) {
		r.failf("name is not valid UTF-8")
		return ""
	}
	return string(b)
}

// count reads a vector length, refusing lengths that cannot fit in the rest
// of the input (every element takes at least one byte) and, as unsupported,
// lengths above max.
func (r *reader) count(what string, max uint32) uint32 {
	at := r.offset()
	n := r.u32()
	if int64(n) > int64(len(r.b)-r.pos) {
		r.failf("%d %s exceed the section", n, what)
		return 0
	}
	if n > max {
		r.unsupportedAt(at, "%d %s (at most %d)", n, what, max)
		return 0
	}
	return n
}

// limited reads a vector length like count, refusing it with a
// *LimitError when base + n exceeds limit (checked before the
// implementation limit max, so a big count names the deploy limit).
func (r *reader) limited(what string, max uint32, key string, limit, base uint64) uint32 {
	n := r.count(what, math.MaxUint32)
	if base+uint64(n) > limit {
		r.fail(limitError(key, limit, base+uint64(n), "module declares "+itoa(base+uint64(n))+" "+what))
		return 0
	}
	if n > max {
		r.unsupportedAt(r.offset(), "%d %s (at most %d)", n, what, max)
		return 0
	}
	return n
}

func (r *reader) valType() byte {
	at := r.offset()
	t := r.byte()
	switch t {
	case api.ValueTypeI32, api.ValueTypeI64, api.ValueTypeF32, api.ValueTypeF64, valV128, valFuncref, api.ValueTypeExternref:
		return t
	}
	r.unsupportedAt(at, "value type %#x", t)
	return 0
}

func (r *reader) refType() byte {
	at := r.offset()
	t := r.byte()
	if t != valFuncref && t != api.ValueTypeExternref {
		r.unsupportedAt(at, "reference type %#x", t)
		return 0
	}
	return t
}

// limits reads the limits of a table or memory (what).
func (r *reader) limits(what string) limits {
	at := r.offset()
	flags := r.byte()
	var l limits
	switch flags {
	case 0x00, 0x01:
	case 0x03:
		l.shared = true
	case 0x02:
		r.invalidAt(at, "shared %s without maximum", what)
		return limits{}
	default:
		if flags&0x04 != 0 {
			r.unsupportedAt(at, "64-bit %s (memory64/table64)", what)
		} else {
			r.unsupportedAt(at, "%s limits flags %#x", what, flags)
		}
		return limits{}
	}
	l.min = r.u32()
	if flags&1 != 0 {
		l.hasMax = true
		l.max = r.u32()
	}
	if r.err != nil {
		return limits{}
	}
	return l
}

// mutability reads a global's mutability flag.
func (r *reader) mutability() bool {
	at := r.offset()
	mut := r.byte()
	if mut > 1 {
		r.invalidAt(at, "global mutability %#x", mut)
		return false
	}
	return mut == 1
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

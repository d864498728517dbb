package canon

// Lifting and lowering: values read from and written to linear memory and
// core values, every guest value validated as it is read.

import (
	"encoding/binary"
	"math"
	"unicode/utf16"
	"unicode/utf8"
)

// Encoding is a string encoding of the canonical options.
type Encoding uint8

// The string encodings.
const (
	UTF8 Encoding = iota
	UTF16
	Latin1UTF16
)

// MaxStringCodeUnits bounds a string's length in code units.
const MaxStringCodeUnits = 1<<28 - 1

const utf16Tag = 1 << 31

// Memory is the guest's linear memory (wazero's api.Memory is one).
type Memory interface {
	Size() uint32
	Read(offset, byteCount uint32) ([]byte, bool)
	Write(offset uint32, v []byte) bool
}

// Options are a lift's or a lower's canonical options.
type Options struct {
	Memory Memory
	// Realloc calls the guest's realloc (nil: the function has none); its
	// error, a guest trap, is returned as is.
	Realloc  func(oldPtr, oldSize, align, newSize uint32) (uint32, error)
	Encoding Encoding
	// Budget, when set, is how many host bytes lifting may still allocate;
	// past zero lifting traps.
	Budget *int64
	// ViewBytes lifts a list<u8> as a view of the guest's memory instead
	// of a copy, neither allocated nor charged: for a host function that
	// is done with its bytes before the guest runs again (a stream's
	// write, which copies what it keeps).
	ViewBytes bool
}

func (o *Options) charge(n int64) error {
	if o.Budget == nil {
		return nil
	}
	*o.Budget -= n
	if *o.Budget < 0 {
		return trap("the guest's values exceed the host buffer bound")
	}
	return nil
}

// read returns n bytes at ptr, aligned to align.
func (o *Options) read(ptr, n, align uint32) ([]byte, error) {
	if o.Memory == nil {
		return nil, trap("no memory to read from")
	}
	if ptr%align != 0 {
		return nil, trap("pointer %#x is not aligned to %d", ptr, align)
	}
	if uint64(ptr)+uint64(n) > uint64(o.Memory.Size()) {
		return nil, trap("%d bytes at %#x are out of bounds", n, ptr)
	}
	b, ok := o.Memory.Read(ptr, n)
	if !ok {
		return nil, trap("%d bytes at %#x are out of bounds", n, ptr)
	}
	return b, nil
}

// Load reads a value of type t at ptr.
func Load(o *Options, t *Type, ptr uint32) (any, error) {
	b, err := o.read(ptr, t.Size(), t.Align())
	if err != nil {
		return nil, err
	}
	le := binary.LittleEndian
	switch t.Kind {
	case Bool:
		return b[0] != 0, nil
	case S8:
		return int64(int8(b[0])), nil
	case U8:
		return uint64(b[0]), nil
	case S16:
		return int64(int16(le.Uint16(b))), nil
	case U16:
		return uint64(le.Uint16(b)), nil
	case S32:
		return int64(int32(le.Uint32(b))), nil
	case U32:
		return uint64(le.Uint32(b)), nil
	case S64:
		return int64(le.Uint64(b)), nil
	case U64:
		return le.Uint64(b), nil
	case F32:
		return math.Float32frombits(le.Uint32(b)), nil
	case F64:
		return math.Float64frombits(le.Uint64(b)), nil
	case Char:
		return char(le.Uint32(b))
	case String:
		return loadString(o, le.Uint32(b), le.Uint32(b[4:]))
	case List:
		return loadList(o, t.Elem, le.Uint32(b), le.Uint32(b[4:]))
	case Record, Tuple:
		if err := o.charge(int64(16 * len(t.Fields))); err != nil {
			return nil, err
		}
		out := make([]any, len(t.Fields))
		at := uint32(0)
		for i, f := range t.Fields {
			at = alignTo(at, f.Align())
			v, err := Load(o, f, ptr+at)
			if err != nil {
				return nil, err
			}
			out[i], at = v, at+f.Size()
		}
		return out, nil
	case Flags:
		var v uint32
		switch len(b) {
		case 1:
			v = uint32(b[0])
		case 2:
			v = uint32(le.Uint16(b))
		case 4:
			v = le.Uint32(b)
		}
		if n := len(t.Names); n < 32 {
			v &= 1<<n - 1
		}
		return v, nil
	case Own, Borrow:
		return le.Uint32(b), nil
	}
	cases := t.cases()
	var disc uint32
	switch discSize(len(cases)) {
	case 1:
		disc = uint32(b[0])
	case 2:
		disc = uint32(le.Uint16(b))
	default:
		disc = le.Uint32(b)
	}
	if disc >= uint32(len(cases)) {
		return nil, trap("discriminant %d of a %d-case type at %#x", disc, len(cases), ptr)
	}
	if t.Kind == Enum {
		return disc, nil
	}
	c := Case{Index: disc}
	if p := cases[disc]; p != nil {
		v, err := Load(o, p, ptr+t.payloadOffset())
		if err != nil {
			return nil, err
		}
		c.Value = v
	}
	return c, nil
}

func char(v uint32) (rune, error) {
	if v >= 0x110000 || v >= 0xd800 && v < 0xe000 {
		return 0, trap("%#x is not a Unicode scalar value", v)
	}
	return rune(v), nil
}

func loadString(o *Options, ptr, n uint32) (string, error) {
	enc, units := o.Encoding, n
	if enc == Latin1UTF16 {
		if n&utf16Tag != 0 {
			enc, units = UTF16, n&^utf16Tag
		} else {
			enc = Latin1UTF16 // latin1
		}
	}
	if units > MaxStringCodeUnits {
		return "", trap("string of %d code units", units)
	}
	switch enc {
	case UTF8:
		b, err := o.read(ptr, units, 1)
		if err != nil {
			return "", err
		}
		if !utf8.Valid(b) {
			return "", trap("string at %#x (%d bytes) is not valid UTF-8", ptr, units)
		}
		if err := o.charge(int64(units)); err != nil {
			return "", err
		}
		return string(b), nil
	case UTF16:
		b, err := o.read(ptr, 2*units, 2)
		if err != nil {
			return "", err
		}
		if err := o.charge(int64(3 * units)); err != nil {
			return "", err
		}
		u := make([]uint16, units)
		for i := range u {
			u[i] = binary.LittleEndian.Uint16(b[2*i:])
		}
		for i := 0; i < len(u); i++ {
			switch c := u[i]; {
			case c >= 0xd800 && c < 0xdc00:
				if i+1 >= len(u) || u[i+1] < 0xdc00 || u[i+1] >= 0xe000 {
					return "", trap("string at %#x is not valid UTF-16", ptr)
				}
				i++
			case c >= 0xdc00 && c < 0xe000:
				return "", trap("string at %#x is not valid UTF-16", ptr)
			}
		}
		return string(utf16.Decode(u)), nil
	default: // latin1
		b, err := o.read(ptr, units, 1)
		if err != nil {
			return "", err
		}
		if err := o.charge(int64(2 * units)); err != nil {
			return "", err
		}
		r := make([]rune, len(b))
		for i, c := range b {
			r[i] = rune(c)
		}
		return string(r), nil
	}
}

func loadList(o *Options, elem *Type, ptr, n uint32) (any, error) {
	size := elem.Size()
	total := uint64(size) * uint64(n)
	if total > uint64(o.memSize()) || size == 0 && n > 1<<16 {
		return nil, trap("list of %d elements at %#x is out of bounds", n, ptr)
	}
	b, err := o.read(ptr, uint32(total), elem.Align())
	if err != nil {
		return nil, err
	}
	if elem.Kind == U8 {
		if o.ViewBytes {
			return b[:len(b):len(b)], nil
		}
		if err := o.charge(int64(n)); err != nil {
			return nil, err
		}
		return append([]byte(nil), b...), nil
	}
	if err := o.charge(16 * int64(n)); err != nil {
		return nil, err
	}
	out := make([]any, n)
	for i := range out {
		v, err := Load(o, elem, ptr+uint32(i)*size)
		if err != nil {
			return nil, err
		}
		out[i] = v
	}
	return out, nil
}

func (o *Options) memSize() uint32 {
	if o.Memory == nil {
		return 0
	}
	return o.Memory.Size()
}

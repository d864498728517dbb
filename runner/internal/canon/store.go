package canon

// Storing values into linear memory, flat values, and the calls'
// arguments and results.

import (
	"encoding/binary"
	"math"
	"unicode/utf16"

	"github.com/cockroachdb/errors"
)

// errValue is a host bug: a Go value that does not fit its type.
func errValue(t *Type, v any) error {
	return errors.AssertionFailedf("canon: value %T for kind %d", v, t.Kind)
}

func (o *Options) write(ptr uint32, b []byte, align uint32) error {
	if o.Memory == nil {
		return trap("no memory to write to")
	}
	if ptr%align != 0 {
		return trap("pointer %#x is not aligned to %d", ptr, align)
	}
	if uint64(ptr)+uint64(len(b)) > uint64(o.Memory.Size()) || !o.Memory.Write(ptr, b) {
		return trap("%d bytes at %#x are out of bounds", len(b), ptr)
	}
	return nil
}

// alloc asks the guest's realloc for size bytes aligned to align.
func (o *Options) alloc(size, align uint32) (uint32, error) {
	if o.Realloc == nil {
		return 0, errors.AssertionFailedf("canon: a value needs realloc, which the function lacks")
	}
	p, err := o.Realloc(0, 0, align, size)
	if err != nil {
		return 0, err
	}
	if p%align != 0 || uint64(p)+uint64(size) > uint64(o.memSize()) {
		return 0, trap("realloc returned %#x for %d bytes aligned to %d", p, size, align)
	}
	return p, nil
}

func toU64(v any) (uint64, bool) {
	switch x := v.(type) {
	case uint64:
		return x, true
	case int64:
		return uint64(x), true
	case uint32:
		return uint64(x), true
	case int:
		return uint64(x), true
	case bool:
		if x {
			return 1, true
		}
		return 0, true
	case rune:
		return uint64(x), true
	}
	return 0, false
}

// Store writes v, of type t, at ptr.
func Store(o *Options, t *Type, ptr uint32, v any) error {
	le := binary.LittleEndian
	var buf [8]byte
	switch t.Kind {
	case Bool, S8, U8, S16, U16, S32, U32, S64, U64, Char, Own, Borrow, Enum, Flags:
		x, ok := toU64(v)
		if !ok {
			return errValue(t, v)
		}
		le.PutUint64(buf[:], x)
		return o.write(ptr, buf[:t.Size()], t.Align())
	case F32:
		f, ok := v.(float32)
		if !ok {
			return errValue(t, v)
		}
		le.PutUint32(buf[:], math.Float32bits(f))
		return o.write(ptr, buf[:4], 4)
	case F64:
		f, ok := v.(float64)
		if !ok {
			return errValue(t, v)
		}
		le.PutUint64(buf[:], math.Float64bits(f))
		return o.write(ptr, buf[:8], 8)
	case String, List:
		p, n, err := lowerPointer(o, t, v)
		if err != nil {
			return err
		}
		le.PutUint32(buf[:], p)
		le.PutUint32(buf[4:], n)
		return o.write(ptr, buf[:8], 4)
	case Record, Tuple:
		fs, ok := v.([]any)
		if !ok || len(fs) != len(t.Fields) {
			return errValue(t, v)
		}
		at := uint32(0)
		for i, f := range t.Fields {
			at = alignTo(at, f.Align())
			if err := Store(o, f, ptr+at, fs[i]); err != nil {
				return err
			}
			at += f.Size()
		}
		return nil
	}
	c, ok := v.(Case)
	cases := t.cases()
	if !ok || c.Index >= uint32(len(cases)) {
		return errValue(t, v)
	}
	le.PutUint32(buf[:], c.Index)
	if err := o.write(ptr, buf[:discSize(len(cases))], t.Align()); err != nil {
		return err
	}
	if p := cases[c.Index]; p != nil {
		return Store(o, p, ptr+t.payloadOffset(), c.Value)
	}
	return nil
}

// lowerPointer copies a string or list into memory the guest's realloc
// gives and returns its pointer and length.
func lowerPointer(o *Options, t *Type, v any) (uint32, uint32, error) {
	if t.Kind == String {
		s, ok := v.(string)
		if !ok {
			return 0, 0, errValue(t, v)
		}
		return lowerString(o, s)
	}
	if b, ok := v.([]byte); ok && t.Elem.Kind == U8 {
		p, err := o.alloc(uint32(len(b)), 1)
		if err != nil {
			return 0, 0, err
		}
		return p, uint32(len(b)), o.write(p, b, 1)
	}
	items, ok := v.([]any)
	if !ok {
		return 0, 0, errValue(t, v)
	}
	size := t.Elem.Size()
	p, err := o.alloc(uint32(len(items))*size, t.Elem.Align())
	if err != nil {
		return 0, 0, err
	}
	for i, it := range items {
		if err := Store(o, t.Elem, p+uint32(i)*size, it); err != nil {
			return 0, 0, err
		}
	}
	return p, uint32(len(items)), nil
}

func lowerString(o *Options, s string) (uint32, uint32, error) {
	switch o.Encoding {
	case UTF16:
		u := utf16.Encode([]rune(s))
		return writeUTF16(o, u, 0)
	case Latin1UTF16:
		latin := true
		for _, r := range s {
			if r > 0xff {
				latin = false
				break
			}
		}
		if !latin {
			return writeUTF16(o, utf16.Encode([]rune(s)), utf16Tag)
		}
		b := make([]byte, 0, len(s))
		for _, r := range s {
			b = append(b, byte(r))
		}
		p, err := o.alloc(uint32(len(b)), 2)
		if err != nil {
			return 0, 0, err
		}
		return p, uint32(len(b)), o.write(p, b, 1)
	}
	p, err := o.alloc(uint32(len(s)), 1)
	if err != nil {
		return 0, 0, err
	}
	return p, uint32(len(s)), o.write(p, []byte(s), 1)
}

func writeUTF16(o *Options, u []uint16, tag uint32) (uint32, uint32, error) {
	b := make([]byte, 2*len(u))
	for i, c := range u {
		binary.LittleEndian.PutUint16(b[2*i:], c)
	}
	p, err := o.alloc(uint32(len(b)), 2)
	if err != nil {
		return 0, 0, err
	}
	return p, uint32(len(u)) | tag, o.write(p, b, 2)
}

// liftFlat reads a value of type t from the flat values vs (consumed from
// the front).
func liftFlat(o *Options, t *Type, vs *[]uint64) (any, error) {
	next := func() (uint64, error) {
		if len(*vs) == 0 {
			return 0, errors.AssertionFailedf("canon: too few flat values")
		}
		v := (*vs)[0]
		*vs = (*vs)[1:]
		return v, nil
	}
	switch t.Kind {
	case Record, Tuple:
		out := make([]any, len(t.Fields))
		for i, f := range t.Fields {
			v, err := liftFlat(o, f, vs)
			if err != nil {
				return nil, err
			}
			out[i] = v
		}
		return out, nil
	case String, List:
		p, err := next()
		if err != nil {
			return nil, err
		}
		n, err := next()
		if err != nil {
			return nil, err
		}
		if t.Kind == String {
			return loadString(o, uint32(p), uint32(n))
		}
		return loadList(o, t.Elem, uint32(p), uint32(n))
	case Flags:
		if len(t.Names) == 0 {
			return uint32(0), nil
		}
	}
	if t.variantLike() {
		d64, err := next()
		if err != nil {
			return nil, err
		}
		d := uint32(d64)
		cases := t.cases()
		width := len(t.Flat()) - 1
		if d >= uint32(len(cases)) {
			return nil, trap("discriminant %d of a %d-case type", d, len(cases))
		}
		payload := (*vs)[:min(width, len(*vs))]
		*vs = (*vs)[len(payload):]
		if t.Kind == Enum {
			return d, nil
		}
		c := Case{Index: d}
		if p := cases[d]; p != nil {
			v, err := liftFlat(o, p, &payload)
			if err != nil {
				return nil, err
			}
			c.Value = v
		}
		return c, nil
	}
	v, err := next()
	if err != nil {
		return nil, err
	}
	switch t.Kind {
	case Bool:
		return uint32(v) != 0, nil
	case S8:
		return int64(int8(v)), nil
	case U8:
		return uint64(uint8(v)), nil
	case S16:
		return int64(int16(v)), nil
	case U16:
		return uint64(uint16(v)), nil
	case S32:
		return int64(int32(v)), nil
	case U32:
		return uint64(uint32(v)), nil
	case S64:
		return int64(v), nil
	case U64:
		return v, nil
	case F32:
		return math.Float32frombits(uint32(v)), nil
	case F64:
		return math.Float64frombits(v), nil
	case Char:
		return char(uint32(v))
	case Flags:
		m := uint32(v)
		if n := len(t.Names); n < 32 {
			m &= 1<<n - 1
		}
		return m, nil
	}
	return uint32(v), nil // Own, Borrow
}

// lowerFlat appends the flat values of v, of type t, to out.
func lowerFlat(o *Options, t *Type, v any, out []uint64) ([]uint64, error) {
	switch t.Kind {
	case Record, Tuple:
		fs, ok := v.([]any)
		if !ok || len(fs) != len(t.Fields) {
			return nil, errValue(t, v)
		}
		for i, f := range t.Fields {
			var err error
			if out, err = lowerFlat(o, f, fs[i], out); err != nil {
				return nil, err
			}
		}
		return out, nil
	case String, List:
		p, n, err := lowerPointer(o, t, v)
		if err != nil {
			return nil, err
		}
		return append(out, uint64(p), uint64(n)), nil
	case F32:
		f, ok := v.(float32)
		if !ok {
			return nil, errValue(t, v)
		}
		return append(out, uint64(math.Float32bits(f))), nil
	case F64:
		f, ok := v.(float64)
		if !ok {
			return nil, errValue(t, v)
		}
		return append(out, math.Float64bits(f)), nil
	case Flags:
		if len(t.Names) == 0 {
			return out, nil
		}
	}
	if t.variantLike() {
		width := len(t.Flat()) - 1
		var c Case
		if t.Kind == Enum {
			x, ok := toU64(v)
			if !ok {
				return nil, errValue(t, v)
			}
			c.Index = uint32(x)
		} else {
			cc, ok := v.(Case)
			if !ok {
				return nil, errValue(t, v)
			}
			c = cc
		}
		if c.Index >= uint32(len(t.cases())) {
			return nil, errValue(t, v)
		}
		out = append(out, uint64(c.Index))
		start := len(out)
		if p := t.cases()[c.Index]; p != nil {
			var err error
			if out, err = lowerFlat(o, p, c.Value, out); err != nil {
				return nil, err
			}
		}
		for len(out)-start < width {
			out = append(out, 0)
		}
		return out, nil
	}
	x, ok := toU64(v)
	if !ok {
		return nil, errValue(t, v)
	}
	switch t.Kind {
	case S64, U64:
		return append(out, x), nil
	}
	return append(out, uint64(uint32(x))), nil
}

// LiftArgs lifts the arguments of a call the guest made to a lowered host
// function (stack as wazero passes it, core values in order).
func LiftArgs(o *Options, params []*Type, stack []uint64) ([]any, error) {
	if len(flatAll(params)) > MaxFlatParams {
		if len(stack) == 0 {
			return nil, errors.AssertionFailedf("canon: no argument pointer")
		}
		v, err := Load(o, TupleOf(params...), uint32(stack[0]))
		if err != nil {
			return nil, err
		}
		return v.([]any), nil
	}
	vs := stack
	out := make([]any, len(params))
	for i, p := range params {
		v, err := liftFlat(o, p, &vs)
		if err != nil {
			return nil, err
		}
		out[i] = v
	}
	return out, nil
}

// LowerResults writes the results of a lowered host function: into
// stack[0], or through the return pointer, its last core parameter.
func LowerResults(o *Options, params, results []*Type, stack []uint64, vals []any) error {
	if len(vals) != len(results) {
		return errors.AssertionFailedf("canon: %d results for %d types", len(vals), len(results))
	}
	flat := flatAll(results)
	if len(flat) <= MaxFlatResults {
		out, err := lowerFlatAll(o, results, vals, nil)
		if err != nil {
			return err
		}
		copy(stack, out)
		return nil
	}
	nparams := len(flatAll(params))
	if nparams > MaxFlatParams {
		nparams = 1
	}
	if nparams >= len(stack) {
		return errors.AssertionFailedf("canon: no return pointer")
	}
	ptr := uint32(stack[nparams])
	t := TupleOf(results...)
	if len(results) == 1 {
		t = results[0]
		return Store(o, t, ptr, vals[0])
	}
	return Store(o, t, ptr, vals)
}

func lowerFlatAll(o *Options, ts []*Type, vals []any, out []uint64) ([]uint64, error) {
	for i, t := range ts {
		var err error
		if out, err = lowerFlat(o, t, vals[i], out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// LowerArgs lowers the arguments of a call of a lifted guest export.
func LowerArgs(o *Options, params []*Type, vals []any) ([]uint64, error) {
	if len(flatAll(params)) > MaxFlatParams {
		t := TupleOf(params...)
		p, err := o.alloc(t.Size(), t.Align())
		if err != nil {
			return nil, err
		}
		return []uint64{uint64(p)}, Store(o, t, p, vals)
	}
	return lowerFlatAll(o, params, vals, nil)
}

// LiftResults lifts the results of a call of a lifted guest export.
func LiftResults(o *Options, results []*Type, core []uint64) ([]any, error) {
	if len(flatAll(results)) > MaxFlatResults {
		if len(core) != 1 {
			return nil, errors.AssertionFailedf("canon: no result pointer")
		}
		t := TupleOf(results...)
		v, err := Load(o, t, uint32(core[0]))
		if err != nil {
			return nil, err
		}
		return v.([]any), nil
	}
	vs := core
	out := make([]any, len(results))
	for i, r := range results {
		v, err := liftFlat(o, r, &vs)
		if err != nil {
			return nil, err
		}
		out[i] = v
	}
	return out, nil
}

package coremerge

// The section-level decoder of one core module, and the byte reader and
// writer.

import (
	"github.com/cockroachdb/errors"
)

// Errors of Merge.
var (
	// ErrInvalid: the plan or one of its modules is malformed, or an import
	// is bound to something it cannot be (a missing export, another kind
	// or type, a cycle).
	ErrInvalid = errors.New("coremerge: invalid")
	// ErrUnsupported: a construct the merger does not handle.
	ErrUnsupported = errors.New("coremerge: unsupported")
)

// External kinds.
const (
	kindFunc   = 0x00
	kindTable  = 0x01
	kindMemory = 0x02
	kindGlobal = 0x03
)

type reader struct {
	b   []byte
	pos int
	err error
}

func (r *reader) fail(err error) {
	if r.err == nil {
		r.err = err
	}
}

func (r *reader) invalid(format string, args ...any) {
	r.fail(errors.Wrapf(ErrInvalid, "offset %#x: "+format, append([]any{r.pos}, args...)...))
}

func (r *reader) done() bool { return r.err != nil || r.pos >= len(r.b) }

func (r *reader) byte() byte {
	if r.err != nil {
		return 0
	}
	if r.pos >= len(r.b) {
		r.invalid("unexpected end")
		return 0
	}
	c := r.b[r.pos]
	r.pos++
	return c
}

func (r *reader) leb(bits uint) uint64 {
	var v uint64
	for shift := uint(0); ; shift += 7 {
		c := r.byte()
		if r.err != nil {
			return 0
		}
		if shift >= bits+7 {
			r.invalid("integer too long")
			return 0
		}
		v |= uint64(c&0x7f) << shift
		if c&0x80 == 0 {
			return v
		}
	}
}

func (r *reader) u32() uint32 {
	v := r.leb(32)
	if v > 1<<32-1 {
		r.invalid("integer too large")
	}
	return uint32(v)
}

// sleb skips a signed LEB128 and returns its bytes.
func (r *reader) sleb(bits uint) []byte {
	start := r.pos
	r.leb(bits)
	if r.err != nil {
		return nil
	}
	return r.b[start:r.pos]
}

func (r *reader) count() int {
	n := r.u32()
	if r.err == nil && int64(n) > int64(len(r.b)-r.pos) {
		r.invalid("vector of %d elements in %d bytes", n, len(r.b)-r.pos)
		return 0
	}
	return int(n)
}

func (r *reader) bytes(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || n > len(r.b)-r.pos {
		r.invalid("length %d beyond the end", n)
		return nil
	}
	b := r.b[r.pos : r.pos+n]
	r.pos += n
	return b
}

func (r *reader) name() string { return string(r.bytes(int(r.u32()))) }

// writer builds a binary.
type writer struct{ b []byte }

func (w *writer) byte(c byte)   { w.b = append(w.b, c) }
func (w *writer) raw(p []byte)  { w.b = append(w.b, p...) }
func (w *writer) u32(v uint32)  { w.b = appendLEB(w.b, uint64(v)) }
func (w *writer) name(s string) { w.u32(uint32(len(s))); w.b = append(w.b, s...) }
func (w *writer) section(id byte, body []byte) {
	w.byte(id)
	w.u32(uint32(len(body)))
	w.raw(body)
}

func appendLEB(b []byte, v uint64) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if v != 0 {
			b = append(b, c|0x80)
			continue
		}
		return append(b, c)
	}
}

// appendS33 appends a non-negative s33 (a block type's type index).
func appendS33(b []byte, v uint32) []byte {
	x := uint64(v)
	for {
		c := byte(x & 0x7f)
		x >>= 7
		if x != 0 || c&0x40 != 0 {
			b = append(b, c|0x80)
			continue
		}
		return append(b, c)
	}
}

// funcType is a core function type: its parameter and result value types.
type funcType struct{ params, results string }

type importEntry struct {
	module, name string
	kind         byte
	typ          uint32 // kindFunc: type index
	desc         []byte // the raw descriptor (tables, memories, globals)
}

type exportEntry struct {
	kind byte
	idx  uint32
}

type global struct {
	desc []byte // value type and mutability
	init []byte // the initializer expression, end included
}

// module is one decoded core module.
type module struct {
	types    []funcType
	imports  []importEntry
	funcs    []uint32 // type index of each defined function
	tables   [][]byte // raw table types
	memories [][]byte // raw memory types
	globals  []global
	exports  map[string]exportEntry
	start    *uint32
	elems    [][]byte // raw segments
	code     [][]byte // raw bodies
	data     [][]byte // raw segments

	numImported [4]uint32 // imported funcs, tables, memories, globals
}

func decodeModule(b []byte) (*module, error) {
	r := &reader{b: b}
	if string(r.bytes(8)) != "\x00asm\x01\x00\x00\x00" {
		return nil, errors.Wrap(ErrInvalid, "not a core module")
	}
	m := &module{exports: map[string]exportEntry{}}
	for !r.done() {
		id := r.byte()
		body := r.bytes(int(r.u32()))
		if r.err != nil {
			break
		}
		s := &reader{b: body}
		m.section(id, s)
		if s.err == nil && !s.done() {
			s.invalid("section %d has bytes left", id)
		}
		if s.err != nil {
			return nil, s.err
		}
	}
	if r.err != nil {
		return nil, r.err
	}
	if len(m.funcs) != len(m.code) {
		return nil, errors.Wrapf(ErrInvalid, "%d functions, %d bodies", len(m.funcs), len(m.code))
	}
	return m, nil
}

func (m *module) section(id byte, r *reader) {
	switch id {
	case 0, 12: // custom; data count (recomputed)
		r.pos = len(r.b)
	case 1:
		for n := r.count(); n > 0 && r.err == nil; n-- {
			if r.byte() != 0x60 {
				r.fail(errors.Wrap(ErrUnsupported, "a type other than a function type"))
				return
			}
			p := r.bytes(r.count())
			q := r.bytes(r.count())
			m.types = append(m.types, funcType{string(p), string(q)})
		}
	case 2:
		for n := r.count(); n > 0 && r.err == nil; n-- {
			imp := importEntry{module: r.name(), name: r.name(), kind: r.byte()}
			start := r.pos
			switch imp.kind {
			case kindFunc:
				imp.typ = r.u32()
				if r.err == nil && int(imp.typ) >= len(m.types) {
					r.invalid("import type %d out of range", imp.typ)
				}
			case kindTable:
				r.byte()
				readLimits(r)
			case kindMemory:
				readLimits(r)
			case kindGlobal:
				r.byte()
				r.byte()
			default:
				r.fail(errors.Wrapf(ErrUnsupported, "import kind %#x", imp.kind))
			}
			imp.desc = r.b[start:r.pos]
			if imp.kind <= kindGlobal {
				m.numImported[imp.kind]++
			}
			m.imports = append(m.imports, imp)
		}
	case 3:
		for n := r.count(); n > 0 && r.err == nil; n-- {
			t := r.u32()
			if r.err == nil && int(t) >= len(m.types) {
				r.invalid("function type %d out of range", t)
			}
			m.funcs = append(m.funcs, t)
		}
	case 4:
		for n := r.count(); n > 0 && r.err == nil; n-- {
			start := r.pos
			if r.byte() == 0x40 {
				r.fail(errors.Wrap(ErrUnsupported, "a table with an initializer"))
				return
			}
			readLimits(r)
			m.tables = append(m.tables, r.b[start:r.pos])
		}
	case 5:
		for n := r.count(); n > 0 && r.err == nil; n-- {
			start := r.pos
			readLimits(r)
			m.memories = append(m.memories, r.b[start:r.pos])
		}
	case 6:
		for n := r.count(); n > 0 && r.err == nil; n-- {
			desc := r.bytes(2)
			m.globals = append(m.globals, global{desc: desc, init: skipConstExpr(r)})
		}
	case 7:
		for n := r.count(); n > 0 && r.err == nil; n-- {
			name := r.name()
			e := exportEntry{kind: r.byte(), idx: r.u32()}
			m.exports[name] = e
		}
	case 8:
		s := r.u32()
		m.start = &s
	case 9:
		for n := r.count(); n > 0 && r.err == nil; n-- {
			start := r.pos
			skipElem(r)
			m.elems = append(m.elems, r.b[start:r.pos])
		}
	case 10:
		for n := r.count(); n > 0 && r.err == nil; n-- {
			m.code = append(m.code, r.bytes(int(r.u32())))
		}
	case 11:
		for n := r.count(); n > 0 && r.err == nil; n-- {
			start := r.pos
			switch flag := r.u32(); flag {
			case 0:
				skipConstExpr(r)
			case 1:
			case 2:
				r.u32()
				skipConstExpr(r)
			default:
				r.invalid("data segment flag %d", flag)
			}
			r.bytes(int(r.u32()))
			m.data = append(m.data, r.b[start:r.pos])
		}
	default:
		r.fail(errors.Wrapf(ErrUnsupported, "section %d", id))
	}
}

func readLimits(r *reader) {
	switch f := r.byte(); f {
	case 0x00:
		r.u32()
	case 0x01:
		r.u32()
		r.u32()
	default:
		r.fail(errors.Wrapf(ErrUnsupported, "limits form %#x (shared or 64-bit)", f))
	}
}

// skipConstExpr reads a constant expression up to its end and returns it.
func skipConstExpr(r *reader) []byte {
	start := r.pos
	for r.err == nil {
		op := r.byte()
		if op == 0x0b {
			return r.b[start:r.pos]
		}
		skipConstOperands(r, op)
	}
	return nil
}

// skipConstOperands reads the operands of the constant instruction op
// (already read); end (0x0b) has none.
func skipConstOperands(r *reader, op byte) {
	switch op {
	case 0x0b:
	case 0x41:
		r.sleb(32)
	case 0x42:
		r.sleb(64)
	case 0x43:
		r.bytes(4)
	case 0x44:
		r.bytes(8)
	case 0x23, 0xd2:
		r.u32()
	case 0xd0:
		r.byte()
	case 0x6a, 0x6b, 0x6c, 0x7c, 0x7d, 0x7e: // extended constant arithmetic
	case 0xfd:
		if r.u32() != 12 {
			r.fail(errors.Wrap(ErrUnsupported, "a SIMD operator in a constant expression"))
		}
		r.bytes(16)
	default:
		r.fail(errors.Wrapf(ErrUnsupported, "operator %#x in a constant expression", op))
	}
}

func skipElem(r *reader) {
	flag := r.u32()
	if flag > 7 {
		r.invalid("element segment flag %d", flag)
		return
	}
	if flag&2 != 0 && flag&1 == 0 {
		r.u32() // table index
	}
	if flag&1 == 0 {
		skipConstExpr(r)
	}
	if flag&3 != 0 {
		r.byte() // element kind or reference type
	}
	for n := r.count(); n > 0 && r.err == nil; n-- {
		if flag&4 != 0 {
			skipConstExpr(r)
		} else {
			r.u32()
		}
	}
}

package coremerge

// The instruction walk of a function body: every index immediate mapped to
// the merged module's spaces, everything else copied.

import (
	"github.com/cockroachdb/errors"
)

// body rewrites function body c of module m into w.
func (g *merger) body(m int, c []byte, w *writer) error {
	r := &reader{b: c}
	start := r.pos
	for n := r.count(); n > 0 && r.err == nil; n-- {
		r.u32()
		r.byte()
	}
	w.raw(r.b[start:r.pos])
	for !r.done() {
		if err := g.instr(m, r, w); err != nil {
			return err
		}
	}
	return r.err
}

// isValType reports whether c is a one-byte block type.
func isValType(c byte) bool {
	switch c {
	case 0x40, 0x7f, 0x7e, 0x7d, 0x7c, 0x7b, 0x70, 0x6f:
		return true
	}
	return false
}

// instr rewrites one instruction.
func (g *merger) instr(m int, r *reader, w *writer) error {
	at := r.pos
	op := r.byte()
	mapped := func(kind byte, idx uint32) error {
		if r.err != nil {
			return r.err
		}
		v, err := g.mapIndex(m, kind, idx)
		if err != nil {
			return errors.Wrapf(err, "offset %#x", at)
		}
		w.u32(v)
		return nil
	}
	copyRest := func() { w.raw(r.b[at:r.pos]) }
	switch {
	case op == 0x02 || op == 0x03 || op == 0x04: // block, loop, if
		if c := peek(r); isValType(c) {
			r.byte()
			copyRest()
			return r.err
		}
		t := r.leb(33)
		if r.err != nil {
			return r.err
		}
		if t >= uint64(len(g.mods[m].types)) {
			return errors.Wrapf(ErrInvalid, "offset %#x: block type %d out of range", at, t)
		}
		w.byte(op)
		w.b = appendS33(w.b, g.typeBase[m]+uint32(t))
	case op == 0x0c || op == 0x0d: // br, br_if
		r.u32()
		copyRest()
	case op == 0x0e: // br_table
		for n := r.count(); n >= 0 && r.err == nil; n-- {
			r.u32()
		}
		copyRest()
	case op == 0x10 || op == 0xd2: // call, ref.func
		w.byte(op)
		return mapped(kindFunc, r.u32())
	case op == 0x11: // call_indirect
		t := r.u32()
		table := r.u32()
		if r.err == nil && t >= uint32(len(g.mods[m].types)) {
			return errors.Wrapf(ErrInvalid, "offset %#x: type %d out of range", at, t)
		}
		w.byte(op)
		w.u32(g.typeBase[m] + t)
		return mapped(kindTable, table)
	case op == 0x12 || op == 0x13 || op == 0x14 || op == 0x15 || op >= 0x06 && op <= 0x0a || op == 0x18 || op == 0x19 || op == 0x1f:
		return errors.Wrapf(ErrUnsupported, "offset %#x: operator %#x (tail calls, exceptions or typed references)", at, op)
	case op == 0x1c: // typed select
		for n := r.count(); n > 0 && r.err == nil; n-- {
			r.byte()
		}
		copyRest()
	case op >= 0x20 && op <= 0x22: // locals
		r.u32()
		copyRest()
	case op == 0x23 || op == 0x24: // global.get, global.set
		w.byte(op)
		return mapped(kindGlobal, r.u32())
	case op == 0x25 || op == 0x26: // table.get, table.set
		w.byte(op)
		return mapped(kindTable, r.u32())
	case op >= 0x28 && op <= 0x3e: // loads and stores
		if err := memarg(r); err != nil {
			return err
		}
		copyRest()
	case op == 0x3f || op == 0x40: // memory.size, memory.grow
		if r.byte() != 0 {
			return errors.Wrap(ErrUnsupported, "multi-memory")
		}
		copyRest()
	case op == 0x41:
		r.sleb(32)
		copyRest()
	case op == 0x42:
		r.sleb(64)
		copyRest()
	case op == 0x43:
		r.bytes(4)
		copyRest()
	case op == 0x44:
		r.bytes(8)
		copyRest()
	case op == 0xd0:
		r.byte()
		copyRest()
	case op == 0xfc:
		return g.misc(m, r, w, at)
	case op == 0xfd:
		return simd(r, w, at)
	case op <= 0x01, op == 0x05, op == 0x0b, op == 0x0f, op == 0x1a, op == 0x1b, op >= 0x45 && op <= 0xc4, op == 0xd1:
		copyRest()
	default:
		return errors.Wrapf(ErrUnsupported, "offset %#x: operator %#x", at, op)
	}
	return r.err
}

func peek(r *reader) byte {
	if r.pos < len(r.b) {
		return r.b[r.pos]
	}
	return 0
}

func memarg(r *reader) error {
	align := r.u32()
	if align&0x40 != 0 {
		return errors.Wrap(ErrUnsupported, "multi-memory")
	}
	r.leb(64)
	return r.err
}

// misc rewrites a 0xfc-prefixed instruction.
func (g *merger) misc(m int, r *reader, w *writer, at int) error {
	sub := r.u32()
	w.byte(0xfc)
	w.u32(sub)
	zero := func() error {
		if r.byte() != 0 {
			return errors.Wrap(ErrUnsupported, "multi-memory")
		}
		w.byte(0)
		return r.err
	}
	switch {
	case sub <= 7: // saturating truncations
	case sub == 8: // memory.init
		w.u32(g.dataBase[m] + r.u32())
		return zero()
	case sub == 9: // data.drop
		w.u32(g.dataBase[m] + r.u32())
	case sub == 10: // memory.copy
		if err := zero(); err != nil {
			return err
		}
		return zero()
	case sub == 11: // memory.fill
		return zero()
	case sub == 12: // table.init
		w.u32(g.elemBase[m] + r.u32())
		t, err := g.mapIndex(m, kindTable, r.u32())
		if err != nil {
			return err
		}
		w.u32(t)
	case sub == 13: // elem.drop
		w.u32(g.elemBase[m] + r.u32())
	case sub == 14: // table.copy
		for range 2 {
			t, err := g.mapIndex(m, kindTable, r.u32())
			if err != nil {
				return err
			}
			w.u32(t)
		}
	case sub >= 15 && sub <= 17: // table.grow, size, fill
		t, err := g.mapIndex(m, kindTable, r.u32())
		if err != nil {
			return err
		}
		w.u32(t)
	default:
		return errors.Wrapf(ErrUnsupported, "offset %#x: operator 0xfc %d", at, sub)
	}
	return r.err
}

// simd copies a 0xfd-prefixed instruction, its immediates walked.
func simd(r *reader, w *writer, at int) error {
	sub := r.u32()
	switch {
	case sub <= 11 || sub == 92 || sub == 93: // loads, stores
		if err := memarg(r); err != nil {
			return err
		}
	case sub == 12 || sub == 13: // v128.const, i8x16.shuffle
		r.bytes(16)
	case sub >= 21 && sub <= 34: // extract and replace lane
		r.byte()
	case sub >= 84 && sub <= 91: // load and store lane
		if err := memarg(r); err != nil {
			return err
		}
		r.byte()
	case sub > 275:
		return errors.Wrapf(ErrUnsupported, "offset %#x: operator 0xfd %d", at, sub)
	}
	w.raw(r.b[at:r.pos])
	return r.err
}

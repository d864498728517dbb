package coremerge

// The merged module's sections, and the rewrite of every instruction's
// indices.

import (
	"github.com/cockroachdb/errors"
)

func (g *merger) encode() ([]byte, error) {
	out := &writer{b: []byte("\x00asm\x01\x00\x00\x00")}
	var starts []uint32 // merged indices of the modules' start functions
	for i, m := range g.mods {
		if m.start != nil {
			if int(*m.start) >= len(g.funcMap[i]) {
				return nil, errors.Wrapf(ErrInvalid, "core module %d: start function out of range", i)
			}
			starts = append(starts, g.funcMap[i][*m.start])
		}
	}

	// Types, with () -> () for the synthesized start function.
	w := &writer{}
	total := g.count(func(m *module) int { return len(m.types) })
	startType := uint32(total)
	if len(starts) > 0 {
		total++
	}
	w.u32(uint32(total))
	for _, m := range g.mods {
		for _, t := range m.types {
			w.byte(0x60)
			w.u32(uint32(len(t.params)))
			w.raw([]byte(t.params))
			w.u32(uint32(len(t.results)))
			w.raw([]byte(t.results))
		}
	}
	if len(starts) > 0 {
		w.raw([]byte{0x60, 0, 0})
	}
	out.section(1, w.b)

	// Imports: the host functions.
	if len(g.hosts) > 0 {
		w = &writer{}
		w.u32(uint32(len(g.hosts)))
		for _, h := range g.hosts {
			w.name(h.module)
			w.name(h.name)
			w.byte(kindFunc)
			w.u32(h.typeIdx)
		}
		out.section(2, w.b)
	}

	// Functions.
	w = &writer{}
	nfuncs := g.count(func(m *module) int { return len(m.funcs) })
	startFunc := uint32(len(g.hosts) + nfuncs)
	if len(starts) > 0 {
		nfuncs++
	}
	w.u32(uint32(nfuncs))
	for i, m := range g.mods {
		for _, t := range m.funcs {
			w.u32(g.typeBase[i] + t)
		}
	}
	if len(starts) > 0 {
		w.u32(startType)
	}
	out.section(3, w.b)

	// Tables, memory, globals.
	w = &writer{}
	w.u32(uint32(g.count(func(m *module) int { return len(m.tables) })))
	for _, m := range g.mods {
		for _, t := range m.tables {
			w.raw(t)
		}
	}
	out.section(4, w.b)
	if g.memOwner >= 0 {
		w = &writer{}
		w.u32(1)
		w.raw(g.mods[g.memOwner].memories[0])
		out.section(5, w.b)
	}
	w = &writer{}
	w.u32(uint32(g.count(func(m *module) int { return len(m.globals) })))
	for i, m := range g.mods {
		for _, gl := range m.globals {
			w.raw(gl.desc)
			if err := g.constExpr(i, gl.init, w); err != nil {
				return nil, err
			}
		}
	}
	out.section(6, w.b)

	// Exports.
	w = &writer{}
	w.u32(uint32(len(g.p.Exports)))
	seen := map[string]bool{}
	for _, e := range g.p.Exports {
		if seen[e.Name] {
			return nil, errors.Wrapf(ErrInvalid, "export %q twice", e.Name)
		}
		seen[e.Name] = true
		if e.Module < 0 || e.Module >= len(g.mods) {
			return nil, errors.Wrapf(ErrInvalid, "export %q of module %d", e.Name, e.Module)
		}
		x, ok := g.mods[e.Module].exports[e.Item]
		if !ok {
			return nil, errors.Wrapf(ErrInvalid, "module %d exports no %q", e.Module, e.Item)
		}
		idx, err := g.mapIndex(e.Module, x.kind, x.idx)
		if err != nil {
			return nil, errors.Wrapf(err, "export %q", e.Name)
		}
		w.name(e.Name)
		w.byte(x.kind)
		w.u32(idx)
	}
	out.section(7, w.b)
	if len(starts) > 0 {
		w = &writer{}
		w.u32(startFunc)
		out.section(8, w.b)
	}

	// Element segments.
	w = &writer{}
	w.u32(uint32(g.count(func(m *module) int { return len(m.elems) })))
	for i, m := range g.mods {
		for _, e := range m.elems {
			if err := g.elem(i, e, w); err != nil {
				return nil, errors.Wrapf(err, "core module %d", i)
			}
		}
	}
	out.section(9, w.b)

	ndata := g.count(func(m *module) int { return len(m.data) })
	if ndata > 0 {
		w = &writer{}
		w.u32(uint32(ndata))
		out.section(12, w.b)
	}

	// Code.
	w = &writer{}
	w.u32(uint32(nfuncs))
	body := &writer{}
	for i, m := range g.mods {
		for k, c := range m.code {
			body.b = body.b[:0]
			if err := g.body(i, c, body); err != nil {
				return nil, errors.Wrapf(err, "core module %d, function %d", i, k)
			}
			w.u32(uint32(len(body.b)))
			w.raw(body.b)
		}
	}
	if len(starts) > 0 {
		body.b = append(body.b[:0], 0) // no locals
		for _, f := range starts {
			body.byte(0x10)
			body.u32(f)
		}
		body.byte(0x0b)
		w.u32(uint32(len(body.b)))
		w.raw(body.b)
	}
	out.section(10, w.b)

	if ndata > 0 {
		w = &writer{}
		w.u32(uint32(ndata))
		for i, m := range g.mods {
			for _, d := range m.data {
				if err := g.dataSeg(i, d, w); err != nil {
					return nil, errors.Wrapf(err, "core module %d", i)
				}
			}
		}
		out.section(11, w.b)
	}
	return out.b, nil
}

// count sums n over the merged modules.
func (g *merger) count(n func(*module) int) int {
	total := 0
	for _, m := range g.mods {
		total += n(m)
	}
	return total
}

// mapIndex is the merged index of item idx of kind in module m's space.
func (g *merger) mapIndex(m int, kind byte, idx uint32) (uint32, error) {
	var space []uint32
	switch kind {
	case kindFunc:
		space = g.funcMap[m]
	case kindTable:
		space = g.tableMap[m]
	case kindGlobal:
		space = g.globalMap[m]
	case kindMemory:
		if idx != 0 || g.memOwner < 0 {
			return 0, errors.Wrap(ErrInvalid, "memory index")
		}
		return 0, nil
	default:
		return 0, errors.Wrapf(ErrUnsupported, "kind %#x", kind)
	}
	if int(idx) >= len(space) {
		return 0, errors.Wrapf(ErrInvalid, "index %d out of range", idx)
	}
	return space[idx], nil
}

// constExpr rewrites constant expression e of module m into w.
func (g *merger) constExpr(m int, e []byte, w *writer) error {
	r := &reader{b: e}
	for !r.done() {
		op := r.byte()
		switch op {
		case 0x23: // global.get: of an import bound to a definition, inline its initializer
			i := r.u32()
			if r.err != nil {
				break
			}
			if int(i) < len(g.globalInit[m]) {
				init := g.globalInit[m][i]
				if len(init) == 0 || containsGlobalGet(init) {
					return errors.Wrap(ErrUnsupported, "a constant expression reading a global that is not constant")
				}
				w.raw(init[:len(init)-1])
				continue
			}
			idx, err := g.mapIndex(m, kindGlobal, i)
			if err != nil {
				return err
			}
			w.byte(op)
			w.u32(idx)
		case 0xd2:
			idx, err := g.mapIndex(m, kindFunc, r.u32())
			if err != nil {
				return err
			}
			w.byte(op)
			w.u32(idx)
		default:
			// Copy the instruction as is.
			start := r.pos - 1
			r.pos = start
			one := &reader{b: r.b[start:]}
			skipConstOperands(one, one.byte())
			if one.err != nil {
				return one.err
			}
			w.raw(r.b[start : start+one.pos])
			r.pos = start + one.pos
		}
	}
	return r.err
}

func containsGlobalGet(e []byte) bool {
	r := &reader{b: e}
	for !r.done() {
		if r.b[r.pos] == 0x23 {
			return true
		}
		skipConstOperands(r, r.byte())
	}
	return false
}

// elem rewrites element segment e of module m into w, with an explicit
// table index for an active one.
func (g *merger) elem(m int, e []byte, w *writer) error {
	r := &reader{b: e}
	flag := r.u32()
	active := flag&1 == 0
	table := uint32(0)
	if flag&2 != 0 && active {
		table = r.u32()
	}
	var offset []byte
	if active {
		offset = skipConstExpr(r)
	}
	kind := byte(0x00)
	if flag&4 != 0 {
		kind = 0x70
	}
	if flag&3 != 0 {
		kind = r.byte()
	}
	if r.err != nil {
		return r.err
	}
	out := flag
	if active {
		out = flag | 2 // explicit table
	}
	w.u32(out)
	if active {
		t, err := g.mapIndex(m, kindTable, table)
		if err != nil {
			return err
		}
		w.u32(t)
		if err := g.constExpr(m, offset, w); err != nil {
			return err
		}
	}
	w.byte(kind)
	n := r.count()
	w.u32(uint32(n))
	for ; n > 0 && r.err == nil; n-- {
		if flag&4 != 0 {
			if err := g.constExpr(m, skipConstExpr(r), w); err != nil {
				return err
			}
			continue
		}
		f, err := g.mapIndex(m, kindFunc, r.u32())
		if err != nil {
			return err
		}
		w.u32(f)
	}
	return r.err
}

// dataSeg rewrites data segment d of module m into w.
func (g *merger) dataSeg(m int, d []byte, w *writer) error {
	r := &reader{b: d}
	flag := r.u32()
	switch flag {
	case 0, 2:
		if flag == 2 && r.u32() != 0 {
			return errors.Wrap(ErrUnsupported, "a data segment of memory other than 0")
		}
		w.u32(0)
		if err := g.constExpr(m, skipConstExpr(r), w); err != nil {
			return err
		}
	case 1:
		w.u32(1)
	}
	rest := r.b[r.pos:]
	if r.err != nil {
		return r.err
	}
	w.raw(rest)
	return nil
}

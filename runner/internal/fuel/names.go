package fuel

// nameSection holds the parts of the "name" custom section that the rewrite
// keeps: the module name and the function and local names, renumbered. The
// other subsections (labels, types, tables, ...) are dropped.
type nameSection struct {
	module    *string
	funcs     []nameAssoc
	locals    []indirectNames
	hasFuncs  bool
	hasLocals bool
}

type nameAssoc struct {
	index uint32
	name  string
}

type indirectNames struct {
	index uint32
	names []nameAssoc
}

// decodeCustom keeps the first "name" section if it parses; every other
// custom section is dropped (see the package documentation).
func (m *module) decodeCustom(r *reader) error {
	name, err := r.name()
	if err != nil {
		return err
	}
	if name != "name" || m.names != nil {
		return nil
	}
	if ns, ok := decodeNames(&reader{b: r.b[r.pos:]}); ok {
		m.names = ns
	}
	r.pos = len(r.b)
	return nil
}

// decodeNames parses the contents of a name section; ok is false when they
// are malformed, and the section is then dropped.
func decodeNames(r *reader) (ns *nameSection, ok bool) {
	ns = &nameSection{}
	seen := map[byte]bool{}
	for !r.eof() {
		id, err := r.byte()
		if err != nil {
			return nil, false
		}
		size, err := r.u32()
		if err != nil {
			return nil, false
		}
		body, err := r.bytes(int(size))
		if err != nil || seen[id] {
			return nil, false
		}
		seen[id] = true
		sr := &reader{b: body}
		switch id {
		case 0:
			s, err := sr.name()
			if err != nil {
				return nil, false
			}
			ns.module = &s
		case 1:
			if ns.funcs, ok = decodeNameMap(sr); !ok {
				return nil, false
			}
			ns.hasFuncs = true
		case 2:
			n, err := sr.count()
			if err != nil {
				return nil, false
			}
			for range n {
				idx, err := sr.u32()
				if err != nil {
					return nil, false
				}
				names, ok := decodeNameMap(sr)
				if !ok {
					return nil, false
				}
				ns.locals = append(ns.locals, indirectNames{index: idx, names: names})
			}
			ns.hasLocals = true
		default:
			continue
		}
		if !sr.eof() {
			return nil, false
		}
	}
	return ns, true
}

func decodeNameMap(r *reader) ([]nameAssoc, bool) {
	n, err := r.count()
	if err != nil {
		return nil, false
	}
	out := make([]nameAssoc, 0, n)
	for range n {
		idx, err := r.u32()
		if err != nil {
			return nil, false
		}
		s, err := r.name()
		if err != nil {
			return nil, false
		}
		out = append(out, nameAssoc{index: idx, name: s})
	}
	return out, true
}

// encode appends the whole custom section contents, with function indices
// shifted past the added imports and names for the added imports.
func (ns *nameSection) encode(w *writer, m *module) {
	w.name("name")
	var sub writer
	if ns.module != nil {
		sub.name(*ns.module)
		w.section(0, sub.b)
		sub.b = sub.b[:0]
	}
	if ns.hasFuncs {
		added := []nameAssoc{
			{m.numImportedFuncs, ImportModule + "." + TickName},
			{m.numImportedFuncs + 1, ImportModule + "." + GrowName},
			{m.numImportedFuncs + 2, ImportModule + "." + DepthName},
		}
		out := make([]nameAssoc, 0, len(ns.funcs)+len(added))
		for _, a := range ns.funcs {
			if a.index >= m.numImportedFuncs && added != nil {
				out, added = append(out, added...), nil
			}
			out = append(out, nameAssoc{m.shift(a.index), a.name})
		}
		out = append(out, added...)
		sub.u32(uint32(len(out)))
		for _, a := range out {
			sub.u32(a.index)
			sub.name(a.name)
		}
		w.section(1, sub.b)
		sub.b = sub.b[:0]
	}
	if ns.hasLocals {
		sub.u32(uint32(len(ns.locals)))
		for _, l := range ns.locals {
			sub.u32(m.shift(l.index))
			sub.u32(uint32(len(l.names)))
			for _, a := range l.names {
				sub.u32(a.index)
				sub.name(a.name)
			}
		}
		w.section(2, sub.b)
	}
}

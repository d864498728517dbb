package fuel

// The name section: decoded, and encoded again with renumbered indices.

import (
	"math"

	"github.com/cockroachdb/errors"
)

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

// decodeCustom keeps the "name" section; every other custom section is
// dropped (see the package documentation). A malformed name section, or a
// second one, is refused like wazero refuses it: wazero would otherwise
// allocate whatever its lengths claim before failing.
func (m decoder) decodeCustom(r *reader) {
	if name := r.name(); name != "name" {
		return
	}
	if m.names != nil {
		r.failf("second name section")
		return
	}
	rest := r.sub(uint32(len(r.b)-r.pos), "", 0)
	names, err := decodeNames(&rest)
	if err != nil {
		r.fail(errors.Wrap(err, "name section"))
	}
	m.names = names
}

// decodeNames parses the contents of a name section.
func decodeNames(r *reader) (*nameSection, error) {
	ns := &nameSection{}
	for !r.eof() {
		id := r.byte()
		sr := r.sub(r.u32(), "", 0)
		switch id {
		case 0:
			s := sr.name()
			ns.module = &s
		case 1:
			ns.funcs = decodeNameMap(&sr)
			ns.hasFuncs = true
		case 2:
			n := sr.count("names", math.MaxUint32)
			ns.locals = ns.locals[:0]
			for range n {
				idx := sr.u32()
				ns.locals = append(ns.locals, indirectNames{index: idx, names: decodeNameMap(&sr)})
				if sr.err != nil {
					break
				}
			}
			ns.hasLocals = true
		}
		if err := first(r.err, sr.err); err != nil {
			return nil, err
		}
	}
	return ns, nil
}

func decodeNameMap(r *reader) []nameAssoc {
	n := r.count("names", math.MaxUint32)
	out := make([]nameAssoc, 0, n)
	for range n {
		idx := r.u32()
		out = append(out, nameAssoc{index: idx, name: r.name()})
		if r.err != nil {
			return nil
		}
	}
	return out
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

package coremerge

// Merge: bind every import, number the merged index spaces, and encode.

import (
	"github.com/cockroachdb/errors"
)

// target is where an import leads once re-exports are followed: a host
// import (host ≥ 0) or item idx (in its own module's space of that kind,
// a definition) of module mod.
type target struct {
	host int
	mod  int
	idx  uint32
}

type hostImport struct {
	module, name string
	typ          funcType
	typeIdx      uint32 // in the merged type space
}

// merger holds the decoded modules and the merged numbering.
type merger struct {
	p      Plan
	mods   []*module
	hosts  []hostImport
	hostBy map[[2]string]int

	// Per module, per index of its own space: the merged index.
	funcMap, tableMap, globalMap [][]uint32
	typeBase, elemBase, dataBase []uint32
	memOwner                     int // the module that defines the memory, -1 if none
	// globalInline[m][i], for an imported global of module m bound to a
	// definition: that definition's initializer, for constant expressions.
	globalInit [][][]byte
}

// Merge merges p's modules into one core module and returns its binary
// (see Plan).
func Merge(p Plan) ([]byte, error) {
	if len(p.Imports) != len(p.Modules) {
		return nil, errors.Wrapf(ErrInvalid, "%d modules, %d import lists", len(p.Modules), len(p.Imports))
	}
	g := &merger{p: p, hostBy: map[[2]string]int{}, memOwner: -1}
	for i, b := range p.Modules {
		m, err := decodeModule(b)
		if err != nil {
			return nil, errors.Wrapf(err, "core module %d", i)
		}
		if len(p.Imports[i]) != len(m.imports) {
			return nil, errors.Wrapf(ErrInvalid, "core module %d has %d imports, the plan binds %d", i, len(m.imports), len(p.Imports[i]))
		}
		if len(m.memories) > 0 {
			if g.memOwner >= 0 || len(m.memories) > 1 {
				return nil, errors.Wrap(ErrUnsupported, "the component defines more than one memory (the node merges components with one memory)")
			}
			g.memOwner = i
		}
		g.mods = append(g.mods, m)
	}
	if err := g.number(); err != nil {
		return nil, err
	}
	return g.encode()
}

// number assigns merged indices to every module's items.
func (g *merger) number() error {
	n := len(g.mods)
	g.funcMap, g.tableMap, g.globalMap = make([][]uint32, n), make([][]uint32, n), make([][]uint32, n)
	g.typeBase, g.elemBase, g.dataBase = make([]uint32, n), make([]uint32, n), make([]uint32, n)
	g.globalInit = make([][][]byte, n)
	var types, elems, data uint32
	for i, m := range g.mods {
		g.typeBase[i], g.elemBase[i], g.dataBase[i] = types, elems, data
		types += uint32(len(m.types))
		elems += uint32(len(m.elems))
		data += uint32(len(m.data))
	}
	// Resolve imports, collecting the host functions first: defined
	// functions are numbered after them.
	targets := make([][]target, n)
	for i, m := range g.mods {
		targets[i] = make([]target, len(m.imports))
		for j, imp := range m.imports {
			t, err := g.resolve(i, j, 0)
			if err != nil {
				return errors.Wrapf(err, "core module %d, import %s.%s", i, imp.module, imp.name)
			}
			targets[i][j] = t
		}
	}
	var funcs, tables, globals uint32 = uint32(len(g.hosts)), 0, 0
	funcBase, tableBase, globalBase := make([]uint32, n), make([]uint32, n), make([]uint32, n)
	for i, m := range g.mods {
		funcBase[i], tableBase[i], globalBase[i] = funcs, tables, globals
		funcs += uint32(len(m.funcs))
		tables += uint32(len(m.tables))
		globals += uint32(len(m.globals))
	}
	for i, m := range g.mods {
		fm, tm, gm := []uint32{}, []uint32{}, []uint32{}
		g.globalInit[i] = make([][]byte, m.numImported[kindGlobal])
		for j, imp := range m.imports {
			t := targets[i][j]
			switch imp.kind {
			case kindFunc:
				if t.host >= 0 {
					fm = append(fm, uint32(t.host))
				} else {
					fm = append(fm, funcBase[t.mod]+t.idx)
				}
			case kindTable:
				tm = append(tm, tableBase[t.mod]+t.idx)
			case kindGlobal:
				g.globalInit[i][len(gm)] = g.mods[t.mod].globals[t.idx].init
				gm = append(gm, globalBase[t.mod]+t.idx)
			}
		}
		for k := range m.funcs {
			fm = append(fm, funcBase[i]+uint32(k))
		}
		for k := range m.tables {
			tm = append(tm, tableBase[i]+uint32(k))
		}
		for k := range m.globals {
			gm = append(gm, globalBase[i]+uint32(k))
		}
		g.funcMap[i], g.tableMap[i], g.globalMap[i] = fm, tm, gm
	}
	return nil
}

// resolve follows import j of module i to a definition or a host import,
// checking kinds and types on the way.
func (g *merger) resolve(i, j, depth int) (target, error) {
	if depth > len(g.mods)+1 {
		return target{}, errors.Wrap(ErrInvalid, "a cycle of re-exported imports")
	}
	imp := g.mods[i].imports[j]
	ref := g.p.Imports[i][j]
	if ref.Host {
		if imp.kind != kindFunc {
			return target{}, errors.Wrap(ErrUnsupported, "a table, memory or global bound to the host")
		}
		typ := g.mods[i].types[imp.typ]
		key := [2]string{ref.HostModule, ref.HostName}
		if h, ok := g.hostBy[key]; ok {
			if g.hosts[h].typ != typ {
				return target{}, errors.Wrapf(ErrInvalid, "host function %s.%s imported with two types", ref.HostModule, ref.HostName)
			}
			return target{host: h}, nil
		}
		g.hostBy[key] = len(g.hosts)
		g.hosts = append(g.hosts, hostImport{module: ref.HostModule, name: ref.HostName, typ: typ, typeIdx: g.typeBase[i] + imp.typ})
		return target{host: len(g.hosts) - 1}, nil
	}
	if ref.Module < 0 || ref.Module >= len(g.mods) || ref.Module == i {
		return target{}, errors.Wrapf(ErrInvalid, "bound to module %d of %d", ref.Module, len(g.mods))
	}
	src := g.mods[ref.Module]
	e, ok := src.exports[ref.Name]
	if !ok {
		return target{}, errors.Wrapf(ErrInvalid, "module %d exports no %q", ref.Module, ref.Name)
	}
	if e.kind != imp.kind {
		return target{}, errors.Wrapf(ErrInvalid, "module %d's %q is of another kind", ref.Module, ref.Name)
	}
	k := imp.kind
	if k > kindGlobal {
		return target{}, errors.Wrap(ErrUnsupported, "import kind")
	}
	if e.idx < src.numImported[k] {
		// A re-export of one of the source's imports: follow it.
		n := uint32(0)
		for jj, im := range src.imports {
			if im.kind != k {
				continue
			}
			if n == e.idx {
				t, err := g.resolve(ref.Module, jj, depth+1)
				if err != nil {
					return target{}, err
				}
				return t, g.check(i, imp, t)
			}
			n++
		}
	}
	def := e.idx - src.numImported[k]
	var count int
	switch k {
	case kindFunc:
		count = len(src.funcs)
	case kindTable:
		count = len(src.tables)
	case kindMemory:
		count = len(src.memories)
	case kindGlobal:
		count = len(src.globals)
	}
	if int(def) >= count {
		return target{}, errors.Wrapf(ErrInvalid, "module %d exports %q out of range", ref.Module, ref.Name)
	}
	t := target{host: -1, mod: ref.Module, idx: def}
	return t, g.check(i, imp, t)
}

// check compares import imp of module i with what it resolved to.
func (g *merger) check(i int, imp importEntry, t target) error {
	switch imp.kind {
	case kindFunc:
		want := g.mods[i].types[imp.typ]
		var have funcType
		if t.host >= 0 {
			have = g.hosts[t.host].typ
		} else {
			src := g.mods[t.mod]
			have = src.types[src.funcs[t.idx]]
		}
		if want != have {
			return errors.Wrap(ErrInvalid, "function type mismatch")
		}
	case kindGlobal:
		if t.host >= 0 || string(g.mods[t.mod].globals[t.idx].desc) != string(imp.desc) {
			return errors.Wrap(ErrInvalid, "global type mismatch")
		}
	case kindTable:
		if t.host >= 0 || len(imp.desc) == 0 || g.mods[t.mod].tables[t.idx][0] != imp.desc[0] {
			return errors.Wrap(ErrInvalid, "table type mismatch")
		}
	case kindMemory:
		if t.host >= 0 || t.mod != g.memOwner {
			return errors.Wrap(ErrInvalid, "memory bound to another memory")
		}
	}
	return nil
}

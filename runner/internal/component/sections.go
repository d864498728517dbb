package component

// The sections that define items: instances, aliases, canonical
// definitions, imports and exports; and the plan's finishing touches.

import (
	"github.com/latent-node/latent-node/runner/internal/coremerge"
)

func (d *decoder) coreInstances(s *scope) {
	n := d.r.count()
	if !d.bump(&d.nInstances, n, d.lim.MaxInstances, "max_instances", "instances") {
		return
	}
	for ; n > 0 && d.r.err == nil; n-- {
		switch form := d.r.byte(); form {
		case 0x00:
			m := d.r.u32()
			args := map[string]*coreInst{}
			for k := d.r.count(); k > 0 && d.r.err == nil; k-- {
				name := d.r.name()
				if d.r.byte() != coreSortInstance {
					d.r.malformed("core instantiation argument is not an instance")
				}
				i := d.r.u32()
				if d.index(i, len(s.coreInsts), "core instance") {
					args[name] = s.coreInsts[i]
				}
			}
			if !d.index(m, len(s.coreModules), "core module") {
				return
			}
			s.coreInsts = append(s.coreInsts, d.instantiate(s.coreModules[m], args))
		case 0x01:
			inst := &coreInst{mod: -1, exports: map[string]coreItem{}}
			for k := d.r.count(); k > 0 && d.r.err == nil; k-- {
				name := d.r.name()
				cs := d.r.byte()
				v := d.item(s, sort{s: sortCore, core: cs}, d.r.u32())
				if v.sort != sortCore || v.core == coreSortModule || v.core == coreSortInstance || v.core == coreSortType {
					d.r.malformed("inline core export %q is not a function, table, memory or global", name)
					return
				}
				inst.exports[name] = v.citem
			}
			s.coreInsts = append(s.coreInsts, inst)
		default:
			d.r.malformed("core instance form %#x", form)
		}
	}
}

// instantiate plans the one instance of module m, its imports bound to
// args.
func (d *decoder) instantiate(m *coreModule, args map[string]*coreInst) *coreInst {
	if m.instantiated {
		d.r.fail(ReasonUnsupported, "", "a core module instantiated twice (the node merges each core module once)")
		return &coreInst{mod: -1}
	}
	m.instantiated = true
	imps, err := coreImports(m.bytes)
	if err != nil {
		d.r.fail(ReasonMalformed, "", "core module %d: %v", len(d.res.Merge.Modules), err)
		return &coreInst{mod: -1}
	}
	idx := len(d.res.Merge.Modules)
	refs := make([]coremerge.Ref, len(imps))
	for i, imp := range imps {
		arg, ok := args[imp.module]
		if !ok {
			d.r.fail(ReasonMalformed, "", "core module %d imports %s.%s, which its instantiation does not supply", idx, imp.module, imp.name)
			return &coreInst{mod: -1}
		}
		it, ok := arg.export(imp.name)
		if !ok {
			d.r.fail(ReasonMalformed, "", "core module %d imports %s.%s, which the instance it is bound to does not export", idx, imp.module, imp.name)
			return &coreInst{mod: -1}
		}
		refs[i] = it.ref()
	}
	d.res.Merge.Modules = append(d.res.Merge.Modules, m.bytes)
	d.res.Merge.Imports = append(d.res.Merge.Imports, refs)
	return &coreInst{mod: idx}
}

func (d *decoder) instances(s *scope, depth int) {
	n := d.r.count()
	if !d.bump(&d.nInstances, n, d.lim.MaxInstances, "max_instances", "instances") {
		return
	}
	for ; n > 0 && d.r.err == nil; n-- {
		switch form := d.r.byte(); form {
		case 0x00:
			c := d.r.u32()
			args := map[string]value{}
			for k := d.r.count(); k > 0 && d.r.err == nil; k-- {
				name := d.r.name()
				args[name] = d.sortIdx(s)
			}
			if !d.index(c, len(s.comps), "component") {
				return
			}
			def := s.comps[c]
			inner := &scope{parent: def.parent, args: args, exports: map[string]value{}}
			if err := d.eval(def.body, inner, depth+1); err != nil {
				if d.r.err == nil {
					d.r.err = err
				}
				return
			}
			s.insts = append(s.insts, &compInst{exports: inner.exports})
		case 0x01:
			inst := &compInst{exports: map[string]value{}}
			for k := d.r.count(); k > 0 && d.r.err == nil; k-- {
				name := d.r.externName()
				inst.exports[name] = d.sortIdx(s)
			}
			s.insts = append(s.insts, inst)
		default:
			d.r.malformed("instance form %#x", form)
		}
	}
}

// sortIdx reads a sortidx and returns the item it names in s.
func (d *decoder) sortIdx(s *scope) value {
	st := d.types().sort()
	i := d.r.u32()
	return d.item(s, st, i)
}

// item is the item of sort st at index i of s.
func (d *decoder) item(s *scope, st sort, i uint32) value {
	v := value{sort: st.s, core: st.core}
	switch st.s {
	case sortCore:
		switch st.core {
		case coreSortFunc:
			v.citem = pick(d, s.coreFuncs, i, "core function")
		case coreSortTable:
			v.citem = pick(d, s.coreTables, i, "core table")
		case coreSortMemory:
			v.citem = pick(d, s.coreMems, i, "core memory")
		case coreSortGlobal:
			v.citem = pick(d, s.coreGlobals, i, "core global")
		case coreSortModule:
			v.cmod = pick(d, s.coreModules, i, "core module")
		case coreSortInstance:
			v.cinst = pick(d, s.coreInsts, i, "core instance")
		case coreSortType:
			d.index(i, s.coreTypes, "core type")
		}
	case sortFunc:
		v.fn = pick(d, s.funcs, i, "function")
	case sortType:
		v.typ = pick(d, s.types, i, "type")
	case sortInstance:
		v.inst = pick(d, s.insts, i, "instance")
	case sortComponent:
		v.comp = pick(d, s.comps, i, "component")
	case sortValue:
		d.r.fail(ReasonUnsupported, "", "component values are not supported")
	}
	return v
}

// pick is list[i], or the zero value with d failed when i is out of range.
func pick[T any](d *decoder, list []T, i uint32, what string) T {
	var zero T
	if !d.index(i, len(list), what) {
		return zero
	}
	return list[i]
}

// add appends v to the index space of its sort in s.
func (d *decoder) add(s *scope, v value) {
	switch v.sort {
	case sortCore:
		switch v.core {
		case coreSortFunc:
			s.coreFuncs = append(s.coreFuncs, v.citem)
		case coreSortTable:
			s.coreTables = append(s.coreTables, v.citem)
		case coreSortMemory:
			s.coreMems = append(s.coreMems, v.citem)
		case coreSortGlobal:
			s.coreGlobals = append(s.coreGlobals, v.citem)
		case coreSortModule:
			s.coreModules = append(s.coreModules, v.cmod)
		case coreSortInstance:
			s.coreInsts = append(s.coreInsts, v.cinst)
		case coreSortType:
			s.coreTypes++
		}
	case sortFunc:
		s.funcs = append(s.funcs, v.fn)
	case sortType:
		s.types = append(s.types, v.typ)
	case sortInstance:
		s.insts = append(s.insts, v.inst)
	case sortComponent:
		s.comps = append(s.comps, v.comp)
	}
}

func (d *decoder) alias(s *scope) {
	st := d.types().sort()
	kind, idx, name, outerIdx := d.types().aliasTarget()
	if d.r.err != nil {
		return
	}
	v := value{sort: st.s, core: st.core}
	switch kind {
	case 0x00: // export of a component instance
		if !d.index(idx, len(s.insts), "instance") || st.s == sortCore {
			d.r.malformed("alias of a core item out of a component instance")
			return
		}
		inst := s.insts[idx]
		if inst.imported != "" {
			switch st.s {
			case sortFunc:
				v.fn = &compFunc{instance: inst.imported, name: name}
			case sortType:
				v.typ = typeVal{instance: inst.imported, name: name}
			default:
				d.r.fail(ReasonUnsupported, "", "alias of %s of the imported instance %s: only functions and types are supported", name, inst.imported)
				return
			}
		} else {
			e, ok := inst.exports[name]
			if !ok || e.sort != st.s {
				d.r.malformed("instance %d has no export %q of that sort", idx, name)
				return
			}
			v = e
		}
	case 0x01: // export of a core instance
		if st.s != sortCore || !d.index(idx, len(s.coreInsts), "core instance") {
			return
		}
		it, ok := s.coreInsts[idx].export(name)
		if !ok {
			d.r.malformed("core instance %d has no export %q", idx, name)
			return
		}
		v.citem = it
	case 0x02: // outer
		target := s
		for n := idx; n > 0 && target != nil; n-- {
			target = target.parent
		}
		if target == nil {
			d.r.malformed("outer alias beyond the outermost component")
			return
		}
		switch {
		case st.s == sortType, st.s == sortComponent, st.s == sortCore && (st.core == coreSortModule || st.core == coreSortType):
			v = d.item(target, st, outerIdx)
		default:
			d.r.fail(ReasonUnsupported, "", "outer alias of this sort")
			return
		}
	}
	d.add(s, v)
}

func (d *decoder) canon(s *scope) {
	switch form := d.r.byte(); form {
	case 0x00: // lift
		if d.r.byte() != 0x00 {
			d.r.malformed("canon lift")
			return
		}
		f := d.r.u32()
		o := d.canonOpts(s)
		d.r.u32() // its type: checked at the core level
		if !d.index(f, len(s.coreFuncs), "core function") {
			return
		}
		core := s.coreFuncs[f]
		if core.host {
			d.r.fail(ReasonUnsupported, "", "a lift of a lowered host function")
			return
		}
		s.funcs = append(s.funcs, &compFunc{lift: &lift{core: core, postReturn: o.postReturn, realloc: o.realloc, encoding: o.encoding}})
	case 0x01: // lower
		if d.r.byte() != 0x00 {
			d.r.malformed("canon lower")
			return
		}
		f := d.r.u32()
		o := d.canonOpts(s)
		if !d.index(f, len(s.funcs), "function") {
			return
		}
		fn := s.funcs[f]
		if fn.lift != nil {
			d.r.fail(ReasonUnsupported, "", "a lower of a lifted function (one part of a component calling another)")
			return
		}
		s.coreFuncs = append(s.coreFuncs, d.hostImport(fn.instance, fn.name, o.realloc, o.encoding))
	case 0x03: // resource.drop
		t := d.r.u32()
		if !d.index(t, len(s.types), "type") {
			return
		}
		tv := s.types[t]
		if tv.instance == "" {
			d.r.fail(ReasonUnsupported, "", "resource.drop of a resource type the component defines (guest-defined resources are not supported)")
			return
		}
		s.coreFuncs = append(s.coreFuncs, d.hostImport(tv.instance, "[resource-drop]"+tv.name, -1, ""))
	case 0x02, 0x04:
		d.r.fail(ReasonUnsupported, "", "resource.new and resource.rep (guest-defined resources are not supported)")
	default:
		d.r.fail(ReasonUnsupported, "", "canonical built-in %#x (async and thread built-ins of WASI 0.3 are not supported)", form)
	}
}

// hostImport is the host import for fn of instance, recorded once.
func (d *decoder) hostImport(instance, fn string, realloc int, encoding string) coreItem {
	mod, err := HostModule(instance)
	if err != nil {
		if d.r.err == nil {
			d.r.err = err
		}
		return coreItem{}
	}
	name := HostName(fn, realloc, encoding)
	if key := mod + "\x00" + name; !d.lowers[key] {
		d.lowers[key] = true
		if encoding == "" {
			encoding = "utf8"
		}
		d.res.Lowers = append(d.res.Lowers, Lower{Module: mod, Name: name, Instance: instance, Func: fn, Realloc: realloc, Encoding: encoding})
	}
	return coreItem{host: true, hostModule: mod, hostName: name}
}

type canonOpts struct {
	realloc    int
	encoding   string
	postReturn *coreItem
}

func (d *decoder) canonOpts(s *scope) canonOpts {
	o := canonOpts{realloc: -1, encoding: "utf8"}
	for n := d.r.count(); n > 0 && d.r.err == nil; n-- {
		switch opt := d.r.byte(); opt {
		case 0x00:
			o.encoding = "utf8"
		case 0x01:
			o.encoding = "utf16"
		case 0x02:
			o.encoding = "latin1+utf16"
		case 0x03:
			m := d.r.u32()
			if d.index(m, len(s.coreMems), "core memory") {
				mem := s.coreMems[m]
				if mem.host {
					d.r.fail(ReasonUnsupported, "", "a memory bound to a host item")
				} else if d.memory == nil {
					d.memory = &mem
				} else if *d.memory != mem {
					d.r.fail(ReasonUnsupported, "", "canonical options name two memories (the node merges components with one memory)")
				}
			}
		case 0x04:
			f := d.r.u32()
			if d.index(f, len(s.coreFuncs), "core function") {
				o.realloc = d.realloc(s.coreFuncs[f])
			}
		case 0x05:
			f := d.r.u32()
			if d.index(f, len(s.coreFuncs), "core function") {
				it := s.coreFuncs[f]
				o.postReturn = &it
			}
		default:
			d.r.fail(ReasonUnsupported, "", "canonical option %#x (async and callbacks of WASI 0.3 are not supported)", opt)
		}
	}
	return o
}

// realloc numbers the realloc function it.
func (d *decoder) realloc(it coreItem) int {
	if it.host {
		d.r.fail(ReasonUnsupported, "", "a realloc bound to a host function")
		return -1
	}
	if k, ok := d.reallocs[it]; ok {
		return k
	}
	if len(d.reallocs) >= MaxReallocs {
		d.r.fail(ReasonUnsupported, "", "more than %d distinct realloc functions", MaxReallocs)
		return -1
	}
	k := len(d.reallocs)
	d.reallocs[it] = k
	d.res.Merge.Exports = append(d.res.Merge.Exports, coremerge.Export{Name: ReallocExport(k), Module: it.mod, Item: it.name})
	return k
}

func (d *decoder) importDef(s *scope) {
	name := d.r.externName()
	st := d.types().externDesc()
	if d.r.err != nil {
		return
	}
	if s.parent == nil && s.args == nil {
		if st != sortInstance {
			d.r.fail(ReasonUnsupported, "", "the import %q is not an instance (the node provides WASI interfaces)", name)
			return
		}
		d.res.Imports = append(d.res.Imports, name)
		s.insts = append(s.insts, &compInst{imported: name})
		return
	}
	v, ok := s.args[name]
	if !ok {
		d.r.malformed("the nested component's import %q is not supplied", name)
		return
	}
	if v.sort != st {
		d.r.malformed("the nested component's import %q is supplied with another sort", name)
		return
	}
	d.add(s, v)
}

func (d *decoder) exportDef(s *scope) {
	name := d.r.externName()
	v := d.sortIdx(s)
	switch d.r.byte() {
	case 0x00:
	case 0x01:
		d.types().externDesc()
	default:
		d.r.malformed("export type ascription")
	}
	if d.r.err != nil {
		return
	}
	if s.exports == nil {
		s.exports = map[string]value{}
	}
	s.exports[name] = v
	d.add(s, v)
}

// finish records the root's exports as lifts and the memory export.
func (d *decoder) finish(root *scope) error {
	d.r = &reader{}
	for name, v := range root.exports {
		switch {
		case v.sort == sortInstance && v.inst != nil:
			for fname, e := range v.inst.exports {
				if e.sort == sortFunc && e.fn != nil && e.fn.lift != nil {
					d.addLift(name, fname, e.fn.lift)
				}
			}
		case v.sort == sortFunc && v.fn != nil && v.fn.lift != nil:
			d.addLift("", name, v.fn.lift)
		}
	}
	if d.memory != nil {
		d.res.Merge.Exports = append(d.res.Merge.Exports, coremerge.Export{Name: "memory", Module: d.memory.mod, Item: d.memory.name})
	}
	return d.r.err
}

func (d *decoder) addLift(iface, fn string, l *lift) {
	target := fn
	if iface != "" {
		mod, err := HostModule(iface)
		if err != nil {
			mod = iface
		}
		target = mod + "#" + fn
	}
	lf := Lift{Interface: iface, Func: fn, Export: "latent:export/" + target, Realloc: l.realloc, Encoding: l.encoding}
	d.res.Merge.Exports = append(d.res.Merge.Exports, coremerge.Export{Name: lf.Export, Module: l.core.mod, Item: l.core.name})
	if l.postReturn != nil {
		lf.PostReturn = "latent:post-return/" + target
		d.res.Merge.Exports = append(d.res.Merge.Exports, coremerge.Export{Name: lf.PostReturn, Module: l.postReturn.mod, Item: l.postReturn.name})
	}
	d.res.Lifts = append(d.res.Lifts, lf)
}

// coreImport is an import of a core module.
type coreImport struct{ module, name string }

// coreImports reads the imports of core module b.
func coreImports(b []byte) ([]coreImport, error) {
	r := &reader{b: b}
	if string(r.bytes(8)) != "\x00asm\x01\x00\x00\x00" {
		return nil, newError(ReasonMalformed, "", "not a core module")
	}
	for !r.done() {
		id := r.byte()
		size := r.u32()
		body := r.bytes(int(min(size, 1<<31-1)))
		if r.err != nil {
			return nil, r.err
		}
		if id != 2 {
			if id != 0 && id != 1 {
				return nil, nil // the import section comes before any other
			}
			continue
		}
		sec := &reader{b: body}
		d := &decoder{r: sec, lim: Limits{MaxTypeNodes: 1 << 30, MaxDepth: 1}}
		var out []coreImport
		for n := sec.count(); n > 0 && sec.err == nil; n-- {
			imp := coreImport{module: sec.name(), name: sec.name()}
			d.types().coreImportDesc()
			out = append(out, imp)
		}
		if sec.err != nil {
			return nil, sec.err
		}
		return out, nil
	}
	return nil, r.err
}

package component

// The type forms of the binary format: read and bounded, not interpreted.
// The node checks a component's functions at the core level (the merged
// module's imports against the host's signatures) and validates every
// value the guest passes, so the component's own descriptions of its
// types are only walked, counted and checked for shape.

// Sorts (sortidx and alias).
const (
	sortCore      = 0x00
	sortFunc      = 0x01
	sortValue     = 0x02
	sortType      = 0x03
	sortComponent = 0x04
	sortInstance  = 0x05

	coreSortFunc     = 0x00
	coreSortTable    = 0x01
	coreSortMemory   = 0x02
	coreSortGlobal   = 0x03
	coreSortType     = 0x10
	coreSortModule   = 0x11
	coreSortInstance = 0x12
)

// sort is a decoded sort: the component sort, and for sortCore the core
// sort.
type sort struct{ s, core byte }

func (d *typeDecoder) sort() sort {
	s := sort{s: d.r.byte()}
	if s.s == sortCore {
		s.core = d.r.byte()
		switch s.core {
		case coreSortFunc, coreSortTable, coreSortMemory, coreSortGlobal, coreSortType, coreSortModule, coreSortInstance:
		default:
			d.r.malformed("core sort %#x", s.core)
		}
		return s
	}
	if s.s > sortInstance {
		d.r.malformed("sort %#x", s.s)
	}
	return s
}

// node counts one node of a type definition against MaxTypeNodes.
func (d *typeDecoder) node() {
	d.typeNodes++
	if d.typeNodes > d.lim.MaxTypeNodes {
		d.r.fail(ReasonLimit, "max_type_nodes", "the component's type definitions have more than %d nodes", d.lim.MaxTypeNodes)
	}
}

func (d *typeDecoder) enter(depth int) bool {
	if depth > d.lim.MaxDepth {
		d.r.fail(ReasonLimit, "max_depth", "the component nests deeper than %d levels", d.lim.MaxDepth)
		return false
	}
	return d.r.err == nil
}

// valType reads a valtype: a primitive (one byte, 0x64 to 0x7f) or a type
// index.
func (d *typeDecoder) valType() {
	d.node()
	if c := d.r.peek(); c >= 0x40 && c < 0x80 {
		if c < 0x64 {
			d.r.malformed("value type %#x", c)
		}
		d.r.byte()
		return
	}
	d.r.u32()
}

func (d *typeDecoder) optValType() {
	switch d.r.byte() {
	case 0x00:
	case 0x01:
		d.valType()
	default:
		d.r.malformed("optional value type")
	}
}

// defType reads a deftype and reports whether it is a resource type.
func (d *typeDecoder) defType(depth int) (resource bool) {
	if !d.enter(depth) {
		return false
	}
	d.node()
	switch c := d.r.byte(); c {
	case 0x40: // functype
		d.funcType()
	case 0x43:
		d.r.fail(ReasonUnsupported, "", "async function types (WASI 0.3) are not supported")
	case 0x41: // componenttype
		for n := d.r.count(); n > 0 && d.r.err == nil; n-- {
			if d.r.peek() == 0x03 {
				d.r.byte()
				d.r.externName()
				d.externDesc()
				continue
			}
			d.instanceDecl(depth + 1)
		}
	case 0x42: // instancetype
		for n := d.r.count(); n > 0 && d.r.err == nil; n-- {
			d.instanceDecl(depth + 1)
		}
	case 0x3f: // resource (rep i32) with an optional destructor
		if d.r.byte() != 0x7f {
			d.r.malformed("resource representation")
		}
		if d.r.byte() == 0x01 {
			d.r.u32()
		}
		return true
	case 0x3e:
		d.r.fail(ReasonUnsupported, "", "async resource types are not supported")
	default:
		d.r.pos--
		d.defValType(depth)
	}
	return false
}

func (d *typeDecoder) funcType() {
	for n := d.r.count(); n > 0 && d.r.err == nil; n-- {
		d.r.name()
		d.valType()
	}
	switch d.r.byte() {
	case 0x00:
		d.valType()
	case 0x01:
		if d.r.byte() != 0x00 {
			d.r.fail(ReasonUnsupported, "", "named function results are not supported")
		}
	default:
		d.r.malformed("function result list")
	}
}

func (d *typeDecoder) defValType(depth int) {
	c := d.r.byte()
	switch {
	case c >= 0x73 && c <= 0x7f, c == 0x64: // primitives, error-context
	case c == 0x72: // record
		for n := d.r.count(); n > 0 && d.r.err == nil; n-- {
			d.r.name()
			d.valType()
		}
	case c == 0x71: // variant
		for n := d.r.count(); n > 0 && d.r.err == nil; n-- {
			d.r.name()
			d.optValType()
			if d.r.byte() != 0x00 {
				d.r.fail(ReasonUnsupported, "", "variant case refinements are not supported")
			}
		}
	case c == 0x70, c == 0x6b: // list, option
		d.valType()
	case c == 0x67: // fixed-size list
		d.valType()
		d.r.u32()
	case c == 0x6f: // tuple
		for n := d.r.count(); n > 0 && d.r.err == nil; n-- {
			d.valType()
		}
	case c == 0x6e, c == 0x6d: // flags, enum
		for n := d.r.count(); n > 0 && d.r.err == nil; n-- {
			d.node()
			d.r.name()
		}
	case c == 0x6a: // result
		d.optValType()
		d.optValType()
	case c == 0x69, c == 0x68: // own, borrow
		d.r.u32()
	case c == 0x66, c == 0x65:
		d.r.fail(ReasonUnsupported, "", "stream and future types (WASI 0.3) are not supported")
	default:
		d.r.malformed("type form %#x", c)
	}
}

func (d *typeDecoder) instanceDecl(depth int) {
	if !d.enter(depth) {
		return
	}
	d.node()
	switch c := d.r.byte(); c {
	case 0x00:
		d.coreType(depth + 1)
	case 0x01:
		d.defType(depth + 1)
	case 0x02:
		d.sort()
		d.aliasTarget()
	case 0x04:
		d.r.externName()
		d.externDesc()
	default:
		d.r.malformed("instance declaration %#x", c)
	}
}

// aliasTarget reads an alias target: an instance (kind 0x00) or core
// instance (0x01) idx and its export name, or an outer alias (0x02) of
// index outer in the scope idx levels up.
func (d *typeDecoder) aliasTarget() (kind byte, idx uint32, name string, outer uint32) {
	kind = d.r.byte()
	switch kind {
	case 0x00, 0x01:
		idx = d.r.u32()
		name = d.r.name()
	case 0x02:
		idx = d.r.u32()
		outer = d.r.u32()
	default:
		d.r.malformed("alias target %#x", kind)
	}
	return kind, idx, name, outer
}

// externDesc reads an externdesc and returns its sort (sortCore for a
// core module).
func (d *typeDecoder) externDesc() byte {
	d.node()
	switch c := d.r.byte(); c {
	case 0x00:
		if d.r.byte() != coreSortModule {
			d.r.malformed("core extern description")
		}
		d.r.u32()
		return sortCore
	case 0x01, 0x04, 0x05:
		d.r.u32()
		return c
	case 0x02:
		switch d.r.byte() {
		case 0x00:
			d.r.u32()
		case 0x01:
			d.valType()
		default:
			d.r.malformed("value bound")
		}
		return sortValue
	case 0x03:
		switch d.r.byte() {
		case 0x00:
			d.r.u32()
		case 0x01:
		default:
			d.r.malformed("type bound")
		}
		return sortType
	default:
		d.r.malformed("extern description %#x", c)
		return 0
	}
}

// coreType reads a core:type: a function type or a module type.
func (d *typeDecoder) coreType(depth int) {
	if !d.enter(depth) {
		return
	}
	d.node()
	switch c := d.r.byte(); c {
	case 0x60:
		for range 2 {
			for n := d.r.count(); n > 0 && d.r.err == nil; n-- {
				d.coreValType()
			}
		}
	case 0x50:
		for n := d.r.count(); n > 0 && d.r.err == nil; n-- {
			d.node()
			switch k := d.r.byte(); k {
			case 0x00:
				d.r.name()
				d.r.name()
				d.coreImportDesc()
			case 0x01:
				d.coreType(depth + 1)
			case 0x02:
				d.sort()
				if d.r.byte() != 0x01 {
					d.r.malformed("module type alias")
				}
				d.r.u32()
				d.r.u32()
			case 0x03:
				d.r.name()
				d.coreImportDesc()
			default:
				d.r.malformed("module declaration %#x", k)
			}
		}
	default:
		d.r.fail(ReasonUnsupported, "", "core type form %#x (only function and module types are supported)", c)
	}
}

func (d *typeDecoder) coreValType() {
	switch c := d.r.byte(); c {
	case 0x7f, 0x7e, 0x7d, 0x7c, 0x7b, 0x70, 0x6f:
	default:
		d.r.fail(ReasonUnsupported, "", "core value type %#x", c)
	}
}

func (d *typeDecoder) coreImportDesc() {
	switch c := d.r.byte(); c {
	case 0x00:
		d.r.u32()
	case 0x01:
		d.coreValType()
		d.limits()
	case 0x02:
		d.limits()
	case 0x03:
		d.coreValType()
		d.r.byte()
	default:
		d.r.fail(ReasonUnsupported, "", "core import kind %#x", c)
	}
}

func (d *typeDecoder) limits() {
	switch f := d.r.byte(); f {
	case 0x00:
		d.r.u32()
	case 0x01:
		d.r.u32()
		d.r.u32()
	default:
		d.r.fail(ReasonUnsupported, "", "limits form %#x (shared or 64-bit)", f)
	}
}

// typeDecoder is the decoder reading types and the other forms of the
// binary it does not interpret.
type typeDecoder decoder

func (d *decoder) types() *typeDecoder { return (*typeDecoder)(d) }

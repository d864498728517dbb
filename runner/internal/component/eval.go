package component

// The evaluator: a component's sections in order, each adding to its
// scope's index spaces, as instantiating it would; core module
// instantiations become the merge plan, canon lowers its host imports.

import (
	"github.com/latent-node/latent-node/runner/internal/coremerge"
)

// coreItem is a core function, table, memory or global: an export of a
// planned module instance, or a host import.
type coreItem struct {
	host       bool
	hostModule string
	hostName   string
	mod        int
	name       string
}

func (c coreItem) ref() coremerge.Ref {
	if c.host {
		return coremerge.Ref{Host: true, HostModule: c.hostModule, HostName: c.hostName}
	}
	return coremerge.Ref{Module: c.mod, Name: c.name}
}

// coreInst is a core instance: of a planned module (mod ≥ 0), or an inline
// bundle of exports.
type coreInst struct {
	mod     int
	exports map[string]coreItem
}

func (c *coreInst) export(name string) (coreItem, bool) {
	if c.mod >= 0 {
		return coreItem{mod: c.mod, name: name}, true
	}
	it, ok := c.exports[name]
	return it, ok
}

// coreModule is a core module of a scope, instantiated at most once.
type coreModule struct {
	bytes        []byte
	instantiated bool
}

// compFunc is a component function: a function of an imported instance,
// or a lifted core function.
type compFunc struct {
	instance, name string // imported
	lift           *lift
}

type lift struct {
	core       coreItem
	postReturn *coreItem
	realloc    int
	encoding   string
}

// typeVal is a component type; a resource exported by an imported
// instance has its instance and name.
type typeVal struct {
	instance, name string
	guest          bool // a resource type the component defines itself
}

// compInst is a component instance: imported, or a bundle of exports (an
// inline instance or a nested component's instantiation).
type compInst struct {
	imported string
	exports  map[string]value
}

// compDef is a nested component: its sections and its defining scope.
type compDef struct {
	body   []byte
	parent *scope
}

// value is an item of any component sort.
type value struct {
	sort  byte
	core  byte // for sortCore: the core sort
	fn    *compFunc
	inst  *compInst
	typ   typeVal
	comp  *compDef
	cmod  *coreModule
	cinst *coreInst
	citem coreItem
}

// scope holds one component's index spaces while it is evaluated.
type scope struct {
	parent      *scope
	args        map[string]value // a nested component's instantiation arguments
	coreFuncs   []coreItem
	coreTables  []coreItem
	coreMems    []coreItem
	coreGlobals []coreItem
	coreTypes   int
	coreModules []*coreModule
	coreInsts   []*coreInst
	funcs       []*compFunc
	types       []typeVal
	insts       []*compInst
	comps       []*compDef
	exports     map[string]value
}

// decoder decodes and evaluates a component; its counters span every
// scope.
type decoder struct {
	r   *reader
	lim Limits
	res Result

	typeNodes, nTypes, coreModules, nInstances, imports, exports, aliases, canons int

	lowers   map[string]bool
	reallocs map[coreItem]int
	memory   *coreItem
}

func newEvaluator(lim Limits) *decoder {
	return &decoder{lim: lim, lowers: map[string]bool{}, reallocs: map[coreItem]int{}}
}

// bump adds n to counter *c and fails past max.
func (d *decoder) bump(c *int, n, max int, key, what string) bool {
	*c += n
	if *c > max {
		d.r.fail(ReasonLimit, key, "the component has more than %d %s", max, what)
		return false
	}
	return true
}

// eval evaluates the sections body (after the preamble) in s.
func (d *decoder) eval(body []byte, s *scope, depth int) error {
	saved := d.r
	defer func() { d.r = saved }()
	top := &reader{b: body}
	d.r = top
	if !d.types().enter(depth) {
		return top.err
	}
	for !top.done() {
		id := top.byte()
		size := top.u32()
		content := top.bytes(int(min(size, 1<<31-1)))
		if top.err != nil {
			return top.err
		}
		sec := &reader{b: content}
		d.r = sec
		d.section(id, s, depth)
		if sec.err == nil && !sec.done() {
			sec.malformed("section %d has %d bytes left", id, sec.left())
		}
		if sec.err != nil {
			return sec.err
		}
		d.r = top
	}
	return top.err
}

func (d *decoder) section(id byte, s *scope, depth int) {
	switch id {
	case 0: // custom
		d.r.pos = len(d.r.b)
	case 1: // core module
		if d.bump(&d.coreModules, 1, d.lim.MaxCoreModules, "max_core_modules", "core modules") {
			s.coreModules = append(s.coreModules, &coreModule{bytes: d.r.bytes(d.r.left())})
		}
	case 2:
		d.coreInstances(s)
	case 3:
		n := d.r.count()
		if d.bump(&d.nTypes, n, d.lim.MaxTypes, "max_types", "type definitions") {
			for ; n > 0 && d.r.err == nil; n-- {
				d.types().coreType(depth + 1)
				s.coreTypes++
			}
		}
	case 4: // nested component
		body := d.r.bytes(d.r.left())
		if !IsComponent(body) {
			d.r.malformed("nested component without a component preamble")
			return
		}
		s.comps = append(s.comps, &compDef{body: body[8:], parent: s})
	case 5:
		d.instances(s, depth)
	case 6:
		n := d.r.count()
		if d.bump(&d.aliases, n, d.lim.MaxAliases, "max_aliases", "aliases") {
			for ; n > 0 && d.r.err == nil; n-- {
				d.alias(s)
			}
		}
	case 7:
		n := d.r.count()
		if d.bump(&d.nTypes, n, d.lim.MaxTypes, "max_types", "type definitions") {
			for ; n > 0 && d.r.err == nil; n-- {
				s.types = append(s.types, typeVal{guest: d.types().defType(depth + 1)})
			}
		}
	case 8:
		n := d.r.count()
		if d.bump(&d.canons, n, d.lim.MaxCanons, "max_canons", "canonical definitions") {
			for ; n > 0 && d.r.err == nil; n-- {
				d.canon(s)
			}
		}
	case 9:
		d.r.fail(ReasonUnsupported, "", "a component start function is not supported")
	case 10:
		n := d.r.count()
		if d.bump(&d.imports, n, d.lim.MaxImports, "max_imports", "imports") {
			for ; n > 0 && d.r.err == nil; n-- {
				d.importDef(s)
			}
		}
	case 11:
		n := d.r.count()
		if d.bump(&d.exports, n, d.lim.MaxExports, "max_exports", "exports") {
			for ; n > 0 && d.r.err == nil; n-- {
				d.exportDef(s)
			}
		}
	case 12:
		d.r.fail(ReasonUnsupported, "", "component values are not supported")
	default:
		d.r.malformed("unknown section %d", id)
	}
}

// index checks idx against a space of n entries.
func (d *decoder) index(idx uint32, n int, what string) bool {
	if d.r.err != nil {
		return false
	}
	if int64(idx) >= int64(n) {
		d.r.malformed("%s index %d out of range (%d defined)", what, idx, n)
		return false
	}
	return true
}

package fuel

import (
	"math"
	"strconv"

	"github.com/cockroachdb/errors"
)

// Section ids of the binary format.
const (
	secCustom    = 0
	secType      = 1
	secImport    = 2
	secFunction  = 3
	secTable     = 4
	secMemory    = 5
	secGlobal    = 6
	secExport    = 7
	secStart     = 8
	secElement   = 9
	secCode      = 10
	secData      = 11
	secDataCount = 12
	secTag       = 13
)

// sectionOrder gives each known non-custom section its required position.
var sectionOrder = map[byte]int{
	secType: 1, secImport: 2, secFunction: 3, secTable: 4, secMemory: 5, secTag: 6,
	secGlobal: 7, secExport: 8, secStart: 9, secElement: 10, secDataCount: 11,
	secCode: 12, secData: 13,
}

var sectionNames = map[byte]string{
	secCustom: "custom", secType: "type", secImport: "import", secFunction: "function",
	secTable: "table", secMemory: "memory", secGlobal: "global", secExport: "export",
	secStart: "start", secElement: "element", secCode: "code", secData: "data",
	secDataCount: "data count", secTag: "tag",
}

// Value types (MVP, SIMD and reference types).
const (
	valI32       = 0x7f
	valI64       = 0x7e
	valF32       = 0x7d
	valF64       = 0x7c
	valV128      = 0x7b
	valFuncref   = 0x70
	valExternref = 0x6f
)

// blockEmpty is the block type of a block without parameters or results.
const blockEmpty = 0x40

// funcType is a function signature: value types of the parameters and
// results.
type funcType struct {
	params, results []byte
}

func (t funcType) equal(o funcType) bool {
	return string(t.params) == string(o.params) && string(t.results) == string(o.results)
}

// limits is a table or memory size range.
type limits struct {
	min, max uint32
	hasMax   bool
	shared   bool
}

// global is a defined global: its type and its raw initializer expression
// (including the final end).
type global struct {
	typ     byte
	mutable bool
	init    []byte
}

// export is one entry of the export section.
type export struct {
	name  string
	kind  ExternKind
	index uint32
}

// elemSegment is an element segment in any of the eight encodings. flags
// selects the encoding exactly as in the binary format, so encoding a decoded
// segment reproduces its bytes:
//
//	bit 0: passive (0 with bit 1 clear: active) or declarative (with bit 1)
//	bit 1: explicit table index (active) / declarative (passive)
//	bit 2: elements are expressions rather than function indices
type elemSegment struct {
	flags  byte
	table  uint32   // flags 2 and 6
	offset []byte   // active segments (flags 0, 2, 4, 6): constant expression
	kind   byte     // elemkind (flags 1-3, always 0x00) or reftype (flags 5-7)
	funcs  []uint32 // flags 0-3
	exprs  [][]byte // flags 4-7: constant expressions
}

func (e *elemSegment) active() bool   { return e.flags&1 == 0 }
func (e *elemSegment) usesExpr() bool { return e.flags&4 != 0 }

// funcBody is one entry of the code section.
type funcBody struct {
	locals    []localGroup
	numLocals uint64 // declared locals, not counting parameters
	code      []byte // instructions, including the final end
	offset    int    // module offset of code[0]
}

type localGroup struct {
	n   uint32
	typ byte
}

// module is the decoded form of a module: parsed where the instrumenter needs
// to read or renumber, raw bytes elsewhere.
type module struct {
	types   []funcType
	imports []importEntry

	numImportedFuncs, numImportedTables, numImportedGlobals, numImportedMems uint32

	importTypes []uint32 // type index of each imported function
	funcs       []uint32 // type index of each defined function
	tables      []tableEntry
	memory      *limits // the one memory, imported or defined (nil: none)
	memDefined  bool
	globals     []global
	exports     []export
	start       *uint32
	elems       []elemSegment
	dataCount   *uint32
	numData     uint32
	code        []funcBody

	tableRaw, memoryRaw, dataRaw, dataCountRaw []byte // section contents kept verbatim

	names    *nameSection
	features Features
	size     int // of the binary

	lim         *Limits // the deploy limits, with defaults filled in
	totalLocals uint64
	typeParams  uint64 // parameters and results, summed over the types
	codeBytes   uint64
	dataBytes   uint64 // data segment payloads
	elemCount   uint64 // element segment entries
	maxFrame    uint64 // largest FrameCost of a defined function (set by instrument)
	loopWork    uint64 // see Limits.LoopLocalWork (set by instrument)
}

type importEntry struct {
	module, name string
	kind         ExternKind
	typeIdx      uint32 // functions
	raw          []byte // the whole entry
}

type tableEntry struct {
	elem byte
	lim  limits
}

// funcType returns the type index of function f (f is in range).
func (m *module) funcType(f uint32) uint32 {
	if f < m.numImportedFuncs {
		return m.importTypes[f]
	}
	return m.funcs[f-m.numImportedFuncs]
}

func (m *module) numFuncs() uint32   { return m.numImportedFuncs + uint32(len(m.funcs)) }
func (m *module) numTables() uint32  { return uint32(len(m.tables)) }
func (m *module) numGlobals() uint32 { return m.numImportedGlobals + uint32(len(m.globals)) }
func (m *module) numElems() uint32   { return uint32(len(m.elems)) }

var wasmMagic = []byte{0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00}

// decodeModule parses b. It refuses (ErrUnsupported) every construct the
// instrumenter does not handle and range-checks every index it reads, so that
// an index that is out of range in the original cannot alias one the
// instrumenter adds. Function bodies are checked by instrumentFunc.
//
// Every deploy limit but the nesting depth (checked by analyze) is checked
// here, each before anything is allocated for the counted items.
func decodeModule(b []byte, lim *Limits) (*module, error) {
	if len(b) < 8 || string(b[:4]) != string(wasmMagic[:4]) {
		return nil, errors.Wrap(ErrInvalid, "not a WebAssembly binary (bad magic)")
	}
	if string(b[4:8]) != string(wasmMagic[4:8]) {
		return nil, errors.Wrapf(ErrUnsupported, "binary format version %x", b[4:8])
	}
	if uint64(len(b)) > lim.ModuleBytes {
		return nil, limitError("module_bytes", lim.ModuleBytes, uint64(len(b)), "module is "+itoa(uint64(len(b)))+" bytes")
	}
	m := &module{size: len(b), lim: lim}
	r := &reader{b: b, pos: 8}
	last := 0
	var numFuncDecls uint32
	sawFunc := false
	for !r.eof() {
		id, err := r.byte()
		if err != nil {
			return nil, err
		}
		size, err := r.u32()
		if err != nil {
			return nil, err
		}
		start := r.offset()
		body, err := r.bytes(int(size))
		if err != nil {
			return nil, errors.Wrapf(err, "section %d", id)
		}
		sr := &reader{b: body, base: start}
		if id == secCustom {
			if err := m.decodeCustom(sr); err != nil {
				return nil, err
			}
			continue
		}
		order, known := sectionOrder[id]
		if !known {
			return nil, errors.Wrapf(ErrInvalid, "offset %#x: unknown section id %d", start, id)
		}
		if id == secTag {
			return nil, errors.Wrapf(ErrUnsupported, "offset %#x: tag section (exception handling)", start)
		}
		if order <= last {
			return nil, errors.Wrapf(ErrInvalid, "offset %#x: %s section out of order or repeated", start, sectionNames[id])
		}
		last = order
		switch id {
		case secType:
			err = m.decodeTypes(sr)
		case secImport:
			err = m.decodeImports(sr)
		case secFunction:
			sawFunc = true
			err = m.decodeFunctions(sr)
			numFuncDecls = uint32(len(m.funcs))
		case secTable:
			m.tableRaw = body
			err = m.decodeTables(sr)
		case secMemory:
			m.memoryRaw = body
			err = m.decodeMemories(sr)
		case secGlobal:
			err = m.decodeGlobals(sr)
		case secExport:
			err = m.decodeExports(sr)
		case secStart:
			err = m.decodeStart(sr)
		case secElement:
			err = m.decodeElems(sr)
		case secDataCount:
			m.dataCountRaw = body
			var n uint32
			n, err = sr.u32()
			m.dataCount = &n
			m.features |= FeatureBulkMemory
		case secCode:
			err = m.decodeCode(sr)
		case secData:
			m.dataRaw = body
			err = m.decodeData(sr)
		}
		if err != nil {
			return nil, errors.Wrapf(err, "%s section", sectionNames[id])
		}
		if !sr.eof() {
			return nil, errors.Wrapf(ErrInvalid, "offset %#x: %s section has %d trailing bytes", sr.offset(), sectionNames[id], len(body)-sr.pos)
		}
	}
	if sawFunc && numFuncDecls != uint32(len(m.code)) || !sawFunc && len(m.code) != 0 {
		return nil, errors.Wrapf(ErrInvalid, "function and code section counts differ (%d, %d)", numFuncDecls, len(m.code))
	}
	if m.dataCount != nil && *m.dataCount != m.numData {
		return nil, errors.Wrapf(ErrInvalid, "data count %d but %d data segments", *m.dataCount, m.numData)
	}
	if err := m.checkExports(); err != nil {
		return nil, err
	}
	return m, nil
}

// Implementation limits: the JavaScript API's (and so V8's and browsers'),
// which wasmtime shares for locals. A module beyond them is refused
// (ErrUnsupported) before wazero decodes it, because wazero allocates per
// declared item, up to 2^32 of them.
const (
	maxTypes        = 1_000_000
	maxParams       = 1000
	maxImports      = 100_000
	maxFuncs        = 1_000_000
	maxTables       = 100_000
	maxGlobals      = 1_000_000
	maxExports      = 100_000
	maxElemSegments = 10_000_000
	maxElems        = 10_000_000
	maxDataSegments = 100_000
	maxLocals       = 50_000
	maxBrTable      = 65_520
)

// limited reads a vector length like count, refusing it with a
// *LimitError when base + n exceeds limit (checked before the
// implementation limit max, so a big count names the deploy limit).
func (r *reader) limited(what string, max uint32, key string, limit, base uint64) (uint32, error) {
	n, err := r.count(what, math.MaxUint32)
	if err != nil {
		return 0, err
	}
	if base+uint64(n) > limit {
		return 0, limitError(key, limit, base+uint64(n), "module declares "+itoa(base+uint64(n))+" "+what)
	}
	if n > max {
		return 0, errors.Wrapf(ErrUnsupported, "offset %#x: %d %s (at most %d)", r.offset(), n, what, max)
	}
	return n, nil
}

func itoa(v uint64) string { return strconv.FormatUint(v, 10) }

// count reads a vector length, refusing lengths that cannot fit in the rest
// of the input (every element takes at least one byte) and, as unsupported,
// lengths above max.
func (r *reader) count(what string, max uint32) (uint32, error) {
	at := r.offset()
	n, err := r.u32()
	if err != nil {
		return 0, err
	}
	if int64(n) > int64(len(r.b)-r.pos) {
		return 0, r.errorf("%d %s exceed the section", n, what)
	}
	if n > max {
		return 0, errors.Wrapf(ErrUnsupported, "offset %#x: %d %s (at most %d)", at, n, what, max)
	}
	return n, nil
}

func (r *reader) valType() (byte, error) {
	at := r.offset()
	t, err := r.byte()
	if err != nil {
		return 0, err
	}
	switch t {
	case valI32, valI64, valF32, valF64, valV128, valFuncref, valExternref:
		return t, nil
	}
	return 0, errors.Wrapf(ErrUnsupported, "offset %#x: value type %#x", at, t)
}

func (r *reader) refType() (byte, error) {
	at := r.offset()
	t, err := r.byte()
	if err != nil {
		return 0, err
	}
	if t != valFuncref && t != valExternref {
		return 0, errors.Wrapf(ErrUnsupported, "offset %#x: reference type %#x", at, t)
	}
	return t, nil
}

func (m *module) noteValType(t byte) {
	switch t {
	case valV128:
		m.features |= FeatureSIMD
	case valExternref:
		m.features |= FeatureReferenceTypes
	}
}

func (m *module) decodeTypes(r *reader) error {
	n, err := r.limited("types", maxTypes, "types", m.lim.Types, 0)
	if err != nil {
		return err
	}
	m.types = make([]funcType, 0, n)
	for range n {
		at := r.offset()
		form, err := r.byte()
		if err != nil {
			return err
		}
		if form != 0x60 {
			return errors.Wrapf(ErrUnsupported, "offset %#x: type form %#x (only function types are supported)", at, form)
		}
		var ft funcType
		for _, dst := range []*[]byte{&ft.params, &ft.results} {
			at := r.offset()
			k, err := r.count("parameters or results", math.MaxUint32)
			if err != nil {
				return err
			}
			if m.typeParams+uint64(k) > m.lim.TypeParams {
				sum := m.typeParams + uint64(k)
				return limitError("type_params", m.lim.TypeParams, sum,
					"types declare at least "+itoa(sum)+" parameters and results")
			}
			if k > maxParams {
				return errors.Wrapf(ErrUnsupported, "offset %#x: %d parameters or results (at most %d)", at, k, maxParams)
			}
			m.typeParams += uint64(k)
			*dst = make([]byte, k)
			for j := range k {
				if (*dst)[j], err = r.valType(); err != nil {
					return err
				}
				m.noteValType((*dst)[j])
			}
		}
		if len(ft.results) > 1 {
			m.features |= FeatureMultiValue
		}
		m.types = append(m.types, ft)
	}
	return nil
}

func (m *module) typeIndex(r *reader) (uint32, error) {
	at := r.offset()
	t, err := r.u32()
	if err != nil {
		return 0, err
	}
	if t >= uint32(len(m.types)) {
		return 0, errors.Wrapf(ErrInvalid, "offset %#x: type index %d out of range", at, t)
	}
	return t, nil
}

func (r *reader) limits(what string) (limits, error) {
	at := r.offset()
	flags, err := r.byte()
	if err != nil {
		return limits{}, err
	}
	var l limits
	switch flags {
	case 0x00, 0x01:
	case 0x03:
		l.shared = true
	case 0x02:
		return l, errors.Wrapf(ErrInvalid, "offset %#x: shared %s without maximum", at, what)
	default:
		if flags&0x04 != 0 {
			return l, errors.Wrapf(ErrUnsupported, "offset %#x: 64-bit %s (memory64/table64)", at, what)
		}
		return l, errors.Wrapf(ErrUnsupported, "offset %#x: %s limits flags %#x", at, what, flags)
	}
	if l.min, err = r.u32(); err != nil {
		return l, err
	}
	if flags&1 != 0 {
		l.hasMax = true
		if l.max, err = r.u32(); err != nil {
			return l, err
		}
	}
	return l, nil
}

func (m *module) addMemory(at int, l limits) error {
	if m.memory != nil {
		return errors.Wrapf(ErrUnsupported, "offset %#x: more than one memory (multi-memory)", at)
	}
	if l.shared {
		return errors.Wrapf(ErrUnsupported, "offset %#x: shared memory (threads)", at)
	}
	m.memory = &l
	return nil
}

func (m *module) decodeImports(r *reader) error {
	n, err := r.limited("imports", maxImports, "imports", m.lim.Imports, 0)
	if err != nil {
		return err
	}
	for range n {
		start := r.pos
		at := r.offset()
		var imp importEntry
		if imp.module, err = r.name(); err != nil {
			return err
		}
		if imp.name, err = r.name(); err != nil {
			return err
		}
		if imp.module == ImportModule {
			return errors.Wrapf(ErrReserved, "offset %#x: import %s.%s uses the reserved module %q", at, imp.module, imp.name, ImportModule)
		}
		kat := r.offset()
		kind, err := r.byte()
		if err != nil {
			return err
		}
		imp.kind = ExternKind(kind)
		switch imp.kind {
		case ExternFunc:
			if imp.typeIdx, err = m.typeIndex(r); err != nil {
				return err
			}
			m.importTypes = append(m.importTypes, imp.typeIdx)
			m.numImportedFuncs++
		case ExternTable:
			t, err := r.refType()
			if err != nil {
				return err
			}
			l, err := r.limits("table")
			if err != nil {
				return err
			}
			if err := m.addTable(kat, t, l, false); err != nil {
				return err
			}
			m.numImportedTables++
		case ExternMemory:
			l, err := r.limits("memory")
			if err != nil {
				return err
			}
			if err := m.addMemory(kat, l); err != nil {
				return err
			}
			m.numImportedMems++
		case ExternGlobal:
			t, err := r.valType()
			if err != nil {
				return err
			}
			m.noteValType(t)
			if _, err := r.mutability(); err != nil {
				return err
			}
			if uint64(m.numImportedGlobals)+1 > m.lim.Globals {
				return limitError("globals", m.lim.Globals, uint64(m.numImportedGlobals)+1, "module declares at least "+itoa(uint64(m.numImportedGlobals)+1)+" globals")
			}
			m.numImportedGlobals++
		default:
			if kind == 0x04 {
				return errors.Wrapf(ErrUnsupported, "offset %#x: tag import (exception handling)", kat)
			}
			return errors.Wrapf(ErrInvalid, "offset %#x: import kind %#x", kat, kind)
		}
		imp.raw = r.b[start:r.pos]
		m.imports = append(m.imports, imp)
	}
	return nil
}

func (r *reader) mutability() (bool, error) {
	at := r.offset()
	mut, err := r.byte()
	if err != nil {
		return false, err
	}
	if mut > 1 {
		return false, errors.Wrapf(ErrInvalid, "offset %#x: global mutability %#x", at, mut)
	}
	return mut == 1, nil
}

func (m *module) decodeFunctions(r *reader) error {
	n, err := r.limited("functions", maxFuncs-m.numImportedFuncs, "functions", m.lim.Functions, 0)
	if err != nil {
		return err
	}
	m.funcs = make([]uint32, n)
	for i := range m.funcs {
		if m.funcs[i], err = m.typeIndex(r); err != nil {
			return err
		}
	}
	return nil
}

func (m *module) decodeTables(r *reader) error {
	n, err := r.limited("tables", maxTables, "tables", m.lim.Tables, uint64(len(m.tables)))
	if err != nil {
		return err
	}
	for range n {
		at := r.offset()
		if len(r.b) > r.pos && r.b[r.pos] == 0x40 {
			return errors.Wrapf(ErrUnsupported, "offset %#x: table with initializer (function references)", at)
		}
		t, err := r.refType()
		if err != nil {
			return err
		}
		l, err := r.limits("table")
		if err != nil {
			return err
		}
		if l.shared {
			return errors.Wrapf(ErrUnsupported, "offset %#x: shared table", at)
		}
		if err := m.addTable(at, t, l, true); err != nil {
			return err
		}
	}
	if len(m.tables) > 1 {
		m.features |= FeatureReferenceTypes
	}
	for _, t := range m.tables {
		m.noteValType(t.elem)
	}
	return nil
}

// addTable appends a table, checking the table limits: its minimum must
// not exceed TableElements, and a defined table's maximum is clamped to
// TableElements (table.grow beyond the maximum returns -1, as the
// specification has it for any maximum). An imported table keeps its type:
// the table it is given decides how far it grows.
func (m *module) addTable(at int, elem byte, l limits, defined bool) error {
	if uint64(len(m.tables))+1 > m.lim.Tables {
		return limitError("tables", m.lim.Tables, uint64(len(m.tables))+1, "module declares at least "+itoa(uint64(len(m.tables))+1)+" tables")
	}
	if uint64(l.min) > m.lim.TableElements {
		return limitError("table_elements", m.lim.TableElements, uint64(l.min),
			"table "+itoa(uint64(len(m.tables)))+" has "+itoa(uint64(l.min))+" elements")
	}
	if defined && (!l.hasMax || uint64(l.max) > m.lim.TableElements) {
		l.hasMax, l.max = true, uint32(m.lim.TableElements)
		if l.max < l.min { // min ≤ limit < 2^32 after the check above
			l.max = l.min
		}
	}
	m.tables = append(m.tables, tableEntry{elem: elem, lim: l})
	return nil
}

func (m *module) decodeMemories(r *reader) error {
	n, err := r.count("memories", maxTables)
	if err != nil {
		return err
	}
	for range n {
		at := r.offset()
		l, err := r.limits("memory")
		if err != nil {
			return err
		}
		if err := m.addMemory(at, l); err != nil {
			return err
		}
		m.memDefined = true
	}
	return nil
}

func (m *module) decodeGlobals(r *reader) error {
	n, err := r.limited("globals", maxGlobals-m.numImportedGlobals, "globals", m.lim.Globals, uint64(m.numImportedGlobals))
	if err != nil {
		return err
	}
	m.globals = make([]global, 0, n)
	for range n {
		var g global
		if g.typ, err = r.valType(); err != nil {
			return err
		}
		m.noteValType(g.typ)
		if g.mutable, err = r.mutability(); err != nil {
			return err
		}
		// A global's initializer may read only imported globals.
		if g.init, err = m.constExpr(r, m.numImportedGlobals); err != nil {
			return err
		}
		m.globals = append(m.globals, g)
	}
	return nil
}

func (m *module) decodeExports(r *reader) error {
	n, err := r.limited("exports", maxExports, "exports", m.lim.Exports, 0)
	if err != nil {
		return err
	}
	m.exports = make([]export, 0, n)
	for range n {
		at := r.offset()
		var e export
		if e.name, err = r.name(); err != nil {
			return err
		}
		if reservedExports[e.name] {
			return errors.Wrapf(ErrReserved, "offset %#x: export %q uses a reserved name", at, e.name)
		}
		kind, err := r.byte()
		if err != nil {
			return err
		}
		e.kind = ExternKind(kind)
		iat := r.offset()
		if e.index, err = r.u32(); err != nil {
			return err
		}
		var limit uint32
		switch e.kind {
		case ExternFunc:
			limit = m.numFuncs()
		case ExternTable:
			limit = m.numTables()
		case ExternMemory:
			limit = 0
			if m.memory != nil {
				limit = 1
			}
		case ExternGlobal:
			limit = m.numGlobals()
		default:
			return errors.Wrapf(ErrInvalid, "offset %#x: export kind %#x", iat-1, kind)
		}
		if e.index >= limit {
			return errors.Wrapf(ErrInvalid, "offset %#x: export %q: %s index %d out of range", iat, e.name, e.kind, e.index)
		}
		m.exports = append(m.exports, e)
	}
	return nil
}

// checkExports refuses duplicate export names (the instrumenter adds one).
func (m *module) checkExports() error {
	seen := make(map[string]bool, len(m.exports))
	for _, e := range m.exports {
		if seen[e.name] {
			return errors.Wrapf(ErrInvalid, "duplicate export %q", e.name)
		}
		seen[e.name] = true
	}
	return nil
}

func (m *module) funcIndex(r *reader) (uint32, error) {
	at := r.offset()
	f, err := r.u32()
	if err != nil {
		return 0, err
	}
	if f >= m.numFuncs() {
		return 0, errors.Wrapf(ErrInvalid, "offset %#x: function index %d out of range", at, f)
	}
	return f, nil
}

func (m *module) decodeStart(r *reader) error {
	f, err := m.funcIndex(r)
	if err != nil {
		return err
	}
	m.start = &f
	return nil
}

func (m *module) tableIndex(r *reader) (uint32, error) {
	at := r.offset()
	t, err := r.u32()
	if err != nil {
		return 0, err
	}
	if t >= m.numTables() {
		return 0, errors.Wrapf(ErrInvalid, "offset %#x: table index %d out of range", at, t)
	}
	if t != 0 {
		m.features |= FeatureReferenceTypes
	}
	return t, nil
}

func (m *module) decodeElems(r *reader) error {
	n, err := r.count("element segments", maxElemSegments)
	if err != nil {
		return err
	}
	m.elems = make([]elemSegment, 0, n)
	for range n {
		at := r.offset()
		flags, err := r.u32()
		if err != nil {
			return err
		}
		if flags > 7 {
			return errors.Wrapf(ErrInvalid, "offset %#x: element segment flags %d", at, flags)
		}
		e := elemSegment{flags: byte(flags)}
		if flags != 0 {
			m.features |= FeatureBulkMemory
		}
		if flags == 3 || flags == 7 {
			m.features |= FeatureReferenceTypes // declarative segments
		}
		if e.flags&2 != 0 && e.active() {
			if e.table, err = m.tableIndex(r); err != nil {
				return err
			}
		} else if e.active() && m.numTables() == 0 {
			return errors.Wrapf(ErrInvalid, "offset %#x: active element segment without a table", at)
		}
		if e.active() {
			if e.offset, err = m.constExpr(r, m.numGlobals()); err != nil {
				return err
			}
		}
		if e.flags&3 != 0 {
			if e.usesExpr() {
				if e.kind, err = r.refType(); err != nil {
					return err
				}
				m.noteValType(e.kind)
			} else {
				kat := r.offset()
				if e.kind, err = r.byte(); err != nil {
					return err
				}
				if e.kind != 0 {
					return errors.Wrapf(ErrInvalid, "offset %#x: element kind %#x", kat, e.kind)
				}
			}
		}
		k, err := r.count("elements", maxElems)
		if err != nil {
			return err
		}
		m.elemCount += uint64(k)
		if e.usesExpr() {
			e.exprs = make([][]byte, k)
			for j := range e.exprs {
				if e.exprs[j], err = m.constExpr(r, m.numGlobals()); err != nil {
					return err
				}
			}
		} else {
			e.funcs = make([]uint32, k)
			for j := range e.funcs {
				if e.funcs[j], err = m.funcIndex(r); err != nil {
					return err
				}
			}
		}
		m.elems = append(m.elems, e)
	}
	return nil
}

// constExpr reads a constant expression and returns its bytes, including the
// final end. Global reads must refer to globals below maxGlobal.
func (m *module) constExpr(r *reader, maxGlobal uint32) ([]byte, error) {
	start := r.pos
	for {
		at := r.offset()
		op, err := r.byte()
		if err != nil {
			return nil, err
		}
		switch op {
		case opEnd:
			return r.b[start:r.pos], nil
		case opI32Const:
			_, err = r.sleb(32)
		case opI64Const:
			_, err = r.sleb(64)
		case opF32Const:
			_, err = r.bytes(4)
		case opF64Const:
			_, err = r.bytes(8)
		case opGlobalGet:
			var g uint32
			if g, err = r.u32(); err == nil && g >= maxGlobal {
				err = errors.Wrapf(ErrInvalid, "offset %#x: global index %d out of range in constant expression", at, g)
			}
		case opRefNull:
			var t byte
			t, err = r.refType()
			m.noteValType(t)
			m.features |= FeatureReferenceTypes
		case opRefFunc:
			_, err = m.funcIndex(r)
			m.features |= FeatureReferenceTypes
		case prefixSIMD:
			var sub uint32
			if sub, err = r.u32(); err == nil {
				if sub != simdV128Const {
					return nil, errors.Wrapf(ErrUnsupported, "offset %#x: opcode 0xfd %#x in constant expression", at, sub)
				}
				_, err = r.bytes(16)
				m.features |= FeatureSIMD
			}
		default:
			return nil, errors.Wrapf(ErrUnsupported, "offset %#x: opcode %#x in constant expression", at, op)
		}
		if err != nil {
			return nil, err
		}
	}
}

// renumberConstExpr returns expr with every ref.func index shifted by
// m.remap. expr was accepted by constExpr.
func (m *module) renumberConstExpr(expr []byte, shift func(uint32) uint32) []byte {
	var w writer
	r := &reader{b: expr}
	for !r.eof() {
		start := r.pos
		op, _ := r.byte()
		switch op {
		case opRefFunc:
			f, _ := r.u32()
			w.byte(opRefFunc)
			w.u32(shift(f))
			continue
		case opI32Const:
			_, _ = r.sleb(32)
		case opI64Const:
			_, _ = r.sleb(64)
		case opF32Const:
			_, _ = r.bytes(4)
		case opF64Const:
			_, _ = r.bytes(8)
		case opGlobalGet:
			_, _ = r.u32()
		case opRefNull:
			_, _ = r.byte()
		case prefixSIMD:
			_, _ = r.u32()
			_, _ = r.bytes(16)
		}
		w.raw(expr[start:r.pos])
	}
	return w.b
}

func (m *module) decodeCode(r *reader) error {
	n, err := r.limited("function bodies", maxFuncs, "functions", m.lim.Functions, 0)
	if err != nil {
		return err
	}
	m.code = make([]funcBody, 0, n)
	for i := range n {
		size, err := r.u32()
		if err != nil {
			return err
		}
		start := r.offset()
		fn := uint64(m.numImportedFuncs) + uint64(i)
		if uint64(size) > m.lim.FunctionBodyBytes {
			return limitError("function_body_bytes", m.lim.FunctionBodyBytes, uint64(size),
				"function "+itoa(fn)+" has a body of "+itoa(uint64(size))+" bytes")
		}
		if m.codeBytes += uint64(size); m.codeBytes > m.lim.CodeBytes {
			return limitError("code_bytes", m.lim.CodeBytes, m.codeBytes,
				"function bodies take at least "+itoa(m.codeBytes)+" bytes")
		}
		body, err := r.bytes(int(size))
		if err != nil {
			return errors.Wrapf(err, "function body %d", i)
		}
		br := &reader{b: body, base: start}
		var fb funcBody
		groups, err := br.count("local groups", maxLocals)
		if err != nil {
			return err
		}
		fb.locals = make([]localGroup, groups)
		for j := range fb.locals {
			if fb.locals[j].n, err = br.u32(); err != nil {
				return err
			}
			if fb.locals[j].typ, err = br.valType(); err != nil {
				return err
			}
			m.noteValType(fb.locals[j].typ)
			fb.numLocals += uint64(fb.locals[j].n)
		}
		if fb.numLocals > m.lim.FunctionLocals {
			return limitError("function_locals", m.lim.FunctionLocals, fb.numLocals,
				"function "+itoa(fn)+" declares "+itoa(fb.numLocals)+" locals")
		}
		if m.totalLocals += fb.numLocals; m.totalLocals > m.lim.TotalLocals {
			return limitError("total_locals", m.lim.TotalLocals, m.totalLocals,
				"functions declare at least "+itoa(m.totalLocals)+" locals in total")
		}
		if fb.numLocals > maxLocals {
			return errors.Wrapf(ErrUnsupported, "offset %#x: function body %d declares %d locals (at most %d)", start, i, fb.numLocals, maxLocals)
		}
		fb.code = body[br.pos:]
		fb.offset = br.offset()
		if len(fb.code) == 0 || fb.code[len(fb.code)-1] != opEnd {
			return errors.Wrapf(ErrInvalid, "offset %#x: function body %d does not end with end", start, i)
		}
		m.code = append(m.code, fb)
	}
	return nil
}

func (m *module) decodeData(r *reader) error {
	n, err := r.count("data segments", maxDataSegments)
	if err != nil {
		return err
	}
	m.numData = n
	for range n {
		at := r.offset()
		flags, err := r.u32()
		if err != nil {
			return err
		}
		switch flags {
		case 0, 2:
			if flags == 2 {
				mat := r.offset()
				mem, err := r.u32()
				if err != nil {
					return err
				}
				if mem != 0 {
					return errors.Wrapf(ErrUnsupported, "offset %#x: data segment for memory %d (multi-memory)", mat, mem)
				}
			}
			if m.memory == nil {
				return errors.Wrapf(ErrInvalid, "offset %#x: active data segment without a memory", at)
			}
			if _, err := m.constExpr(r, m.numGlobals()); err != nil {
				return err
			}
		case 1:
			m.features |= FeatureBulkMemory
		default:
			return errors.Wrapf(ErrInvalid, "offset %#x: data segment flags %d", at, flags)
		}
		k, err := r.u32()
		if err != nil {
			return err
		}
		if m.dataBytes += uint64(k); m.dataBytes > m.lim.DataBytes {
			return limitError("data_bytes", m.lim.DataBytes, m.dataBytes,
				"data segments hold at least "+itoa(m.dataBytes)+" bytes")
		}
		if _, err := r.bytes(int(k)); err != nil {
			return err
		}
	}
	return nil
}

// encodeElem appends segment e with function indices mapped by shift.
func (m *module) encodeElem(w *writer, e *elemSegment, shift func(uint32) uint32) {
	w.u32(uint32(e.flags))
	if e.flags&2 != 0 && e.active() {
		w.u32(e.table)
	}
	if e.active() {
		w.raw(m.renumberConstExpr(e.offset, shift))
	}
	if e.flags&3 != 0 {
		w.byte(e.kind)
	}
	if e.usesExpr() {
		w.u32(uint32(len(e.exprs)))
		for _, x := range e.exprs {
			w.raw(m.renumberConstExpr(x, shift))
		}
		return
	}
	w.u32(uint32(len(e.funcs)))
	for _, f := range e.funcs {
		w.u32(shift(f))
	}
}

package fuel

// The decoded module and its decoder: section-level decoding and checks,
// and the element-segment encoder.

import (
	"math"
	"strconv"

	"github.com/cockroachdb/errors"
	"github.com/tetratelabs/wazero/api"
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

// decoder is the decoding phase of a module: its methods read the
// sections in order and fill the module they embed, checking the deploy
// limits as they go. The module's own methods serve the rewrite.
type decoder struct{ *module }

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
	// maxUnchecked is the largest sum of the unchecked charges of one body,
	// maxChecked the largest charge a check follows (Info.MaxDebt is their
	// sum; set by instrument).
	maxUnchecked, maxChecked uint64
	// countChecks makes the rewrite count the checks and charges it
	// executes in two more exported globals (Config.countChecks).
	countChecks bool
	loopWork    uint64 // see Limits.LoopLocalWork (set by instrument)

	mutatesTables   bool // see Info.MutatesTables (set by instrument)
	passiveSegments bool // see Info.PassiveSegments (segments by decode, code by instrument)
}

type importEntry struct {
	module, name string
	kind         ExternKind
	typeIdx      uint32 // functions
	mutable      bool   // globals
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

// mutableGlobals returns the indices of the module's mutable globals,
// imported and defined, ascending (see Info.MutableGlobals).
func (m *module) mutableGlobals() []uint32 {
	var out []uint32
	var g uint32
	for _, imp := range m.imports {
		if imp.kind == ExternGlobal {
			if imp.mutable {
				out = append(out, g)
			}
			g++
		}
	}
	for i, d := range m.globals {
		if d.mutable {
			out = append(out, m.numImportedGlobals+uint32(i))
		}
	}
	return out
}

var wasmMagic = []byte{0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00}

// decodeModule parses b. It refuses (ErrUnsupported) every construct the
// instrumenter does not handle and range-checks every index it reads, so that
// an index that is out of range in the original cannot alias one the
// instrumenter adds. Function bodies are checked by instrumentFunc.
//
// Every deploy limit but the nesting depth (checked by analyze) is checked
// here, each before anything is allocated for the counted items.
//
// Each section decoder reads its section with the reader's sticky error
// (see reader) and leaves the first error in it; decodeModule checks it once
// per section.
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
	d := decoder{m}
	r := &reader{b: b, pos: 8}
	last := 0
	var numFuncDecls uint32
	sawFunc := false
	for !r.eof() {
		id, sr := r.section()
		if r.err != nil {
			return nil, r.err
		}
		start := sr.base
		if id == secCustom {
			if d.decodeCustom(&sr); sr.err != nil {
				return nil, sr.err
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
			d.decodeTypes(&sr)
		case secImport:
			d.decodeImports(&sr)
		case secFunction:
			sawFunc = true
			d.decodeFunctions(&sr)
			numFuncDecls = uint32(len(m.funcs))
		case secTable:
			m.tableRaw = sr.b
			d.decodeTables(&sr)
		case secMemory:
			m.memoryRaw = sr.b
			d.decodeMemories(&sr)
		case secGlobal:
			d.decodeGlobals(&sr)
		case secExport:
			d.decodeExports(&sr)
		case secStart:
			d.decodeStart(&sr)
		case secElement:
			d.decodeElems(&sr)
		case secDataCount:
			m.dataCountRaw = sr.b
			n := sr.u32()
			m.dataCount = &n
			m.features |= FeatureBulkMemory
		case secCode:
			d.decodeCode(&sr)
		case secData:
			m.dataRaw = sr.b
			d.decodeData(&sr)
		}
		if sr.err != nil {
			return nil, errors.Wrapf(sr.err, "%s section", sectionNames[id])
		}
		if !sr.eof() {
			return nil, errors.Wrapf(ErrInvalid, "offset %#x: %s section has %d trailing bytes", sr.offset(), sectionNames[id], len(sr.b)-sr.pos)
		}
	}
	if sawFunc && numFuncDecls != uint32(len(m.code)) || !sawFunc && len(m.code) != 0 {
		return nil, errors.Wrapf(ErrInvalid, "function and code section counts differ (%d, %d)", numFuncDecls, len(m.code))
	}
	if m.dataCount != nil && *m.dataCount != m.numData {
		return nil, errors.Wrapf(ErrInvalid, "data count %d but %d data segments", *m.dataCount, m.numData)
	}
	if err := d.checkExports(); err != nil {
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

func itoa(v uint64) string { return strconv.FormatUint(v, 10) }

func (m *module) noteValType(t byte) {
	switch t {
	case valV128:
		m.features |= FeatureSIMD
	case api.ValueTypeExternref:
		m.features |= FeatureReferenceTypes
	}
}

func (m decoder) decodeTypes(r *reader) {
	n := r.limited("types", maxTypes, "types", m.lim.Types, 0)
	m.types = make([]funcType, 0, n)
	for range n {
		at := r.offset()
		if form := r.byte(); form != 0x60 {
			r.unsupportedAt(at, "type form %#x (only function types are supported)", form)
			return
		}
		var ft funcType
		for _, dst := range []*[]byte{&ft.params, &ft.results} {
			at := r.offset()
			k := r.count("parameters or results", math.MaxUint32)
			if sum := m.typeParams + uint64(k); sum > m.lim.TypeParams {
				r.fail(limitError("type_params", m.lim.TypeParams, sum,
					"types declare at least "+itoa(sum)+" parameters and results"))
				return
			}
			if k > maxParams {
				r.unsupportedAt(at, "%d parameters or results (at most %d)", k, maxParams)
				return
			}
			m.typeParams += uint64(k)
			*dst = make([]byte, k)
			for j := range *dst {
				(*dst)[j] = r.valType()
				m.noteValType((*dst)[j])
			}
		}
		if len(ft.results) > 1 {
			m.features |= FeatureMultiValue
		}
		m.types = append(m.types, ft)
		if r.err != nil {
			return
		}
	}
}

func (m decoder) typeIndex(r *reader) uint32 {
	at := r.offset()
	t := r.u32()
	if t >= uint32(len(m.types)) {
		r.invalidAt(at, "type index %d out of range", t)
		return 0
	}
	return t
}

func (m decoder) addMemory(r *reader, at int, l limits) {
	if m.memory != nil {
		r.unsupportedAt(at, "more than one memory (multi-memory)")
		return
	}
	if l.shared {
		r.unsupportedAt(at, "shared memory (threads)")
		return
	}
	m.memory = &l
}

func (m decoder) decodeImports(r *reader) {
	n := r.limited("imports", maxImports, "imports", m.lim.Imports, 0)
	for range n {
		start := r.pos
		at := r.offset()
		var imp importEntry
		imp.module = r.name()
		imp.name = r.name()
		if imp.module == ImportModule {
			r.fail(errors.Wrapf(ErrReserved, "offset %#x: import %s.%s uses the reserved module %q", at, imp.module, imp.name, ImportModule))
			return
		}
		kat := r.offset()
		kind := r.byte()
		imp.kind = ExternKind(kind)
		switch imp.kind {
		case ExternFunc:
			imp.typeIdx = m.typeIndex(r)
			m.importTypes = append(m.importTypes, imp.typeIdx)
			m.numImportedFuncs++
		case ExternTable:
			t := r.refType()
			m.addTable(r, kat, t, r.limits("table"), false)
			m.numImportedTables++
		case ExternMemory:
			m.addMemory(r, kat, r.limits("memory"))
			m.numImportedMems++
		case ExternGlobal:
			m.noteValType(r.valType())
			imp.mutable = r.mutability()
			if n := uint64(m.numImportedGlobals) + 1; n > m.lim.Globals {
				r.fail(limitError("globals", m.lim.Globals, n, "module declares at least "+itoa(n)+" globals"))
				return
			}
			m.numImportedGlobals++
		default:
			if kind == 0x04 {
				r.unsupportedAt(kat, "tag import (exception handling)")
			} else {
				r.invalidAt(kat, "import kind %#x", kind)
			}
			return
		}
		imp.raw = r.b[start:r.pos]
		m.imports = append(m.imports, imp)
		if r.err != nil {
			return
		}
	}
}

func (m decoder) decodeFunctions(r *reader) {
	n := r.limited("functions", maxFuncs-m.numImportedFuncs, "functions", m.lim.Functions, 0)
	m.funcs = make([]uint32, n)
	for i := range m.funcs {
		if m.funcs[i] = m.typeIndex(r); r.err != nil {
			return
		}
	}
}

func (m decoder) decodeTables(r *reader) {
	n := r.limited("tables", maxTables, "tables", m.lim.Tables, uint64(len(m.tables)))
	for range n {
		at := r.offset()
		if len(r.b) > r.pos && r.b[r.pos] == 0x40 {
			r.unsupportedAt(at, "table with initializer (function references)")
			return
		}
		t := r.refType()
		l := r.limits("table")
		if l.shared {
			r.unsupportedAt(at, "shared table")
			return
		}
		if m.addTable(r, at, t, l, true); r.err != nil {
			return
		}
	}
	if len(m.tables) > 1 {
		m.features |= FeatureReferenceTypes
	}
	for _, t := range m.tables {
		m.noteValType(t.elem)
	}
}

// addTable appends a table, checking the table limits: its minimum must
// not exceed TableElements, and a defined table's maximum is clamped to
// TableElements (table.grow beyond the maximum returns -1, as the
// specification has it for any maximum). An imported table keeps its type:
// the table it is given decides how far it grows.
func (m decoder) addTable(r *reader, at int, elem byte, l limits, defined bool) {
	if n := uint64(len(m.tables)) + 1; n > m.lim.Tables {
		r.fail(limitError("tables", m.lim.Tables, n, "module declares at least "+itoa(n)+" tables"))
		return
	}
	if uint64(l.min) > m.lim.TableElements {
		r.fail(limitError("table_elements", m.lim.TableElements, uint64(l.min),
			"table "+itoa(uint64(len(m.tables)))+" has "+itoa(uint64(l.min))+" elements"))
		return
	}
	if defined && (!l.hasMax || uint64(l.max) > m.lim.TableElements) {
		l.hasMax, l.max = true, uint32(m.lim.TableElements)
		if l.max < l.min { // min ≤ limit < 2^32 after the check above
			l.max = l.min
		}
	}
	m.tables = append(m.tables, tableEntry{elem: elem, lim: l})
}

func (m decoder) decodeMemories(r *reader) {
	n := r.count("memories", maxTables)
	for range n {
		at := r.offset()
		m.addMemory(r, at, r.limits("memory"))
		m.memDefined = true
		if r.err != nil {
			return
		}
	}
}

func (m decoder) decodeGlobals(r *reader) {
	n := r.limited("globals", maxGlobals-m.numImportedGlobals, "globals", m.lim.Globals, uint64(m.numImportedGlobals))
	m.globals = make([]global, 0, n)
	for range n {
		var g global
		g.typ = r.valType()
		m.noteValType(g.typ)
		g.mutable = r.mutability()
		// A global's initializer may read only imported globals.
		g.init = m.constExpr(r, m.numImportedGlobals)
		m.globals = append(m.globals, g)
		if r.err != nil {
			return
		}
	}
}

func (m decoder) decodeExports(r *reader) {
	n := r.limited("exports", maxExports, "exports", m.lim.Exports, 0)
	m.exports = make([]export, 0, n)
	for range n {
		at := r.offset()
		var e export
		e.name = r.name()
		if reservedExport(e.name) {
			r.fail(errors.Wrapf(ErrReserved, "offset %#x: export %q uses a reserved name", at, e.name))
			return
		}
		kind := r.byte()
		e.kind = ExternKind(kind)
		iat := r.offset()
		e.index = r.u32()
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
			r.invalidAt(iat-1, "export kind %#x", kind)
			return
		}
		if e.index >= limit {
			r.invalidAt(iat, "export %q: %s index %d out of range", e.name, e.kind, e.index)
			return
		}
		m.exports = append(m.exports, e)
		if r.err != nil {
			return
		}
	}
}

// checkExports refuses duplicate export names (the instrumenter adds one).
func (m decoder) checkExports() error {
	seen := make(map[string]bool, len(m.exports))
	for _, e := range m.exports {
		if seen[e.name] {
			return errors.Wrapf(ErrInvalid, "duplicate export %q", e.name)
		}
		seen[e.name] = true
	}
	return nil
}

func (m decoder) funcIndex(r *reader) uint32 {
	at := r.offset()
	f := r.u32()
	if f >= m.numFuncs() {
		r.invalidAt(at, "function index %d out of range", f)
		return 0
	}
	return f
}

func (m decoder) decodeStart(r *reader) {
	f := m.funcIndex(r)
	m.start = &f
}

// tableIndex reads a table index. It returns the reader's error, or an
// error for an index out of range without recording it in r (decode goes
// on to read the instruction's other immediates).
func (m *module) tableIndex(r *reader) (uint32, error) {
	at := r.offset()
	t := r.u32()
	if r.err != nil {
		return 0, r.err
	}
	if t >= m.numTables() {
		return 0, errors.Wrapf(ErrInvalid, "offset %#x: table index %d out of range", at, t)
	}
	if t != 0 {
		m.features |= FeatureReferenceTypes
	}
	return t, nil
}

func (m decoder) decodeElems(r *reader) {
	n := r.count("element segments", maxElemSegments)
	m.elems = make([]elemSegment, 0, n)
	for range n {
		at := r.offset()
		flags := r.u32()
		if flags > 7 {
			r.invalidAt(at, "element segment flags %d", flags)
			return
		}
		e := elemSegment{flags: byte(flags)}
		if flags != 0 {
			m.features |= FeatureBulkMemory
		}
		if !e.active() {
			m.passiveSegments = true // passive or declarative
		}
		if flags == 3 || flags == 7 {
			m.features |= FeatureReferenceTypes // declarative segments
		}
		if e.flags&2 != 0 && e.active() {
			t, err := m.tableIndex(r)
			if err != nil {
				r.fail(err)
				return
			}
			e.table = t
		} else if e.active() && m.numTables() == 0 {
			r.invalidAt(at, "active element segment without a table")
			return
		}
		if e.active() {
			e.offset = m.constExpr(r, m.numGlobals())
		}
		if e.flags&3 != 0 {
			if e.usesExpr() {
				e.kind = r.refType()
				m.noteValType(e.kind)
			} else {
				kat := r.offset()
				if e.kind = r.byte(); e.kind != 0 {
					r.invalidAt(kat, "element kind %#x", e.kind)
					return
				}
			}
		}
		k := r.count("elements", maxElems)
		m.elemCount += uint64(k)
		if e.usesExpr() {
			e.exprs = make([][]byte, k)
			for j := range e.exprs {
				e.exprs[j] = m.constExpr(r, m.numGlobals())
			}
		} else {
			e.funcs = make([]uint32, k)
			for j := range e.funcs {
				e.funcs[j] = m.funcIndex(r)
			}
		}
		m.elems = append(m.elems, e)
		if r.err != nil {
			return
		}
	}
}

// constExpr reads a constant expression and returns its bytes, including the
// final end. Global reads must refer to globals below maxGlobal.
func (m decoder) constExpr(r *reader, maxGlobal uint32) []byte {
	start := r.pos
	for {
		at := r.offset()
		switch op := r.byte(); op {
		case opEnd:
			return r.b[start:r.pos]
		case opI32Const:
			r.sleb(32)
		case opI64Const:
			r.sleb(64)
		case opF32Const:
			r.bytes(4)
		case opF64Const:
			r.bytes(8)
		case opGlobalGet:
			if g := r.u32(); g >= maxGlobal {
				r.invalidAt(at, "global index %d out of range in constant expression", g)
			}
		case opRefNull:
			m.noteValType(r.refType())
			m.features |= FeatureReferenceTypes
		case opRefFunc:
			m.funcIndex(r)
			m.features |= FeatureReferenceTypes
		case prefixSIMD:
			if sub := r.u32(); sub != simdV128Const {
				r.unsupportedAt(at, "opcode 0xfd %#x in constant expression", sub)
				return nil
			}
			r.bytes(16)
			m.features |= FeatureSIMD
		default:
			// Also where a read failed: r.byte returned 0.
			r.unsupportedAt(at, "opcode %#x in constant expression", op)
			return nil
		}
		if r.err != nil {
			return nil
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
		switch r.byte() {
		case opRefFunc:
			w.byte(opRefFunc)
			w.u32(shift(r.u32()))
			continue
		case opI32Const:
			r.sleb(32)
		case opI64Const:
			r.sleb(64)
		case opF32Const:
			r.bytes(4)
		case opF64Const:
			r.bytes(8)
		case opGlobalGet:
			r.u32()
		case opRefNull:
			r.byte()
		case prefixSIMD:
			r.u32()
			r.bytes(16)
		}
		w.raw(expr[start:r.pos])
	}
	return w.b
}

func (m decoder) decodeCode(r *reader) {
	n := r.limited("function bodies", maxFuncs, "functions", m.lim.Functions, 0)
	m.code = make([]funcBody, 0, n)
	for i := range n {
		size := r.u32()
		fn := uint64(m.numImportedFuncs) + uint64(i)
		if uint64(size) > m.lim.FunctionBodyBytes {
			r.fail(limitError("function_body_bytes", m.lim.FunctionBodyBytes, uint64(size),
				"function "+itoa(fn)+" has a body of "+itoa(uint64(size))+" bytes"))
			return
		}
		if m.codeBytes += uint64(size); m.codeBytes > m.lim.CodeBytes {
			r.fail(limitError("code_bytes", m.lim.CodeBytes, m.codeBytes,
				"function bodies take at least "+itoa(m.codeBytes)+" bytes"))
			return
		}
		br := r.sub(size, "function body", i)
		start := br.base
		var fb funcBody
		fb.locals = make([]localGroup, br.count("local groups", maxLocals))
		for j := range fb.locals {
			fb.locals[j].n = br.u32()
			fb.locals[j].typ = br.valType()
			m.noteValType(fb.locals[j].typ)
			fb.numLocals += uint64(fb.locals[j].n)
		}
		if err := first(r.err, br.err); err != nil {
			r.fail(err)
			return
		}
		if fb.numLocals > m.lim.FunctionLocals {
			r.fail(limitError("function_locals", m.lim.FunctionLocals, fb.numLocals,
				"function "+itoa(fn)+" declares "+itoa(fb.numLocals)+" locals"))
			return
		}
		if m.totalLocals += fb.numLocals; m.totalLocals > m.lim.TotalLocals {
			r.fail(limitError("total_locals", m.lim.TotalLocals, m.totalLocals,
				"functions declare at least "+itoa(m.totalLocals)+" locals in total"))
			return
		}
		if fb.numLocals > maxLocals {
			r.unsupportedAt(start, "function body %d declares %d locals (at most %d)", i, fb.numLocals, maxLocals)
			return
		}
		fb.code = br.b[br.pos:]
		fb.offset = br.offset()
		if len(fb.code) == 0 || fb.code[len(fb.code)-1] != opEnd {
			r.invalidAt(start, "function body %d does not end with end", i)
			return
		}
		m.code = append(m.code, fb)
	}
}

func (m decoder) decodeData(r *reader) {
	n := r.count("data segments", maxDataSegments)
	m.numData = n
	for range n {
		at := r.offset()
		switch flags := r.u32(); flags {
		case 0, 2:
			if flags == 2 {
				mat := r.offset()
				if mem := r.u32(); mem != 0 {
					r.unsupportedAt(mat, "data segment for memory %d (multi-memory)", mem)
					return
				}
			}
			if m.memory == nil {
				r.invalidAt(at, "active data segment without a memory")
				return
			}
			m.constExpr(r, m.numGlobals())
		case 1:
			m.features |= FeatureBulkMemory
			m.passiveSegments = true
		default:
			r.invalidAt(at, "data segment flags %d", flags)
			return
		}
		k := r.u32()
		if m.dataBytes += uint64(k); m.dataBytes > m.lim.DataBytes {
			r.fail(limitError("data_bytes", m.lim.DataBytes, m.dataBytes,
				"data segments hold at least "+itoa(m.dataBytes)+" bytes"))
			return
		}
		if r.bytes(int(k)); r.err != nil {
			return
		}
	}
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

package fuel

import (
	"github.com/cockroachdb/errors"
)

// numAdded is the number of function imports the rewrite appends: tick, grow
// and depth_exceeded, in this order.
const numAdded = 3

// rewriter holds the module-wide facts of one rewrite and buffers reused
// from one function to the next.
type rewriter struct {
	m        *module
	maxDepth uint32

	tickFn, growFn, depthFn uint32 // function indices of the added imports
	fuelG, depthG           uint32 // global indices of the added globals
	voidType, growType      uint32 // type indices of the added imports
	types                   []funcType

	// Per-function state, reset by function.
	ins     []instr
	charges []charge
	ctl     []ctrl
	targets []uint32
}

// instr is one decoded instruction of the function being rewritten.
type instr struct {
	op         uint16 // opcode; prefixed: prefix<<8 | sub-opcode
	start, end int32  // byte range in funcBody.code
	imm        uint32 // function index (call, ref.func)
}

// charge is a fuel charge emitted before instruction at (at == 0: at
// function entry, with the call-depth check).
type charge struct {
	at   int
	cost int64
}

// ctrl is an open block, loop, if or the function body during analysis.
type ctrl struct {
	op        uint16 // opBlock, opLoop, opIf; opEnd for the function body
	reachable bool   // entered from reachable code
	targeted  bool   // a reachable branch targets its label (not for loops)
	hasElse   bool
	thenLive  bool // the then arm falls through to the end
	// For a reachable if: the regions holding the if, starting the then arm
	// and starting the else arm (-1: none yet).
	pre, then, els int
}

func (m *module) shift(f uint32) uint32 {
	if f < m.numImportedFuncs {
		return f
	}
	return f + numAdded
}

// instrument rewrites the decoded module m (see the package documentation).
func (m *module) instrument(maxDepth uint32) ([]byte, error) {
	rw := &rewriter{
		m:        m,
		maxDepth: maxDepth,
		tickFn:   m.numImportedFuncs,
		growFn:   m.numImportedFuncs + 1,
		depthFn:  m.numImportedFuncs + 2,
		fuelG:    m.numGlobals(),
		depthG:   m.numGlobals() + 1,
		types:    m.types,
	}
	rw.voidType = rw.typeFor(funcType{params: []byte{}, results: []byte{}})
	rw.growType = rw.typeFor(funcType{params: []byte{valI32}, results: []byte{valI32}})

	var code writer
	code.u32(uint32(len(m.code)))
	var body writer
	for i := range m.code {
		body.b = body.b[:0]
		if err := rw.function(i, &body); err != nil {
			return nil, errors.Wrapf(err, "code section: function %d", m.numImportedFuncs+uint32(i))
		}
		code.u32(uint32(len(body.b)))
		code.raw(body.b)
	}

	var out, sec writer
	out.raw(wasmMagic)
	emit := func(id byte) {
		out.section(id, sec.b)
		sec.b = sec.b[:0]
	}

	sec.u32(uint32(len(rw.types)))
	for _, t := range rw.types {
		sec.byte(0x60)
		sec.u32(uint32(len(t.params)))
		sec.raw(t.params)
		sec.u32(uint32(len(t.results)))
		sec.raw(t.results)
	}
	emit(secType)

	sec.u32(uint32(len(m.imports) + numAdded))
	for _, imp := range m.imports {
		sec.raw(imp.raw)
	}
	for _, f := range []struct {
		name string
		typ  uint32
	}{{TickName, rw.voidType}, {GrowName, rw.growType}, {DepthName, rw.voidType}} {
		sec.name(ImportModule)
		sec.name(f.name)
		sec.byte(byte(ExternFunc))
		sec.u32(f.typ)
	}
	emit(secImport)

	if len(m.funcs) > 0 {
		sec.u32(uint32(len(m.funcs)))
		for _, t := range m.funcs {
			sec.u32(t)
		}
		emit(secFunction)
	}
	if m.tableRaw != nil {
		sec.raw(m.tableRaw)
		emit(secTable)
	}
	if m.memoryRaw != nil {
		sec.raw(m.memoryRaw)
		emit(secMemory)
	}

	sec.u32(uint32(len(m.globals) + 2))
	for _, g := range m.globals {
		sec.byte(g.typ)
		sec.byte(boolByte(g.mutable))
		sec.raw(m.renumberConstExpr(g.init, m.shift))
	}
	sec.raw([]byte{valI64, 1, opI64Const, 0, opEnd}) // fuel
	sec.raw([]byte{valI32, 1, opI32Const, 0, opEnd}) // call depth
	emit(secGlobal)

	sec.u32(uint32(len(m.exports) + 1))
	for _, e := range m.exports {
		sec.name(e.name)
		sec.byte(byte(e.kind))
		if e.kind == ExternFunc {
			sec.u32(m.shift(e.index))
		} else {
			sec.u32(e.index)
		}
	}
	sec.name(FuelExport)
	sec.byte(byte(ExternGlobal))
	sec.u32(rw.fuelG)
	emit(secExport)

	if m.start != nil {
		sec.u32(m.shift(*m.start))
		emit(secStart)
	}
	if m.elems != nil {
		sec.u32(uint32(len(m.elems)))
		for i := range m.elems {
			m.encodeElem(&sec, &m.elems[i], m.shift)
		}
		emit(secElement)
	}
	if m.dataCountRaw != nil {
		sec.raw(m.dataCountRaw)
		emit(secDataCount)
	}
	if len(m.code) > 0 {
		out.section(secCode, code.b)
	}
	if m.dataRaw != nil {
		sec.raw(m.dataRaw)
		emit(secData)
	}
	if m.names != nil {
		m.names.encode(&sec, m)
		emit(secCustom)
	}
	return out.b, nil
}

func boolByte(b bool) byte {
	if b {
		return 1
	}
	return 0
}

// typeFor returns the index of a type equal to t, appending t if the module
// has none.
func (rw *rewriter) typeFor(t funcType) uint32 {
	for i, u := range rw.types {
		if u.equal(t) {
			return uint32(i)
		}
	}
	if len(rw.types) == len(rw.m.types) {
		// First addition: copy so that m.types stays the original.
		rw.types = append(make([]funcType, 0, len(rw.types)+3), rw.types...)
	}
	rw.types = append(rw.types, t)
	return uint32(len(rw.types) - 1)
}

// function rewrites body i of the code section into w.
func (rw *rewriter) function(i int, w *writer) error {
	m := rw.m
	fb := &m.code[i]
	ft := m.types[m.funcs[i]]
	numLocals := uint64(len(ft.params)) + fb.numLocals
	wrap, finalLive, scratch, err := rw.analyze(fb, numLocals)
	if err != nil {
		return err
	}

	// Locals, plus one i32 scratch local for the dynamic charges.
	groups := len(fb.locals)
	if scratch {
		groups++
	}
	w.u32(uint32(groups))
	for _, g := range fb.locals {
		w.u32(g.n)
		w.byte(g.typ)
	}
	scratchLocal := uint32(numLocals)
	if scratch {
		w.u32(1)
		w.byte(valI32)
	}

	rw.emitEntry(w, rw.charges[0].cost)
	if wrap {
		w.byte(opBlock)
		switch len(ft.results) {
		case 0:
			w.byte(blockEmpty)
		case 1:
			w.byte(ft.results[0])
		default:
			w.s64(int64(rw.typeFor(funcType{params: []byte{}, results: ft.results})))
		}
	}
	code := fb.code
	next := 1 // rw.charges[0] is the entry charge
	last := len(rw.ins) - 1
	for idx, in := range rw.ins {
		if next < len(rw.charges) && rw.charges[next].at == idx {
			rw.emitCharge(w, rw.charges[next].cost)
			next++
		}
		switch in.op {
		case opCall, opRefFunc:
			w.byte(byte(in.op))
			w.u32(m.shift(in.imm))
		case opMemoryGrow:
			w.byte(opCall)
			w.u32(rw.growFn)
		case opReturn:
			rw.emitExit(w)
			w.byte(opReturn)
		case prefixMisc<<8 | miscMemoryInit, prefixMisc<<8 | miscMemoryCopy, prefixMisc<<8 | miscMemoryFill,
			prefixMisc<<8 | miscTableInit, prefixMisc<<8 | miscTableCopy, prefixMisc<<8 | miscTableFill:
			rw.emitDynamic(w, scratchLocal, BulkShift)
			w.raw(code[in.start:in.end])
		case prefixMisc<<8 | miscTableGrow:
			rw.emitDynamic(w, scratchLocal, 0)
			w.raw(code[in.start:in.end])
		case opEnd:
			if idx == last {
				if wrap {
					w.byte(opEnd)
				}
				if wrap || finalLive {
					rw.emitExit(w)
				}
			}
			w.byte(opEnd)
		default:
			w.raw(code[in.start:in.end])
		}
	}
	return nil
}

// analyze decodes and checks the body of fb, filling rw.ins with its
// instructions and rw.charges with the regions (see the package
// documentation). It reports whether a branch targets the function's own
// label (wrap), whether the final end is reachable by falling through
// (finalLive) and whether a dynamic charge needs the scratch local.
func (rw *rewriter) analyze(fb *funcBody, numLocals uint64) (wrap, finalLive, scratch bool, err error) {
	rw.ins = rw.ins[:0]
	rw.charges = append(rw.charges[:0], charge{at: 0, cost: int64(fb.numLocals / 8)})
	rw.ctl = append(rw.ctl[:0], ctrl{op: opEnd, reachable: true})
	cur := 0 // index in rw.charges of the open region; -1: unreachable code

	open := func(at int) {
		rw.charges = append(rw.charges, charge{at: at})
		cur = len(rw.charges) - 1
	}
	r := &reader{b: fb.code, base: fb.offset}
	mark := func(depth uint32, at int) error {
		if uint64(depth) >= uint64(len(rw.ctl)) {
			return errors.Wrapf(ErrInvalid, "offset %#x: branch depth %d out of range", at, depth)
		}
		t := &rw.ctl[len(rw.ctl)-1-int(depth)]
		if t.op == opEnd {
			wrap = true
		}
		if cur >= 0 {
			t.targeted = true
		}
		return nil
	}
	for len(rw.ctl) > 0 {
		if r.eof() {
			return false, false, false, r.errorf("function body ends inside a block")
		}
		at := r.offset()
		in, err := rw.decode(r, numLocals)
		if err != nil {
			return false, false, false, err
		}
		idx := len(rw.ins)
		rw.ins = append(rw.ins, in)
		if cur >= 0 {
			rw.charges[cur].cost += opCost(in.op)
		}
		switch in.op {
		case opBlock, opLoop, opIf:
			rw.ctl = append(rw.ctl, ctrl{op: in.op, reachable: cur >= 0, pre: cur, then: -1, els: -1})
			if cur >= 0 && in.op != opBlock {
				open(idx + 1) // loop header (a branch target) or then arm
				rw.ctl[len(rw.ctl)-1].then = cur
			}
		case opElse:
			t := &rw.ctl[len(rw.ctl)-1]
			if t.op != opIf || t.hasElse {
				return false, false, false, errors.Wrapf(ErrInvalid, "offset %#x: else without if", at)
			}
			t.hasElse, t.thenLive = true, cur >= 0
			cur = -1
			if t.reachable {
				open(idx + 1)
				t.els = cur
			}
		case opEnd:
			t := rw.ctl[len(rw.ctl)-1]
			rw.ctl = rw.ctl[:len(rw.ctl)-1]
			switch t.op {
			case opEnd:
				finalLive = cur >= 0
			case opBlock:
				if t.targeted {
					open(idx + 1) // a merge point
				}
			case opIf:
				if t.els >= 0 {
					// Exactly one arm runs after the if's region: charge the
					// cheaper arm's first region there (see doc.go, hoisting).
					h := min(rw.charges[t.then].cost, rw.charges[t.els].cost)
					rw.charges[t.pre].cost += h
					rw.charges[t.then].cost -= h
					rw.charges[t.els].cost -= h
				}
				live := cur >= 0 || t.targeted || !t.hasElse || t.thenLive
				cur = -1
				if t.reachable && live {
					open(idx + 1)
				}
			}
			// opLoop: only the fall-through reaches the end, so the region
			// continues.
		case opBr, opBrIf:
			if err := mark(in.imm, at); err != nil {
				return false, false, false, err
			}
			if in.op == opBr {
				cur = -1
			}
		case opBrTable:
			for _, l := range rw.targets {
				if err := mark(l, at); err != nil {
					return false, false, false, err
				}
			}
			cur = -1
		case opReturn, opUnreachable:
			cur = -1
		case prefixMisc<<8 | miscMemoryInit, prefixMisc<<8 | miscMemoryCopy, prefixMisc<<8 | miscMemoryFill,
			prefixMisc<<8 | miscTableInit, prefixMisc<<8 | miscTableCopy, prefixMisc<<8 | miscTableFill,
			prefixMisc<<8 | miscTableGrow:
			scratch = true
		}
	}
	if !r.eof() {
		return false, false, false, r.errorf("%d bytes after the end of the function body", len(r.b)-r.pos)
	}
	return wrap, finalLive, scratch, nil
}

// emitEntry writes the function prologue: the entry region's charge and the
// call-depth increment, with one branch to a slow path that calls tick
// and/or depth_exceeded:
//
//	fuel -= cost; depth++
//	if fuel < 0 | depth > max { if fuel < 0 { tick() }; if depth > max { depth_exceeded() } }
var splitEntry = false
var expNoDepth, expNoFuel bool

func (rw *rewriter) emitEntry(w *writer, cost int64) {
	if expNoDepth {
		rw.emitCharge(w, cost)
		return
	}
	if expNoFuel {
		w.byte(opGlobalGet)
		w.u32(rw.depthG)
		w.byte(opI32Const)
		w.byte(1)
		w.byte(opI32Add)
		w.byte(opGlobalSet)
		w.u32(rw.depthG)
		rw.emitDepthExceeded(w)
		w.byte(opIf)
		w.byte(blockEmpty)
		w.byte(opCall)
		w.u32(rw.depthFn)
		w.byte(opEnd)
		return
	}
	if splitEntry {
		rw.emitCharge(w, cost)
		w.byte(opGlobalGet)
		w.u32(rw.depthG)
		w.byte(opI32Const)
		w.byte(1)
		w.byte(opI32Add)
		w.byte(opGlobalSet)
		w.u32(rw.depthG)
		rw.emitDepthExceeded(w)
		w.byte(opIf)
		w.byte(blockEmpty)
		w.byte(opCall)
		w.u32(rw.depthFn)
		w.byte(opEnd)
		return
	}
	if cost != 0 {
		rw.emitSub(w, cost)
	}
	w.byte(opGlobalGet)
	w.u32(rw.depthG)
	w.byte(opI32Const)
	w.byte(1)
	w.byte(opI32Add)
	w.byte(opGlobalSet)
	w.u32(rw.depthG)
	if cost != 0 {
		rw.emitFuelNegative(w)
		rw.emitDepthExceeded(w)
		w.byte(opI32Or)
		w.byte(opIf)
		w.byte(blockEmpty)
		rw.emitCheck(w)
		rw.emitDepthExceeded(w)
		w.byte(opIf)
		w.byte(blockEmpty)
		w.byte(opCall)
		w.u32(rw.depthFn)
		w.byte(opEnd)
		w.byte(opEnd)
		return
	}
	rw.emitDepthExceeded(w)
	w.byte(opIf)
	w.byte(blockEmpty)
	w.byte(opCall)
	w.u32(rw.depthFn)
	w.byte(opEnd)
}

// emitDepthExceeded pushes depth > max.
func (rw *rewriter) emitDepthExceeded(w *writer) {
	w.byte(opGlobalGet)
	w.u32(rw.depthG)
	w.byte(opI32Const)
	w.s64(int64(rw.maxDepth))
	w.byte(opI32GtU)
}

// emitFuelNegative pushes fuel < 0.
func (rw *rewriter) emitFuelNegative(w *writer) {
	w.byte(opGlobalGet)
	w.u32(rw.fuelG)
	w.byte(opI64Const)
	w.byte(0)
	w.byte(opI64LtS)
}

// emitSub writes fuel -= cost.
func (rw *rewriter) emitSub(w *writer, cost int64) {
	w.byte(opGlobalGet)
	w.u32(rw.fuelG)
	w.byte(opI64Const)
	w.s64(cost)
	w.byte(opI64Sub)
	w.byte(opGlobalSet)
	w.u32(rw.fuelG)
}

// emitExit writes the call-depth decrement of a function exit.
func (rw *rewriter) emitExit(w *writer) {
	if expNoDepth {
		return
	}
	w.byte(opGlobalGet)
	w.u32(rw.depthG)
	w.byte(opI32Const)
	w.byte(1)
	w.byte(opI32Sub)
	w.byte(opGlobalSet)
	w.u32(rw.depthG)
}

// emitCharge writes "fuel -= cost; if fuel < 0 { tick() }". A zero cost
// writes nothing.
func (rw *rewriter) emitCharge(w *writer, cost int64) {
	if cost == 0 || expNoFuel {
		return
	}
	rw.emitSub(w, cost)
	rw.emitCheck(w)
}

// emitCheck writes "if fuel < 0 { tick() }".
func (rw *rewriter) emitCheck(w *writer) {
	rw.emitFuelNegative(w)
	w.byte(opIf)
	w.byte(blockEmpty)
	w.byte(opCall)
	w.u32(rw.tickFn)
	w.byte(opEnd)
}

// emitDynamic writes the charge of a bulk operation whose i32 length (an
// unsigned count of bytes or elements) is on top of the stack: "fuel -=
// uint64(len) >> shift; if fuel < 0 { tick() }", leaving the length in place.
func (rw *rewriter) emitDynamic(w *writer, scratch uint32, shift byte) {
	w.byte(opLocalTee)
	w.u32(scratch)
	w.byte(opGlobalGet)
	w.u32(rw.fuelG)
	w.byte(opLocalGet)
	w.u32(scratch)
	w.byte(opI64ExtendU)
	if shift != 0 {
		w.byte(opI64Const)
		w.byte(shift)
		w.byte(opI64ShrU)
	}
	w.byte(opI64Sub)
	w.byte(opGlobalSet)
	w.u32(rw.fuelG)
	rw.emitCheck(w)
}

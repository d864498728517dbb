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
	fuelG, depthG           uint32 // global indices of the added globals (fuel, calls left)
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

// charge is the charge of the region starting before instruction at (at ==
// 0: the function entry, emitted with the call-depth check). A negative cost
// is a refund (see hoisting in doc.go).
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

	codeSize := 0
	for i := range m.code {
		codeSize += len(m.code[i].code)
	}
	code := writer{b: make([]byte, 0, codeSize*3/2+64)}
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

	out := writer{b: make([]byte, 0, len(code.b)+m.size-codeSize+1024)}
	var sec writer
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
	sec.raw([]byte{valI64, 1, opI64Const})           // calls left
	sec.s64(int64(rw.maxDepth) - 1)
	sec.byte(opEnd)
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
	scratch, err := rw.analyze(fb, numLocals)
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

	rw.emitEntry(w, rw.charges[0].cost, m.numImportedFuncs+numAdded+uint32(i), len(ft.params))
	code := fb.code
	next := 1        // rw.charges[0] is the entry charge
	calling := false // inside a call bracket: depth decremented
	for idx, in := range rw.ins {
		if next < len(rw.charges) && rw.charges[next].at == idx {
			rw.emitCharge(w, rw.charges[next].cost)
			next++
		}
		switch in.op {
		case opCall, opCallIndirect:
			if !calling {
				rw.emitDepth(w, opI64Sub)
				calling = true
			}
		case opBlock, opLoop, opIf, opElse, opEnd, opBr, opBrIf, opBrTable, opReturn, opUnreachable:
			if calling {
				rw.emitDepth(w, opI64Add)
				calling = false
			}
		}
		switch in.op {
		case opCall, opRefFunc:
			w.byte(byte(in.op))
			w.u32(m.shift(in.imm))
		case opMemoryGrow:
			w.byte(opCall)
			w.u32(rw.growFn)
		case prefixMisc<<8 | miscMemoryInit, prefixMisc<<8 | miscMemoryCopy, prefixMisc<<8 | miscMemoryFill,
			prefixMisc<<8 | miscTableInit, prefixMisc<<8 | miscTableCopy, prefixMisc<<8 | miscTableFill:
			rw.emitDynamic(w, scratchLocal, BulkShift)
			w.raw(code[in.start:in.end])
		case prefixMisc<<8 | miscTableGrow:
			rw.emitDynamic(w, scratchLocal, 0)
			w.raw(code[in.start:in.end])
		default:
			w.raw(code[in.start:in.end])
		}
	}
	return nil
}

// analyze decodes and checks the body of fb, filling rw.ins with its
// instructions and rw.charges with its regions and their costs (see the
// package documentation). It reports whether a dynamic charge needs the
// scratch local.
func (rw *rewriter) analyze(fb *funcBody, numLocals uint64) (scratch bool, err error) {
	rw.ins = rw.ins[:0]
	rw.charges = append(rw.charges[:0], charge{at: 0, cost: int64(fb.numLocals / 8)})
	rw.ctl = append(rw.ctl[:0], ctrl{op: opEnd, reachable: true})
	cur := 0 // index in rw.charges of the open region; -1: unreachable code

	open := func(at int) {
		rw.charges = append(rw.charges, charge{at: at})
		cur = len(rw.charges) - 1
	}
	r := &reader{b: fb.code, base: fb.offset}
	// mark records a branch to the label at depth and returns the target's
	// opcode.
	mark := func(depth uint32, at int) (uint16, error) {
		if uint64(depth) >= uint64(len(rw.ctl)) {
			return 0, errors.Wrapf(ErrInvalid, "offset %#x: branch depth %d out of range", at, depth)
		}
		t := &rw.ctl[len(rw.ctl)-1-int(depth)]
		if cur >= 0 {
			t.targeted = true
		}
		return t.op, nil
	}
	for len(rw.ctl) > 0 {
		if r.eof() {
			return false, r.errorf("function body ends inside a block")
		}
		at := r.offset()
		in, err := rw.decode(r, numLocals)
		if err != nil {
			return false, err
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
				return false, errors.Wrapf(ErrInvalid, "offset %#x: else without if", at)
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
			case opBlock:
				if t.targeted {
					open(idx + 1) // a merge point
				}
			case opIf:
				if t.els >= 0 {
					// Exactly one arm runs after the if: charge the dearer
					// arm's first region with the if's region and refund the
					// difference in the other arm (see doc.go, hoisting).
					h := max(rw.charges[t.then].cost, rw.charges[t.els].cost)
					rw.charges[t.pre].cost += h
					rw.charges[t.then].cost -= h
					rw.charges[t.els].cost -= h
				}
				live := cur >= 0 || t.targeted || !t.hasElse || t.thenLive
				cur = -1
				if t.reachable && live {
					open(idx + 1)
				}
			case opLoop:
				// Only the fall-through reaches the end, but the current
				// region may run once per iteration (a do-while's br_if):
				// the code after the loop gets its own region.
				if cur >= 0 {
					open(idx + 1)
				}
			}
			// opEnd (the function): done.
		case opBr, opBrIf:
			target, err := mark(in.imm, at)
			if err != nil {
				return false, err
			}
			switch {
			case in.op == opBr:
				cur = -1
			case target == opLoop && cur >= 0:
				// A conditional back edge: the code after it runs only
				// when the loop is done, so it gets its own region rather
				// than being paid for on every iteration. A forward br_if
				// stays merged: its taken path pays for the rest of the
				// region, and the loop costs one check per iteration.
				open(idx + 1)
			}
		case opBrTable:
			for _, l := range rw.targets {
				if _, err := mark(l, at); err != nil {
					return false, err
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
		return false, r.errorf("%d bytes after the end of the function body", len(r.b)-r.pos)
	}
	return scratch, nil
}

// emitEntry writes the function prologue of function self (its index in
// the output) with numParams parameters: the entry region's charge and the
// call-depth check, with one branch to the slow path:
//
//	fuel -= cost
//	if fuel|depth < 0 {
//		if fuel < 0 { tick() }
//		if depth < 0 { depth_exceeded(); unreachable }
//		fuel += cost
//		return self(params...)
//	}
//
// After tick the function enters itself again instead of going on: the slow
// path then ends in a return and never joins the fast path, which keeps the
// parameters and the fuel in registers there (wazero's compiler reloads
// every value live across a join with a call on one side). The refund and
// the charge on re-entry cancel out, so fuel is unchanged. The re-entry is a
// real frame that the depth counter does not see, at most one per counted
// frame (the re-entered call passes its check: tick left fuel ≥ 0).
//
// The check is written "if fuel|depth >= 0 {} else { ... }" (see
// emitUnlikely) so that the fast path falls through. Fuel is never negative
// outside a charge, so with no cost only the depth needs checking.
func (rw *rewriter) emitEntry(w *writer, cost int64, self uint32, numParams int) {
	if cost == 0 {
		rw.emitDepthCheck(w)
		return
	}
	rw.emitAdd(w, rw.fuelG, -cost)
	w.byte(opGlobalGet)
	w.u32(rw.fuelG)
	w.byte(opGlobalGet)
	w.u32(rw.depthG)
	w.byte(0x84) // i64.or
	w.byte(opI64Const)
	w.byte(0)
	w.byte(opI64GeS)
	rw.emitUnlikely(w)
	rw.emitNegative(w, rw.fuelG)
	rw.emitSlowCall(w, rw.tickFn)
	rw.emitDepthCheck(w)
	rw.emitAdd(w, rw.fuelG, cost)
	for p := range numParams {
		w.byte(opLocalGet)
		w.u32(uint32(p))
	}
	w.byte(opCall)
	w.u32(self)
	w.byte(opReturn)
	w.byte(opEnd)
}

// emitUnlikely opens the slow path of a check whose condition (true: all
// is well) is on the stack: "if else". The fast path is the empty then
// arm, so wazero's compiler lays it out as the fall-through and puts the
// slow path after it; the caller writes the slow path and its end. Only for
// slow paths that end in return or unreachable: one that joins the fast
// path again costs the fast path a jump over it.
func (rw *rewriter) emitUnlikely(w *writer) {
	w.byte(opIf)
	w.byte(blockEmpty)
	w.byte(opElse)
}

// emitNonNegative pushes global g >= 0.
func (rw *rewriter) emitNonNegative(w *writer, g uint32) {
	w.byte(opGlobalGet)
	w.u32(g)
	w.byte(opI64Const)
	w.byte(0)
	w.byte(opI64GeS)
}

// emitNegative pushes global g < 0.
func (rw *rewriter) emitNegative(w *writer, g uint32) {
	w.byte(opGlobalGet)
	w.u32(g)
	w.byte(opI64Const)
	w.byte(0)
	w.byte(opI64LtS)
}

// emitSlowCall writes "if { fn() }", consuming the condition on the stack.
func (rw *rewriter) emitSlowCall(w *writer, fn uint32) {
	w.byte(opIf)
	w.byte(blockEmpty)
	w.byte(opCall)
	w.u32(fn)
	w.byte(opEnd)
}

// emitDepthCheck writes "if depth >= 0 {} else { depth_exceeded();
// unreachable }": depth_exceeded never returns.
func (rw *rewriter) emitDepthCheck(w *writer) {
	rw.emitNonNegative(w, rw.depthG)
	rw.emitUnlikely(w)
	w.byte(opCall)
	w.u32(rw.depthFn)
	w.byte(opUnreachable)
	w.byte(opEnd)
}

// emitAdd writes g += delta for an i64 global g.
func (rw *rewriter) emitAdd(w *writer, g uint32, delta int64) {
	w.byte(opGlobalGet)
	w.u32(g)
	w.byte(opI64Const)
	if delta < 0 && delta != -delta {
		w.s64(-delta)
		w.byte(opI64Sub)
	} else {
		w.s64(delta)
		w.byte(opI64Add)
	}
	w.byte(opGlobalSet)
	w.u32(g)
}

// emitDepth writes the opening (op i64.sub: one more call in progress) or
// closing (i64.add) of a call bracket.
func (rw *rewriter) emitDepth(w *writer, op byte) {
	w.byte(opGlobalGet)
	w.u32(rw.depthG)
	w.byte(opI64Const)
	w.byte(1)
	w.byte(op)
	w.byte(opGlobalSet)
	w.u32(rw.depthG)
}

// emitCharge writes the charge of a region: "fuel -= cost; if fuel < 0 {
// tick() }", or for a negative cost (a refund, see hoisting) "fuel +=
// -cost", which cannot make fuel negative. A zero cost writes nothing.
func (rw *rewriter) emitCharge(w *writer, cost int64) {
	switch {
	case cost < 0:
		rw.emitAdd(w, rw.fuelG, -cost)
	case cost > 0:
		rw.emitAdd(w, rw.fuelG, -cost)
		rw.emitNegative(w, rw.fuelG)
		rw.emitSlowCall(w, rw.tickFn)
	}
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
	rw.emitNegative(w, rw.fuelG)
	rw.emitSlowCall(w, rw.tickFn)
}

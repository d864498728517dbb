package fuel

// The rewrite: region analysis and frame estimate (analyze), code emission
// (function) and module assembly (instrument).

import (
	"github.com/cockroachdb/errors"
	"github.com/tetratelabs/wazero/api"
)

// numAdded is the number of function imports the rewrite appends: tick, grow
// and depth_exceeded, in this order.
const numAdded = 3

// rewriter holds the module-wide facts of one rewrite and buffers reused
// from one function to the next.
type rewriter struct {
	m     *module
	stack int64 // initial value of the stack globals

	tickFn, growFn, depthFn uint32 // function indices of the added imports
	fuelG, stackG, lowG     uint32 // global indices of the added globals
	voidType, growType      uint32 // type indices of the added imports
	types                   []funcType
	// checksG and chargesG count the fuel checks and the region charges
	// executed, when module.countChecks is set (tests only).
	checksG, chargesG uint32

	// Per-function state, reset by function.
	ins     []instr
	charges []charge
	ctl     []ctrl
	targets []uint32
	loopBrs []loopBr   // br instructions to loops, by region
	locals  []localRun // the function's parameters and locals, by type
	set     []bool     // by local: a local.set or local.tee writes it
	frame   frameSize  // the function's frame estimate (see analyze)
}

// localRun is a run of locals of one type ending before index end.
type localRun struct {
	end uint64
	typ byte
}

// frameSize counts the values a function's compiled frame may hold, by
// size (see FrameCost).
type frameSize struct {
	scalars, vectors uint64
	callArea         uint64 // largest params+results of one call, in 16-byte slots
	nesting          uint64 // deepest block nesting
}

// instr is one decoded instruction of the function being rewritten.
type instr struct {
	op         uint16 // opcode; prefixed: prefix<<8 | sub-opcode
	v8, v16    uint16 // values of 8 and 16 bytes it defines (see frameSize)
	start, end int32  // byte range in funcBody.code
	// imm is the function index (call, ref.func), type index
	// (call_indirect), local index (local.*), the table whose size bounds
	// a bulk table operation (table.fill, table.copy, table.init) or the
	// value of an i32.const.
	imm uint32
}

// charge is the charge of the region starting before instruction at (at ==
// 0: the function entry, emitted with the call-depth check). A negative cost
// is a refund (see hoisting in doc.go). check says whether the charge is
// followed by a check of the fuel (see check points in doc.go); exit that
// the region can leave the function.
type charge struct {
	at    int
	cost  int64
	check bool
	exit  bool
	// clean: the region is entered only right after a region whose
	// charges are all checked (an if's arms, a loop's header), so a check
	// at its top would find nothing new when its own cost is not positive.
	// It is computed once every charge is final (settleClean), from after:
	// the region it is entered right after (-1: none, never clean).
	clean bool
	after int
}

// checkedAtEnd reports whether no unchecked charge can have happened since
// the last check when the region of c ends.
func (c charge) checkedAtEnd() bool { return c.check || c.cost <= 0 && c.clean }

// loopBr is a br in region from to the loop at position ctl of rw.ctl;
// forward is set for a forward jump through a dispatch loop, which was not
// made a check point (see dispatchForward).
type loopBr struct {
	from, ctl int
	forward   bool
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
	localOps       uint64 // local.get, local.set and local.tee before it opened
	// For a loop: a br_if or br_table targets it (condBr), and where its
	// br instructions start in rw.loopBrs.
	condBr bool
	brs    int
	// at is the index in rw.ins of the instruction that opened it.
	at int
	// For a dispatch loop (see dispatchForward): the local its br_table
	// reads, and the code block each value of it selects (the br_table's
	// label depths, the default last; nil: not a dispatch loop). For a
	// block: it is one of a dispatch loop's blocks.
	dispatchLocal  uint32
	dispatch       []uint32
	dispatchBlocks int
	dispatchBlock  bool
}

func (m *module) shift(f uint32) uint32 {
	if f < m.numImportedFuncs {
		return f
	}
	return f + numAdded
}

// instrument rewrites the decoded module m (see the package documentation)
// with stack as the initial value of the stack globals.
func (m *module) instrument(stack int64) ([]byte, error) {
	rw := &rewriter{
		m:        m,
		stack:    stack,
		tickFn:   m.numImportedFuncs,
		growFn:   m.numImportedFuncs + 1,
		depthFn:  m.numImportedFuncs + 2,
		fuelG:    m.numGlobals(),
		stackG:   m.numGlobals() + 1,
		lowG:     m.numGlobals() + 2,
		checksG:  m.numGlobals() + 3,
		chargesG: m.numGlobals() + 4,
		types:    m.types,
	}
	rw.voidType = rw.typeFor(funcType{params: []byte{}, results: []byte{}})
	rw.growType = rw.typeFor(funcType{params: []byte{api.ValueTypeI32}, results: []byte{api.ValueTypeI32}})

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
		// Re-encoded: maxima may be clamped (see addTable).
		defined := m.tables[m.numImportedTables:]
		sec.u32(uint32(len(defined)))
		for _, t := range defined {
			sec.byte(t.elem)
			sec.byte(boolByte(t.lim.hasMax))
			sec.u32(t.lim.min)
			if t.lim.hasMax {
				sec.u32(t.lim.max)
			}
		}
		emit(secTable)
	}
	if m.memoryRaw != nil {
		sec.raw(m.memoryRaw)
		emit(secMemory)
	}

	counters := 0
	if m.countChecks {
		counters = 2
	}
	sec.u32(uint32(len(m.globals) + 3 + counters))
	for _, g := range m.globals {
		sec.byte(g.typ)
		sec.byte(boolByte(g.mutable))
		sec.raw(m.renumberConstExpr(g.init, m.shift))
	}
	// The fuel, then the stack and its low-water mark.
	sec.raw([]byte{api.ValueTypeI64, 1, opI64Const, 0, opEnd})
	for range 2 {
		sec.raw([]byte{api.ValueTypeI64, 1, opI64Const})
		sec.s64(rw.stack)
		sec.byte(opEnd)
	}
	for range counters {
		sec.raw([]byte{api.ValueTypeI64, 1, opI64Const, 0, opEnd})
	}
	emit(secGlobal)

	added := 3
	if m.start != nil {
		added++
	}
	mutable := m.mutableGlobals()
	sec.u32(uint32(len(m.exports) + added + len(mutable) + counters))
	for _, e := range m.exports {
		sec.name(e.name)
		sec.byte(byte(e.kind))
		if e.kind == ExternFunc {
			sec.u32(m.shift(e.index))
		} else {
			sec.u32(e.index)
		}
	}
	for _, g := range []struct {
		name string
		idx  uint32
	}{{FuelExport, rw.fuelG}, {StackExport, rw.stackG}, {StackLowExport, rw.lowG}} {
		sec.name(g.name)
		sec.byte(byte(ExternGlobal))
		sec.u32(g.idx)
	}
	if m.start != nil {
		// No start section: the host runs the start function itself, once
		// it has set the stack globals.
		sec.name(StartExport)
		sec.byte(byte(ExternFunc))
		sec.u32(m.shift(*m.start))
	}
	// The module's mutable globals, for a host that snapshots the instance.
	for _, g := range mutable {
		sec.name(GlobalExport(g))
		sec.byte(byte(ExternGlobal))
		sec.u32(g)
	}
	if counters > 0 {
		for _, g := range []struct {
			name string
			idx  uint32
		}{{checksExport, rw.checksG}, {chargesExport, rw.chargesG}} {
			sec.name(g.name)
			sec.byte(byte(ExternGlobal))
			sec.u32(g.idx)
		}
	}
	emit(secExport)
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
	rw.locals = rw.locals[:0]
	for j, t := range ft.params {
		rw.locals = append(rw.locals, localRun{end: uint64(j) + 1, typ: t})
	}
	end := uint64(len(ft.params))
	for _, g := range fb.locals {
		if g.n > 0 {
			end += uint64(g.n)
			rw.locals = append(rw.locals, localRun{end: end, typ: g.typ})
		}
	}
	scratch, err := rw.analyze(fb, numLocals)
	if err != nil {
		return err
	}
	if d := rw.frame.nesting; d > m.lim.NestingDepth {
		return limitError("nesting_depth", m.lim.NestingDepth, d,
			"function "+itoa(uint64(m.numImportedFuncs)+uint64(i))+" nests blocks "+itoa(d)+" deep")
	}
	if m.loopWork > m.lim.LoopLocalWork {
		return limitError("loop_local_work", m.lim.LoopLocalWork, m.loopWork,
			"function "+itoa(uint64(m.numImportedFuncs)+uint64(i))+" brings the local uses in loops and branch targets (squared per loop) to "+itoa(m.loopWork))
	}
	// The frame: parameters, locals and scratch locals, the values the body
	// defines, the results.
	fr := rw.frame
	for _, t := range ft.params {
		fr.add(t, 1)
	}
	for _, g := range fb.locals {
		fr.add(g.typ, uint64(g.n))
	}
	entryCost := rw.charges[0].cost
	fr.scalars += uint64(scratch) + uint64(boolByte(entryCost != 0))
	for _, t := range ft.results {
		fr.add(t, 1)
	}
	frameCost := FrameCost(fr.scalars, fr.vectors+fr.callArea)
	m.maxFrame = max(m.maxFrame, frameCost)

	// Locals, plus up to two i32 scratch locals for the dynamic charges and
	// an i64 one for the entry check.
	groups := len(fb.locals) + int(boolByte(scratch > 0)) + int(boolByte(entryCost != 0))
	w.u32(uint32(groups))
	for _, g := range fb.locals {
		w.u32(g.n)
		w.byte(g.typ)
	}
	s0, s1 := uint32(numLocals), uint32(numLocals)+1
	if scratch > 0 {
		w.u32(uint32(scratch))
		w.byte(api.ValueTypeI32)
	}
	if entryCost != 0 {
		w.u32(1)
		w.byte(api.ValueTypeI64)
	}

	rw.emitEntry(w, entryCost, uint32(numLocals)+uint32(scratch), m.numImportedFuncs+numAdded+uint32(i), len(ft.params), frameCost)
	code := fb.code
	next := 1        // rw.charges[0] is the entry charge
	calling := false // inside a call bracket: the frame is charged
	for idx, in := range rw.ins {
		if next < len(rw.charges) && rw.charges[next].at == idx {
			rw.emitCharge(w, rw.charges[next])
			next++
		}
		switch in.op {
		case opCall, opCallIndirect:
			if !calling {
				rw.emitAdd(w, rw.stackG, -int64(frameCost))
				calling = true
			}
		case opBlock, opLoop, opIf, opElse, opEnd, opBr, opBrIf, opBrTable, opReturn, opUnreachable:
			if calling {
				rw.emitAdd(w, rw.stackG, int64(frameCost))
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
		case prefixMisc<<8 | miscMemoryInit, prefixMisc<<8 | miscMemoryCopy, prefixMisc<<8 | miscMemoryFill:
			rw.emitBulk(w, s0, false, 0)
			w.raw(code[in.start:in.end])
		case prefixMisc<<8 | miscTableInit, prefixMisc<<8 | miscTableCopy, prefixMisc<<8 | miscTableFill:
			rw.emitBulk(w, s0, true, in.imm)
			w.raw(code[in.start:in.end])
		case prefixMisc<<8 | miscTableGrow:
			w.byte(opLocalTee)
			w.u32(s0)
			w.raw(code[in.start:in.end])
			rw.emitGrown(w, s0, s1)
		default:
			w.raw(code[in.start:in.end])
		}
	}
	return nil
}

// add counts n values of type t.
func (f *frameSize) add(t byte, n uint64) {
	if t == valV128 {
		f.vectors += n
	} else {
		f.scalars += n
	}
}

// localType returns the type of local idx (idx is in range).
func (rw *rewriter) localType(idx uint32) byte {
	lo, hi := 0, len(rw.locals)-1
	for lo < hi {
		mid := (lo + hi) / 2
		if uint64(idx) < rw.locals[mid].end {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return rw.locals[lo].typ
}

// analyze decodes and checks the body of fb, filling rw.ins with its
// instructions, rw.charges with its regions and their costs (see the
// package documentation) and rw.frame with the values the body defines and
// its nesting depth. It returns the number of i32 scratch locals the
// dynamic charges need (0, 1 or 2).
func (rw *rewriter) analyze(fb *funcBody, numLocals uint64) (scratch int, err error) {
	rw.ins = rw.ins[:0]
	rw.frame = frameSize{}
	// Block parameters the locals may need: at most one per enclosing block
	// of each local.set and local.tee, and at most one per block and local
	// set in the body.
	var defDepth, constructs, distinct, localOps uint64
	wide := false
	rw.set = append(rw.set[:0], make([]bool, numLocals)...)
	defer func() {
		phis := min(defDepth, constructs*distinct)
		if wide {
			rw.frame.vectors += phis
		} else {
			rw.frame.scalars += phis
		}
	}()
	rw.charges = append(rw.charges[:0], charge{at: 0, cost: int64(fb.numLocals / 8), check: true, after: -1})
	rw.ctl = append(rw.ctl[:0], ctrl{op: opEnd, reachable: true})
	rw.loopBrs = rw.loopBrs[:0]
	loopWork := uint64(0) // rw.loopBrs entries scanned at loop ends
	cur := 0              // index in rw.charges of the open region; -1: unreachable code

	open := func(at int) {
		rw.charges = append(rw.charges, charge{at: at, after: -1})
		cur = len(rw.charges) - 1
	}
	r := &reader{b: fb.code, base: fb.offset}
	// mark records a branch to the label at depth and returns the target's
	// opcode.
	mark := func(depth uint32, at int, op uint16) (uint16, error) {
		if uint64(depth) >= uint64(len(rw.ctl)) {
			return 0, errors.Wrapf(ErrInvalid, "offset %#x: branch depth %d out of range", at, depth)
		}
		pos := len(rw.ctl) - 1 - int(depth)
		t := &rw.ctl[pos]
		if cur >= 0 {
			t.targeted = true
			if pos == 0 {
				rw.charges[cur].exit = true // a branch out of the function
			}
			if t.op == opLoop {
				// A back edge: every iteration passes a check, unless it
				// is a forward jump through a dispatch loop.
				forward := op == opBr && rw.dispatchForward(pos)
				rw.charges[cur].check = rw.charges[cur].check || !forward
				if op == opBr {
					rw.loopBrs = append(rw.loopBrs, loopBr{from: cur, ctl: pos, forward: forward})
				} else {
					t.condBr = true
				}
			}
		}
		return t.op, nil
	}
	for len(rw.ctl) > 0 {
		if r.eof() {
			return 0, r.errorf("function body ends inside a block")
		}
		at := r.offset()
		in, err := rw.decode(r, numLocals)
		if err != nil {
			return 0, err
		}
		idx := len(rw.ins)
		rw.ins = append(rw.ins, in)
		if cur >= 0 {
			rw.charges[cur].cost += opCost(in.op)
		}
		rw.frame.scalars += uint64(in.v8)
		rw.frame.vectors += uint64(in.v16)
		if in.op >= opLocalGet && in.op <= opLocalTee {
			localOps++
		}
		switch in.op {
		case opLocalSet, opLocalTee:
			// A new value of the local: it may become a block parameter
			// (a phi) of every enclosing block.
			defDepth += uint64(len(rw.ctl) - 1)
			if !rw.set[in.imm] {
				rw.set[in.imm] = true
				distinct++
				wide = wide || rw.localType(in.imm) == valV128
			}
		case opCall, opCallIndirect:
			ti := in.imm
			if in.op == opCall {
				ti = rw.m.funcType(in.imm)
			}
			t := rw.m.types[ti]
			rw.frame.callArea = max(rw.frame.callArea, uint64(len(t.params)+len(t.results)))
		}
		switch in.op {
		case opBlock, opLoop, opIf:
			rw.ctl = append(rw.ctl, ctrl{op: in.op, reachable: cur >= 0, pre: cur, then: -1, els: -1, localOps: localOps,
				brs: len(rw.loopBrs), at: idx})
			rw.frame.nesting = max(rw.frame.nesting, uint64(len(rw.ctl)-1))
			constructs++
			if cur >= 0 && in.op != opBlock {
				pre := cur
				open(idx + 1) // loop header (a branch target) or then arm
				rw.charges[cur].after = pre
				rw.ctl[len(rw.ctl)-1].then = cur
			}
		case opElse:
			t := &rw.ctl[len(rw.ctl)-1]
			if t.op != opIf || t.hasElse {
				return 0, errors.Wrapf(ErrInvalid, "offset %#x: else without if", at)
			}
			t.hasElse, t.thenLive = true, cur >= 0
			cur = -1
			if t.reachable {
				open(idx + 1)
				rw.charges[cur].after = t.pre
				t.els = cur
			}
		case opEnd:
			t := rw.ctl[len(rw.ctl)-1]
			rw.ctl = rw.ctl[:len(rw.ctl)-1]
			if t.op == opLoop || t.op == opIf || t.op == opBlock && t.targeted {
				// A merge point: the compiler may give it a block parameter
				// per local used inside (see Limits.LoopLocalWork).
				n := min(localOps-t.localOps, numLocals)
				rw.m.loopWork += n * n
			}
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
				if t.reachable {
					loopWork += uint64(len(rw.loopBrs) - t.brs)
					rw.pushLoopHeader(&t, len(rw.ctl), loopWork <= maxLoopBrWork)
				}
				// Only the fall-through reaches the end, but the current
				// region may run once per iteration (a do-while's br_if):
				// the code after the loop gets its own region.
				if cur >= 0 {
					open(idx + 1)
				}
			}
			if len(rw.ctl) == 0 && cur >= 0 {
				rw.charges[cur].exit = true // falls off the end of the function
			}
		case opBr, opBrIf:
			target, err := mark(in.imm, at, in.op)
			if err != nil {
				return 0, err
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
			rw.noteDispatch(idx)
			for _, l := range rw.targets {
				if _, err := mark(l, at, in.op); err != nil {
					return 0, err
				}
			}
			cur = -1
		case opReturn, opUnreachable:
			if in.op == opReturn && cur >= 0 {
				rw.charges[cur].exit = true
			}
			cur = -1
		case opCall, opCallIndirect, opMemoryGrow:
			// A host call (an imported function, maybe one in a table, or
			// grow): the fuel must not be negative when the host runs.
			if cur >= 0 && (in.op != opCall || in.imm < rw.m.numImportedFuncs) {
				rw.charges[cur].check = true
			}
		case prefixMisc<<8 | miscMemoryInit, prefixMisc<<8 | miscMemoryCopy, prefixMisc<<8 | miscMemoryFill,
			prefixMisc<<8 | miscTableInit, prefixMisc<<8 | miscTableCopy, prefixMisc<<8 | miscTableFill:
			scratch = max(scratch, 1)
		case prefixMisc<<8 | miscTableGrow:
			scratch = 2
		}
		switch in.op {
		case opTableSet, prefixMisc<<8 | miscTableGrow, prefixMisc<<8 | miscTableFill,
			prefixMisc<<8 | miscTableCopy, prefixMisc<<8 | miscTableInit, prefixMisc<<8 | miscElemDrop:
			rw.m.mutatesTables = true
		case prefixMisc<<8 | miscMemoryInit, prefixMisc<<8 | miscDataDrop:
			rw.m.passiveSegments = true
		}
	}
	if !r.eof() {
		return 0, r.errorf("%d bytes after the end of the function body", len(r.b)-r.pos)
	}
	rw.placeExitChecks()
	rw.settleClean()
	return scratch, nil
}

// settleClean computes each region's clean flag from the region it is
// entered right after, on the final charges: moving a loop header's charge
// (pushLoopHeader) and hoisting an if's dearer arm both charge the region
// before, which may then end unchecked although it was empty when the
// later region opened. (Judged on that early state, a loop at the top of
// another loop lost the check of its branch back to the outer one, and
// the two could spin with no check at all.) A region's predecessor opened
// before it, so one pass in order sees every predecessor settled.
func (rw *rewriter) settleClean() {
	for i := range rw.charges {
		c := &rw.charges[i]
		c.clean = c.after >= 0 && rw.charges[c.after].checkedAtEnd()
	}
}

// placeExitChecks adds a check to every region that can leave the function
// when some region of it is charged without a check, so that no function
// returns with fuel it has not checked, and notes the function's unchecked
// charges and largest checked charge for Info.MaxDebt (see doc.go).
func (rw *rewriter) placeExitChecks() {
	unchecked := func() (sum int64) {
		for _, c := range rw.charges {
			if c.cost > 0 && !c.check {
				sum += c.cost
			}
		}
		return sum
	}
	if unchecked() > 0 {
		for i := range rw.charges {
			if rw.charges[i].exit {
				rw.charges[i].check = true
			}
		}
	}
	rw.m.maxUnchecked = max(rw.m.maxUnchecked, uint64(unchecked()))
	checked := int64(0)
	for _, c := range rw.charges {
		if c.check {
			checked = max(checked, c.cost)
		}
	}
	rw.m.maxChecked = max(rw.m.maxChecked, uint64(checked))
}

// maxLoopBrWork bounds, per function, the br instructions scanned at loop
// ends (each is scanned once per enclosing loop): past it, loop headers are
// charged where they are.
const maxLoopBrWork = 1 << 16

// noteDispatch records the loop around the br_table at rw.ins[idx] as a
// dispatch loop when it has the shape Go's compiler gives every function
// that jumps: a loop whose body opens k blocks and then, with nothing
// else before it, reads a local and branches on it with a br_table:
//
//	loop
//	  block … block        (k blocks)
//	    local.get $pc
//	    br_table …
//	  end  (code block 0) … end  (code block k-1)
//	end
//
// Label depth d < k of that br_table selects code block d: the code after
// the end of the d-th innermost block.
func (rw *rewriter) noteDispatch(idx int) {
	if idx < 2 || rw.ins[idx-1].op != opLocalGet {
		return
	}
	top := len(rw.ctl) - 1
	k := 0
	for top-k > 0 && rw.ctl[top-k].op == opBlock && rw.ctl[top-k].at == idx-2-k {
		k++
	}
	p := top - k
	if k == 0 || p <= 0 || rw.ctl[p].op != opLoop || rw.ctl[p].at != idx-2-k || rw.ctl[p].dispatch != nil {
		return
	}
	rw.ctl[p].dispatchLocal, rw.ctl[p].dispatchBlocks = rw.ins[idx-1].imm, k
	rw.ctl[p].dispatch = append([]uint32(nil), rw.targets...)
	for i := p + 1; i <= top; i++ {
		rw.ctl[i].dispatchBlock = true
	}
}

// dispatchForward reports whether the br about to be recorded, whose
// target is the dispatch loop at rw.ctl[pos], is a forward jump: the two
// instructions before it set the loop's local to a constant that selects
// a code block after the one the br is in. Such a jump needs no check:
// code blocks follow one another in the body, so a run that only falls
// through and jumps forward visits each region of the loop at most once,
// and any repetition needs a jump to the same or an earlier code block,
// which stays a check point. The loop's header (the dispatch) runs once per
// jump; its charge is moved into each jumping region (pushLoopHeader), or,
// when it cannot be, the forward jumps are made check points after all.
func (rw *rewriter) dispatchForward(pos int) bool {
	t := &rw.ctl[pos]
	idx := len(rw.ins) - 1 // the br
	if t.dispatch == nil || idx < 2 || rw.ins[idx-1].op != opLocalSet || rw.ins[idx-1].imm != t.dispatchLocal ||
		rw.ins[idx-2].op != opI32Const {
		return false
	}
	k := t.dispatchBlocks
	open := 0 // its blocks still open here
	for i := pos + 1; i < len(rw.ctl) && rw.ctl[i].dispatchBlock; i++ {
		open++
	}
	v := uint64(rw.ins[idx-2].imm) // br_table reads the value as unsigned
	d := t.dispatch[len(t.dispatch)-1]
	if v < uint64(len(t.dispatch)-1) {
		d = t.dispatch[v]
	}
	// The br is in code block k-1-open (-1: before the first); the target
	// must be a code block (d below the number of blocks) after it.
	return int(d) < k && int(d) > k-1-open
}

// pushLoopHeader charges the header region of loop t (at position pos of
// rw.ctl, just popped) on the paths into it instead of at its top, when
// those paths are the fall-through into the loop and br instructions only
// (no br_if or br_table targets it): each of those regions runs once right
// before the header does, so it pays the header's cost with its own and the
// header needs no check. The loop's br entries are dropped from rw.loopBrs.
func (rw *rewriter) pushLoopHeader(t *ctrl, pos int, ok bool) {
	brs := rw.loopBrs[t.brs:]
	h := t.then
	ok = ok && !t.condBr && t.pre >= 0 && h >= 0 && rw.charges[h].cost > 0
	for _, b := range brs {
		if b.ctl == pos && b.from == h {
			ok = false // the header branches to itself
		}
	}
	kept := brs[:0]
	for _, b := range brs {
		switch {
		case b.ctl != pos:
			kept = append(kept, b)
		case ok:
			rw.charges[b.from].cost += rw.charges[h].cost
		case b.forward:
			// The header keeps its own charge and would run once per
			// jump: the jump checks after all (see dispatchForward).
			rw.charges[b.from].check = true
		}
	}
	if ok {
		rw.charges[t.pre].cost += rw.charges[h].cost
		rw.charges[h].cost = 0
	}
	rw.loopBrs = rw.loopBrs[:t.brs+len(kept)]
}

// emitEntry writes the function prologue of function self (its index in
// the output) with numParams parameters and frame cost frame: the entry
// region's charge and the stack check, with one branch to the slow path:
//
//	fuel -= cost
//	if fuel|(stack-low) < 0 {
//		if stack < 0 { depth_exceeded(); unreachable }
//		if stack < low { low = stack }
//		if fuel < 0 {
//			tick()
//			fuel += cost
//			low = min(low, max(stack-frame, 0))
//			return self(params...)
//		}
//	}
//
// stack ≥ low ≥ 0 outside the slow path (the host keeps both ≥ 0), so
// stack-low ≥ 0 means both that the budget is not spent and that the
// low-water mark holds. The slow path that only moves the mark joins the
// fast path; it makes no call, so nothing live across it is reloaded.
//
// After tick the function enters itself again instead of going on: that
// slow path then ends in a return and never joins the fast path, which keeps
// the parameters and the fuel in registers there (wazero's compiler reloads
// every value live across a join with a call on one side). The refund and
// the charge on re-entry cancel out, so fuel is unchanged. The re-entry is a
// real frame that the stack global does not charge (see emitReentry): at
// most one per tick in progress.
//
// The new fuel is kept in an added i64 local for the check, which saves the
// fast path a load of the global. The check is written "if x >= 0 {} else
// { ... }" (see emitUnlikely) so that the fast path falls through. With no
// cost the fuel is still tested: the caller may have left it negative
// (unchecked charges), and the entry is what bounds that debt.
func (rw *rewriter) emitEntry(w *writer, cost int64, fuelLocal, self uint32, numParams int, frame uint64) {
	rw.count(w, rw.checksG)
	if cost != 0 {
		rw.count(w, rw.chargesG)
		// fuel -= cost, keeping the new fuel in a local for the check
		// rather than loading the global again.
		w.byte(opGlobalGet)
		w.u32(rw.fuelG)
		w.byte(opI64Const)
		w.s64(cost)
		w.byte(opI64Sub)
		w.byte(opLocalTee)
		w.u32(fuelLocal)
		w.byte(opGlobalSet)
		w.u32(rw.fuelG)
		w.byte(opLocalGet)
		w.u32(fuelLocal)
	} else {
		// No charge, but the caller may have left the fuel negative
		// (unchecked charges): the entry is a check point all the same.
		w.byte(opGlobalGet)
		w.u32(rw.fuelG)
	}
	w.byte(opGlobalGet)
	w.u32(rw.stackG)
	w.byte(opGlobalGet)
	w.u32(rw.lowG)
	w.byte(opI64Sub)
	w.byte(opI64Or)
	w.byte(opI64Const)
	w.byte(0)
	w.byte(opI64GeS)
	rw.emitUnlikely(w)
	// stack < 0: the budget is spent.
	rw.emitNonNegative(w, rw.stackG)
	rw.emitUnlikely(w)
	w.byte(opCall)
	w.u32(rw.depthFn)
	w.byte(opUnreachable)
	w.byte(opEnd)
	// low = min(low, stack)
	w.byte(opGlobalGet)
	w.u32(rw.stackG)
	w.byte(opGlobalGet)
	w.u32(rw.lowG)
	w.byte(opI64LtS)
	w.byte(opIf)
	w.byte(blockEmpty)
	w.byte(opGlobalGet)
	w.u32(rw.stackG)
	w.byte(opGlobalSet)
	w.u32(rw.lowG)
	w.byte(opEnd)
	rw.emitNegative(w, rw.fuelG)
	w.byte(opIf)
	w.byte(blockEmpty)
	w.byte(opCall)
	w.u32(rw.tickFn)
	if cost != 0 {
		rw.emitAdd(w, rw.fuelG, cost)
	}
	rw.emitReentry(w, self, numParams, frame)
	w.byte(opEnd)
	w.byte(opEnd)
}

// emitReentry writes "if stack-frame < low { low = max(stack-frame, 0) };
// return self(params...)". The re-entered frame is not charged to the
// stack global: a charge would make later entry checks, and so traps,
// depend on where ticks happened. The low-water mark does see it, so the
// host's view of the peak includes it (capped at the whole budget: the
// mark never goes below 0, which keeps stack-low ≥ 0 meaning stack ≥ 0).
func (rw *rewriter) emitReentry(w *writer, self uint32, numParams int, frame uint64) {
	below := func() {
		w.byte(opGlobalGet)
		w.u32(rw.stackG)
		w.byte(opI64Const)
		w.s64(int64(frame))
		w.byte(opI64Sub)
	}
	below()
	w.byte(opGlobalGet)
	w.u32(rw.lowG)
	w.byte(opI64LtS)
	w.byte(opIf)
	w.byte(blockEmpty)
	below()
	w.byte(opI64Const)
	w.byte(0)
	below()
	w.byte(opI64Const)
	w.byte(0)
	w.byte(opI64GtS)
	w.byte(opSelect)
	w.byte(opGlobalSet)
	w.u32(rw.lowG)
	w.byte(opEnd)
	for p := range numParams {
		w.byte(opLocalGet)
		w.u32(uint32(p))
	}
	w.byte(opCall)
	w.u32(self)
	w.byte(opReturn)
}

// emitUnlikely opens the slow path of a check whose condition (true: all
// is well) is on the stack: "if else". The fast path is the empty then
// arm, so wazero's compiler lays it out as the fall-through and puts the
// slow path after it; the caller writes the slow path and its end.
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

// emitCharge writes the charge of a region: "fuel -= cost", followed by
// "if fuel < 0 { tick() }" when c.check is set; for a negative cost (a
// refund, see hoisting) "fuel += -cost", which cannot make fuel negative,
// followed by the check when c.check is set (the fuel may be negative from
// unchecked charges before it). A zero cost writes only the check, if any.
func (rw *rewriter) emitCharge(w *writer, c charge) {
	if c.cost != 0 {
		rw.emitAdd(w, rw.fuelG, -c.cost)
	}
	if c.cost > 0 {
		rw.count(w, rw.chargesG)
	}
	if c.check && (c.cost > 0 || !c.clean) {
		rw.emitCheck(w)
	}
}

// emitCheck writes "if fuel < 0 { tick() }".
func (rw *rewriter) emitCheck(w *writer) {
	rw.count(w, rw.checksG)
	rw.emitNegative(w, rw.fuelG)
	rw.emitSlowCall(w, rw.tickFn)
}

// count writes g += 1 for a counting global g when counting is on.
func (rw *rewriter) count(w *writer, g uint32) {
	if rw.m.countChecks {
		rw.emitAdd(w, g, 1)
	}
}

// emitBulk writes the charge of a bulk operation whose i32 length (an
// unsigned count of bytes or elements) is on top of the stack, leaving the
// length in place: "fuel -= min(len>>6, bound); if fuel < 0 { tick() }"
// where bound is the memory's size in 64-byte units (pages<<10) or, for a
// table operation, the size of table>>6. That is min(len, size)>>BulkShift:
// an out-of-bounds length is charged only up to the size, and the
// operation's own bounds check traps.
func (rw *rewriter) emitBulk(w *writer, scratch uint32, isTable bool, table uint32) {
	bound := func() {
		if isTable {
			w.byte(prefixMisc)
			w.u32(miscTableSize)
			w.u32(table)
			w.byte(opI32Const)
			w.byte(BulkShift)
			w.byte(opI32ShrU)
		} else {
			w.byte(opMemorySize)
			w.byte(0)
			w.byte(opI32Const)
			w.byte(16 - BulkShift)
			w.byte(opI32Shl)
		}
	}
	units := func() {
		w.byte(opLocalGet)
		w.u32(scratch)
		w.byte(opI32Const)
		w.byte(BulkShift)
		w.byte(opI32ShrU)
	}
	w.byte(opLocalTee)
	w.u32(scratch)
	w.byte(opGlobalGet)
	w.u32(rw.fuelG)
	units()
	bound()
	units()
	bound()
	w.byte(opI32LtU)
	w.byte(opSelect)
	w.byte(opI64ExtendU)
	w.byte(opI64Sub)
	w.byte(opGlobalSet)
	w.u32(rw.fuelG)
	rw.emitCheck(w)
}

// emitGrown writes the charge of a table.grow that has run, its delta in
// local delta and its result on top of the stack (left in place): "fuel -=
// (result == -1 ? 0 : delta); if fuel < 0 { tick() }". A refused grow did
// no work and costs only its static 1.
func (rw *rewriter) emitGrown(w *writer, delta, result uint32) {
	w.byte(opLocalTee)
	w.u32(result)
	w.byte(opGlobalGet)
	w.u32(rw.fuelG)
	w.byte(opLocalGet)
	w.u32(delta)
	w.byte(opI32Const)
	w.byte(0)
	w.byte(opLocalGet)
	w.u32(result)
	w.byte(opI32Const)
	w.byte(1)
	w.byte(opI32Add)
	w.byte(opSelect) // result+1 != 0 ? delta : 0
	w.byte(opI64ExtendU)
	w.byte(opI64Sub)
	w.byte(opGlobalSet)
	w.u32(rw.fuelG)
	rw.emitCheck(w)
}

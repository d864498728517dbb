package fuel

// The instruction decoder: one instruction read with its index checks and
// the features it uses.

import (
	"github.com/cockroachdb/errors"
	"github.com/tetratelabs/wazero/api"
)

// decode reads one instruction, range-checks its indices and records the
// features it uses. For br and br_if in.imm is the label depth; for br_table
// the labels (default last) are left in rw.targets. Label depths are checked
// by the caller, which knows the block nesting.
//
// Read errors and refusals of the reader stay in r.err (see reader). An
// index out of range is returned as an error value instead: decode reads
// all of an instruction's immediates before it reports one, so a scan can
// step over the instruction (see the tests' safeForWazero). The helpers
// below return r.err when a read failed first, so the first error in the
// instruction is the one reported.
func (rw *rewriter) decode(r *reader, numLocals uint64) (instr, error) {
	m := rw.m
	at := r.offset()
	in := instr{start: int32(r.pos)}
	op := r.byte()
	in.op = uint16(op)
	unsupported := func(what string) error {
		if r.err != nil {
			return r.err
		}
		return errors.Wrapf(ErrUnsupported, "offset %#x: %s", at, what)
	}
	invalid := func(format string, args ...any) error {
		if r.err != nil {
			return r.err
		}
		return errors.Wrapf(ErrInvalid, "offset %#x: "+format, append([]any{at}, args...)...)
	}
	index := func(what string, limit uint64) (uint32, error) {
		v := r.u32()
		if r.err != nil {
			return 0, r.err
		}
		if uint64(v) >= limit {
			return v, invalid("%s index %d out of range", what, v)
		}
		return v, nil
	}
	needMemory := func() error {
		if m.memory == nil {
			return invalid("memory instruction without a memory")
		}
		return nil
	}
	memarg := func() error {
		if align := r.u32(); align&0x40 != 0 {
			return unsupported("memory index in memarg (multi-memory)")
		}
		r.u32() // offset
		return needMemory()
	}
	memIndex := func() error {
		mat := r.offset()
		if b := r.byte(); b != 0 {
			return errors.Wrapf(ErrUnsupported, "offset %#x: memory index %d (multi-memory)", mat, b)
		}
		return needMemory()
	}
	table := func() error {
		_, err := m.tableIndex(r)
		return err
	}
	// vals counts the values of types ts the instruction defines.
	vals := func(ts []byte) {
		for _, t := range ts {
			if t == valV128 {
				in.v16++
			} else {
				in.v8++
			}
		}
	}

	var err error
	switch {
	case op == opBlock || op == opLoop || op == opIf:
		bt := r.sleb(33)
		switch {
		case r.err != nil:
		case bt >= 0:
			if bt >= int64(len(m.types)) {
				return in, invalid("block type index %d out of range", bt)
			}
			m.features |= FeatureMultiValue
			vals(m.types[bt].params) // block parameters and results:
			vals(m.types[bt].results)
		case bt == -0x40:
		default:
			switch t := byte(bt & 0x7f); t {
			case api.ValueTypeI32, api.ValueTypeI64, api.ValueTypeF32, api.ValueTypeF64, valV128, valFuncref, api.ValueTypeExternref:
				m.noteValType(t)
				vals([]byte{t})
			default:
				return in, unsupported("block type " + hexByte(t))
			}
		}
	case op == opBr || op == opBrIf:
		in.imm = r.u32()
	case op == opBrTable:
		n := r.count("br_table labels", maxBrTable)
		rw.targets = rw.targets[:0]
		for range n + 1 {
			rw.targets = append(rw.targets, r.u32())
		}
	case op == opCall:
		if in.imm, err = index("function", uint64(m.numFuncs())); err == nil {
			vals(m.types[m.funcType(in.imm)].results)
		}
	case op == opCallIndirect:
		if in.imm, err = index("type", uint64(len(m.types))); err == nil {
			vals(m.types[in.imm].results)
		}
		err = first(err, table())
	case op == opSelectTyped:
		m.features |= FeatureReferenceTypes
		n := r.count("select types", maxParams)
		for range n {
			m.noteValType(r.valType())
		}
		if n != 1 {
			return in, invalid("select with %d types", n)
		}
	case op >= opLocalGet && op <= opLocalTee:
		in.imm, err = index("local", numLocals)
	case op == opGlobalGet || op == opGlobalSet:
		_, err = index("global", uint64(m.numGlobals()))
	case op == opTableGet || op == opTableSet:
		m.features |= FeatureReferenceTypes
		err = table()
	case op >= opI32Load && op <= opI64Store32:
		err = memarg()
	case op == opMemorySize || op == opMemoryGrow:
		err = memIndex()
	case op == opI32Const:
		in.imm = uint32(r.sleb(32)) // its value (a dispatch loop's target, see analyze)
	case op == opI64Const:
		r.sleb(64)
	case op == opF32Const:
		r.bytes(4)
	case op == opF64Const:
		r.bytes(8)
	case op == opRefNull:
		m.features |= FeatureReferenceTypes
		m.noteValType(r.refType())
	case op == opRefIsNull:
		m.features |= FeatureReferenceTypes
	case op == opRefFunc:
		m.features |= FeatureReferenceTypes
		in.imm, err = index("function", uint64(m.numFuncs()))
	case op == prefixMisc:
		err = rw.decodeMisc(r, &in, at, index, memIndex, table)
	case op == prefixSIMD:
		err = rw.decodeSIMD(r, &in, at, memarg)
	case op >= opI32Extend8S && op <= opI64Extend32S:
		m.features |= FeatureSignExtension
	case op <= opNop || op == opElse || op == opEnd || op == opReturn ||
		op == opDrop || op == opSelect || op >= opI32Eqz && op < opI32Extend8S:
		// No immediates (or the opcode could not be read: r.err says).
	default:
		if what, ok := unsupportedOps[op]; ok {
			return in, unsupported(what)
		}
		return in, unsupported("unknown opcode " + hexByte(op))
	}
	in.end = int32(r.pos)
	if op != prefixMisc && op != prefixSIMD {
		in.v8 += uint16(definesScalar(op))
		if op == opSelect || op == opSelectTyped || op == opGlobalGet && m.features&FeatureSIMD != 0 {
			in.v8, in.v16 = 0, 1 // may be a v128
		}
	}
	if err == nil {
		err = r.err
	}
	return in, err
}

// definesScalar reports (1 or 0) whether a single-byte opcode other than
// block, loop, if, call and call_indirect defines a value, counted as 8
// bytes (see frameSize). local.get and local.tee define none: they name a
// local's value.
func definesScalar(op byte) int {
	switch {
	case op <= opCallIndirect, op == opDrop, op >= opLocalGet && op <= opLocalTee,
		op == opGlobalSet, op == opTableSet, op >= opI32Store && op <= opI64Store32:
		return 0
	}
	return 1
}

// first returns the first non-nil error.
func first(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func (rw *rewriter) decodeMisc(r *reader, in *instr, at int,
	index func(string, uint64) (uint32, error), memIndex, table func() error,
) error {
	m := rw.m
	sub := r.u32()
	if r.err != nil {
		return r.err
	}
	if sub > miscTableFill {
		return errors.Wrapf(ErrUnsupported, "offset %#x: unknown opcode 0xfc %d", at, sub)
	}
	in.op = prefixMisc<<8 | uint16(sub)
	tableImm := func() error {
		t, err := m.tableIndex(r)
		in.imm = t
		return err
	}
	dataLimit := uint64(m.numData)
	if m.dataCount != nil {
		dataLimit = uint64(*m.dataCount)
	}
	var err error
	switch {
	case sub <= miscTruncSatLast:
		m.features |= FeatureNontrappingF2I
		in.v8 = 1
	case sub == miscMemoryInit:
		m.features |= FeatureBulkMemory
		_, err = index("data", dataLimit)
		err = first(err, memIndex())
	case sub == miscDataDrop:
		m.features |= FeatureBulkMemory
		_, err = index("data", dataLimit)
	case sub == miscMemoryCopy:
		m.features |= FeatureBulkMemory
		err = first(memIndex(), memIndex())
	case sub == miscMemoryFill:
		m.features |= FeatureBulkMemory
		err = memIndex()
	case sub == miscTableInit:
		m.features |= FeatureBulkMemory
		_, err = index("element", uint64(m.numElems()))
		err = first(err, tableImm())
	case sub == miscElemDrop:
		m.features |= FeatureBulkMemory
		_, err = index("element", uint64(m.numElems()))
	case sub == miscTableCopy:
		m.features |= FeatureBulkMemory
		err = first(tableImm(), table())
	default: // table.grow, table.size, table.fill
		m.features |= FeatureReferenceTypes
		err = tableImm()
		if sub != miscTableFill {
			in.v8 = 1
		}
	}
	return err
}

func (rw *rewriter) decodeSIMD(r *reader, in *instr, at int, memarg func() error) error {
	rw.m.features |= FeatureSIMD
	sub := r.u32()
	if sub > 0xff || simdUnused[sub] {
		return errors.Wrapf(ErrUnsupported, "offset %#x: unknown opcode 0xfd %#x", at, sub)
	}
	in.op = prefixSIMD<<8 | uint16(sub)
	if sub != simdStore && (sub < simdStoreLaneFirst || sub > simdLoadLaneLast) {
		in.v16 = 1 // a few define an i32 or a lane; counted as a v128
	}
	switch {
	case sub <= simdStore, sub == simdLoadZero32, sub == simdLoadZero64:
		return memarg()
	case sub == simdV128Const, sub == simdShuffle:
		r.bytes(16)
	case sub >= simdLaneFirst && sub <= simdLaneLast:
		r.byte()
	case sub >= simdLoadLaneFrst && sub <= simdLoadLaneLast:
		err := memarg()
		r.byte() // the lane: an input that ends here is reported as such
		return first(r.err, err)
	}
	return nil
}

func hexByte(b byte) string {
	const digits = "0123456789abcdef"
	return "0x" + string([]byte{digits[b>>4], digits[b&15]})
}

package fuel

// The opcodes the instrumenter reads or writes, those it refuses, and the
// cost table (opCost).

// Opcodes the instrumenter reads or writes. Prefixed opcodes are written as
// prefix<<8 | sub-opcode in instr.op.
const (
	opUnreachable  = 0x00
	opNop          = 0x01
	opBlock        = 0x02
	opLoop         = 0x03
	opIf           = 0x04
	opElse         = 0x05
	opEnd          = 0x0b
	opBr           = 0x0c
	opBrIf         = 0x0d
	opBrTable      = 0x0e
	opReturn       = 0x0f
	opCall         = 0x10
	opCallIndirect = 0x11
	opDrop         = 0x1a
	opSelect       = 0x1b
	opSelectTyped  = 0x1c
	opLocalGet     = 0x20
	opLocalSet     = 0x21
	opLocalTee     = 0x22
	opGlobalGet    = 0x23
	opGlobalSet    = 0x24
	opTableGet     = 0x25
	opTableSet     = 0x26
	opI32Load      = 0x28
	opI32Store     = 0x36
	opI64Store32   = 0x3e
	opMemorySize   = 0x3f
	opMemoryGrow   = 0x40
	opI32Const     = 0x41
	opI64Const     = 0x42
	opF32Const     = 0x43
	opF64Const     = 0x44
	opI32Eqz       = 0x45
	opI64LtS       = 0x53
	opI64GeS       = 0x59
	opI64Add       = 0x7c
	opI64Sub       = 0x7d
	opI64ShrU      = 0x88
	opI64ExtendU   = 0xad
	opI32Extend8S  = 0xc0
	opI64Extend32S = 0xc4
	opRefNull      = 0xd0
	opRefIsNull    = 0xd1
	opRefFunc      = 0xd2

	prefixMisc    = 0xfc
	prefixSIMD    = 0xfd
	prefixAtomics = 0xfe
)

// Sub-opcodes of prefixMisc.
const (
	miscTruncSatLast = 7
	miscMemoryInit   = 8
	miscDataDrop     = 9
	miscMemoryCopy   = 10
	miscMemoryFill   = 11
	miscTableInit    = 12
	miscElemDrop     = 13
	miscTableCopy    = 14
	miscTableGrow    = 15
	miscTableSize    = 16
	miscTableFill    = 17
)

// Sub-opcodes of prefixSIMD with immediates.
const (
	simdLoadFirst      = 0x00 // 0x00-0x0b: v128 loads and store: memarg
	simdStore          = 0x0b
	simdV128Const      = 0x0c // 16 bytes
	simdShuffle        = 0x0d // 16 lane indices
	simdLaneFirst      = 0x15 // 0x15-0x22: extract/replace lane: lane index
	simdLaneLast       = 0x22
	simdLoadLaneFrst   = 0x54 // 0x54-0x5b: load/store lane: memarg, lane index
	simdLoadLaneLast   = 0x5b
	simdStoreLaneFirst = 0x58 // 0x58-0x5b: store lane
	simdLoadZero32     = 0x5c // memarg
	simdLoadZero64     = 0x5d // memarg
)

// simdUnused are the SIMD sub-opcodes below 0x100 that the SIMD proposal
// leaves unassigned.
var simdUnused = map[uint32]bool{
	0x9a: true, 0xa2: true, 0xa5: true, 0xa6: true, 0xaf: true, 0xb0: true,
	0xb2: true, 0xb3: true, 0xb4: true, 0xbb: true, 0xc2: true, 0xc5: true,
	0xc6: true, 0xcf: true, 0xd0: true, 0xd2: true, 0xd3: true, 0xd4: true,
	0xe2: true, 0xee: true,
}

// unsupportedOps names the single-byte opcodes of proposals the instrumenter
// refuses.
var unsupportedOps = map[byte]string{
	0x06: "try (exception handling)",
	0x07: "catch (exception handling)",
	0x08: "throw (exception handling)",
	0x09: "rethrow (exception handling)",
	0x0a: "throw_ref (exception handling)",
	0x12: "return_call (tail calls)",
	0x13: "return_call_indirect (tail calls)",
	0x14: "call_ref (function references)",
	0x15: "return_call_ref (tail calls)",
	0x18: "delegate (exception handling)",
	0x19: "catch_all (exception handling)",
	0x1f: "try_table (exception handling)",
	0xd3: "ref.eq (GC)",
	0xd4: "ref.as_non_null (function references)",
	0xd5: "br_on_null (function references)",
	0xd6: "br_on_non_null (function references)",
	0xfb: "GC instructions",
	0xfe: "atomic instructions (threads)",
}

// opCost is the static fuel cost of an operator: wasmtime's operator_cost,
// 1 for every operator except the structural and free ones.
func opCost(op uint16) int64 {
	switch op {
	case opNop, opDrop, opBlock, opLoop, opEnd, opElse, opUnreachable, opReturn:
		return 0
	}
	return 1
}

// Opcodes only the rewrite writes.
const (
	opI32LtU  = 0x49
	opI32Add  = 0x6a
	opI32Shl  = 0x74
	opI32ShrU = 0x76
	opI64Or   = 0x84
	opI64GtS  = 0x55
)

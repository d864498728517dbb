package fuel

import "github.com/tetratelabs/wazero/api"

// A tiny assembler for hand-written test modules, so that tests need no
// wat2wasm: each helper returns the bytes of one binary-format construct.

func cat(parts ...[]byte) []byte {
	var out []byte
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func u32(v uint32) []byte { return appendU32(nil, v) }

func s64(v int64) []byte { return appendS64(nil, v) }

func str(s string) []byte { return cat(u32(uint32(len(s))), []byte(s)) }

// vec is a vector of already encoded items.
func vec(items ...[]byte) []byte { return cat(u32(uint32(len(items))), cat(items...)) }

func section(id byte, items ...[]byte) []byte {
	body := cat(items...)
	return cat([]byte{id}, u32(uint32(len(body))), body)
}

// wasmModule is the magic and version followed by sections.
func wasmModule(sections ...[]byte) []byte { return cat(wasmMagic, cat(sections...)) }

func functype(params, results []byte) []byte {
	return cat([]byte{0x60}, u32(uint32(len(params))), params, u32(uint32(len(results))), results)
}

func types(ts ...[]byte) []byte { return section(secType, vec(ts...)) }

func importFunc(mod, name string, typ uint32) []byte {
	return cat(str(mod), str(name), []byte{byte(ExternFunc)}, u32(typ))
}

func imports(entries ...[]byte) []byte { return section(secImport, vec(entries...)) }

func funcs(typeIdx ...uint32) []byte {
	items := make([][]byte, len(typeIdx))
	for i, t := range typeIdx {
		items[i] = u32(t)
	}
	return section(secFunction, vec(items...))
}

// memory is a memory section with one memory of min pages (max if >= 0).
func memory(min uint32, max int64) []byte {
	if max < 0 {
		return section(secMemory, vec(cat([]byte{0}, u32(min))))
	}
	return section(secMemory, vec(cat([]byte{1}, u32(min), u32(uint32(max)))))
}

func exportEntry(name string, kind ExternKind, idx uint32) []byte {
	return cat(str(name), []byte{byte(kind)}, u32(idx))
}

func exports(entries ...[]byte) []byte { return section(secExport, vec(entries...)) }

// body is a function body: locals (pairs of count and type) and code. The
// final end is appended.
func body(locals []localGroup, code ...[]byte) []byte {
	var ls [][]byte
	for _, l := range locals {
		ls = append(ls, cat(u32(l.n), []byte{l.typ}))
	}
	b := cat(vec(ls...), cat(code...), []byte{opEnd})
	return cat(u32(uint32(len(b))), b)
}

func codes(bodies ...[]byte) []byte { return section(secCode, vec(bodies...)) }

// Instructions.
func op(b ...byte) []byte       { return b }
func localGet(i uint32) []byte  { return cat([]byte{opLocalGet}, u32(i)) }
func localSet(i uint32) []byte  { return cat([]byte{opLocalSet}, u32(i)) }
func localTee(i uint32) []byte  { return cat([]byte{opLocalTee}, u32(i)) }
func globalGet(i uint32) []byte { return cat([]byte{opGlobalGet}, u32(i)) }
func globalSet(i uint32) []byte { return cat([]byte{opGlobalSet}, u32(i)) }
func i32c(v int32) []byte       { return cat([]byte{opI32Const}, s64(int64(v))) }
func i64c(v int64) []byte       { return cat([]byte{opI64Const}, s64(v)) }
func call(f uint32) []byte      { return cat([]byte{opCall}, u32(f)) }
func br(l uint32) []byte        { return cat([]byte{opBr}, u32(l)) }
func brIf(l uint32) []byte      { return cat([]byte{opBrIf}, u32(l)) }
func block(bt byte, code ...[]byte) []byte {
	return cat([]byte{opBlock, bt}, cat(code...), []byte{opEnd})
}
func loop(bt byte, code ...[]byte) []byte {
	return cat([]byte{opLoop, bt}, cat(code...), []byte{opEnd})
}
func misc(sub uint32, imm ...byte) []byte { return cat([]byte{prefixMisc}, u32(sub), imm) }

func brTable(def uint32, labels ...uint32) []byte {
	items := make([][]byte, len(labels))
	for i, l := range labels {
		items[i] = u32(l)
	}
	return cat([]byte{opBrTable}, vec(items...), u32(def))
}

func ifElse(bt byte, then, els []byte) []byte {
	if els == nil {
		return cat([]byte{opIf, bt}, then, []byte{opEnd})
	}
	return cat([]byte{opIf, bt}, then, []byte{opElse}, els, []byte{opEnd})
}

// Numeric opcodes used by the tests.
const (
	opI32Mul  = 0x6c
	opI32And  = 0x71
	opI32Xor  = 0x73
	opI32RemU = 0x70
	opI32Sub  = 0x6b
	opI32Ne   = 0x47
	opI32GeU  = 0x4f
	opI64LtU  = 0x54
	opI64Mul  = 0x7e
)

var (
	i32  = []byte{api.ValueTypeI32}
	i64  = []byte{api.ValueTypeI64}
	none = []byte{}
)

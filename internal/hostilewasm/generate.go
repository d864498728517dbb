package hostilewasm

// The generators: small WASI commands that are malformed, trap, or push the
// runtime's bounds (deep nesting, big code and data, many locals or
// signatures, stack bombs).

import (
	"encoding/binary"

	"github.com/latent-node/latent-node/vocab"
)

// Opcodes the generators emit.
const (
	opUnreachable = 0x00
	opNop         = 0x01
	opBlock       = 0x02
	opLoop        = 0x03
	opIf          = 0x04
	opBr          = 0x0c
	opBrIf        = 0x0d
	opReturn      = 0x0f
	opCall        = 0x10
	opDrop        = 0x1a
	opLocalGet    = 0x20
	opLocalSet    = 0x21
	opI64Const    = 0x42
	opI32Eqz      = 0x45
	opI32Ne       = 0x47
	opI32Sub      = 0x6b
	opI64Add      = 0x7c
	opI64ExtendU  = 0xad
	opRefNull     = 0xd0
	opPrefixFC    = 0xfc
	fcMemoryFill  = 11
	fcTableGrow   = 15
	blockEmpty    = 0x40
)

// WASIModule is the import module name of WASI preview 1.
const WASIModule = "wasi_snapshot_preview1"

// PageSize is the WebAssembly page size in bytes.
const PageSize = vocab.WasmPageBytes

var voidType = FuncType{}

// command returns a module with one page of exported memory and the given
// functions; function fnStart (an index counting imports) is exported as
// _start.
func command(m Module, startIndex uint32) Module {
	if len(m.Types) == 0 {
		m.Types = []FuncType{voidType}
	}
	if m.Memories == nil {
		m.Memories = []Limits{{Min: 1}}
	}
	m.Exports = append(m.Exports, Export{Name: "memory", Kind: ExportMemory, Index: 0},
		Export{Name: "_start", Kind: ExportFunc, Index: startIndex})
	return m
}

// Trivial is a WASI command whose _start returns at once.
func Trivial() []byte {
	m := command(Module{Funcs: []Func{{Type: 0}}}, 0)
	return m.Encode()
}

// WrongSignatureImport imports wasi_snapshot_preview1.fd_write with the type
// (i32) -> (i32) instead of (i32, i32, i32, i32) -> (i32) and calls it from
// _start. Valid WebAssembly; only linking against WASI can refuse it.
func WrongSignatureImport() []byte {
	m := command(Module{
		Types:   []FuncType{voidType, {Params: []ValType{I32}, Results: []ValType{I32}}},
		Imports: []Import{{Module: WASIModule, Name: "fd_write", Type: 1}},
		Funcs:   []Func{{Type: 0, Body: []byte{opI32Const, 1, opCall, 0, opDrop}}},
	}, 1)
	return m.Encode()
}

// UnknownImport imports wasi_snapshot_preview1.<name> as () -> () and calls
// it from _start.
func UnknownImport(name string) []byte {
	m := command(Module{
		Imports: []Import{{Module: WASIModule, Name: name, Type: 0}},
		Funcs:   []Func{{Type: 0, Body: []byte{opCall, 0}}},
	}, 1)
	return m.Encode()
}

// DataOutOfBounds has one page of memory and an active data segment at
// offset 65535 of two bytes: instantiation fails (out of bounds).
func DataOutOfBounds() []byte {
	m := command(Module{
		Funcs: []Func{{Type: 0}},
		Data:  []Data{{Offset: PageSize - 1, Bytes: []byte("xy")}},
	}, 0)
	return m.Encode()
}

// StartTrap has a start function that executes unreachable.
func StartTrap() []byte {
	start := uint32(1)
	m := command(Module{
		Funcs: []Func{{Type: 0}, {Type: 0, Body: []byte{opUnreachable}}},
		Start: &start,
	}, 0)
	return m.Encode()
}

// NestedBlocks is a _start of depth nested empty blocks (3 bytes each).
func NestedBlocks(depth int) []byte {
	body := make([]byte, 0, 3*depth)
	for i := 0; i < depth; i++ {
		body = append(body, opBlock, blockEmpty)
	}
	for i := 0; i < depth; i++ {
		body = append(body, opEnd)
	}
	m := command(Module{Funcs: []Func{{Type: 0, Body: body}}}, 0)
	return m.Encode()
}

// LongFunction is a _start of n nop instructions (one byte each).
func LongFunction(n int) []byte {
	body := make([]byte, n)
	for i := range body {
		body[i] = opNop
	}
	m := command(Module{Funcs: []Func{{Type: 0, Body: body}}}, 0)
	return m.Encode()
}

// ManyLocals has funcs functions (the first is _start), each declaring
// locals i64 locals in one declaration and an empty body.
func ManyLocals(funcs, locals int) []byte {
	fs := make([]Func, funcs)
	for i := range fs {
		fs[i] = Func{Type: 0, Locals: []Local{{Count: uint32(locals), Type: I64}}}
	}
	m := command(Module{Funcs: fs}, 0)
	return m.Encode()
}

// MaxBodyBytes is the size of each function body BigCode emits, below the
// deploy limit on one body (512 KiB by default).
const MaxBodyBytes = 256 << 10

// BigCode is a valid module of codeBytes of function bodies (plus their end
// opcodes) spread over functions of at most MaxBodyBytes each. Each body
// pushes and drops distinct constants derived from seed, so different seeds
// give different code (not only different bytes). _start returns at once;
// the other functions are never called.
func BigCode(codeBytes int, seed uint64) []byte {
	var fs []Func
	fs = append(fs, Func{Type: 0})
	x := seed*0x9e3779b97f4a7c15 + 1
	for left := codeBytes; left > 0; {
		n := min(left, MaxBodyBytes)
		body := make([]byte, 0, n+16)
		for len(body) < n-12 {
			x ^= x << 13
			x ^= x >> 7
			x ^= x << 17
			body = append(body, opI64Const)
			body = AppendI64(body, int64(x>>20))
			body = append(body, opDrop)
		}
		for len(body) < n {
			body = append(body, opNop)
		}
		fs = append(fs, Func{Type: 0, Body: body})
		left -= n
	}
	m := command(Module{Funcs: fs}, 0)
	return m.Encode()
}

// BigData has an active data segment of size bytes at offset 0 and just
// enough memory for it.
func BigData(size int) []byte {
	// A 4 KiB pattern, then doubling copies: cheap even under the race
	// detector.
	data := make([]byte, size)
	for i := 0; i+8 <= min(size, 4096); i += 8 {
		binary.LittleEndian.PutUint64(data[i:], uint64(i)*0x9e3779b97f4a7c15)
	}
	for n := 4096; n < size; n *= 2 {
		copy(data[n:], data[:n])
	}
	pages := uint32((size + PageSize - 1) / PageSize)
	m := command(Module{
		Funcs:    []Func{{Type: 0}},
		Memories: []Limits{{Min: max(pages, 1)}},
		Data:     []Data{{Offset: 0, Bytes: data}},
	}, 0)
	return m.Encode()
}

// StackBomb: _start calls a function r(depth) that recurses depth times,
// each frame keeping live i64 values computed from its argument on the
// operand stack across the recursive call (so no engine can drop them), then
// adding them to the callee's result.
func StackBomb(depth uint32, live int) []byte {
	var r []byte
	// if d == 0 { return 0 }
	r = append(r, opLocalGet, 0, opI32Eqz, opIf, blockEmpty, opI64Const, 0, opReturn, opEnd)
	// x = u64(d)
	r = append(r, opLocalGet, 0, opI64ExtendU, opLocalSet, 1)
	for k := 0; k < live; k++ {
		r = append(r, opLocalGet, 1, opI64Const)
		r = AppendI64(r, int64(k+1))
		r = append(r, opI64Add)
	}
	r = append(r, opLocalGet, 0, opI32Const, 1, opI32Sub, opCall, 1)
	for k := 0; k < live; k++ {
		r = append(r, opI64Add)
	}
	start := []byte{opI32Const}
	start = AppendI32(start, int32(depth))
	start = append(start, opCall, 1, opDrop)
	m := command(Module{
		Types: []FuncType{voidType, {Params: []ValType{I32}, Results: []ValType{I64}}},
		Funcs: []Func{{Type: 0, Body: start}, {Type: 1, Locals: []Local{{Count: 1, Type: I64}}, Body: r}},
	}, 0)
	return m.Encode()
}

// TableGrow has an empty funcref table without a maximum; _start grows it by
// delta null entries and traps (unreachable) unless table.grow returned -1.
// So an activation succeeds exactly when the grow was refused.
func TableGrow(delta uint32) []byte {
	body := []byte{opRefNull, byte(FuncRef), opI32Const}
	body = AppendI32(body, int32(delta))
	body = append(body, opPrefixFC, fcTableGrow, 0)
	body = append(body, opI32Const, 0x7f, opI32Ne, opIf, blockEmpty, opUnreachable, opEnd)
	m := command(Module{Funcs: []Func{{Type: 0, Body: body}}, Tables: []Limits{{Min: 0}}}, 0)
	return m.Encode()
}

// MemoryFill has one page of memory; _start fills n bytes from offset 0,
// which traps out of bounds for any n above 65536.
func MemoryFill(n uint32) []byte {
	body := []byte{opI32Const, 0, opI32Const, 0, opI32Const}
	body = AppendI32(body, int32(n))
	body = append(body, opPrefixFC, fcMemoryFill, 0)
	m := command(Module{Funcs: []Func{{Type: 0, Body: body}}}, 0)
	return m.Encode()
}

// Salted returns module with a custom section holding salt appended: the
// same code under a different digest.
func Salted(module []byte, salt uint64) []byte {
	var s []byte
	s = appendName(s, "hostile-salt")
	s = binary.LittleEndian.AppendUint64(s, salt)
	out := append([]byte(nil), module...)
	return appendSection(out, 0, s)
}

// ManySignatures is a WASI command that declares n function types no other
// salt gives (each one's parameters spell salt·n + i in base 2 over i32
// and i64, 40 of them), besides the void type its _start uses: every
// compile of a module with fresh signatures grows the runtime's type table
// for good.
func ManySignatures(n int, salt uint64) []byte {
	types := []FuncType{voidType}
	for i := range n {
		v := salt*uint64(n) + uint64(i)
		params := make([]ValType, 40)
		for b := range params {
			params[b] = I32
			if v>>b&1 == 1 {
				params[b] = I64
			}
		}
		types = append(types, FuncType{Params: params})
	}
	m := command(Module{Types: types, Funcs: []Func{{Type: 0}}}, 0)
	return m.Encode()
}

// IovecCalls is a WASI command whose _start calls fn (fd_read, fd_write,
// fd_pread or fd_pwrite) calls times on fd with n iovecs from address 0,
// all zero-length (the memory is zero), and drops what it returns: the
// per-iovec work a guest asks of the host in one call.
func IovecCalls(fn string, fd, n, calls uint32) []byte {
	params := []ValType{I32, I32, I32, I32}
	positioned := fn == "fd_pread" || fn == "fd_pwrite"
	if positioned {
		params = []ValType{I32, I32, I32, I64, I32}
	}
	call := []byte{opI32Const}
	call = AppendI32(call, int32(fd))
	call = append(call, opI32Const, 0, opI32Const)
	call = AppendI32(call, int32(n))
	if positioned {
		call = append(call, opI64Const, 0)
	}
	call = append(call, opI32Const)
	call = AppendI32(call, int32(8*n)) // the result, after the iovecs
	call = append(call, opCall, 0, opDrop)
	body := repeat(call, calls)
	pages := (8*n + 4 + PageSize - 1) / PageSize
	m := command(Module{
		Types:    []FuncType{voidType, {Params: params, Results: []ValType{I32}}},
		Imports:  []Import{{Module: WASIModule, Name: fn, Type: 1}},
		Funcs:    []Func{{Type: 0, Locals: []Local{{Count: 1, Type: I32}}, Body: body}},
		Memories: []Limits{{Min: pages}},
	}, 1)
	return m.Encode()
}

// SizesCalls is a WASI command whose _start calls fn (args_sizes_get or
// environ_sizes_get) calls times, its results at addresses 0 and 4.
func SizesCalls(fn string, calls uint32) []byte {
	body := repeat([]byte{opI32Const, 0, opI32Const, 4, opCall, 0, opDrop}, calls)
	m := command(Module{
		Types:   []FuncType{voidType, {Params: []ValType{I32, I32}, Results: []ValType{I32}}},
		Imports: []Import{{Module: WASIModule, Name: fn, Type: 1}},
		Funcs:   []Func{{Type: 0, Locals: []Local{{Count: 1, Type: I32}}, Body: body}},
	}, 1)
	return m.Encode()
}

// PollCalls is a WASI command whose _start calls poll_oneoff calls times
// with n subscriptions from address 0, all zero (relative clocks of no
// time), its events and count after them.
func PollCalls(n, calls uint32) []byte {
	call := []byte{opI32Const, 0, opI32Const}
	call = AppendI32(call, int32(48*n))
	call = append(call, opI32Const)
	call = AppendI32(call, int32(n))
	call = append(call, opI32Const)
	call = AppendI32(call, int32(80*n))
	call = append(call, opCall, 0, opDrop)
	body := repeat(call, calls)
	m := command(Module{
		Types:    []FuncType{voidType, {Params: []ValType{I32, I32, I32, I32}, Results: []ValType{I32}}},
		Imports:  []Import{{Module: WASIModule, Name: "poll_oneoff", Type: 1}},
		Funcs:    []Func{{Type: 0, Locals: []Local{{Count: 1, Type: I32}}, Body: body}},
		Memories: []Limits{{Min: (80*n + 4 + PageSize - 1) / PageSize}},
	}, 1)
	return m.Encode()
}

// repeat is a body that runs call calls times, counting down in local 0.
func repeat(call []byte, calls uint32) []byte {
	body := []byte{opI32Const}
	body = AppendI32(body, int32(calls))
	body = append(body, opLocalSet, 0, opBlock, blockEmpty, opLoop, blockEmpty, opLocalGet, 0, opI32Eqz, opBrIf, 1)
	body = append(body, call...)
	return append(body, opLocalGet, 0, opI32Const, 1, opI32Sub, opLocalSet, 0, opBr, 0, opEnd, opEnd)
}

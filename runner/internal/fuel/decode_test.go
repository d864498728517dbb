package fuel

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/errors"
	"github.com/tetratelabs/wazero/api"
)

// richModule uses every section and every kind of import, export, global
// initializer and data segment.
func richModule() []byte {
	constExprs := [][]byte{
		cat(op(api.ValueTypeI32, 0), i32c(-5), op(opEnd)),
		cat(op(api.ValueTypeI64, 1), i64c(1<<40), op(opEnd)),
		cat(op(api.ValueTypeF32, 0, opF32Const), []byte{0, 0, 0x80, 0x3f}, op(opEnd)),
		cat(op(api.ValueTypeF64, 1, opF64Const), make([]byte, 8), op(opEnd)),
		cat(op(valV128, 0, prefixSIMD), u32(simdV128Const), make([]byte, 16), op(opEnd)),
		cat(op(api.ValueTypeExternref, 0, opRefNull, api.ValueTypeExternref, opEnd)),
		cat(op(valFuncref, 0, opRefFunc), u32(1), op(opEnd)),
		cat(op(api.ValueTypeI32, 0), globalGet(0), op(opEnd)), // the imported global
	}
	return wasmModule(
		types(functype(none, none), functype([]byte{api.ValueTypeI32, api.ValueTypeI64}, []byte{api.ValueTypeI32, api.ValueTypeI64})),
		imports(
			importFunc("lib", "f", 0),
			cat(str("lib"), str("t"), op(byte(ExternTable), valFuncref, 1), u32(1), u32(10)),
			cat(str("lib"), str("m"), op(byte(ExternMemory), 1), u32(1), u32(4)),
			cat(str("lib"), str("g"), op(byte(ExternGlobal), api.ValueTypeI32, 0)),
		),
		funcs(0, 1),
		section(secTable, vec(cat(op(api.ValueTypeExternref, 0), u32(2)))),
		section(secGlobal, vec(constExprs...)),
		exports(
			exportEntry("f", ExternFunc, 1), exportEntry("t", ExternTable, 1),
			exportEntry("m", ExternMemory, 0), exportEntry("g", ExternGlobal, 2),
		),
		section(secStart, u32(0)),
		section(secElement, vec(cat(u32(0), i32c(0), op(opEnd), vec(u32(1), u32(2))))),
		section(secDataCount, u32(3)),
		codes(
			body(nil, i32c(0), i32c(0), i32c(2), misc(miscMemoryInit, 1, 0), misc(miscDataDrop, 2)),
			body([]localGroup{{9, api.ValueTypeI64}, {1, valV128}}, localGet(0), localGet(1)),
		),
		section(secData, vec(
			cat(u32(0), i32c(16), op(opEnd), str("active")),
			cat(u32(1), str("passive")),
			cat(u32(2), u32(0), i32c(32), op(opEnd), str("explicit")),
		)),
	)
}

func TestInstrument_richModule(t *testing.T) {
	res := mustInstrument(t, richModule(), Config{})
	info := res.Info
	wantImports := []Import{
		{Module: "lib", Name: "f", Kind: ExternFunc, Params: []byte{}, Results: []byte{}},
		{Module: "lib", Name: "t", Kind: ExternTable}, {Module: "lib", Name: "m", Kind: ExternMemory},
		{Module: "lib", Name: "g", Kind: ExternGlobal},
	}
	if !reflect.DeepEqual(info.Imports, wantImports) {
		t.Errorf("imports %v", info.Imports)
	}
	if info.DataBytes != 21 || info.ElemCount != 2 {
		t.Errorf("data bytes %d, elements %d, want 21 and 2", info.DataBytes, info.ElemCount)
	}
	if info.MaxFrameBytes < FrameCost(0, 0) {
		t.Errorf("max frame bytes %d", info.MaxFrameBytes)
	}
	wantExports := []Export{{"f", ExternFunc}, {"t", ExternTable}, {"m", ExternMemory}, {"g", ExternGlobal}}
	if !slices.Equal(info.Exports, wantExports) {
		t.Errorf("exports %v", info.Exports)
	}
	if !info.HasMemory || info.MemoryMinPages != 1 || !info.HasMemoryMax || info.MemoryMaxPages != 4 || info.SharedMemory {
		t.Errorf("memory %+v", info)
	}
	want := FeatureBulkMemory | FeatureSIMD | FeatureMultiValue | FeatureReferenceTypes
	if info.Features != want {
		t.Errorf("features %v, want %v", info.Features.Names(), want.Names())
	}
	for k, want := range map[ExternKind]string{ExternFunc: "func", ExternTable: "table", ExternMemory: "memory", ExternGlobal: "global", 9: "extern(9)"} {
		if k.String() != want {
			t.Errorf("%d.String() = %q", k, k.String())
		}
	}
}

// TestDecode_prefixes checks that proper prefixes of valid modules are
// refused as invalid (except a few that end between sections), and that
// corrupting any single byte never panics and yields a marked error or a
// valid module.
func TestDecode_prefixes(t *testing.T) {
	for _, wasm := range [][]byte{richModule(), renumberModule(), bulkModule(), countModule()} {
		accepted := 0
		for n := range len(wasm) {
			_, err := Instrument(wasm[:n], Config{})
			if err == nil {
				accepted++ // a prefix ending between sections can be valid
				continue
			}
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("prefix of %d bytes: %v", n, err)
			}
		}
		if accepted > 6 {
			t.Errorf("%d prefixes accepted", accepted)
		}
		for i := range wasm {
			for _, b := range []byte{0x00, 0x7f, 0x80, 0xff} {
				c := slices.Clone(wasm)
				c[i] = b
				res, err := Instrument(c, Config{})
				switch {
				case err == nil:
					if err := validate(res.Module); err != nil {
						t.Fatalf("byte %d = %#x: output invalid: %v", i, b, err)
					}
				case !errors.Is(err, ErrInvalid) && !errors.Is(err, ErrUnsupported) && !errors.Is(err, ErrReserved) && !errors.Is(err, ErrLimit):
					t.Fatalf("byte %d = %#x: unmarked error %v", i, b, err)
				}
			}
		}
	}
}

func TestReader_leb(t *testing.T) {
	tests := []struct {
		in   []byte
		bits uint
		u    uint64
		s    int64
		uerr bool
		serr bool
	}{
		{in: []byte{0x00}, bits: 32},
		{in: []byte{0x7f}, bits: 32, u: 127, s: -1},
		{in: []byte{0x80, 0x01}, bits: 32, u: 128, s: 128},
		{in: []byte{0xff, 0xff, 0xff, 0xff, 0x0f}, bits: 32, u: 0xffffffff, serr: true},
		{in: []byte{0xff, 0xff, 0xff, 0xff, 0x07}, bits: 32, u: 0x7fffffff, s: 0x7fffffff},
		{in: []byte{0x80, 0x80, 0x80, 0x80, 0x78}, bits: 32, uerr: true, s: -0x80000000},
		{in: []byte{0xff, 0xff, 0xff, 0xff, 0x1f}, bits: 32, uerr: true, serr: true},
		{in: []byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x00}, bits: 32, uerr: true, serr: true},
		{in: []byte{0x80, 0x80, 0x80, 0x80, 0x00}, bits: 32}, // padded zero
		{in: []byte{0xff, 0xff, 0xff, 0xff, 0x7f}, bits: 32, uerr: true, s: -1},
		{in: []byte{0x40}, bits: 33, u: 64, s: -64},
		{in: []byte{0xff, 0xff, 0xff, 0xff, 0x0f}, bits: 33, u: 0xffffffff, s: 0xffffffff, uerr: false},
		{in: []byte{0x80, 0x80, 0x80, 0x80, 0x70}, bits: 33, uerr: true, s: -0x100000000},
		{in: []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x00}, bits: 64, u: 1<<63 - 1, s: 1<<63 - 1},
		{in: []byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x7f}, bits: 64, uerr: true, s: -1 << 63},
		{in: []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, bits: 64, u: 1<<64 - 1, serr: true},
		{in: []byte{0x80}, bits: 32, uerr: true, serr: true}, // truncated
	}
	for _, tc := range tests {
		r := &reader{b: tc.in}
		u := r.uleb(tc.bits)
		if (r.err != nil) != tc.uerr || r.err == nil && (u != tc.u || !r.eof()) || r.err != nil && u != 0 {
			t.Errorf("uleb%d(%x) = %d, %v", tc.bits, tc.in, u, r.err)
		}
		r = &reader{b: tc.in}
		s := r.sleb(tc.bits)
		if (r.err != nil) != tc.serr || r.err == nil && (s != tc.s || !r.eof()) || r.err != nil && s != 0 {
			t.Errorf("sleb%d(%x) = %d, %v", tc.bits, tc.in, s, r.err)
		}
	}
	// Round trips through the writer.
	for _, v := range []int64{0, 1, -1, 63, 64, -64, -65, 1 << 40, -1 << 63, 1<<63 - 1} {
		r := &reader{b: appendS64(nil, v)}
		if s := r.sleb(64); r.err != nil || s != v || !r.eof() {
			t.Errorf("sleb64(appendS64(%d)) = %d, %v", v, s, r.err)
		}
	}
	for _, v := range []uint32{0, 1, 127, 128, 1 << 21, 1<<32 - 1} {
		r := &reader{b: appendU32(nil, v)}
		if u := r.u32(); r.err != nil || u != v || !r.eof() {
			t.Errorf("u32(appendU32(%d)) = %d, %v", v, u, r.err)
		}
	}
}

func TestDecode_sectionErrors(t *testing.T) {
	mem := memory(1, -1)
	tests := []struct {
		name string
		wasm []byte
		want error
	}{
		{"data without memory", wasmModule(section(secData, vec(cat(u32(0), i32c(0), op(opEnd), str("x"))))), ErrInvalid},
		{"data for memory 1", wasmModule(mem, section(secData, vec(cat(u32(2), u32(1), i32c(0), op(opEnd), str("x"))))), ErrUnsupported},
		{"data flags", wasmModule(mem, section(secData, vec(cat(u32(3))))), ErrInvalid},
		{"elem flags", wasmModule(section(secElement, vec(u32(8)))), ErrInvalid},
		{"elem kind", wasmModule(types(functype(none, none)), section(secElement, vec(cat(u32(1), op(1), vec())))), ErrInvalid},
		{"active elem without table", wasmModule(section(secElement, vec(cat(u32(0), i32c(0), op(opEnd), vec())))), ErrInvalid},
		{"elem table out of range", wasmModule(section(secElement, vec(cat(u32(2), u32(3))))), ErrInvalid},
		{"const expr op", wasmModule(section(secGlobal, vec(cat(op(api.ValueTypeI32, 0), i32c(1), i32c(2), op(0x6a, opEnd))))), ErrUnsupported},
		{"const expr global", wasmModule(section(secGlobal, vec(cat(op(api.ValueTypeI32, 0), globalGet(0), op(opEnd))))), ErrInvalid},
		{"const expr simd", wasmModule(section(secGlobal, vec(cat(op(valV128, 0, prefixSIMD), u32(13))))), ErrUnsupported},
		{"global mutability", wasmModule(section(secGlobal, vec(cat(op(api.ValueTypeI32, 2), i32c(0), op(opEnd))))), ErrInvalid},
		{"import kind", wasmModule(imports(cat(str("a"), str("b"), op(5)))), ErrInvalid},
		{"tag import", wasmModule(imports(cat(str("a"), str("b"), op(4, 0), u32(0)))), ErrUnsupported},
		{"import type out of range", wasmModule(imports(importFunc("a", "b", 0))), ErrInvalid},
		{"shared without max", wasmModule(section(secMemory, vec(op(2, 1)))), ErrInvalid},
		{"limits flags", wasmModule(section(secMemory, vec(op(0x10, 1)))), ErrUnsupported},
		{"table initializer", wasmModule(section(secTable, vec(op(0x40, 0)))), ErrUnsupported},
		{"ref type", wasmModule(section(secTable, vec(op(api.ValueTypeI32, 0, 1)))), ErrUnsupported},
		{"start out of range", wasmModule(section(secStart, u32(0))), ErrInvalid},
		{"export kind", wasmModule(exports(cat(str("x"), op(7), u32(0)))), ErrInvalid},
		{"second name section", wasmModule(section(secCustom, str("name")), section(secCustom, str("name"))), ErrInvalid},
		{"bad name section", wasmModule(section(secCustom, str("name"), op(1, 5, 0xff))), ErrInvalid},
		{"too many br_table labels", voidModule(nil, i32c(0), op(opBrTable), u32(70000), make([]byte, 70001)), ErrUnsupported},
		{"select types", voidModule(nil, i32c(1), i32c(2), i32c(0), op(opSelectTyped, 2, api.ValueTypeI32, api.ValueTypeI32, opDrop)), ErrInvalid},
		{"block type", voidModule(nil, op(opBlock, 0x50), op(opEnd)), ErrUnsupported},
		{"block type index", voidModule(nil, op(opBlock, 5), op(opEnd)), ErrInvalid},
		{"memory op without memory", voidModule(nil, i32c(0), op(opI32Load, 2, 0, opDrop)), ErrInvalid},
		{"data index", voidModule(mem, misc(miscDataDrop, 0)), ErrInvalid},
		{"elem index", voidModule(nil, misc(miscElemDrop, 0)), ErrInvalid},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Instrument(tc.wasm, Config{}); !errors.Is(err, tc.want) {
				t.Errorf("error %v, want %v", err, tc.want)
			}
		})
	}
}

// TestReader_sticky: after its first error a reader keeps that error and
// every read returns zero values, although bytes remain after the error.
func TestReader_sticky(t *testing.T) {
	tests := []struct {
		name string
		in   []byte
		fail func(r *reader)
		want string // in the kept error
	}{
		{"integer too large", []byte{0xff, 0xff, 0xff, 0xff, 0x7f, 5, 5, 5}, func(r *reader) { r.u32() }, "integer too large"},
		{"count beyond the input", []byte{9, 5, 5, 5}, func(r *reader) { r.count("things", 100) }, "9 things exceed the section"},
		{"count above max", []byte{2, 5, 5, 5}, func(r *reader) { r.count("things", 1) }, "2 things (at most 1)"},
		{"value type", []byte{0x60, 5, 5, 5}, func(r *reader) { r.valType() }, "value type 0x60"},
		{"name", []byte{1, 0xff, 5, 5, 5}, func(r *reader) { r.name() }, "not valid UTF-8"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// Negative control: without the failure the next byte reads 5.
			if c := (&reader{b: tc.in[len(tc.in)-1:]}).byte(); c != 5 {
				t.Fatalf("control: byte() = %d", c)
			}
			r := &reader{b: tc.in}
			tc.fail(r)
			first := r.err
			if first == nil || !strings.Contains(first.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", first, tc.want)
			}
			if c, u, s, n, l := r.byte(), r.u32(), r.sleb(64), r.name(), r.limits("table"); c != 0 || u != 0 || s != 0 || n != "" || l != (limits{}) {
				t.Errorf("after the error: byte %d u32 %d sleb %d name %q limits %+v", c, u, s, n, l)
			}
			if b := r.bytes(1); b != nil {
				t.Errorf("after the error: bytes(1) = %x", b)
			}
			if r.err != first {
				t.Errorf("err changed to %v", r.err)
			}
		})
	}
}

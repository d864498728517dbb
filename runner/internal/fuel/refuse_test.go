package fuel

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/errors"
	"github.com/tetratelabs/wazero/api"
)

// voidModule is a module with one () -> () function whose body is code,
// plus extra sections before the code section.
func voidModule(extra []byte, code ...[]byte) []byte {
	return wasmModule(
		types(functype(none, none)),
		funcs(0),
		extra,
		codes(body(nil, code...)),
	)
}

func TestInstrument_refusals(t *testing.T) {
	mem1 := memory(1, -1)
	tests := []struct {
		name string
		wasm []byte
		want error
		msg  string // a substring of the message
	}{
		{"reserved import", wasmModule(types(functype(none, none)), imports(importFunc(ImportModule, "x", 0))), ErrReserved, `import latent_fuel.x`},
		{"reserved export", wasmModule(types(functype(none, none)), funcs(0), exports(exportEntry(FuelExport, ExternFunc, 0)), codes(body(nil))), ErrReserved, FuelExport},
		{"two memories", wasmModule(section(secMemory, vec(cat(op(0), u32(1)), cat(op(0), u32(1))))), ErrUnsupported, "multi-memory"},
		{"imported and defined memory", wasmModule(imports(cat(str("env"), str("m"), op(byte(ExternMemory), 0), u32(1))), mem1), ErrUnsupported, "multi-memory"},
		{"memory64", wasmModule(section(secMemory, vec(cat(op(4), u32(1))))), ErrUnsupported, "memory64"},
		{"shared memory", wasmModule(section(secMemory, vec(cat(op(3), u32(1), u32(2))))), ErrUnsupported, "threads"},
		{"return_call", voidModule(nil, op(0x12), u32(0)), ErrUnsupported, "return_call (tail calls)"},
		{"return_call_indirect", voidModule(nil, op(0x13), u32(0), u32(0)), ErrUnsupported, "tail calls"},
		{"try", voidModule(nil, op(0x06, blockEmpty)), ErrUnsupported, "exception"},
		{"tag section", wasmModule(types(functype(none, none)), section(secTag, vec(cat(op(0), u32(0))))), ErrUnsupported, "tag section"},
		{"atomics", voidModule(mem1, op(prefixAtomics), u32(3), op(opEnd)), ErrUnsupported, "threads"},
		{"memarg with memory index", voidModule(mem1, i32c(0), op(opI32Load, 0x42), u32(0), u32(0), op(opDrop)), ErrUnsupported, "multi-memory"},
		{"memory.size 1", voidModule(mem1, op(opMemorySize, 1), op(opDrop)), ErrUnsupported, "multi-memory"},
		{"relaxed simd", voidModule(nil, op(prefixSIMD), u32(0x100)), ErrUnsupported, "0xfd"},
		{"unknown simd", voidModule(nil, op(prefixSIMD), u32(0x9a)), ErrUnsupported, "0xfd"},
		{"unknown misc", voidModule(nil, op(prefixMisc), u32(18)), ErrUnsupported, "0xfc"},
		{"unknown opcode", voidModule(nil, op(0x27)), ErrUnsupported, "unknown opcode 0x27"},
		{"gc type", wasmModule(section(secType, vec(op(0x5f, 0)))), ErrUnsupported, "type form"},
		{"too many locals", wasmModule(types(functype(none, none)), funcs(0), codes(body([]localGroup{{60000, api.ValueTypeI32}}))), ErrLimit, "function 0 declares 60000 locals; deploy_limits.function_locals is 10000"},
		{"table64", wasmModule(section(secTable, vec(cat(op(valFuncref, 4), u32(1))))), ErrUnsupported, "64-bit"},
		{"typed ref local", wasmModule(types(functype(none, none)), funcs(0), codes(body([]localGroup{{1, 0x63}}))), ErrUnsupported, "value type"},
		{"version 2", append(slices.Clone(wasmMagic[:4]), 2, 0, 0, 0), ErrUnsupported, "version"},

		{"global out of range", voidModule(nil, globalGet(0), op(opDrop)), ErrInvalid, "global index 0 out of range"},
		{"call out of range", voidModule(nil, call(1)), ErrInvalid, "function index 1"},
		{"local out of range", voidModule(nil, localGet(0), op(opDrop)), ErrInvalid, "local index"},
		{"branch out of range", voidModule(nil, br(1)), ErrInvalid, "branch depth"},
		{"type mismatch", voidModule(nil, i64c(1), i32c(1), op(0x6a), op(opDrop)), ErrInvalid, "invalid module"},
		{"bad magic", []byte("\x00asn\x01\x00\x00\x00"), ErrInvalid, "magic"},
		{"truncated", renumberModule()[:40], ErrInvalid, ""},
		{"section order", wasmModule(funcs(), types()), ErrInvalid, "out of order"},
		{"unknown section", wasmModule(section(14)), ErrInvalid, "unknown section"},
		{"trailing bytes", wasmModule(section(secType, vec(), op(0))), ErrInvalid, "trailing"},
		{"func without code", wasmModule(types(functype(none, none)), funcs(0)), ErrInvalid, "counts differ"},
		{"body without end", wasmModule(types(functype(none, none)), funcs(0), codes(cat(u32(2), op(0, opNop)))), ErrInvalid, "end"},
		{"else without if", voidModule(nil, op(opElse)), ErrInvalid, "else"},
		{"code after end", wasmModule(types(functype(none, none)), funcs(0), codes(cat(u32(3), op(0, opEnd, opEnd)))), ErrInvalid, "after the end"},
		{"unterminated block", wasmModule(types(functype(none, none)), funcs(0), codes(cat(u32(3), op(0, opBlock, blockEmpty)))), ErrInvalid, ""},
		{"duplicate export", wasmModule(types(functype(none, none)), funcs(0), exports(exportEntry("a", ExternFunc, 0), exportEntry("a", ExternFunc, 0)), codes(body(nil))), ErrInvalid, "duplicate"},
		{"export out of range", wasmModule(exports(exportEntry("m", ExternMemory, 0))), ErrInvalid, "out of range"},
		{"data count mismatch", wasmModule(section(secDataCount, u32(1))), ErrInvalid, "data count"},
		{"long leb", wasmModule(section(secType, op(0x80, 0x80, 0x80, 0x80, 0x80, 0))), ErrInvalid, "too long"},
		{"big leb", wasmModule(section(secType, op(0xff, 0xff, 0xff, 0xff, 0x7f))), ErrInvalid, "too large"},
		{"bad utf8 name", wasmModule(imports(cat(str("\xff"), str("x"), op(0), u32(0)))), ErrInvalid, "UTF-8"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, err := Instrument(tc.wasm, Config{})
			if err == nil {
				t.Fatalf("accepted, output %d bytes", len(res.Module))
			}
			if !errors.Is(err, tc.want) {
				t.Errorf("error %q is not %v", err, tc.want)
			}
			if !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("error %q does not mention %q", err, tc.msg)
			}
			if wd, _ := os.Getwd(); strings.Contains(err.Error(), wd) || strings.Contains(err.Error(), os.TempDir()) {
				t.Errorf("error %q names a host path", err)
			}
		})
	}
}

// TestInstrument_twice checks that an instrumented module is refused: it
// imports from the reserved module.
func TestInstrument_twice(t *testing.T) {
	res := mustInstrument(t, countModule(), Config{})
	if _, err := Instrument(res.Module, Config{}); !errors.Is(err, ErrReserved) {
		t.Errorf("re-instrumenting: %v, want ErrReserved", err)
	}
}

func TestInstrument_features(t *testing.T) {
	mem1 := memory(1, -1)
	tests := []struct {
		name string
		wasm []byte
		want Features
	}{
		{"mvp", countModule(), 0},
		{"sign-extension", voidModule(nil, i32c(1), op(opI32Extend8S, opDrop)), FeatureSignExtension},
		{"nontrapping-f2i", voidModule(nil, op(opF32Const, 0, 0, 0, 0), misc(0), op(opDrop)), FeatureNontrappingF2I},
		{"simd", voidModule(nil, op(prefixSIMD), u32(simdV128Const), make([]byte, 16), op(prefixSIMD), u32(simdLaneFirst), op(0, opDrop)), FeatureSIMD},
		{"simd memory", voidModule(mem1,
			i32c(0), op(prefixSIMD), u32(simdV128Const), make([]byte, 16),
			op(prefixSIMD), u32(simdLoadLaneFrst), u32(0), u32(0), op(0), // v128.load8_lane
			op(prefixSIMD), u32(simdV128Const), make([]byte, 16),
			op(prefixSIMD), u32(simdShuffle), make([]byte, 16),
			i32c(0), op(prefixSIMD), u32(simdLoadZero32), u32(2), u32(0), // v128.load32_zero
			op(opDrop, opDrop)), FeatureSIMD},
		{"multi-value", wasmModule(types(functype(none, []byte{api.ValueTypeI32, api.ValueTypeI32})), funcs(0), codes(body(nil, i32c(1), i32c(2)))), FeatureMultiValue},
		{"multi-value block", voidModule(nil, op(opBlock, 0), op(opEnd)), FeatureMultiValue},
		{"reference-types", voidModule(nil, op(opRefNull, api.ValueTypeExternref), op(opRefIsNull, opDrop)), FeatureReferenceTypes},
		{"typed select", voidModule(nil, i32c(1), i32c(2), i32c(0), op(opSelectTyped, 1, api.ValueTypeI32, opDrop)), FeatureReferenceTypes},
		{"bulk-memory", voidModule(mem1, i32c(0), i32c(0), i32c(0), misc(miscMemoryCopy, 0, 0)), FeatureBulkMemory},
		{"passive data", wasmModule(types(functype(none, none)), funcs(0), mem1, section(secDataCount, u32(1)),
			codes(body(nil, misc(miscDataDrop, 0))), section(secData, vec(cat(u32(1), str("hi"))))), FeatureBulkMemory},
		{"two tables", wasmModule(section(secTable, vec(op(valFuncref, 0, 0), op(api.ValueTypeExternref, 0, 0)))), FeatureReferenceTypes},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := mustInstrument(t, tc.wasm, Config{})
			if res.Info.Features != tc.want {
				t.Errorf("features %v, want %v", res.Info.Features.Names(), tc.want.Names())
			}
		})
	}
	all := Features(1<<7 - 1)
	if want := []string{"bulk-memory", "simd", "multi-value", "sign-extension", "nontrapping-f2i", "reference-types", "threads"}; !slices.Equal(all.Names(), want) {
		t.Errorf("names %v", all.Names())
	}
}

// TestInstrument_deadCode covers code after br, br_table, return and
// unreachable, with nested blocks, loops and ifs inside.
func TestInstrument_deadCode(t *testing.T) {
	dead := cat(
		block(blockEmpty, loop(blockEmpty, br(0)), i32c(0), ifElse(blockEmpty, op(opNop), op(opNop)), i32c(1), brIf(0)),
		op(opNop),
	)
	wasm := wasmModule(
		types(functype(i32, i32)),
		funcs(0),
		exports(exportEntry("f", ExternFunc, 0)),
		codes(body(nil,
			block(blockEmpty,
				block(blockEmpty,
					localGet(0), brTable(1, 0), dead,
				),
				// br_table index 0
				localGet(0), op(opI32Eqz),
				ifElse(blockEmpty, cat(i32c(10), op(opReturn), dead), cat(op(opUnreachable), dead)),
				dead,
			),
			// br_table default
			localGet(0), i32c(100), op(0x6a), op(opReturn), dead, i32c(0),
		)),
	)
	res := mustInstrument(t, wasm, Config{})
	e := getEngine(t, true)
	for _, tc := range []struct {
		in   uint64
		want uint64
	}{{0, 10}, {1, 101}, {5, 105}} {
		want := e.run(t, wasm, "", "f", nil, tc.in)
		have := e.run(t, res.Module, "", "f", nil, tc.in)
		if want.err != nil || have.err != nil {
			t.Fatalf("f(%d): %v / %v", tc.in, want.err, have.err)
		}
		if want.results[0] != tc.want || have.results[0] != tc.want {
			t.Errorf("f(%d) = %d / %d, want %d", tc.in, want.results[0], have.results[0], tc.want)
		}
	}
}

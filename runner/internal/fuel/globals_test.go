package fuel

import (
	"bytes"
	"context"
	"encoding/binary"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/errors"
	"github.com/latent-node/latent-node/internal/testwasm"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
)

// globalEntry is one entry of a global section.
func globalEntry(typ byte, mutable bool, init ...[]byte) []byte {
	return cat([]byte{typ, boolByte(mutable)}, cat(init...), op(opEnd))
}

func globalsSection(entries ...[]byte) []byte { return section(secGlobal, vec(entries...)) }

func importGlobal(mod, name string, typ byte, mutable bool) []byte {
	return cat(str(mod), str(name), []byte{byte(ExternGlobal), typ, boolByte(mutable)})
}

func f32c(v float32) []byte {
	return binary.LittleEndian.AppendUint32([]byte{opF32Const}, math.Float32bits(v))
}

func f64c(v float64) []byte {
	return binary.LittleEndian.AppendUint64([]byte{opF64Const}, math.Float64bits(v))
}

// globalsModule has mutable and immutable globals of every type: 0 const
// i32, 1 mut i64, 2 mut f32, 3 const f64, 4 mut f64, 5 mut i32 (also
// exported by the module as "counter"), 6 mut funcref, 7 const i64, 8 mut
// v128, 9 mut externref. "bump" adds 1 to global 5, "set1" sets global 1.
func globalsModule() []byte {
	v128 := cat(op(prefixSIMD), u32(simdV128Const), []byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16})
	return wasmModule(
		types(functype(none, none), functype(i64, none)),
		funcs(0, 1),
		globalsSection(
			globalEntry(api.ValueTypeI32, false, i32c(7)),
			globalEntry(api.ValueTypeI64, true, i64c(-5)),
			globalEntry(api.ValueTypeF32, true, f32c(1.5)),
			globalEntry(api.ValueTypeF64, false, f64c(2.25)),
			globalEntry(api.ValueTypeF64, true, f64c(-3.75)),
			globalEntry(api.ValueTypeI32, true, i32c(-1)),
			globalEntry(valFuncref, true, op(opRefNull, valFuncref)),
			globalEntry(api.ValueTypeI64, false, i64c(1<<40)),
			globalEntry(valV128, true, v128),
			globalEntry(api.ValueTypeExternref, true, op(opRefNull, api.ValueTypeExternref)),
		),
		exports(exportEntry("bump", ExternFunc, 0), exportEntry("set1", ExternFunc, 1),
			exportEntry("counter", ExternGlobal, 5), exportEntry("seven", ExternGlobal, 0)),
		codes(
			body(nil, globalGet(5), i32c(1), op(0x6a /* i32.add */), globalSet(5)),
			body(nil, localGet(0), globalSet(1)),
		),
	)
}

// importedGlobalsModule imports two globals from "genv" (0: mutable i32
// "m", 1: immutable i64 "c") and defines 2: mutable i64 initialised from
// global 1, 3: immutable i32. "bump" adds 1 to global 0.
func importedGlobalsModule() []byte {
	return wasmModule(
		types(functype(none, none)),
		imports(importGlobal("genv", "m", api.ValueTypeI32, true), importGlobal("genv", "c", api.ValueTypeI64, false)),
		funcs(0),
		globalsSection(
			globalEntry(api.ValueTypeI64, true, globalGet(1)),
			globalEntry(api.ValueTypeI32, false, i32c(3)),
		),
		exports(exportEntry("bump", ExternFunc, 0)),
		codes(body(nil, globalGet(0), i32c(1), op(0x6a), globalSet(0))),
	)
}

// genvModule provides importedGlobalsModule's imports: "m" (mutable i32
// 11) and "c" (i64 22).
func genvModule() []byte {
	return wasmModule(
		globalsSection(globalEntry(api.ValueTypeI32, true, i32c(11)), globalEntry(api.ValueTypeI64, false, i64c(22))),
		exports(exportEntry("m", ExternGlobal, 0), exportEntry("c", ExternGlobal, 1)),
	)
}

// exportNames returns the names and indices of the global exports of wasm,
// read from its export section.
func globalExports(t *testing.T, wasm []byte) map[string]uint32 {
	t.Helper()
	sec, ok := rawSections(t, wasm)["7"]
	if !ok {
		return nil
	}
	r := &reader{b: sec}
	out := map[string]uint32{}
	for range r.u32() {
		name := r.name()
		kind := ExternKind(r.byte())
		idx := r.u32()
		if kind == ExternGlobal {
			out[name] = idx
		}
	}
	if r.err != nil || !r.eof() {
		t.Fatalf("export section: %v", r.err)
	}
	return out
}

// initialValue evaluates a constant global initializer as wazero encodes
// the value (api.Global.Get: the low 64 bits of a v128). ok is false for
// global.get and ref.func.
func initialValue(init []byte) (v uint64, ok bool) {
	r := &reader{b: init}
	switch r.byte() {
	case opI32Const:
		return uint64(uint32(int32(r.sleb(32)))), true
	case opI64Const:
		return uint64(r.sleb(64)), true
	case opF32Const:
		return uint64(binary.LittleEndian.Uint32(r.bytes(4))), true
	case opF64Const:
		return binary.LittleEndian.Uint64(r.bytes(8)), true
	case opRefNull:
		return 0, true
	case prefixSIMD:
		r.u32()
		return binary.LittleEndian.Uint64(r.bytes(16)), true
	}
	return 0, false
}

// checkGlobalExports instantiates the instrumented res in rt and checks
// that every GlobalExport(i) of Info.MutableGlobals is an api.MutableGlobal
// holding the original's initial value of global i (where it is a
// constant), and that no other global is exported under the prefix.
func checkGlobalExports(t *testing.T, rt wazero.Runtime, orig []byte, res *Result) {
	t.Helper()
	lim := DefaultLimits()
	m, err := decodeModule(orig, &lim)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	cm, err := rt.CompileModule(ctx, res.Module)
	if err != nil {
		t.Fatalf("compile: %v", err)
	}
	defer func() { _ = cm.Close(ctx) }()
	mod, err := rt.InstantiateModule(ctx, cm, moduleConfig())
	if err != nil {
		t.Fatalf("instantiate: %v", err)
	}
	defer func() { _ = mod.Close(ctx) }()
	for _, i := range res.Info.MutableGlobals {
		g := mod.ExportedGlobal(GlobalExport(i))
		mg, ok := g.(api.MutableGlobal)
		if !ok {
			t.Errorf("%s = %v, want an api.MutableGlobal", GlobalExport(i), g)
			continue
		}
		if i < m.numImportedGlobals {
			continue // its value is the provider's
		}
		if want, ok := initialValue(m.globals[i-m.numImportedGlobals].init); ok && mg.Get() != want {
			t.Errorf("%s = %#x, want %#x", GlobalExport(i), mg.Get(), want)
		}
	}
	for name, idx := range globalExports(t, res.Module) {
		if strings.HasPrefix(name, GlobalExportPrefix) && (name != GlobalExport(idx) || !slices.Contains(res.Info.MutableGlobals, idx)) {
			t.Errorf("export %s of global %d: not in MutableGlobals %v", name, idx, res.Info.MutableGlobals)
		}
	}
}

func TestInstrument_mutableGlobals(t *testing.T) {
	tests := []struct {
		name     string
		wasm     []byte
		want     []uint32
		exported map[string]uint32 // the original's global exports, kept
	}{
		{"every type", globalsModule(), []uint32{1, 2, 4, 5, 6, 8, 9}, map[string]uint32{"counter": 5, "seven": 0}},
		{"imported", importedGlobalsModule(), []uint32{0, 2}, nil},
		{"none", countModule(), nil, nil},
		{"only immutable", wasmModule(globalsSection(globalEntry(api.ValueTypeI32, false, i32c(1)))), nil, nil},
		{"renumber", renumberModule(), []uint32{0}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := mustInstrument(t, tc.wasm, Config{})
			if !slices.Equal(res.Info.MutableGlobals, tc.want) {
				t.Errorf("MutableGlobals = %v, want %v", res.Info.MutableGlobals, tc.want)
			}
			lim := DefaultLimits()
			m, err := decodeModule(tc.wasm, &lim)
			if err != nil {
				t.Fatal(err)
			}
			n := m.numGlobals()
			want := map[string]uint32{FuelExport: n, StackExport: n + 1, StackLowExport: n + 2}
			for k, v := range tc.exported {
				want[k] = v
			}
			for _, i := range tc.want {
				want[GlobalExport(i)] = i
			}
			if have := globalExports(t, res.Module); !maps(have, want) {
				t.Errorf("global exports %v, want %v", have, want)
			}
			// Info.Exports lists the original's exports only.
			var orig []Export
			for _, e := range m.exports {
				orig = append(orig, Export{Name: e.name, Kind: e.kind})
			}
			if !slices.Equal(res.Info.Exports, orig) {
				t.Errorf("Info.Exports = %v, want %v", res.Info.Exports, orig)
			}
		})
	}
}

func maps(a, b map[string]uint32) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// TestInstrument_mutableGlobalsWazero instantiates instrumented modules
// with wazero: every GlobalExport is a mutable global with the global's
// initial value, and it is the global itself (a write through the guest's
// code or another export of the same global shows through it).
func TestInstrument_mutableGlobalsWazero(t *testing.T) {
	e := getEngine(t, true)
	t.Run("every type", func(t *testing.T) {
		res := mustInstrument(t, globalsModule(), Config{})
		checkGlobalExports(t, e.rt, globalsModule(), res)
		ctx := ctxWith(context.Background(), newMeter(1<<40))
		mod, err := e.rt.InstantiateModule(ctx, e.compile(t, res.Module), moduleConfig())
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = mod.Close(ctx) }()
		g5, ok := mod.ExportedGlobal(GlobalExport(5)).(api.MutableGlobal)
		if !ok {
			t.Fatalf("%s is not a mutable global", GlobalExport(5))
		}
		if _, err := mod.ExportedFunction("bump").Call(ctx); err != nil {
			t.Fatal(err)
		}
		if g5.Get() != 0 || mod.ExportedGlobal("counter").Get() != 0 {
			t.Errorf("after bump: %s = %d, counter = %d, want 0", GlobalExport(5), g5.Get(), mod.ExportedGlobal("counter").Get())
		}
		// Restoring through the latent export is what the guest sees.
		g5.Set(41)
		if _, err := mod.ExportedFunction("bump").Call(ctx); err != nil {
			t.Fatal(err)
		}
		if v := mod.ExportedGlobal("counter").Get(); v != 42 {
			t.Errorf("counter = %d after Set(41) and bump, want 42", v)
		}
		if _, err := mod.ExportedFunction("set1").Call(ctx, 1234); err != nil {
			t.Fatal(err)
		}
		if g := mod.ExportedGlobal(GlobalExport(1)); g == nil || g.Get() != 1234 {
			t.Errorf("%s = %v after set1(1234)", GlobalExport(1), g)
		}
		// Immutable globals are not exported under the prefix; the
		// module's own export of one stays.
		for _, i := range []uint32{0, 3, 7} {
			if g := mod.ExportedGlobal(GlobalExport(i)); g != nil {
				t.Errorf("immutable global %d exported as %s", i, GlobalExport(i))
			}
		}
		if g := mod.ExportedGlobal("seven"); g == nil || g.Get() != 7 {
			t.Errorf("seven = %v", g)
		}
	})
	t.Run("imported", func(t *testing.T) {
		ctx := context.Background()
		rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter().WithCoreFeatures(api.CoreFeaturesV2))
		defer func() { _ = rt.Close(ctx) }()
		if _, err := rt.NewHostModuleBuilder(ImportModule).
			NewFunctionBuilder().WithFunc(tick).Export(TickName).
			NewFunctionBuilder().WithFunc(grow).Export(GrowName).
			NewFunctionBuilder().WithFunc(depthExceeded).Export(DepthName).
			Instantiate(ctx); err != nil {
			t.Fatal(err)
		}
		genv, err := rt.InstantiateWithConfig(ctx, genvModule(), wazero.NewModuleConfig().WithName("genv"))
		if err != nil {
			t.Fatal(err)
		}
		res := mustInstrument(t, importedGlobalsModule(), Config{})
		checkGlobalExports(t, rt, importedGlobalsModule(), res)
		mod, err := rt.InstantiateWithConfig(ctx, res.Module, moduleConfig())
		if err != nil {
			t.Fatal(err)
		}
		if g := mod.ExportedGlobal(GlobalExport(2)); g == nil || g.Get() != 22 {
			t.Errorf("%s = %v, want 22 (from the imported global)", GlobalExport(2), g)
		}
		// The re-exported import is the provider's global.
		m, ok := mod.ExportedGlobal(GlobalExport(0)).(api.MutableGlobal)
		if !ok {
			t.Fatalf("%s is not a mutable global", GlobalExport(0))
		}
		if m.Get() != 11 {
			t.Errorf("%s = %d, want 11", GlobalExport(0), m.Get())
		}
		if _, err := mod.ExportedFunction("bump").Call(ctxWith(ctx, newMeter(1<<40))); err != nil {
			t.Fatal(err)
		}
		if m.Get() != 12 || genv.ExportedGlobal("m").Get() != 12 {
			t.Errorf("after bump: %d, provider %d, want 12", m.Get(), genv.ExportedGlobal("m").Get())
		}
	})
	// Every fixture and the Go guest (its stack pointer and other runtime
	// globals are mutable).
	mods := map[string][]byte{"renumber": renumberModule(), "go guest": testwasm.BuildGoGuest(t)}
	for _, name := range testwasm.Names() {
		if name != "oob_data" { // its data segment does not fit: instantiation fails
			mods[name] = testwasm.Bytes(t, name)
		}
	}
	engine := getEngine(t, !testing.Short()) // the Go guest takes seconds to compile under -race
	for name, wasm := range mods {
		t.Run(name, func(t *testing.T) {
			res, err := Instrument(wasm, Config{MaxStackBytes: 4 << 20})
			if err != nil {
				t.Fatal(err)
			}
			checkGlobalExports(t, engine.rt, wasm, res)
			if name == "go guest" && len(res.Info.MutableGlobals) == 0 {
				t.Error("the Go guest has no mutable globals?")
			}
			t.Logf("mutable globals %v, mutates tables %v, passive segments %v",
				res.Info.MutableGlobals, res.Info.MutatesTables, res.Info.PassiveSegments)
		})
	}
}

// TestInstrument_globalExportsOnlyAddBytes: exporting the mutable globals
// adds export entries and nothing else. The module instrumented with its
// globals made immutable (which changes no code the rewrite emits) differs
// from the real output only in the mutability bytes of the global section
// and in the export entries.
func TestInstrument_globalExportsOnlyAddBytes(t *testing.T) {
	mods := map[string][]byte{
		"every type": globalsModule(),
		"imported":   importedGlobalsModule(),
		"go guest":   testwasm.BuildGoGuest(t),
		"count":      countModule(),
	}
	for name, wasm := range mods {
		t.Run(name, func(t *testing.T) {
			lim := DefaultLimits()
			m, err := decodeModule(wasm, &lim)
			if err != nil {
				t.Fatal(err)
			}
			mutable := m.mutableGlobals()
			real, err := m.instrument(DefaultMaxStackBytes)
			if err != nil {
				t.Fatal(err)
			}
			if res, err := Instrument(wasm, Config{}); err != nil || !bytes.Equal(res.Module, real) {
				t.Fatalf("Instrument and module.instrument differ (%v)", err)
			}
			m, _ = decodeModule(wasm, &lim)
			for i := range m.globals {
				m.globals[i].mutable = false
			}
			for i := range m.imports {
				m.imports[i].mutable = false
			}
			frozen, err := m.instrument(DefaultMaxStackBytes)
			if err != nil {
				t.Fatal(err)
			}
			rs, fs := rawSections(t, real), rawSections(t, frozen)
			if len(rs) != len(fs) {
				t.Fatalf("sections %d, %d", len(rs), len(fs))
			}
			for k, v := range rs {
				switch k {
				case strconv.Itoa(secGlobal):
					if len(v) != len(fs[k]) {
						t.Errorf("global section %d bytes, %d without mutability", len(v), len(fs[k]))
					}
				case strconv.Itoa(secExport):
					// frozen's count and entries, then one entry per
					// mutable global.
					r := &reader{b: fs[k]}
					n := r.u32()
					want := cat(u32(n+uint32(len(mutable))), fs[k][r.pos:])
					for _, g := range mutable {
						want = cat(want, exportEntry(GlobalExport(g), ExternGlobal, g))
					}
					if !bytes.Equal(v, want) {
						t.Errorf("export section differs from the entries added")
					}
				default:
					if !bytes.Equal(v, fs[k]) {
						t.Errorf("section %s differs", k)
					}
				}
			}
			t.Logf("%d mutable globals: %d bytes (%+.3f%%)", len(mutable), len(real)-len(frozen),
				100*float64(len(real)-len(frozen))/float64(len(frozen)))
		})
	}
}

func TestInstrument_reservedGlobalPrefix(t *testing.T) {
	withExport := func(name string) []byte {
		return wasmModule(types(functype(none, none)), funcs(0),
			globalsSection(globalEntry(api.ValueTypeI32, true, i32c(0))),
			exports(exportEntry(name, ExternGlobal, 0)), codes(body(nil)))
	}
	tests := []struct {
		name     string
		reserved bool
	}{
		{GlobalExport(0), true}, // the name the rewrite gives global 0
		{GlobalExport(7), true},
		{GlobalExportPrefix, true},
		{GlobalExportPrefix + "x", true},
		{"__latent_globals", false},
		{"__latent_global", false},
		{"__LATENT_GLOBAL_0", false},
		{"__latent_other", false},
		{"g", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, err := Instrument(withExport(tc.name), Config{})
			if tc.reserved {
				if !errors.Is(err, ErrReserved) || !strings.Contains(err.Error(), tc.name) {
					t.Errorf("err = %v, want ErrReserved naming %q", err, tc.name)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			have := globalExports(t, res.Module)
			if i, ok := have[tc.name]; !ok || i != 0 {
				t.Errorf("exports %v, want %q of global 0", have, tc.name)
			}
			if i, ok := have[GlobalExport(0)]; !ok || i != 0 {
				t.Errorf("exports %v, want %s", have, GlobalExport(0))
			}
		})
	}
}

func TestInstrument_tablesAndSegments(t *testing.T) {
	const (
		tFunc = iota // () -> ()
	)
	table := section(secTable, vec(cat([]byte{valFuncref, 0}, u32(4))))
	mem := memory(1, -1)
	activeElem := cat(u32(0), i32c(0), op(opEnd), vec(u32(0)))
	passiveElem := cat(u32(1), op(0), vec(u32(0)))
	declaredElem := cat(u32(3), op(0), vec(u32(0)))
	activeData := cat(u32(0), i32c(0), op(opEnd), str("hi"))
	passiveData := cat(u32(1), str("hi"))
	// mod is one function () -> () with code, a table, a memory and the
	// given element and data segments.
	mod := func(elems, data [][]byte, code ...[]byte) []byte {
		secs := [][]byte{types(functype(none, none)), funcs(tFunc), table, mem}
		if elems != nil {
			secs = append(secs, section(secElement, vec(elems...)))
		}
		if data != nil {
			secs = append(secs, section(secDataCount, u32(uint32(len(data)))))
		}
		secs = append(secs, codes(body(nil, code...)))
		if data != nil {
			secs = append(secs, section(secData, vec(data...)))
		}
		return wasmModule(secs...)
	}
	refNull := op(opRefNull, valFuncref)
	tests := []struct {
		name            string
		wasm            []byte
		tables, passive bool
	}{
		{"nothing", mod(nil, nil), false, false},
		{"active segments", mod([][]byte{activeElem}, [][]byte{activeData}), false, false},
		{"table.get, table.size, call_indirect", mod(nil, nil,
			i32c(0), op(opTableGet, 0, opDrop), misc(miscTableSize, 0), op(opDrop),
			i32c(5), op(opCallIndirect, 0, 0)), false, false},
		{"memory.copy, memory.fill", mod(nil, nil,
			i32c(0), i32c(0), i32c(1), misc(miscMemoryCopy, 0, 0),
			i32c(0), i32c(0), i32c(1), misc(miscMemoryFill, 0)), false, false},
		{"table.set", mod(nil, nil, i32c(0), refNull, op(opTableSet, 0)), true, false},
		{"table.grow", mod(nil, nil, refNull, i32c(1), misc(miscTableGrow, 0), op(opDrop)), true, false},
		{"table.fill", mod(nil, nil, i32c(0), refNull, i32c(1), misc(miscTableFill, 0)), true, false},
		{"table.copy", mod(nil, nil, i32c(0), i32c(1), i32c(1), misc(miscTableCopy, 0, 0)), true, false},
		{"table.init", mod([][]byte{passiveElem}, nil, i32c(0), i32c(0), i32c(1), misc(miscTableInit, 0, 0)), true, true},
		{"elem.drop of an active segment", mod([][]byte{activeElem}, nil, misc(miscElemDrop, 0)), true, false},
		{"table.set in dead code", mod(nil, nil, op(opUnreachable), i32c(0), refNull, op(opTableSet, 0)), true, false},
		{"passive element segment", mod([][]byte{activeElem, passiveElem}, nil), false, true},
		{"declarative element segment", mod([][]byte{declaredElem}, nil), false, true},
		{"passive data segment", mod(nil, [][]byte{activeData, passiveData}), false, true},
		{"memory.init of an active segment", mod(nil, [][]byte{activeData}, i32c(0), i32c(0), i32c(0), misc(miscMemoryInit, 0, 0)), false, true},
		{"data.drop of an active segment", mod(nil, [][]byte{activeData}, misc(miscDataDrop, 0)), false, true},
		{"bulk module", bulkModule(), true, false},
		{"renumber module", renumberModule(), true, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := mustInstrument(t, tc.wasm, Config{})
			if res.Info.MutatesTables != tc.tables || res.Info.PassiveSegments != tc.passive {
				t.Errorf("MutatesTables %v, PassiveSegments %v; want %v, %v",
					res.Info.MutatesTables, res.Info.PassiveSegments, tc.tables, tc.passive)
			}
		})
	}
	for _, name := range testwasm.Names() {
		res := mustInstrument(t, testwasm.Bytes(t, name), Config{})
		// tablestate changes its table (table.set); no fixture has passive
		// segments.
		if res.Info.MutatesTables != (name == "tablestate") || res.Info.PassiveSegments {
			t.Errorf("%s: MutatesTables %v, PassiveSegments %v", name, res.Info.MutatesTables, res.Info.PassiveSegments)
		}
	}
}

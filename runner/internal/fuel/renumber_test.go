package fuel

import (
	"bytes"
	"slices"
	"strconv"
	"testing"

	"github.com/tetratelabs/wazero/api"
)

// Element segments in all eight encodings, for a module with functions
// 1 (double) and 2 (inc) after one import, and 3 (start), 4 (run).
var elemForms = [][]byte{
	// 0: active, table 0, offset, function indices -> slots 0, 1
	cat(u32(0), i32c(0), op(opEnd), vec(u32(1), u32(2))),
	// 1: passive, elemkind, function indices (table.init into slot 4)
	cat(u32(1), op(0), vec(u32(2))),
	// 2: active, explicit table, offset, elemkind, function indices -> slot 2
	cat(u32(2), u32(0), i32c(2), op(opEnd), op(0), vec(u32(1))),
	// 3: declarative, elemkind, function indices (declares run for ref.func)
	cat(u32(3), op(0), vec(u32(4))),
	// 4: active, table 0, offset, expressions -> slot 5
	cat(u32(4), i32c(5), op(opEnd), vec(cat(op(opRefFunc), u32(2), op(opEnd)))),
	// 5: passive, reftype, expressions (table.init into slots 6, 7)
	cat(u32(5), op(valFuncref), vec(cat(op(opRefFunc), u32(1), op(opEnd)), cat(op(opRefNull, valFuncref), op(opEnd)))),
	// 6: active, explicit table, offset, reftype, expressions -> slot 3
	cat(u32(6), u32(0), i32c(3), op(opEnd), op(valFuncref), vec(cat(op(opRefFunc), u32(2), op(opEnd)))),
	// 7: declarative, reftype, expressions
	cat(u32(7), op(valFuncref), vec(cat(op(opRefFunc), u32(3), op(opEnd)))),
}

// renumberModule exercises every place a function index occurs: an import
// (so defined functions do not start at 0), call_indirect through a table
// filled by element segments of all eight forms, table.init from passive
// segments, ref.func in a global initializer and in code, an exported
// function and a start function, and a name section.
func renumberModule() []byte {
	const (
		tI32I32 = 0 // (i32) -> i32
		tVoid   = 1 // () -> ()
		tRun    = 2 // () -> i32
	)
	callSlot := func(slot int32) []byte {
		// acc = acc*3 + table[slot](slot+1)
		return cat(localGet(0), i32c(3), op(opI32Mul),
			i32c(slot+1), i32c(slot), op(opCallIndirect), u32(tI32I32), u32(0),
			op(0x6a), localSet(0))
	}
	var run [][]byte
	run = append(run,
		i32c(4), i32c(0), i32c(1), misc(miscTableInit, 1, 0), // slot 4 <- elem 1
		i32c(6), i32c(0), i32c(2), misc(miscTableInit, 5, 0), // slots 6, 7 <- elem 5
		i32c(7), globalGet(1), op(opTableSet, 0), // slot 7 <- gref (inc)
	)
	for slot := range int32(8) {
		run = append(run, callSlot(slot))
	}
	run = append(run,
		// acc += env.f(acc & 0xff) + started*1000
		localGet(0), localGet(0), i32c(0xff), op(opI32And), call(0), op(0x6a),
		globalGet(0), i32c(1000), op(opI32Mul), op(0x6a), localSet(0),
		// acc += ref.is_null(ref.func run) (0)
		localGet(0), op(opRefFunc), u32(4), op(opRefIsNull), op(0x6a),
	)
	names := cat(str("name"),
		section(0, str("renumber")),
		section(1, vec(cat(u32(0), str("env.f")), cat(u32(1), str("double")), cat(u32(2), str("inc")),
			cat(u32(3), str("start")), cat(u32(4), str("run")))),
		section(2, vec(cat(u32(4), vec(cat(u32(0), str("acc")))))),
		section(3, vec()), // label names: dropped
	)
	return wasmModule(
		types(functype(i32, i32), functype(none, none), functype(none, i32)),
		imports(importFunc("env", "f", tI32I32)),
		funcs(tI32I32, tI32I32, tVoid, tRun),
		section(secTable, vec(cat([]byte{valFuncref, 0}, u32(8)))),
		section(secGlobal, vec(
			cat([]byte{api.ValueTypeI32, 1}, i32c(0), op(opEnd)),         // started
			cat([]byte{valFuncref, 0}, op(opRefFunc), u32(2), op(opEnd)), // gref = inc
		)),
		exports(exportEntry("run", ExternFunc, 4), exportEntry("double", ExternFunc, 1)),
		section(secStart, u32(3)),
		section(secElement, vec(elemForms...)),
		codes(
			body(nil, localGet(0), i32c(2), op(opI32Mul)),          // double
			body(nil, localGet(0), i32c(1), op(0x6a)),              // inc
			body(nil, i32c(1), globalSet(0)),                       // start
			body([]localGroup{{1, api.ValueTypeI32}}, cat(run...)), // run
		),
		section(secCustom, names),
		section(secCustom, cat(str("producers"), []byte{0})), // dropped
	)
}

func TestInstrument_renumber(t *testing.T) {
	orig := renumberModule()
	res := mustInstrument(t, orig, Config{})

	// The expected result, computed independently.
	double := func(x uint32) uint32 { return x * 2 }
	inc := func(x uint32) uint32 { return x + 1 }
	slots := []func(uint32) uint32{double, inc, double, inc, inc, inc, double, inc}
	var acc uint32
	for i, f := range slots {
		acc = acc*3 + f(uint32(i+1))
	}
	acc += (acc&0xff)*3 + 1 + 1000

	for _, compiler := range []bool{true, false} {
		e := getEngine(t, compiler)
		want := e.run(t, orig, "", "run", nil)
		have := e.run(t, res.Module, "", "run", nil)
		if want.err != nil || have.err != nil {
			t.Fatalf("original: %v; instrumented: %v", want.err, have.err)
		}
		if uint32(want.results[0]) != acc || uint32(have.results[0]) != acc {
			t.Errorf("compiler=%v: run() = %d original, %d instrumented, want %d", compiler, want.results[0], have.results[0], acc)
		}
		if have.fuel <= 0 {
			t.Errorf("fuel %d", have.fuel)
		}
		have = e.run(t, res.Module, "", "double", nil, 21)
		if have.results[0] != 42 {
			t.Errorf("double(21) = %d", have.results[0])
		}
	}

	// The name section is kept, renumbered, with names for the imports.
	secs := rawSections(t, res.Module)
	r := &reader{b: secs["name"]}
	if r.name(); r.err != nil {
		t.Fatal(r.err)
	}
	names, err := decodeNames(&reader{b: r.b[r.pos:]})
	if err != nil || *names.module != "renumber" {
		t.Fatalf("names = %+v, %v", names, err)
	}
	if _, ok := secs["producers"]; ok {
		t.Error("producers section kept")
	}
	m := &module{names: names}
	wantNames := []nameAssoc{{0, "env.f"}, {1, "latent_fuel.tick"}, {2, "latent_fuel.grow"},
		{3, "latent_fuel.depth_exceeded"}, {4, "double"}, {5, "inc"}, {6, "start"}, {7, "run"}}
	if !slices.Equal(m.names.funcs, wantNames) {
		t.Errorf("function names %v, want %v", m.names.funcs, wantNames)
	}
	if len(m.names.locals) != 1 || m.names.locals[0].index != 7 {
		t.Errorf("local names %+v", m.names.locals)
	}
	cm, err := getEngine(t, true).rt.CompileModule(t.Context(), res.Module)
	if err != nil {
		t.Fatal(err)
	}
	if name := cm.ExportedFunctions()["run"].Name(); name != "run" {
		t.Errorf("wazero sees run as %q", name)
	}
	// The start function is exported instead of started.
	if start, ok := secs["8"]; ok {
		t.Errorf("start section %x kept", start)
	}
	if def := cm.ExportedFunctions()[StartExport]; def == nil || def.Index() != 6 {
		t.Errorf("%s exports %v, want function 6", StartExport, def)
	}
}

func TestElemSegments_roundTrip(t *testing.T) {
	shift := func(f uint32) uint32 { return f + 100 }
	for flags, enc := range elemForms {
		m := &module{numImportedFuncs: 1, funcs: make([]uint32, 4), tables: []tableEntry{{elem: valFuncref}}}
		r := &reader{b: vec(enc)}
		if (decoder{m}).decodeElems(r); r.err != nil {
			t.Fatalf("form %d: %v", flags, r.err)
		}
		if !r.eof() || len(m.elems) != 1 || m.elems[0].flags != byte(flags) {
			t.Fatalf("form %d: decoded %+v", flags, m.elems)
		}
		var w writer
		m.encodeElem(&w, &m.elems[0], func(f uint32) uint32 { return f })
		if !bytes.Equal(w.b, enc) {
			t.Errorf("form %d: re-encoded %x, want %x", flags, w.b, enc)
		}
		// Shifted: every function index moves, nothing else.
		w.b = nil
		m.encodeElem(&w, &m.elems[0], shift)
		m2 := &module{numImportedFuncs: 1, funcs: make([]uint32, 200), tables: m.tables}
		r = &reader{b: vec(w.b)}
		if (decoder{m2}).decodeElems(r); r.err != nil {
			t.Fatalf("form %d shifted: %v", flags, r.err)
		}
		if have, want := funcRefs(m2, &m2.elems[0]), mapped(funcRefs(m, &m.elems[0]), shift); !slices.Equal(have, want) {
			t.Errorf("form %d: shifted functions %v, want %v", flags, have, want)
		}
	}
}

// funcRefs lists the function indices a segment refers to.
func funcRefs(m *module, e *elemSegment) []uint32 {
	out := slices.Clone(e.funcs)
	for _, x := range e.exprs {
		if x[0] == opRefFunc {
			f := (&reader{b: x[1:]}).u32()
			out = append(out, f)
		}
	}
	return out
}

func mapped(fs []uint32, f func(uint32) uint32) []uint32 {
	out := make([]uint32, len(fs))
	for i, x := range fs {
		out[i] = f(x)
	}
	return out
}

// rawSections returns the contents of the sections of wasm, keyed by id
// ("1".."12") or, for custom sections, by name (with the name included).
func rawSections(t *testing.T, wasm []byte) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	r := &reader{b: wasm, pos: 8}
	for !r.eof() {
		id, sr := r.section()
		if r.err != nil {
			t.Fatal(r.err)
		}
		key := strconv.Itoa(int(id))
		if id == secCustom {
			key = (&reader{b: sr.b}).name()
		}
		out[key] = sr.b
	}
	return out
}

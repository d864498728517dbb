package fuel

import (
	"bytes"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/errors"
	"github.com/tetratelabs/wazero/api"
)

// limitModules builds modules around one deploy limit: n items of the
// limited kind.
var limitModules = map[string]func(n int) []byte{
	"module_bytes": func(n int) []byte { // n bytes in all
		m := wasmModule()
		return append(m, section(secCustom, cat(str("x"), make([]byte, n-len(m)-4)))...)
	},
	"functions": func(n int) []byte {
		return wasmModule(types(functype(none, none)), funcs(make([]uint32, n)...), codes(repeat(n, body(nil))...))
	},
	"function_locals": func(n int) []byte {
		return voidModuleLocals([]localGroup{{uint32(n - 1), api.ValueTypeI32}, {1, api.ValueTypeI64}})
	},
	"total_locals": func(n int) []byte { // two functions
		return wasmModule(types(functype(none, none)), funcs(0, 0),
			codes(body([]localGroup{{uint32(n / 2), api.ValueTypeI32}}), body([]localGroup{{uint32(n - n/2), api.ValueTypeI32}})))
	},
	"function_body_bytes": func(n int) []byte { // a body of n bytes: vec of locals, nops, end
		return wasmModule(types(functype(none, none)), funcs(0), codes(cat(u32(uint32(n)), u32(0), make([]byte, n-2), op(opEnd))))
	},
	"code_bytes": func(n int) []byte { // bodies of 10 bytes and one of the rest
		var bodies [][]byte
		for ; n > 20; n -= 10 {
			bodies = append(bodies, cat(u32(10), u32(0), make([]byte, 8), op(opEnd)))
		}
		bodies = append(bodies, cat(u32(uint32(n)), u32(0), make([]byte, n-2), op(opEnd)))
		return wasmModule(types(functype(none, none)), funcs(make([]uint32, len(bodies))...), codes(bodies...))
	},
	"nesting_depth": func(n int) []byte { return voidModuleLocals(nil, nestedBlocks(n)) },
	"data_bytes": func(n int) []byte { // two passive segments
		return wasmModule(memory(1, -1), section(secData, vec(cat(u32(1), str(strings.Repeat("a", n/2))), cat(u32(1), str(strings.Repeat("b", n-n/2))))))
	},
	"imports": func(n int) []byte {
		var imps [][]byte
		for i := range n {
			imps = append(imps, importFunc("env", "f"+strconv.Itoa(i), 0))
		}
		return wasmModule(types(functype(none, none)), imports(imps...))
	},
	"exports": func(n int) []byte {
		var exps [][]byte
		for i := range n {
			exps = append(exps, exportEntry("f"+strconv.Itoa(i), ExternFunc, 0))
		}
		return wasmModule(types(functype(none, none)), funcs(0), exports(exps...), codes(body(nil)))
	},
	"tables": func(n int) []byte { // one imported, the rest defined
		return wasmModule(imports(cat(str("env"), str("t"), op(byte(ExternTable), valFuncref, 0), u32(0))),
			section(secTable, vec(repeat(n-1, cat(op(valFuncref, 0), u32(1)))...)))
	},
	"table_elements": func(n int) []byte {
		return wasmModule(section(secTable, vec(cat(op(valFuncref, 0), u32(uint32(n))))))
	},
	"types": func(n int) []byte {
		return wasmModule(types(repeat(n, functype(none, none))...))
	},
	"type_params": func(n int) []byte { // a type with n/2 parameters and one with the rest
		return wasmModule(types(functype(bytes.Repeat(i32, n/2), none), functype(none, bytes.Repeat(i32, n-n/2))))
	},
	"loop_local_work": func(n int) []byte { // n loops using one local each
		return voidModuleLocals([]localGroup{{1, api.ValueTypeI32}}, repeat(n, loop(blockEmpty, localGet(0), op(opDrop)))...)
	},
	"globals": func(n int) []byte { // one imported, the rest defined
		return wasmModule(imports(cat(str("env"), str("g"), op(byte(ExternGlobal), api.ValueTypeI32, 0))),
			section(secGlobal, vec(repeat(n-1, cat(op(api.ValueTypeI32, 0), i32c(0), op(opEnd)))...)))
	},
}

func repeat(n int, b []byte) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		out[i] = b
	}
	return out
}

// nestedBlocks is n nested constructs, alternating block, loop and if.
func nestedBlocks(n int) []byte {
	code := []byte{}
	for i := range n {
		switch i % 3 {
		case 0:
			code = block(blockEmpty, code)
		case 1:
			code = loop(blockEmpty, code)
		default:
			code = cat(i32c(1), ifElse(blockEmpty, code, nil))
		}
	}
	return code
}

func voidModuleLocals(locals []localGroup, code ...[]byte) []byte {
	return wasmModule(types(functype(none, none)), funcs(0), codes(body(locals, code...)))
}

// setLimit returns Limits with the limit named key set to v.
func setLimit(key string, v uint64) Limits {
	var l Limits
	p := map[string]*uint64{
		"module_bytes": &l.ModuleBytes, "functions": &l.Functions, "function_locals": &l.FunctionLocals,
		"total_locals": &l.TotalLocals, "function_body_bytes": &l.FunctionBodyBytes, "code_bytes": &l.CodeBytes,
		"nesting_depth": &l.NestingDepth, "data_bytes": &l.DataBytes, "imports": &l.Imports,
		"exports": &l.Exports, "tables": &l.Tables, "table_elements": &l.TableElements, "globals": &l.Globals,
		"types": &l.Types, "type_params": &l.TypeParams, "loop_local_work": &l.LoopLocalWork,
	}[key]
	*p = v
	return l
}

// TestLimits: a module at each limit is accepted and one item more is
// refused with a *LimitError naming the key, the limit and the actual value.
func TestLimits(t *testing.T) {
	if len(limitModules) != 16 {
		t.Fatalf("%d limits covered, want 16", len(limitModules))
	}
	for key, build := range limitModules {
		t.Run(key, func(t *testing.T) {
			const limit = 30
			cfg := Config{Limits: setLimit(key, limit)}
			if _, err := Instrument(build(limit), cfg); err != nil {
				t.Fatalf("at the limit: %v", err)
			}
			_, err := Instrument(build(limit+1), cfg)
			if !errors.Is(err, ErrLimit) {
				t.Fatalf("over the limit: %v", err)
			}
			var le *LimitError
			if !errors.As(err, &le) || le.Key != "deploy_limits."+key || le.Limit != limit || le.Actual != limit+1 && key != "tables" && key != "globals" {
				t.Fatalf("LimitError %+v", le)
			}
			if msg := err.Error(); !strings.Contains(msg, "deploy_limits."+key+" is 30") || !strings.Contains(msg, strconv.FormatUint(le.Actual, 10)) {
				t.Errorf("message %q", msg)
			}
			// The defaults accept the module over the small limit.
			if _, err := Instrument(build(limit+1), Config{}); err != nil && key != "tables" {
				t.Errorf("default limits: %v", err)
			}
		})
	}
}

func TestLimits_defaults(t *testing.T) {
	d := DefaultLimits()
	if d.withDefaults() != d || (Limits{}).withDefaults() != d {
		t.Errorf("withDefaults: %+v", (Limits{}).withDefaults())
	}
	l := (Limits{Functions: 7}).withDefaults()
	if l.Functions != 7 || l.Globals != d.Globals {
		t.Errorf("withDefaults kept %+v", l)
	}
	// A huge count is refused as a limit, before anything is allocated
	// for it (the module claims 2^32-1 functions and is 20 bytes long).
	_, err := Instrument(wasmModule(types(functype(none, none)), section(secFunction, u32(0xffffffff))), Config{})
	if !errors.Is(err, ErrInvalid) {
		t.Errorf("claimed count: %v", err)
	}
}

// TestLimits_tableClamp: a defined table's maximum is clamped to
// table_elements, so table.grow beyond it returns -1; an explicit smaller
// maximum is kept.
func TestLimits_tableClamp(t *testing.T) {
	e := getEngine(t, true)
	grow := func(max int64) []byte {
		lim := cat(op(0), u32(5))
		if max >= 0 {
			lim = cat(op(1), u32(5), u32(uint32(max)))
		}
		return wasmModule(
			types(functype(i32, i32)),
			funcs(0),
			section(secTable, vec(cat(op(valFuncref), lim))),
			exports(exportEntry("tgrow", ExternFunc, 0)),
			codes(body(nil, op(opRefNull, valFuncref), localGet(0), misc(miscTableGrow, 0))),
		)
	}
	cfg := Config{Limits: Limits{TableElements: 100}}
	for _, tc := range []struct {
		max   int64
		delta uint64
		want  int32
	}{
		{-1, 95, 5}, {-1, 96, -1}, {1000, 95, 5}, {1000, 96, -1}, {50, 45, 5}, {50, 46, -1},
	} {
		res := mustInstrument(t, grow(tc.max), cfg)
		o := e.run(t, res.Module, "", "tgrow", nil, tc.delta)
		if o.err != nil || int32(o.results[0]) != tc.want {
			t.Errorf("max %d: table.grow(%d) = %v (%v), want %d", tc.max, tc.delta, o.results, o.err, tc.want)
		}
	}
	// Negative control: without the clamp the grow succeeds.
	o := e.run(t, grow(-1), "", "tgrow", nil, 96)
	if o.err != nil || int32(o.results[0]) != 5 {
		t.Errorf("original: table.grow(96) = %v (%v)", o.results, o.err)
	}
}

// TestInfo_tables: TableBytes counts 8 bytes per element of each table's
// largest size (its maximum clamped to table_elements, table_elements
// without one), imported or defined; TableMinElements sums the minimums.
func TestInfo_tables(t *testing.T) {
	wasm := wasmModule(
		imports(
			cat(str("env"), str("t0"), op(byte(ExternTable), valFuncref, 0), u32(3)),                         // no max: 100
			cat(str("env"), str("t1"), op(byte(ExternTable), valFuncref, 1), u32(2), u32(10)),                // max 10
			cat(str("env"), str("t2"), op(byte(ExternTable), api.ValueTypeExternref, 1), u32(1), u32(5000))), // clamped: 100
		section(secTable, vec(
			cat(op(valFuncref, 1), u32(5), u32(1000)),          // clamped: 100
			cat(op(valFuncref, 0), u32(4)),                     // no max: 100
			cat(op(api.ValueTypeExternref, 1), u32(0), u32(7)), // max 7
		)),
	)
	for _, tc := range []struct {
		name      string
		wasm      []byte
		lim       Limits
		bytes, mn uint64
	}{
		{"mixed", wasm, Limits{TableElements: 100}, 8 * (100 + 10 + 100 + 100 + 100 + 7), 3 + 2 + 1 + 5 + 4},
		{"defaults", wasmModule(section(secTable, vec(cat(op(valFuncref, 0), u32(1))))), Limits{}, 8 * 200_000, 1},
		{"none", wasmModule(), Limits{}, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := mustInstrument(t, tc.wasm, Config{Limits: tc.lim})
			if res.Info.TableBytes != tc.bytes || res.Info.TableMinElements != tc.mn {
				t.Errorf("TableBytes %d, TableMinElements %d; want %d, %d",
					res.Info.TableBytes, res.Info.TableMinElements, tc.bytes, tc.mn)
			}
		})
	}
	// The worst case of the defaults: every table at its largest size.
	d := DefaultLimits()
	if w := 8 * d.Tables * d.TableElements; w != 12_800_000 {
		t.Errorf("default worst case %d bytes", w)
	}
}

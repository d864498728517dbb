package fuel

import (
	"bytes"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/cockroachdb/errors"
	"github.com/tetratelabs/wazero/api"
)

// hugeModule is a valid module built from fuzz bytes around deploy
// limits, with the counts it has for each limit.
type hugeModule struct {
	wasm   []byte
	counts map[string]uint64
	lim    Limits
}

// genHuge builds a valid module whose sizes straddle lim's values (small
// random limits, or the defaults with sizes near them).
func genHuge(data []byte) hugeModule {
	g := &gen{data: data}
	var lim Limits
	near := func(l uint64) uint64 { // a count within a few of l
		return max(0, l+uint64(g.n(5))) - 2
	}
	small := g.n(4) != 0
	if small {
		for _, p := range []*uint64{&lim.Functions, &lim.FunctionLocals, &lim.TotalLocals, &lim.FunctionBodyBytes,
			&lim.CodeBytes, &lim.NestingDepth, &lim.DataBytes, &lim.Imports, &lim.Exports, &lim.Tables,
			&lim.TableElements, &lim.Globals, &lim.Types, &lim.TypeParams} {
			*p = 3 + uint64(g.n(60))
		}
		lim.FunctionBodyBytes += 40
		lim.CodeBytes += 80
		lim.ModuleBytes = 300 + uint64(g.n(200))*4
	}
	eff := lim.withDefaults()
	pick := func(l uint64, cap uint64) uint64 {
		if g.n(3) == 0 {
			return uint64(g.n(int(min(l, cap)) + 1))
		}
		return min(near(l), cap+2)
	}
	nf := max(1, pick(eff.Functions, 40))
	ni := pick(eff.Imports, 30)
	ne := min(pick(eff.Exports, 30), ni+nf)
	nt := pick(eff.Tables, 20)
	ng := pick(eff.Globals, 30)
	tmin := pick(eff.TableElements, 1<<20)
	depth := pick(eff.NestingDepth, 1100)
	locals := pick(eff.FunctionLocals, 10_100)
	db := pick(eff.DataBytes, 200)
	filler := g.n(200)
	nty := max(1, pick(eff.Types, 30))
	tp := uint64(0) // parameters of the last type, when there are two or more
	if nty > 1 {
		tp = pick(eff.TypeParams, 60)
	}

	counts := map[string]uint64{"functions": nf, "imports": ni, "exports": ne, "tables": nt, "globals": ng,
		"nesting_depth": depth, "function_locals": locals, "total_locals": locals * nf, "data_bytes": db,
		"types": nty, "type_params": tp}
	var imps [][]byte
	for i := range ni {
		imps = append(imps, importFunc("env", "f"+strconv.Itoa(int(i)), 0))
	}
	var tables [][]byte
	for range nt {
		if g.n(2) == 0 {
			tables = append(tables, cat(op(valFuncref, 0), u32(uint32(tmin))))
		} else {
			tables = append(tables, cat(op(valFuncref, 1), u32(uint32(tmin)), u32(uint32(tmin)+uint32(g.n(3)))))
		}
	}
	if nt > 0 {
		counts["table_elements"] = tmin
	}
	var globals [][]byte
	for range ng {
		globals = append(globals, cat(op(api.ValueTypeI32, 1), i32c(7), op(opEnd)))
	}
	var exps [][]byte
	for i := range ne {
		exps = append(exps, exportEntry("e"+strconv.Itoa(int(i)), ExternFunc, uint32(i)))
	}
	inner := []byte{}
	for j := range filler {
		if locals > 0 && j%2 == 0 {
			inner = append(inner, cat(localGet(uint32(j)%uint32(locals)), localSet(0))...)
		} else {
			inner = append(inner, cat(i32c(int32(j)), op(opDrop))...)
		}
	}
	code := cat(inner, nestedBlocks(int(depth)))
	b := body([]localGroup{{uint32(locals), api.ValueTypeI32}}, code)
	var bodies [][]byte
	for range nf {
		bodies = append(bodies, b)
	}
	r := &reader{b: b}
	size := r.u32()
	counts["function_body_bytes"] = uint64(size)
	counts["code_bytes"] = uint64(size) * nf
	var secs [][]byte
	tys := repeat(int(nty), functype(none, none)) // function and import type 0
	if nty > 1 {
		tys[nty-1] = functype(bytes.Repeat(i32, int(tp)), none)
	}
	secs = append(secs, types(tys...))
	if ni > 0 {
		secs = append(secs, imports(imps...))
	}
	secs = append(secs, funcs(make([]uint32, nf)...))
	if nt > 0 {
		secs = append(secs, section(secTable, vec(tables...)))
	}
	secs = append(secs, memory(1, -1))
	if ng > 0 {
		secs = append(secs, section(secGlobal, vec(globals...)))
	}
	if ne > 0 {
		secs = append(secs, exports(exps...))
	}
	secs = append(secs, codes(bodies...))
	payload := make([]byte, db)
	secs = append(secs, section(secData, vec(cat(u32(1), u32(uint32(db)), payload))))
	wasm := wasmModule(secs...)
	counts["module_bytes"] = uint64(len(wasm))
	return hugeModule{wasm: wasm, counts: counts, lim: lim}
}

// FuzzLimits: modules around the deploy limits are refused with ErrLimit
// exactly when one of their counts is over its limit (or with ErrInvalid or
// ErrUnsupported), and otherwise instrumented into a module wazero accepts.
//
//	go test -run '^$' -fuzz '^FuzzLimits$' -fuzztime 60s ./runner/internal/fuel/
func FuzzLimits(f *testing.F) {
	r := rand.New(rand.NewPCG(5, 6))
	for range 16 {
		seed := make([]byte, 32)
		for i := range seed {
			seed[i] = byte(r.Uint32())
		}
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		h := genHuge(data)
		eff := h.lim.withDefaults()
		limits := map[string]uint64{
			"module_bytes": eff.ModuleBytes, "functions": eff.Functions, "function_locals": eff.FunctionLocals,
			"total_locals": eff.TotalLocals, "function_body_bytes": eff.FunctionBodyBytes, "code_bytes": eff.CodeBytes,
			"nesting_depth": eff.NestingDepth, "data_bytes": eff.DataBytes, "imports": eff.Imports,
			"exports": eff.Exports, "tables": eff.Tables, "table_elements": eff.TableElements, "globals": eff.Globals,
			"types": eff.Types, "type_params": eff.TypeParams,
		}
		over := ""
		for k, c := range h.counts {
			if c > limits[k] {
				over += k + " "
			}
		}
		res, err := Instrument(h.wasm, Config{Limits: h.lim})
		var le *LimitError
		switch {
		case err == nil:
			if over != "" {
				t.Fatalf("accepted a module over %s", over)
			}
			if err := validate(res.Module); err != nil {
				t.Fatalf("output does not validate: %v", err)
			}
		case errors.As(err, &le):
			if !errors.Is(err, ErrLimit) || le.Actual <= le.Limit || over == "" {
				t.Fatalf("limit refusal %+v (%v), counts over: %q", le, err, over)
			}
		case errors.Is(err, ErrInvalid), errors.Is(err, ErrUnsupported):
			if validate(h.wasm) == nil && over == "" {
				t.Fatalf("refused a valid module within the limits: %v", err)
			}
		default:
			t.Fatalf("error not marked: %v", err)
		}
	})
}

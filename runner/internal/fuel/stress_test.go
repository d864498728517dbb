//go:build stress

package fuel

import (
	"context"
	"math"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
)

// Adversarial modules at the default deploy limits, and what compiling
// them with wazero's compiler costs. Each case runs in a child process so
// that its peak RSS (VmHWM) is its own.
//
//	go test -tags stress -run TestStress_compile -v -timeout 60m ./runner/internal/fuel/

const (
	stressBody = 512 << 10 // DefaultLimits().FunctionBodyBytes
	stressNest = 1024      // DefaultLimits().NestingDepth
)

// fill repeats unit until body is n bytes long (unit must be small).
func fill(body []byte, n int, unit []byte) []byte {
	for len(body)+len(unit) <= n {
		body = append(body, unit...)
	}
	return body
}

// rawBody encodes a function body of locals and code (code ends with end).
func rawBody(locals []localGroup, code []byte) []byte {
	var ls [][]byte
	for _, l := range locals {
		ls = append(ls, cat(u32(l.n), []byte{l.typ}))
	}
	b := cat(vec(ls...), code)
	return cat(u32(uint32(len(b))), b)
}

// nested wraps inner in depth constructs of kind opBlock or opLoop and ends
// the function, keeping the body within max bytes.
func nested(depth int, kind byte, inner func(room int) []byte, max int) []byte {
	head := make([]byte, 0, 2*depth)
	for range depth {
		head = append(head, kind, blockEmpty)
	}
	tail := make([]byte, depth+1)
	for i := range tail {
		tail[i] = opEnd
	}
	room := max - len(head) - len(tail) - 8 // locals vector and size prefix
	return cat(head, inner(room), tail)
}

// nestLocals is depth nested constructs of kind around as much of "local.get
// j; i32.const 1; i32.add; local.set j" over locals locals as fits.
func nestLocals(kind byte, depth, locals int) []byte {
	code := nested(depth, kind, func(room int) []byte {
		var b []byte
		for j := 0; ; j = (j + 1) % locals {
			unit := cat(localGet(uint32(j)), i32c(1), op(0x6a), localSet(uint32(j)))
			if len(b)+len(unit) > room {
				return b
			}
			b = append(b, unit...)
		}
	}, stressBody)
	return wasmModule(types(functype(none, none)), funcs(0), codes(rawBody([]localGroup{{uint32(locals), api.ValueTypeI32}}, code)))
}

var stressLocals = int(DefaultLimits().FunctionLocals)

var stressCases = map[string]func() []byte{
	// 1024 nested blocks around 512 KiB of i32.const 1; drop.
	"nest-blocks-const": func() []byte {
		code := nested(stressNest, opBlock, func(room int) []byte { return fill(nil, room, cat(i32c(1), op(opDrop))) }, stressBody)
		return wasmModule(types(functype(none, none)), funcs(0), codes(rawBody(nil, code)))
	},
	// The deepest nesting of loops; the innermost increments as many locals
	// as loop_local_work allows (every local may need a block parameter at
	// every loop): 1024 loops of 1397 locals.
	"nest-loops-locals": func() []byte {
		return nestLocals(opLoop, stressNest, int(math.Sqrt(float64(DefaultLimits().LoopLocalWork)/stressNest)))
	},
	// 20 nested loops around all the locals a function may have.
	"nest20-loops-locals": func() []byte {
		return nestLocals(opLoop, 20, min(stressLocals, int(math.Sqrt(float64(DefaultLimits().LoopLocalWork)/20))))
	},
	"nest-blocks-locals": func() []byte { return nestLocals(opBlock, stressNest, stressLocals) },
	// Loops one after the other, each reading and writing every local.
	"seq-loops-locals": func() []byte {
		var code []byte
		loopBody := []byte{}
		for j := range stressLocals {
			loopBody = append(loopBody, cat(localGet(uint32(j)), i32c(1), op(0x6a), localSet(uint32(j)))...)
		}
		for len(code)+len(loopBody)+4 < stressBody-8 {
			code = append(code, loop(blockEmpty, loopBody)...)
		}
		code = append(code, opEnd)
		return wasmModule(types(functype(none, none)), funcs(0), codes(rawBody([]localGroup{{uint32(stressLocals), api.ValueTypeI32}}, code)))
	},
	// One 512 KiB function of i32.const 0; drop.
	"const-drop": func() []byte {
		code := append(fill(nil, stressBody-8, cat(i32c(0), op(opDrop))), opEnd)
		return wasmModule(types(functype(none, none)), funcs(0), codes(rawBody(nil, code)))
	},
	// One 512 KiB function of local.get; local.set pairs.
	"get-set": func() []byte {
		code := append(fill(nil, stressBody-8, cat(localGet(0), localSet(1))), opEnd)
		return wasmModule(types(functype(none, none)), funcs(0), codes(rawBody([]localGroup{{2, api.ValueTypeI64}}, code)))
	},
	// Functions of function_locals locals each up to total_locals, each
	// local used.
	"max-locals": func() []byte {
		l := DefaultLimits()
		n := int(l.TotalLocals / l.FunctionLocals)
		var code []byte
		for j := range stressLocals {
			code = append(code, cat(localGet(uint32(j)), localSet(uint32((j+1)%stressLocals)))...)
		}
		b := rawBody([]localGroup{{uint32(stressLocals), api.ValueTypeI64}}, append(code, opEnd))
		return wasmModule(types(functype(none, none)), funcs(make([]uint32, n)...), codes(repeat(n, b)...))
	},
	// As many functions as allowed, each calling the next.
	"max-functions": func() []byte {
		n := int(DefaultLimits().Functions)
		if v := os.Getenv("FUEL_STRESS_FUNCS"); v != "" {
			n, _ = strconv.Atoi(v)
		}
		var bodies [][]byte
		for i := range n {
			code := []byte{opEnd}
			if i+1 < n {
				code = cat(call(uint32(i+1)), op(opEnd))
			}
			bodies = append(bodies, rawBody(nil, code))
		}
		return wasmModule(types(functype(none, none)), funcs(make([]uint32, n)...), codes(bodies...))
	},
	// 512 KiB of local.get 0 (values on the operand stack) live across one
	// call, then dropped.
	"live-across-call": func() []byte {
		k := (stressBody - 16) / 3
		code := make([]byte, 0, stressBody)
		for range k {
			code = append(code, localGet(0)...)
		}
		code = append(code, call(0)...)
		for range k {
			code = append(code, opDrop)
		}
		code = append(code, opEnd)
		return wasmModule(types(functype(none, none)), funcs(0), codes(rawBody([]localGroup{{1, api.ValueTypeI32}}, code)))
	},
	// A value redefined and live across a call, over and over (each
	// definition spilled to its own slot).
	"spill-sequence": func() []byte {
		unit := cat(localGet(0), i64c(3), op(opI64Mul), localSet(0), call(0))
		code := append(fill(nil, stressBody-8, unit), opEnd)
		return wasmModule(types(functype(none, none)), funcs(0), codes(rawBody([]localGroup{{1, api.ValueTypeI64}}, code)))
	},
	// 512 KiB functions of nested loops updating locals (the dearest
	// function per byte found) up to code_bytes, each within
	// loop_local_work: 25 locals, so that 32 of them fit.
	"max-code-nest": func() []byte {
		one := nestLocals(opLoop, stressNest, 25)
		lim := DefaultLimits()
		m, _ := decodeModule(one, &lim)
		raw := one[len(one)-int(m.codeBytes):] // the body: the module ends with it
		n := int(DefaultLimits().CodeBytes) / len(raw)
		if v := os.Getenv("FUEL_STRESS_FUNCS"); v != "" {
			n, _ = strconv.Atoi(v)
		}
		return wasmModule(types(functype(none, none)), funcs(make([]uint32, n)...), codes(repeat(n, cat(u32(uint32(len(raw))), raw))...))
	},
	// 32 functions of 512 KiB (code_bytes) of i32.const/drop.
	"max-code": func() []byte {
		code := append(fill(nil, stressBody-8, cat(i32c(0), op(opDrop))), opEnd)
		b := rawBody(nil, code)
		return wasmModule(types(functype(none, none)), funcs(make([]uint32, 32)...), codes(repeat(32, b)...))
	},
}

// TestStress_compile runs each case in a child process and reports the
// instrumentation time, wazero compiler time and peak RSS.
func TestStress_compile(t *testing.T) {
	if name := os.Getenv("FUEL_STRESS_CASE"); name != "" {
		stressChild(t, name)
		return
	}
	for name := range stressCases {
		if only := os.Getenv("FUEL_STRESS_ONLY"); only != "" && !strings.Contains(","+only+",", ","+name+",") {
			continue
		}
		t.Run(name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run", "^TestStress_compile$", "-test.v")
			cmd.Env = append(os.Environ(), "FUEL_STRESS_CASE="+name)
			out, err := cmd.CombinedOutput()
			for _, line := range strings.Split(string(out), "\n") {
				if strings.Contains(line, "RESULT") {
					t.Log(strings.TrimSpace(line))
				}
			}
			if err != nil {
				t.Errorf("child: %v\n%s", err, out)
			}
		})
	}
}

func stressChild(t *testing.T, name string) {
	wasm := stressCases[name]()
	start := time.Now()
	cfg := Config{}
	if n, l := os.Getenv("FUEL_STRESS_NEST"), os.Getenv("FUEL_STRESS_LOCALS"); n != "" {
		d, _ := strconv.Atoi(n)
		k, _ := strconv.Atoi(l)
		kind := byte(opLoop)
		if strings.Contains(name, "blocks") {
			kind = opBlock
		}
		wasm = nestLocals(kind, d, k)
		cfg.Limits = Limits{NestingDepth: 1 << 20, FunctionLocals: 1 << 20}
	}
	res, err := Instrument(wasm, cfg)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	inst := time.Since(start)
	runtime.GC()
	ctx := context.Background()
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigCompiler().WithCoreFeatures(api.CoreFeaturesV2))
	start = time.Now()
	cm, err := rt.CompileModule(ctx, res.Module)
	if err != nil {
		t.Fatalf("%s: compile: %v", name, err)
	}
	comp := time.Since(start)
	_ = cm.Close(ctx)
	status, _ := os.ReadFile("/proc/self/status")
	hwm := ""
	for _, line := range strings.Split(string(status), "\n") {
		if strings.HasPrefix(line, "VmHWM:") {
			hwm = strings.TrimSpace(strings.TrimPrefix(line, "VmHWM:"))
		}
	}
	t.Logf("RESULT %s: module %d bytes, instrumented %d bytes, max frame %d; Instrument %v, compile %v, VmHWM %s",
		name, len(wasm), len(res.Module), res.Info.MaxFrameBytes, inst.Round(time.Millisecond), comp.Round(time.Millisecond), hwm)
}

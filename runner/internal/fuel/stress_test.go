//go:build stress

package fuel

import (
	"context"
	"os"
	"os/exec"
	"runtime"
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

var stressCases = map[string]func() []byte{
	// 1024 nested blocks around 512 KiB of i32.const 1; drop.
	"nest-blocks-const": func() []byte {
		code := nested(stressNest, opBlock, func(room int) []byte { return fill(nil, room, cat(i32c(1), op(opDrop))) }, stressBody)
		return wasmModule(types(functype(none, none)), funcs(0), codes(rawBody(nil, code)))
	},
	// 1024 nested loops; the innermost increments 10,000 locals over and
	// over (every local may need a block parameter at every loop).
	"nest-loops-locals": func() []byte {
		const locals = 10_000
		code := nested(stressNest, opLoop, func(room int) []byte {
			var b []byte
			for j := 0; ; j = (j + 1) % locals {
				unit := cat(localGet(uint32(j)), i32c(1), op(0x6a), localSet(uint32(j)))
				if len(b)+len(unit) > room {
					return b
				}
				b = append(b, unit...)
			}
		}, stressBody)
		return wasmModule(types(functype(none, none)), funcs(0), codes(rawBody([]localGroup{{locals, valI32}}, code)))
	},
	// One 512 KiB function of i32.const 0; drop.
	"const-drop": func() []byte {
		code := append(fill(nil, stressBody-8, cat(i32c(0), op(opDrop))), opEnd)
		return wasmModule(types(functype(none, none)), funcs(0), codes(rawBody(nil, code)))
	},
	// One 512 KiB function of local.get; local.set pairs.
	"get-set": func() []byte {
		code := append(fill(nil, stressBody-8, cat(localGet(0), localSet(1))), opEnd)
		return wasmModule(types(functype(none, none)), funcs(0), codes(rawBody([]localGroup{{2, valI64}}, code)))
	},
	// 100 functions of 10,000 locals each (total_locals), each local used.
	"max-locals": func() []byte {
		var bodies [][]byte
		for range 100 {
			var code []byte
			for j := range 10_000 {
				code = append(code, cat(localGet(uint32(j)), localSet(uint32((j+1)%10_000)))...)
			}
			bodies = append(bodies, rawBody([]localGroup{{10_000, valI64}}, append(code, opEnd)))
		}
		return wasmModule(types(functype(none, none)), funcs(make([]uint32, 100)...), codes(bodies...))
	},
	// 50,000 functions, each calling the next.
	"max-functions": func() []byte {
		const n = 50_000
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
		code := fill(nil, 2*k, localGet(0))
		code = append(code, call(0)...)
		code = fill(code, 3*k, op(opDrop))
		code = append(code, opEnd)
		return wasmModule(types(functype(none, none)), funcs(0), codes(rawBody([]localGroup{{1, valI32}}, code)))
	},
	// A value redefined and live across a call, over and over (each
	// definition spilled to its own slot).
	"spill-sequence": func() []byte {
		unit := cat(localGet(0), i64c(3), op(opI64Mul), localSet(0), call(0))
		code := append(fill(nil, stressBody-8, unit), opEnd)
		return wasmModule(types(functype(none, none)), funcs(0), codes(rawBody([]localGroup{{1, valI64}}, code)))
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
	res, err := Instrument(wasm, Config{})
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

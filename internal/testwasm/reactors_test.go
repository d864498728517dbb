package testwasm_test

import (
	"bytes"
	"context"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/errors"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
	"github.com/tetratelabs/wazero/sys"

	"github.com/latent-node/latent-node/internal/testwasm"
)

// reactorCall is one call of a reactor's entry function: its stdin and
// environment, and what it must answer.
type reactorCall struct {
	stdin  string
	env    []string
	stdout string // the exact stdout, unless contains is set
	// contains are substrings stdout must have instead.
	contains []string
	exit     uint32 // the exit status (proc_exit); 0: the function returned
	stderr   string // a substring of stderr
}

// exampleReactor is one reactor of examples/: the module build.sh writes, its
// entry function and calls to it in order on one instance. Each call but a
// failing last one sets a different environment and stdin: a reactor that
// answered from the environment it saw at _initialize, or kept the
// previous call's stdin or stdout, fails.
type exampleReactor struct {
	lang, module, export string
	calls                []reactorCall
}

var exampleReactors = []exampleReactor{
	{lang: "go", module: "greet-reactor", export: "greet", calls: []reactorCall{
		{stdin: `{"name":"Ada","language":"fr"}`, env: []string{"LATENT_ACTIVATION_ID=act-1"},
			stdout: `{"greeting":"bonjour, Ada","activation":"act-1"}` + "\n"},
		{stdin: `{"name":"Grace"}`, env: []string{"LATENT_REVISION=r", "LATENT_ACTIVATION_ID=act-2"},
			stdout: `{"greeting":"hello, Grace","activation":"act-2"}` + "\n"},
		{stdin: "Ada", exit: 2, stderr: "greet: the body must be a JSON object"},
	}},
	{lang: "go", module: "router-reactor", export: "web", calls: []reactorCall{
		{env: []string{"REQUEST_METHOD=GET", "PATH_INFO=/hello", "QUERY_STRING=name=Ada", "HTTP_ACCEPT_LANGUAGE=fr-CH, en", "LATENT_ACTIVATION_ID=act-1"},
			contains: []string{"Status: 200\nContent-Type: application/json\nX-Example: go-router\nContent-Language: fr\n", `"greeting":"bonjour, Ada"`, `"activation":"act-1"`}},
		{stdin: "hi there", env: []string{"REQUEST_METHOD=POST", "PATH_INFO=/echo", "CONTENT_TYPE=text/plain"},
			stdout: "Status: 200\nContent-Type: text/plain\nX-Example: go-router\nX-Body-Bytes: 8\n\nhi there"},
		{env: []string{"REQUEST_METHOD=GET", "PATH_INFO=/nowhere"},
			stdout: "Status: 404\nContent-Type: application/json\nX-Example: go-router\n\n" + `{"error":"no route /nowhere"}` + "\n"},
	}},
	{lang: "rust", module: "wordfreq-reactor", export: "wordfreq", calls: []reactorCall{
		{stdin: "The cat and the hat; THE bat, and a cat.", stdout: "3 the\n2 and\n2 cat\n1 a\n1 bat\n1 hat\n"},
		{stdin: "b a b", stdout: "2 b\n1 a\n"},
		{stdin: " ,;. ", exit: 2, stderr: "wordfreq: the body has no words"},
	}},
	{lang: "rust", module: "count-reactor", export: "web", calls: []reactorCall{
		{env: []string{"REQUEST_METHOD=GET", "PATH_INFO=/words", "QUERY_STRING=text=to+be+or+not"},
			stdout: "Status: 200\nContent-Type: text/plain; charset=utf-8\nX-Example: rust-count\nX-Count: 4\n\n4 words\n"},
		{stdin: "a\nb\nc\n", env: []string{"REQUEST_METHOD=POST", "PATH_INFO=/lines", "HTTP_ACCEPT=application/json"},
			stdout: "Status: 200\nContent-Type: application/json\nX-Example: rust-count\nX-Count: 3\n\n" + `{"count":3,"unit":"lines"}` + "\n"},
		{env: []string{"REQUEST_METHOD=PUT", "PATH_INFO=/bytes"},
			stdout: "Status: 405\nContent-Type: text/plain\nX-Example: rust-count\n\nPUT not allowed: want GET or POST\n"},
	}},
	{lang: "c", module: "upper-reactor", export: "upper", calls: []reactorCall{
		{stdin: "hello, Ada 42\n", stdout: "HELLO, ADA 42\n"},
		{stdin: strings.Repeat("abc", 5000), stdout: strings.Repeat("ABC", 5000)},
		{stdin: "", exit: 2, stderr: "upper: the body is empty"},
	}},
	{lang: "c", module: "case-reactor", export: "web", calls: []reactorCall{
		{env: []string{"REQUEST_METHOD=GET", "PATH_INFO=/upper", "QUERY_STRING=text=Hello+Ada", "HTTP_X_REPEAT=2"},
			stdout: "Status: 200\nContent-Type: text/plain\nX-Example: c-case\nX-Transform: upper\n\nHELLO ADA\nHELLO ADA\n"},
		{stdin: "MiXeD Case", env: []string{"REQUEST_METHOD=POST", "PATH_INFO=/lower"},
			stdout: "Status: 200\nContent-Type: text/plain\nX-Example: c-case\nX-Transform: lower\n\nmixed case"},
		{stdin: strings.Repeat("Ab", 5000), env: []string{"REQUEST_METHOD=POST", "PATH_INFO=/upper"},
			stdout: "Status: 200\nContent-Type: text/plain\nX-Example: c-case\nX-Transform: upper\n\n" + strings.Repeat("AB", 5000)},
		{env: []string{"REQUEST_METHOD=DELETE", "PATH_INFO=/upper"},
			stdout: "Status: 405\nContent-Type: text/plain\nX-Example: c-case\n\nwant GET or POST\n"},
	}},
}

// initEnv is the environment the reactors see at _initialize: a request of
// its own that no call expects, so an answer computed from it fails.
var initEnv = []string{"REQUEST_METHOD=PATCH", "PATH_INFO=/init", "QUERY_STRING=text=init&name=init", "LATENT_ACTIVATION_ID=init"}

// TestExampleReactors builds the reactors of examples/ whose toolchain is on
// this machine (examples/build.sh) and runs each with plain wazero, as the
// node's snapshot and reuse modes do: instantiate without a start function,
// call _initialize once, then call the entry function on the same instance
// once per activation, each time with its own stdin, stdout, stderr and
// environment (environ_get answers the current call's, like the node's
// runner). It proves the examples read the environment per call, forget
// the previous call's stdin and flush stdout before returning.
func TestExampleReactors(t *testing.T) {
	t.Parallel()
	for _, lang := range []string{"go", "rust", "c"} {
		t.Run(lang, func(t *testing.T) {
			t.Parallel()
			dir := testwasm.BuildExamplesT(t, lang)
			for _, r := range exampleReactors {
				if r.lang != lang {
					continue
				}
				t.Run(r.module, func(t *testing.T) {
					wasm, err := os.ReadFile(filepath.Join(dir, r.module+".wasm"))
					if err != nil {
						t.Fatal(err)
					}
					testReactor(t, wasm, r)
				})
			}
		})
	}
}

// reactorHost is the WASI side of one reactor instance: what the current
// call reads and writes.
type reactorHost struct {
	env            []string
	stdin          io.Reader
	stdout, stderr bytes.Buffer
}

func (h *reactorHost) Read(p []byte) (int, error) { return h.stdin.Read(p) }

type hostWriter struct{ b *bytes.Buffer }

func (w hostWriter) Write(p []byte) (int, error) { return w.b.Write(p) }

// set starts a call: its environment and stdin, empty stdout and stderr.
func (h *reactorHost) set(env []string, stdin string) {
	h.env, h.stdin = env, strings.NewReader(stdin)
	h.stdout.Reset()
	h.stderr.Reset()
}

// defineWASI instantiates wasi_snapshot_preview1 in rt: wazero's functions
// but environ_sizes_get and environ_get, which answer h.env as it is when
// the guest calls them.
func defineWASI(ctx context.Context, rt wazero.Runtime, h *reactorHost) error {
	b := rt.NewHostModuleBuilder(wasi_snapshot_preview1.ModuleName)
	wasi_snapshot_preview1.NewFunctionExporter().ExportFunctions(b)
	i32 := []api.ValueType{api.ValueTypeI32, api.ValueTypeI32}
	size := func() (n uint32) {
		for _, e := range h.env {
			n += uint32(len(e)) + 1
		}
		return n
	}
	b.NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(func(_ context.Context, m api.Module, stack []uint64) {
		ok := m.Memory().WriteUint32Le(uint32(stack[0]), uint32(len(h.env))) && m.Memory().WriteUint32Le(uint32(stack[1]), size())
		stack[0] = errno(ok)
	}), i32, i32[:1]).Export("environ_sizes_get")
	b.NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(func(_ context.Context, m api.Module, stack []uint64) {
		ptrs, buf := uint32(stack[0]), uint32(stack[1])
		ok := true
		for i, e := range h.env {
			ok = ok && m.Memory().WriteUint32Le(ptrs+4*uint32(i), buf) &&
				m.Memory().WriteString(buf, e) && m.Memory().WriteByte(buf+uint32(len(e)), 0)
			buf += uint32(len(e)) + 1
		}
		stack[0] = errno(ok)
	}), i32, i32[:1]).Export("environ_get")
	_, err := b.Instantiate(ctx)
	return err
}

// errno is WASI's success (0) or EFAULT (21).
func errno(ok bool) uint64 {
	if ok {
		return 0
	}
	return 21
}

func testReactor(t *testing.T, wasm []byte, r exampleReactor) {
	ctx := context.Background()
	// The compiler's timings are the ones that matter; in -short mode (under
	// -race it compiles a Go reactor in 30 to 50 s) the interpreter runs the
	// same calls.
	config := wazero.NewRuntimeConfig()
	if testing.Short() {
		config = wazero.NewRuntimeConfigInterpreter()
	}
	rt := wazero.NewRuntimeWithConfig(ctx, config)
	defer rt.Close(ctx)
	h := &reactorHost{}
	if err := defineWASI(ctx, rt, h); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	compiled, err := rt.CompileModule(ctx, wasm)
	if err != nil {
		t.Fatal(err)
	}
	compile := time.Since(start)
	exports := compiled.ExportedFunctions()
	if _, ok := exports["_start"]; ok {
		t.Errorf("%s exports _start: a reactor must not", r.module)
	}
	for _, name := range []string{"_initialize", r.export} {
		if f, ok := exports[name]; !ok || len(f.ParamTypes()) != 0 || len(f.ResultTypes()) != 0 {
			t.Fatalf("%s does not export %s as a function of no parameters and no results (exports %v)", r.module, name, slices.Sorted(maps.Keys(exports)))
		}
	}

	h.set(initEnv, "init's stdin")
	start = time.Now()
	mod, err := rt.InstantiateModule(ctx, compiled, wazero.NewModuleConfig().WithName("").WithStartFunctions().
		WithStdin(h).WithStdout(hostWriter{&h.stdout}).WithStderr(hostWriter{&h.stderr}))
	if err != nil {
		t.Fatal(err)
	}
	instantiate := time.Since(start)
	start = time.Now()
	if _, err := mod.ExportedFunction("_initialize").Call(ctx); err != nil {
		t.Fatalf("_initialize: %v (stderr %q)", err, h.stderr.String())
	}
	initialize := time.Since(start)
	if h.stdout.Len() > 0 {
		t.Errorf("_initialize wrote %q to stdout", h.stdout.String())
	}
	entry := mod.ExportedFunction(r.export)

	var first time.Duration
	for i, c := range r.calls {
		h.set(c.env, c.stdin)
		start := time.Now()
		_, err := entry.Call(ctx)
		if i == 0 {
			first = time.Since(start)
		}
		var exit uint32
		if err != nil {
			var ee *sys.ExitError
			if !errors.As(err, &ee) {
				t.Fatalf("call %d: %v (stderr %q)", i, err, h.stderr.String())
			}
			exit = ee.ExitCode()
		}
		if exit != c.exit {
			t.Errorf("call %d: exit status %d, want %d (stdout %q, stderr %q)", i, exit, c.exit, h.stdout.String(), h.stderr.String())
		}
		got := h.stdout.String()
		if c.contains != nil {
			for _, s := range c.contains {
				if !strings.Contains(got, s) {
					t.Errorf("call %d: stdout %q lacks %q", i, got, s)
				}
			}
		} else if got != c.stdout {
			t.Errorf("call %d: stdout\n%q, want\n%q (stderr %q)", i, got, c.stdout, h.stderr.String())
		}
		if !strings.Contains(h.stderr.String(), c.stderr) {
			t.Errorf("call %d: stderr %q lacks %q", i, h.stderr.String(), c.stderr)
		}
		if exit != 0 {
			if i != len(r.calls)-1 {
				t.Fatalf("call %d exited: the instance is gone", i)
			}
			break
		}
	}

	// The steady state of a reused instance: the first call again, timed.
	c := r.calls[0]
	const rounds = 21
	times := make([]time.Duration, 0, rounds)
	for range rounds {
		h.set(c.env, c.stdin)
		if mod.IsClosed() {
			if mod, err = rt.InstantiateModule(ctx, compiled, wazero.NewModuleConfig().WithName("").WithStartFunctions().
				WithStdin(h).WithStdout(hostWriter{&h.stdout}).WithStderr(hostWriter{&h.stderr})); err != nil {
				t.Fatal(err)
			}
			if _, err := mod.ExportedFunction("_initialize").Call(ctx); err != nil {
				t.Fatal(err)
			}
			entry = mod.ExportedFunction(r.export)
			h.set(c.env, c.stdin)
		}
		start := time.Now()
		if _, err := entry.Call(ctx); err != nil {
			t.Fatal(err)
		}
		times = append(times, time.Since(start))
		if c.contains == nil && h.stdout.String() != c.stdout {
			t.Fatalf("repeated call: stdout %q, want %q", h.stdout.String(), c.stdout)
		}
	}
	slices.Sort(times)
	t.Logf("%s (%d bytes, memory %d bytes after the calls): compile %v, instantiate %v, _initialize %v, first %s call %v, then p50 %v",
		r.module, len(wasm), mod.Memory().Size(), compile.Round(time.Millisecond), instantiate.Round(time.Microsecond),
		initialize.Round(time.Microsecond), r.export, first.Round(time.Microsecond), times[rounds/2].Round(100*time.Nanosecond))
}

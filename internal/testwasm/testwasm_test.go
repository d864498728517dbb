package testwasm_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/errors"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
	"github.com/tetratelabs/wazero/sys"

	"github.com/latent-node/latent-node/internal/testwasm"
)

// wat2wasmArgs are the flags used to build every fixture; they must match
// the header comments of the .wat files, testdata/wasm/README.md and the
// Makefile's wasm target (plain `wat2wasm X.wat -o X.wasm`).
var wat2wasmArgs = []string(nil)

// fixtures is the set of guests other packages' tests rely on.
var fixtures = []string{
	"bad_import",
	"cgienv",
	"chatty",
	"clocks",
	"complain",
	"compute",
	"echo",
	"exit",
	"fib",
	"flood",
	"grow",
	"hello",
	"hostcalls",
	"infinite",
	"oob_data",
	"random",
	"recursion",
	"sleep",
	"state",
	"tablestate",
	"trap_divzero",
	"trap_oob",
	"trap_unreachable",
	"trivial",
}

func TestDir(t *testing.T) {
	d := testwasm.Dir()
	if !filepath.IsAbs(d) {
		t.Errorf("Dir() = %q, want an absolute path", d)
	}
	if fi, err := os.Stat(d); err != nil || !fi.IsDir() {
		t.Fatalf("Dir() = %q is not a directory: %v", d, err)
	}
	if got, want := testwasm.Path("echo"), filepath.Join(d, "echo.wasm"); got != want {
		t.Errorf("Path(echo) = %q, want %q", got, want)
	}
	if got, want := testwasm.Path("echo.wat"), filepath.Join(d, "echo.wat"); got != want {
		t.Errorf("Path(echo.wat) = %q, want %q", got, want)
	}
	if b := testwasm.Bytes(t, "trivial"); !bytes.HasPrefix(b, []byte("\x00asm")) {
		t.Errorf("Bytes(trivial) does not start with the wasm magic: % x", b[:min(len(b), 8)])
	}
}

func TestNames(t *testing.T) {
	if got := testwasm.Names(); !slices.Equal(got, fixtures) {
		t.Errorf("Names() = %q\nwant %q", got, fixtures)
	}
}

// TestFixturesPaired checks that every .wat has a committed .wasm and vice
// versa. It needs no external tools.
func TestFixturesPaired(t *testing.T) {
	wats := globNames(t, "*.wat")
	wasms := globNames(t, "*.wasm")
	for _, n := range wats {
		if !slices.Contains(wasms, n) {
			t.Errorf("%s.wat has no %s.wasm: run make wasm", n, n)
		}
	}
	for _, n := range wasms {
		if !slices.Contains(wats, n) {
			t.Errorf("%s.wasm has no %s.wat source", n, n)
		}
	}
}

func globNames(t *testing.T, pattern string) []string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(testwasm.Dir(), pattern))
	if err != nil {
		t.Fatalf("glob %s: %v", pattern, err)
	}
	var names []string
	for _, p := range paths {
		names = append(names, strings.TrimSuffix(filepath.Base(p), filepath.Ext(p)))
	}
	return names
}

// TestFixturesMatchSources rebuilds every .wat with wat2wasm and compares the
// result with the committed .wasm.
func TestFixturesMatchSources(t *testing.T) {
	wat2wasm, err := exec.LookPath("wat2wasm")
	if err != nil {
		t.Skipf("wat2wasm not on PATH: %v", err)
	}
	tmp := t.TempDir()
	for _, n := range globNames(t, "*.wat") {
		t.Run(n, func(t *testing.T) {
			out := filepath.Join(tmp, n+".wasm")
			args := append(slices.Clone(wat2wasmArgs), testwasm.Path(n+".wat"), "-o", out)
			if output, err := exec.Command(wat2wasm, args...).CombinedOutput(); err != nil {
				t.Fatalf("wat2wasm %s: %v\n%s", strings.Join(args, " "), err, output)
			}
			built, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			committed, err := os.ReadFile(testwasm.Path(n))
			if err != nil {
				t.Fatalf("%v: run make wasm", err)
			}
			if !bytes.Equal(built, committed) {
				t.Errorf("%s.wasm is stale (%d bytes committed, %d bytes from %s.wat): run make wasm",
					n, len(committed), len(built), n)
			}
		})
	}
}

// TestFixturesValidate runs wasm-validate on every committed .wasm.
func TestFixturesValidate(t *testing.T) {
	validate, err := exec.LookPath("wasm-validate")
	if err != nil {
		t.Skipf("wasm-validate not on PATH: %v", err)
	}
	for _, n := range testwasm.Names() {
		if output, err := exec.Command(validate, testwasm.Path(n)).CombinedOutput(); err != nil {
			t.Errorf("wasm-validate %s.wasm: %v\n%s", n, err, output)
		}
	}
}

// engines are the wazero engines the behaviour tests run on. The default
// engine is the optimizing compiler where wazero supports it.
var engines = []struct {
	name   string
	config func() wazero.RuntimeConfig
}{
	{"default", wazero.NewRuntimeConfig},
	{"interpreter", wazero.NewRuntimeConfigInterpreter},
}

// TestFixturesAreCommands checks the shape every guest must have: exports
// "_start" () -> () and "memory" (a reactor, listed in reactors, exports
// "_initialize" instead), and imports only from wasi_snapshot_preview1
// (bad_import also imports env.host_log).
func TestFixturesAreCommands(t *testing.T) {
	ctx := context.Background()
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter())
	defer rt.Close(ctx)
	for _, n := range testwasm.Names() {
		t.Run(n, func(t *testing.T) {
			compiled, err := rt.CompileModule(ctx, testwasm.Bytes(t, n))
			if err != nil {
				t.Fatalf("compile: %v", err)
			}
			defer compiled.Close(ctx)
			entry := "_start"
			if slices.Contains(reactors, n) {
				entry = "_initialize"
			}
			checkEntry(t, compiled, entry)
			var foreign []string
			for _, f := range compiled.ImportedFunctions() {
				if mod, name, _ := f.Import(); mod != wasi_snapshot_preview1.ModuleName {
					foreign = append(foreign, mod+"."+name)
				}
			}
			for _, m := range compiled.ImportedMemories() {
				mod, name, _ := m.Import()
				foreign = append(foreign, mod+"."+name)
			}
			want := []string(nil)
			if n == "bad_import" {
				want = []string{"env.host_log"}
			}
			if !slices.Equal(foreign, want) {
				t.Errorf("non-WASI imports = %q, want %q", foreign, want)
			}
		})
	}
}

// reactors are the fixtures that are reactors, not commands.
var reactors = []string{"state", "tablestate"}

func checkCommand(t *testing.T, compiled wazero.CompiledModule) { checkEntry(t, compiled, "_start") }

func checkEntry(t *testing.T, compiled wazero.CompiledModule, entry string) {
	t.Helper()
	start, ok := compiled.ExportedFunctions()[entry]
	if !ok {
		t.Errorf("no %s export", entry)
	} else if len(start.ParamTypes()) != 0 || len(start.ResultTypes()) != 0 {
		t.Errorf("%s has type %v -> %v, want () -> ()", entry, start.ParamTypes(), start.ResultTypes())
	}
	if _, ok := compiled.ExportedMemories()["memory"]; !ok {
		t.Errorf("no memory export")
	}
}

// runOpts describes one activation of a guest.
type runOpts struct {
	stdin    string
	stdout   io.Writer // defaults to a buffer returned in runResult
	memLimit uint32    // pages; 0 means wazero's default
}

type runResult struct {
	stdout, stderr string
	// err is the error from instantiation or from calling _start directly
	// (so proc_exit(0) shows up as *sys.ExitError with code 0).
	err error
}

// run instantiates wasm with WASI on a fresh runtime and calls _start.
// It fails the test if the module does not compile.
func run(t *testing.T, config func() wazero.RuntimeConfig, wasm []byte, o runOpts) runResult {
	t.Helper()
	ctx := context.Background()
	cfg := config()
	if o.memLimit != 0 {
		cfg = cfg.WithMemoryLimitPages(o.memLimit)
	}
	rt := wazero.NewRuntimeWithConfig(ctx, cfg)
	defer rt.Close(ctx)
	wasi_snapshot_preview1.MustInstantiate(ctx, rt)

	compiled, err := rt.CompileModule(ctx, wasm)
	if err != nil {
		t.Fatalf("compile: %v", err)
	}
	var stdout, stderr bytes.Buffer
	modCfg := wazero.NewModuleConfig().
		WithStdin(strings.NewReader(o.stdin)).
		WithStdout(&stdout).
		WithStderr(&stderr).
		WithStartFunctions() // call _start ourselves, see runResult.err
	if o.stdout != nil {
		modCfg = modCfg.WithStdout(o.stdout)
	}
	mod, err := rt.InstantiateModule(ctx, compiled, modCfg)
	if err != nil {
		return runResult{stdout.String(), stderr.String(), err}
	}
	_, err = mod.ExportedFunction("_start").Call(ctx)
	return runResult{stdout.String(), stderr.String(), err}
}

// wantOK fails unless r finished successfully: _start returned or the guest
// called proc_exit(0).
func wantOK(t *testing.T, r runResult) {
	t.Helper()
	if code, ok := exitCode(r.err); r.err != nil && !(ok && code == 0) {
		t.Fatalf("unexpected error: %v\nstderr: %s", r.err, r.stderr)
	}
}

// wantExit fails unless the guest called proc_exit(code).
func wantExit(t *testing.T, r runResult, code uint32) {
	t.Helper()
	got, ok := exitCode(r.err)
	if !ok {
		t.Fatalf("got error %v, want *sys.ExitError with code %d", r.err, code)
	}
	if got != code {
		t.Fatalf("exit code %d, want %d (stderr: %q)", got, code, r.stderr)
	}
}

func exitCode(err error) (uint32, bool) {
	var exit *sys.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode(), true
	}
	return 0, false
}

// wantTrap fails unless the activation failed with a non-exit error whose
// text contains want.
func wantTrap(t *testing.T, r runResult, want string) {
	t.Helper()
	if r.err == nil {
		t.Fatalf("succeeded, want a trap containing %q", want)
	}
	if code, ok := exitCode(r.err); ok {
		t.Fatalf("exited with code %d, want a trap containing %q", code, want)
	}
	if !strings.Contains(r.err.Error(), want) {
		t.Fatalf("error %q does not contain %q", r.err, want)
	}
}

// computeOracle is the Go definition of compute.wat's loop.
func computeOracle(n uint64) uint64 {
	x := uint64(0x9e3779b97f4a7c15)
	for range n {
		x = x*6364136223846793005 + 1442695040888963407
		x ^= x >> 29
	}
	return x
}

// compute1000 is computeOracle(1000), hard-coded so that a change to either
// the oracle or the guest is noticed.
const compute1000 = 2926642762503582672

// errWriter accepts limit bytes in total, then fails every write.
type errWriter struct {
	limit int
	buf   bytes.Buffer
}

var errWriterFull = errors.New("errWriter: output limit reached")

func (w *errWriter) Write(p []byte) (int, error) {
	if w.buf.Len()+len(p) > w.limit {
		return 0, errWriterFull
	}
	return w.buf.Write(p)
}

func TestFixturesBehave(t *testing.T) {
	if got := computeOracle(1000); got != compute1000 {
		t.Fatalf("computeOracle(1000) = %d, want %d", got, compute1000)
	}
	for _, e := range engines {
		t.Run(e.name, func(t *testing.T) {
			t.Parallel()
			testBehaviour(t, e.name, e.config)
		})
	}
}

func testBehaviour(t *testing.T, name string, engine func() wazero.RuntimeConfig) {
	// Share compiled code between the many short-lived runtimes below; the Go
	// guest in particular is slow to compile (especially under -race).
	cache := wazero.NewCompilationCache()
	defer cache.Close(context.Background())
	config := func() wazero.RuntimeConfig { return engine().WithCompilationCache(cache) }
	fixture := func(name string) []byte { return testwasm.Bytes(t, name) }

	t.Run("echo", func(t *testing.T) {
		big := make([]byte, 200<<10)
		for i := range big {
			big[i] = byte(i*7 + i>>8)
		}
		for _, in := range []string{"", "hello\n", "no newline", string(big)} {
			r := run(t, config, fixture("echo"), runOpts{stdin: in})
			wantOK(t, r)
			if r.stdout != in {
				t.Errorf("echo of %d bytes wrote %d bytes (equal prefix: %v)",
					len(in), len(r.stdout), strings.HasPrefix(in, r.stdout))
			}
		}
	})

	t.Run("compute", func(t *testing.T) {
		want := fmt.Sprintf("%d\n", uint64(compute1000))
		for _, in := range []string{"1000", "1000\n", " 1000 \r\n", "1000\n"} {
			r := run(t, config, fixture("compute"), runOpts{stdin: in})
			wantOK(t, r)
			if r.stdout != want {
				t.Errorf("compute(%q) = %q, want %q", in, r.stdout, want)
			}
		}
		for _, n := range []uint64{0, 1, 2, 12345} {
			r := run(t, config, fixture("compute"), runOpts{stdin: fmt.Sprint(n)})
			wantOK(t, r)
			if want := fmt.Sprintf("%d\n", computeOracle(n)); r.stdout != want {
				t.Errorf("compute(%d) = %q, want %q", n, r.stdout, want)
			}
		}
		for _, in := range []string{"", "\n", "abc", "-5", "12x", "1 2", "9223372036854775808", strings.Repeat("1", 64)} {
			r := run(t, config, fixture("compute"), runOpts{stdin: in})
			wantExit(t, r, 2)
			if r.stdout != "" {
				t.Errorf("compute(%q) wrote %q", in, r.stdout)
			}
		}
	})

	t.Run("grow", func(t *testing.T) {
		r := run(t, config, fixture("grow"), runOpts{memLimit: 16})
		wantOK(t, r)
		if r.stdout != "15\n" {
			t.Errorf("grow with a 16-page limit wrote %q, want %q", r.stdout, "15\n")
		}
	})

	t.Run("exit", func(t *testing.T) {
		for in, code := range map[string]uint32{
			"":           0,
			"0":          0,
			"1":          1,
			"42\n":       42,
			"255":        255,
			"4294967295": 4294967295,
			"4294967296": 2,
			"nope":       2,
		} {
			r := run(t, config, fixture("exit"), runOpts{stdin: in})
			wantExit(t, r, code)
		}
	})

	t.Run("traps", func(t *testing.T) {
		for name, want := range map[string]string{
			"trap_unreachable": "unreachable",
			"trap_divzero":     "integer divide by zero",
			"trap_oob":         "out of bounds memory access",
			"recursion":        "stack overflow",
		} {
			r := run(t, config, fixture(name), runOpts{})
			wantTrap(t, r, want)
			t.Logf("%s: %s", name, firstLine(r.err.Error()))
		}
	})

	t.Run("flood", func(t *testing.T) {
		w := &errWriter{limit: 1 << 20}
		r := run(t, config, fixture("flood"), runOpts{stdout: w})
		wantExit(t, r, 1)
		if w.buf.Len() != 1<<20 {
			t.Errorf("flood wrote %d bytes before the error, want %d", w.buf.Len(), 1<<20)
		}
		line := strings.Repeat("x", 63) + "\n"
		if want := strings.Repeat(line, (1<<20)/64); w.buf.String() != want {
			t.Errorf("flood output is not lines of 63 x's")
		}
	})

	t.Run("hello", func(t *testing.T) {
		for in, want := range map[string]string{
			"":           "hello, world\n",
			"\n":         "hello, world\n",
			"ada":        "hello, ada\n",
			"ada\n":      "hello, ada\n",
			"ada\r\n":    "hello, ada\n",
			"ada lace\n": "hello, ada lace\n",
		} {
			r := run(t, config, fixture("hello"), runOpts{stdin: in})
			wantOK(t, r)
			if r.stdout != want {
				t.Errorf("hello(%q) = %q, want %q", in, r.stdout, want)
			}
		}
	})

	t.Run("fib", func(t *testing.T) {
		for in, want := range map[string]string{
			"0":    "0\n",
			"1":    "1\n",
			"2":    "1\n",
			"20\n": "6765\n",
			"25":   "75025\n",
		} {
			r := run(t, config, fixture("fib"), runOpts{stdin: in})
			wantOK(t, r)
			if r.stdout != want {
				t.Errorf("fib(%q) = %q, want %q", in, r.stdout, want)
			}
		}
		wantExit(t, run(t, config, fixture("fib"), runOpts{stdin: "x"}), 2)
	})

	t.Run("trivial", func(t *testing.T) {
		r := run(t, config, fixture("trivial"), runOpts{})
		if r.err != nil {
			t.Fatalf("trivial: %v", r.err)
		}
		if r.stdout != "" || r.stderr != "" {
			t.Errorf("trivial wrote stdout %q, stderr %q", r.stdout, r.stderr)
		}
	})

	t.Run("random", func(t *testing.T) {
		r := run(t, config, fixture("random"), runOpts{})
		wantOK(t, r)
		// Two calls of 16 bytes each: the halves of the line differ.
		if ok, _ := regexp.MatchString(`^[0-9a-f]{64}\n$`, r.stdout); !ok || r.stdout[:32] == r.stdout[32:64] {
			t.Errorf("random stdout = %q, want 64 hex digits (two different halves) and a newline", r.stdout)
		}
	})

	t.Run("clocks", func(t *testing.T) {
		r := run(t, config, fixture("clocks"), runOpts{})
		wantOK(t, r)
		// The monotonic clock's reading and resolution in nanoseconds.
		if ok, _ := regexp.MatchString(`^[0-9]+ [1-9][0-9]*\n$`, r.stdout); !ok {
			t.Errorf("clocks stdout = %q, want two numbers and a newline", r.stdout)
		}
	})

	t.Run("bad_import", func(t *testing.T) {
		r := run(t, config, fixture("bad_import"), runOpts{})
		if r.err == nil {
			t.Fatal("bad_import instantiated without an env module")
		}
		if msg := r.err.Error(); !strings.Contains(msg, "env") || !strings.Contains(msg, "not instantiated") {
			t.Errorf("bad_import error %q does not say that env is not instantiated", msg)
		}
		t.Logf("bad_import: %v", r.err)
	})

	// sleep and infinite never finish on their own: compile/instantiate
	// them but never call _start.
	t.Run("sleep", func(t *testing.T) {
		ctx := context.Background()
		rt := wazero.NewRuntimeWithConfig(ctx, config())
		defer rt.Close(ctx)
		wasi_snapshot_preview1.MustInstantiate(ctx, rt)
		compiled, err := rt.CompileModule(ctx, fixture("sleep"))
		if err != nil {
			t.Fatalf("compile: %v", err)
		}
		if !importsFunc(compiled, wasi_snapshot_preview1.ModuleName, "poll_oneoff") {
			t.Errorf("sleep does not import poll_oneoff")
		}
		mod, err := rt.InstantiateModule(ctx, compiled, wazero.NewModuleConfig().WithStartFunctions())
		if err != nil {
			t.Fatalf("instantiate: %v", err)
		}
		if mod.ExportedFunction("_start") == nil {
			t.Errorf("no _start")
		}
	})

	t.Run("infinite", func(t *testing.T) {
		ctx := context.Background()
		rt := wazero.NewRuntimeWithConfig(ctx, config())
		defer rt.Close(ctx)
		compiled, err := rt.CompileModule(ctx, fixture("infinite"))
		if err != nil {
			t.Fatalf("compile: %v", err)
		}
		checkCommand(t, compiled)
		if n := len(compiled.ImportedFunctions()); n != 0 {
			t.Errorf("infinite has %d imports, want none", n)
		}
	})

	t.Run("goguest", func(t *testing.T) {
		if testing.Short() && name != "interpreter" {
			// Compiling the 3.5 MB guest takes 20-30 s under -race; the
			// runner's tests run it compiled, so the short suite checks the
			// fixture with the interpreter only.
			t.Skip("short: the Go guest runs under the interpreter only")
		}
		wasm := testwasm.BuildGoGuest(t)
		r := run(t, config, wasm, runOpts{stdin: `{"words":["pear","apple","pear","fig"]}`})
		wantOK(t, r)
		want := `{"total":4,"unique":3,"sorted":["apple","fig","pear","pear"],"counts":{"apple":1,"fig":1,"pear":2}}` + "\n"
		if r.stdout != want {
			t.Errorf("goguest stdout = %q, want %q", r.stdout, want)
		}
		// No arguments and no environment: this harness configures none.
		// The random line's bytes depend on the host's random source.
		wantStderr := regexp.MustCompile(`^goguest: \{"args":\[\],"env":\[\]\}\ngoguest: sorted 4 words \(3 unique\)\ngoguest: random [0-9a-f]{16}\n$`)
		if !wantStderr.MatchString(r.stderr) {
			t.Errorf("goguest stderr = %q, want a match of %s", r.stderr, wantStderr)
		}

		r = run(t, config, wasm, runOpts{stdin: `{"words":[`})
		wantExit(t, r, 3)
		if r.stdout != "" {
			t.Errorf("goguest wrote %q to stdout on bad JSON", r.stdout)
		}
		if !strings.Contains(r.stderr, "invalid input") {
			t.Errorf("goguest stderr on bad JSON = %q", r.stderr)
		}
	})
}

func importsFunc(compiled wazero.CompiledModule, module, name string) bool {
	return slices.ContainsFunc(compiled.ImportedFunctions(), func(f api.FunctionDefinition) bool {
		m, n, _ := f.Import()
		return m == module && n == name
	})
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

package runner

import (
	"context"
	"crypto/sha256"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/latent-node/latent-node/admission"
	"github.com/latent-node/latent-node/catalog"
	"github.com/latent-node/latent-node/internal/testutil/admissiontest"
	"github.com/latent-node/latent-node/internal/testwasm"
	"github.com/latent-node/latent-node/loadsource"
	"github.com/latent-node/latent-node/vocab"
)

// plainCell uses wazero's default memory allocator.
type plainCell struct{}

func (plainCell) WithMemory(ctx context.Context, _ uint64) context.Context { return ctx }

func (plainCell) AbandonMemory() {}

// env is a catalog whose inspector is a real Runner, and an admission ledger
// to issue permits: the path an activation takes in the node.
type env struct {
	t    testing.TB
	r    *Runner
	cat  *catalog.Catalog
	prov *admission.LocalQuotaProvider
	load *loadsource.State
}

var (
	sharedOnce sync.Once
	sharedR    *Runner
	sharedErr  error
)

// sharedRunner compiles each fixture once per test process.
func sharedRunner(t testing.TB) *Runner {
	sharedOnce.Do(func() {
		sharedR, sharedErr = New(context.Background(), Config{MaxOutputBytes: 64 << 10})
	})
	if sharedErr != nil {
		t.Fatal(sharedErr)
	}
	return sharedR
}

func newEnv(t testing.TB) *env { return newEnvWith(t, sharedRunner(t)) }

func newEnvWith(t testing.TB, r *Runner) *env {
	e := &env{t: t, r: r, load: loadsource.NewState(time.Hour)}
	cat, err := catalog.Open(context.Background(), catalog.Config{Dir: t.TempDir(), Inspector: e.r, OnSnapshotsUnused: e.r.DropSnapshots})
	if err != nil {
		t.Fatal(err)
	}
	e.cat = cat
	policy := admissiontest.Policy(admissiontest.Spec{})
	if e.prov, err = admission.NewLocalQuotaProvider(policy, admission.Options{Clock: vocab.WallClock, Load: e.load}); err != nil {
		t.Fatal(err)
	}
	// One sample, fresh for the test's lifetime (max age 1h).
	if err := e.load.Publish(loadsource.Sample{CPU: 0, Memory: 0, TakenAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	return e
}

// deploy uploads wasm as service name with one route "run".
func (e *env) deploy(name string, wasm []byte, ceiling vocab.ManifestCeiling) {
	e.t.Helper()
	e.deployRevision(name, wasm, vocab.ManifestRevision{Ceiling: &ceiling})
}

// deployRevision is deploy with the revision's other manifest fields from
// rev (its name, artifact and trust class are set here).
func (e *env) deployRevision(name string, wasm []byte, rev vocab.ManifestRevision) {
	e.t.Helper()
	d := vocab.DigestOf(sha256.Sum256(wasm))
	if err := e.cat.Artifacts().Put(context.Background(), "acme", d, strings.NewReader(string(wasm))); err != nil {
		e.t.Fatal(err)
	}
	rev.Name, rev.Artifact, rev.TrustClass = "v1", d, "untrusted"
	m := vocab.Manifest{Tenant: "acme", Service: vocab.ServiceName(name),
		Revisions: []vocab.ManifestRevision{rev},
		Routes:    []vocab.ManifestRoute{{Name: "run", Targets: []vocab.ManifestTarget{{Revision: "v1", Weight: 1}}}}}
	if _, err := e.cat.Deploy(context.Background(), m); err != nil {
		e.t.Fatalf("deploy %s: %v", name, err)
	}
}

var idSeq struct {
	sync.Mutex
	n int
}

// permit admits and starts an activation of service name.
func (e *env) permit(name string, budget admission.BudgetRequest) *admission.ExecutionPermit {
	e.t.Helper()
	x, err := e.tryPermit(name, budget)
	if err != nil {
		e.t.Fatal(err)
	}
	return x
}

// tryPermit admits an activation of name with budget and starts it.
func (e *env) tryPermit(name string, budget admission.BudgetRequest) (*admission.ExecutionPermit, error) {
	e.t.Helper()
	pin := e.cat.Pin()
	rev, err := pin.Resolve(vocab.Target{Tenant: "acme", Service: vocab.ServiceName(name), Route: "run"}, "")
	if err != nil {
		e.t.Fatal(err)
	}
	idSeq.Lock()
	idSeq.n++
	id := "act-" + strings.Repeat("x", 0) + string(rune('a'+idSeq.n%26)) + "-" + itoa(idSeq.n)
	idSeq.Unlock()
	p, err := e.prov.WithPolicySource(pin).Admit(&admission.Request{ActivationID: id, Revision: rev, Budget: budget,
		Principal: admission.Principal{Subject: "alice", Kind: admission.KindUser, Tenant: "acme"}})
	if err != nil {
		return nil, err
	}
	return p.StartExecution()
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b []byte
	for ; n > 0; n /= 10 {
		b = append([]byte{byte('0' + n%10)}, b...)
	}
	return string(b)
}

func ceiling(fuel uint64, mem uint64, wall time.Duration) vocab.ManifestCeiling {
	return vocab.ManifestCeiling{CPUFuel: fuel, MemoryBytes: vocab.ByteSize(mem), WallTime: vocab.Duration(wall)}
}

func (e *env) run(name, input string, budget admission.BudgetRequest) Outcome {
	e.t.Helper()
	x := e.permit(name, budget)
	defer func() { _ = x.Release() }()
	return e.r.Run(context.Background(), x, plainCell{}, []byte(input))
}

func TestRun_outcomes(t *testing.T) {
	e := newEnv(t)
	big := ceiling(1<<40, 64<<20, 10*time.Second)
	for _, name := range []string{"echo", "compute", "infinite", "grow", "exit", "trap_unreachable", "trap_divzero",
		"trap_oob", "recursion", "flood", "hello", "trivial", "fib"} {
		e.deploy(name, testwasm.Bytes(t, name), big)
	}
	e.deploy("oob_data", testwasm.Bytes(t, "oob_data"), big)
	e.deploy("sleep", testwasm.Bytes(t, "sleep"), ceiling(1<<40, 1<<20, 500*time.Millisecond))
	e.deploy("small-fuel", testwasm.Bytes(t, "infinite"), ceiling(100_000, 1<<20, 10*time.Second))
	e.deploy("grow-capped", testwasm.Bytes(t, "grow"), ceiling(1<<40, 16*vocab.WasmPageBytes, 10*time.Second))

	none := admission.BudgetRequest{}
	tests := []struct {
		name, service, input string
		budget               admission.BudgetRequest
		kind                 Kind
		exit                 uint32
		trap                 string
		stdout               string
	}{
		{"echo", "echo", "hello there", none, Success, 0, "", "hello there"},
		{"hello", "hello", "ada\n", none, Success, 0, "", "hello, ada\n"},
		{"compute", "compute", "1000", none, Success, 0, "", "2926642762503582672\n"},
		{"fib", "fib", "20", none, Success, 0, "", "6765\n"},
		{"trivial", "trivial", "", none, Success, 0, "", ""},
		{"exit 0", "exit", "0", none, Success, 0, "", ""},
		{"exit 42", "exit", "42", none, DeclaredError, 42, "", ""},
		{"unreachable", "trap_unreachable", "", none, Trap, 0, TrapUnreachable, ""},
		{"divide by zero", "trap_divzero", "", none, Trap, 0, TrapDivideByZero, ""},
		{"out of bounds", "trap_oob", "", none, Trap, 0, TrapOutOfBounds, ""},
		{"recursion", "recursion", "", none, Trap, 0, TrapCallDepth, ""},
		{"infinite: fuel", "small-fuel", "", none, FuelExhausted, 0, "", ""},
		{"infinite: requested fuel", "infinite", "", admission.BudgetRequest{CPUFuel: 5_000_000, HasCPUFuel: true}, FuelExhausted, 0, "", ""},
		// The grant holds linear memory and call stack together: grow takes
		// every page the stack does not use, after which printing the count
		// has no stack left, so there is no output.
		{"grow capped", "grow-capped", "", none, MemoryExhausted, 0, "", "13\n"},
		{"flood", "flood", "", none, OutputExceeded, 0, "", ""},
		{"sleep", "sleep", "", none, DeadlineExceeded, 0, "", ""},
		{"data segment out of bounds", "oob_data", "", none, Trap, 0, TrapOutOfBounds, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			out := e.run(tc.service, tc.input, tc.budget)
			if tc.name == "sleep" {
				// The deadline must stop the 30s sleep within 600ms. Wall
				// time on a loaded machine is noisy: the best of 3 runs counts.
				for i := 0; i < 2 && time.Since(start) > 600*time.Millisecond; i++ {
					start = time.Now()
					out = e.run(tc.service, tc.input, tc.budget)
				}
			}
			if out.Kind != tc.kind || out.ExitCode != tc.exit || out.TrapKind != tc.trap {
				t.Fatalf("want %s/%d/%q, have %s/%d/%q (err %v)", tc.kind, tc.exit, tc.trap, out.Kind, out.ExitCode, out.TrapKind, out.Err)
			}
			if out.Quarantine {
				t.Fatalf("a guest's own failure quarantined the cell: %v", out.Err)
			}
			if tc.stdout != "" && string(out.Stdout) != tc.stdout {
				t.Fatalf("stdout: want %q, have %q", tc.stdout, out.Stdout)
			}
			if out.FuelUsed == 0 && tc.service != "trivial" && tc.service != "oob_data" {
				t.Fatal("no fuel used")
			}
			if tc.name == "sleep" && time.Since(start) > 600*time.Millisecond {
				t.Fatalf("a 500ms deadline stopped the 30s sleep after %v", time.Since(start))
			}
			// Linear memory grows to the grant less the stack's reserve (2
			// pages of 16); the stack in use adds to the peak.
			if tc.service == "grow-capped" && (out.MemoryPeakBytes <= 14*vocab.WasmPageBytes || out.MemoryPeakBytes > 16*vocab.WasmPageBytes) {
				t.Fatalf("grow under a 16-page grant: memory peak %d, want 14 pages and the stack in use", out.MemoryPeakBytes)
			}
			if tc.kind == FuelExhausted && tc.budget.HasCPUFuel && out.FuelUsed != tc.budget.CPUFuel {
				t.Fatalf("fuel-exhausted used %d of %d", out.FuelUsed, tc.budget.CPUFuel)
			}
			t.Logf("%s: fuel %d, memory peak %d, %v", out.Kind, out.FuelUsed, out.MemoryPeakBytes, out.ExecutionTime)
		})
	}
}

func TestRun_fuelExactAndDeterministic(t *testing.T) {
	e := newEnv(t)
	e.deploy("compute", testwasm.Bytes(t, "compute"), ceiling(1<<40, 1<<20, 10*time.Second))
	used := map[string]uint64{}
	for _, n := range []string{"1000", "2000", "3000"} {
		first := e.run("compute", n, admission.BudgetRequest{})
		for i := 0; i < 3; i++ {
			if again := e.run("compute", n, admission.BudgetRequest{}); again.FuelUsed != first.FuelUsed {
				t.Fatalf("N=%s: fuel %d then %d", n, first.FuelUsed, again.FuelUsed)
			}
		}
		used[n] = first.FuelUsed
	}
	// The loop dominates: the steps differ only by the printing of the
	// result (its number of digits).
	if d1, d2 := int64(used["2000"]-used["1000"]), int64(used["3000"]-used["2000"]); d1 < 1000 || d2-d1 > 100 || d1-d2 > 100 {
		t.Fatalf("fuel not linear in N: %v", used)
	}
	// Exhaustion stops at exactly the budget.
	out := e.run("compute", "3000", admission.BudgetRequest{CPUFuel: used["3000"] - 1, HasCPUFuel: true})
	if out.Kind != FuelExhausted || out.FuelUsed != used["3000"]-1 {
		t.Fatalf("one unit short: %s used %d", out.Kind, out.FuelUsed)
	}
	out = e.run("compute", "3000", admission.BudgetRequest{CPUFuel: used["3000"], HasCPUFuel: true})
	if out.Kind != Success || out.FuelUsed != used["3000"] {
		t.Fatalf("exact budget: %s used %d", out.Kind, out.FuelUsed)
	}
	t.Logf("compute fuel: %v", used)
}

func TestInspect_refusesForeignImports(t *testing.T) {
	r := sharedRunner(t)
	wasm := testwasm.Bytes(t, "bad_import")
	_, err := r.Inspect(context.Background(), vocab.DigestOf(sha256.Sum256(wasm)), wasm)
	if err == nil || !strings.Contains(err.Error(), "env.host_log") {
		t.Fatalf("want a refusal naming env.host_log, have %v", err)
	}
	if _, err := r.Inspect(context.Background(), "sha256:00", []byte("not wasm")); err == nil {
		t.Fatal("garbage inspected")
	}
}

// TestRunner_compilationCacheSurvivesRestart: a second runner on the same
// cache directory reuses the compiled code instead of writing it again.
func TestRunner_compilationCacheSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	wasm := testwasm.Bytes(t, "fib")
	digest := vocab.DigestOf(sha256.Sum256(wasm))
	files := func() map[string]time.Time {
		out := map[string]time.Time{}
		_ = filepathWalk(dir, func(path string, mod time.Time) { out[path] = mod })
		return out
	}
	r1, err := New(ctx, Config{CacheDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r1.Inspect(ctx, digest, wasm); err != nil {
		t.Fatal(err)
	}
	if !r1.Prepared(digest) {
		t.Fatal("inspected module not prepared")
	}
	_ = r1.Close(ctx)
	first := files()
	if len(first) == 0 {
		t.Fatal("the compilation cache wrote nothing")
	}
	r2, err := New(ctx, Config{CacheDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = r2.Close(ctx) }()
	if _, err := r2.Inspect(ctx, digest, wasm); err != nil {
		t.Fatal(err)
	}
	second := files()
	if len(second) != len(first) {
		t.Fatalf("restart wrote new cache entries: %d then %d files", len(first), len(second))
	}
	for path, mod := range first {
		if !second[path].Equal(mod) {
			t.Fatalf("restart rewrote %s", path)
		}
	}
}

// TestRun_runawayGuestDoesNotStallGC: a guest spinning in a tight loop
// reaches the fuel slow path every slice, which is a Go safe point, so a
// garbage collection completes while it runs. Without the slow path the
// collection waits for the whole call: Go cannot stop a goroutine running
// compiled guest code, whose loops have no safe point of their own.
func TestRun_runawayGuestDoesNotStallGC(t *testing.T) {
	e := newEnv(t)
	e.deploy("infinite", testwasm.Bytes(t, "infinite"), ceiling(1<<40, 1<<20, 3*time.Second))
	x := e.permit("infinite", admission.BudgetRequest{})
	defer func() { _ = x.Release() }()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan Outcome)
	go func() { done <- e.r.Run(ctx, x, plainCell{}, nil) }()
	var worst time.Duration
	for i := 0; i < 5; i++ {
		start := time.Now()
		runtime.GC()
		worst = max(worst, time.Since(start))
	}
	cancel()
	out := <-done
	if out.Kind != Cancelled {
		t.Fatalf("want cancelled, have %s (%v)", out.Kind, out.Err)
	}
	t.Logf("worst GC while a guest spins: %v", worst)
	// Without a safe point the collection would wait for the whole guest,
	// which only stops when cancelled after these collections: it would
	// never finish within the guest's 3s deadline. The bound is loose so a
	// loaded machine cannot fail it; the tick count below is exact.
	if worst > 2*time.Second {
		t.Fatalf("a spinning guest stalled GC for %v", worst)
	}
}

// infiniteEnv is an env on a runner of its own whose fuel slice is 10,000,
// with the infinite guest deployed as "infinite" (a budget of 1,000,000).
func infiniteEnv(t *testing.T) *env {
	r, err := New(context.Background(), Config{FuelSlice: 10_000})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close(context.Background()) })
	e := newEnvWith(t, r)
	e.deploy("infinite", testwasm.Bytes(t, "infinite"), ceiling(1_000_000, 1<<20, 10*time.Second))
	return e
}

// TestRun_slowPathEverySlice: the guest reaches the slow path (a Go safe
// point and a context check) once per fuel slice, exactly.
func TestRun_slowPathEverySlice(t *testing.T) {
	e := infiniteEnv(t)
	var ticks int
	tickHook = func() { ticks++ }
	defer func() { tickHook = nil }()
	out := e.run("infinite", "", admission.BudgetRequest{})
	if out.Kind != FuelExhausted || out.FuelUsed != 1_000_000 {
		t.Fatalf("%s used %d", out.Kind, out.FuelUsed)
	}
	if ticks != 1_000_000/10_000+1 { // 100 refills, then the tick that finds the budget spent
		t.Fatalf("want %d slow-path calls, have %d", 1_000_000/10_000+1, ticks)
	}
}

// TestRun_pauseLeftOutOfExecutionTime: what Input.OnSlice reports it held
// the guest (the node's pauses for newcomers) is not the guest's execution
// time. The first slice check holds the guest for 20 ms; the outcome's
// execution time is at most the run's wall time less that.
func TestRun_pauseLeftOutOfExecutionTime(t *testing.T) {
	e := infiniteEnv(t)
	var held time.Duration
	hold := func() time.Duration {
		if held > 0 {
			return 0
		}
		start := time.Now()
		for time.Since(start) < 20*time.Millisecond { // the guest is held, not sleeping
		}
		held = time.Since(start)
		return held
	}
	start := time.Now()
	out := e.runWith("infinite", Input{OnSlice: hold})
	wall := time.Since(start)
	if out.Kind != FuelExhausted || held == 0 {
		t.Fatalf("%s, held %v", out.Kind, held)
	}
	if out.ExecutionTime <= 0 || out.ExecutionTime > wall-held {
		t.Fatalf("execution time %v, want above 0 and at most %v (the wall time %v less the %v held)", out.ExecutionTime,
			wall-held, wall, held)
	}
}

// TestRun_deepRecursionBounded: unbounded recursion stops when the call
// stack budget (the 1 MiB grant less linear memory) is spent, with a typed
// trap, and the process's memory does not explode on the way (the
// compiler's stack lives outside linear memory, so the budget is what
// keeps it small).
func TestRun_deepRecursionBounded(t *testing.T) {
	r, err := New(context.Background(), Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = r.Close(context.Background()) }()
	e := newEnvWith(t, r)
	e.deploy("recursion", testwasm.Bytes(t, "recursion"), ceiling(1<<40, 1<<20, 10*time.Second))
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := 0; i < 5; i++ {
		out := e.run("recursion", "", admission.BudgetRequest{})
		if out.Kind != Trap || out.TrapKind != TrapCallDepth {
			t.Fatalf("want the call-depth trap, have %s/%s (%v)", out.Kind, out.TrapKind, out.Err)
		}
	}
	runtime.ReadMemStats(&after)
	growth := int64(after.Sys) - int64(before.Sys)
	t.Logf("process memory from the Go runtime grew by %d KiB over 5 deep recursions", growth>>10)
	if growth > 64<<20 {
		t.Fatalf("deep recursion grew the process by %d MiB", growth>>20)
	}
}

// panicCell breaks while the runner prepares the activation.
type panicCell struct{}

func (panicCell) WithMemory(context.Context, uint64) context.Context { panic("cell broke") }
func (panicCell) AbandonMemory()                                     {}

// TestRun_platformFailure: a panic anywhere in Run is a platform failure that
// asks for the cell's quarantine; the process does not crash.
func TestRun_platformFailure(t *testing.T) {
	e := newEnv(t)
	e.deploy("trivial", testwasm.Bytes(t, "trivial"), ceiling(1<<20, 1<<20, time.Second))
	x := e.permit("trivial", admission.BudgetRequest{})
	defer func() { _ = x.Release() }()
	out := e.r.Run(context.Background(), x, panicCell{}, nil)
	if out.Kind != PlatformFailure || !out.Quarantine || out.Err == nil {
		t.Fatalf("want a quarantining platform failure, have %+v", out)
	}
}

// TestRun_hostCallsCharged: clock reads, sleeps and yields cost the guest
// hostCallFuel each, random_get one unit per 64 bytes, an iovec of
// fd_read or fd_write one (the guest reads its input with one) and a
// subscription of poll_oneoff one (each sleep has one), on top of the
// instructions around the call. The baseline is the same run with those
// charges off (hostCallsFree), so only the host's charge differs.
func TestRun_hostCallsCharged(t *testing.T) {
	const iovec, subscription = hostCallFuel, hostCallFuel
	e := newEnv(t)
	e.deploy("hostcalls", testwasm.Bytes(t, "hostcalls"), ceiling(1<<40, 1<<20, 10*time.Second))
	t.Cleanup(func() { hostCallsFree = false })
	for _, tc := range []struct {
		input string
		want  uint64
	}{
		{"ccccc", 5*hostCallFuel + iovec},
		{"wwwww", 5*hostCallFuel + iovec},
		{"sssss", 5*(hostCallFuel+subscription) + iovec},
		{"yyyyy", 5*hostCallFuel + iovec},
		{"rrrrr", 5*640>>ioShift + iovec},
		{"crswy", 4*hostCallFuel + subscription + 640>>ioShift + iovec},
		{"xx", iovec},
	} {
		hostCallsFree = false
		charged := e.run("hostcalls", tc.input, admission.BudgetRequest{})
		hostCallsFree = true
		free := e.run("hostcalls", tc.input, admission.BudgetRequest{})
		if charged.Kind != Success || free.Kind != Success {
			t.Fatalf("%q: %s (%v), %s (%v)", tc.input, charged.Kind, charged.Err, free.Kind, free.Err)
		}
		if got := charged.FuelUsed - free.FuelUsed; got != tc.want {
			t.Errorf("%q: host calls charged %d (%d - %d), want %d", tc.input, got, charged.FuelUsed, free.FuelUsed, tc.want)
		}
	}
}

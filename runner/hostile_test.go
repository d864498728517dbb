package runner

import (
	"context"
	"crypto/sha256"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/latent-node/latent-node/admission"
	"github.com/latent-node/latent-node/catalog"
	"github.com/latent-node/latent-node/cellpool"
	"github.com/latent-node/latent-node/internal/hostilewasm"
	"github.com/latent-node/latent-node/internal/testutil"
	"github.com/latent-node/latent-node/internal/testwasm"
	"github.com/latent-node/latent-node/refusal"
	"github.com/latent-node/latent-node/runner/internal/fuel"
	"github.com/latent-node/latent-node/vocab"
)

func digestOf(wasm []byte) vocab.Digest { return vocab.DigestOf(sha256.Sum256(wasm)) }

// TestInspect_wasiImportTypes: an import is accepted only if it is a
// function of the runner's own WASI module with exactly its type.
func TestInspect_wasiImportTypes(t *testing.T) {
	r := sharedRunner(t)
	wasm := testwasm.Bytes(t, "hostile/wasi_bad_sig")
	_, err := r.Inspect(context.Background(), digestOf(wasm), wasm)
	const want = "import wasi_snapshot_preview1.fd_write has type (i32) -> (i32); want (i32, i32, i32, i32) -> (i32)"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("want a refusal %q, have %v", want, err)
	}
	if r.Prepared(digestOf(wasm)) {
		t.Fatal("a refused module was compiled")
	}
	i32, i64 := byte(0x7f), byte(0x7e)
	for _, tc := range []struct {
		name string
		imp  fuel.Import
		want string // "" accepted
	}{
		{"fd_write", fuel.Import{Module: WASIModule, Name: "fd_write", Kind: fuel.ExternFunc,
			Params: []byte{i32, i32, i32, i32}, Results: []byte{i32}}, ""},
		{"proc_exit", fuel.Import{Module: WASIModule, Name: "proc_exit", Kind: fuel.ExternFunc,
			Params: []byte{i32}, Results: []byte{}}, ""},
		{"args_get (the runner's own)", fuel.Import{Module: WASIModule, Name: "args_get", Kind: fuel.ExternFunc,
			Params: []byte{i32, i32}, Results: []byte{i32}}, ""},
		{"wrong result", fuel.Import{Module: WASIModule, Name: "proc_exit", Kind: fuel.ExternFunc,
			Params: []byte{i32}, Results: []byte{i32}}, "import wasi_snapshot_preview1.proc_exit has type (i32) -> (i32); want (i32) -> ()"},
		{"wrong param type", fuel.Import{Module: WASIModule, Name: "clock_time_get", Kind: fuel.ExternFunc,
			Params: []byte{i32, i32, i32}, Results: []byte{i32}}, "has type (i32, i32, i32) -> (i32); want (i32, i64, i32) -> (i32)"},
		{"unknown function", fuel.Import{Module: WASIModule, Name: "no_such_fn", Kind: fuel.ExternFunc},
			"import wasi_snapshot_preview1.no_such_fn is not a WASI preview 1 function"},
		{"memory", fuel.Import{Module: WASIModule, Name: "memory", Kind: fuel.ExternMemory},
			"import wasi_snapshot_preview1.memory is not a WASI preview 1 function"},
		{"global named like a function", fuel.Import{Module: WASIModule, Name: "fd_write", Kind: fuel.ExternGlobal},
			"import wasi_snapshot_preview1.fd_write is not a WASI preview 1 function"},
		{"other module", fuel.Import{Module: "env", Name: "fd_write", Kind: fuel.ExternFunc,
			Params: []byte{i32, i32, i32, i32}, Results: []byte{i32}}, "import env.fd_write is not allowed"},
		{"i64 for i32", fuel.Import{Module: WASIModule, Name: "sched_yield", Kind: fuel.ExternFunc,
			Params: []byte{}, Results: []byte{i64}}, "want () -> (i32)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := r.checkImport(tc.imp)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("want %q, have %v", tc.want, err)
			}
		})
	}
}

// countingCell records whether Run asked it for memory.
type countingCell struct {
	mu             sync.Mutex
	withMemory     int
	abandonedCalls int
}

func (c *countingCell) WithMemory(ctx context.Context, _ uint64) context.Context {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.withMemory++
	return ctx
}

func (c *countingCell) AbandonMemory() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.abandonedCalls++
}

// TestRun_instantiationFailuresAreTraps: whatever makes a module fail to
// instantiate or start is the guest's trap, and never quarantines a cell.
func TestRun_instantiationFailuresAreTraps(t *testing.T) {
	e := newEnv(t)
	// elem_oob's table has no maximum: deploy_limits.table_elements × 8
	// bytes of the grant are its.
	big := ceiling(1<<40, 4<<20, 10*time.Second)
	for _, tc := range []struct {
		fixture string
		kind    Kind
		trap    string
	}{
		{"oob_data", Trap, TrapOutOfBounds},
		{"hostile/start_trap", Trap, TrapUnreachable},
		// wazero v1.12.0 ignores an active element segment past the end of
		// its table (with reference types on it should trap): the module
		// instantiates and runs.
		{"hostile/elem_oob", Success, ""},
	} {
		t.Run(tc.fixture, func(t *testing.T) {
			name := strings.ReplaceAll(tc.fixture, "/", "-")
			e.deploy(name, testwasm.Bytes(t, tc.fixture), big)
			out := e.run(name, "", admission.BudgetRequest{})
			if out.Kind != tc.kind || out.TrapKind != tc.trap || out.Quarantine {
				t.Fatalf("want %s %q, unquarantined; have %s/%q quarantine=%v (%v)", tc.kind, tc.trap, out.Kind, out.TrapKind, out.Quarantine, out.Err)
			}
		})
	}
	// Negative control: an error out of the host side of a call that is not
	// a trap (here a host assertion) is still the host's fault.
	a := &activation{ctx: context.Background(), deadline: time.Now().Add(time.Hour)}
	if kind, _, _ := classify(a, errors.AssertionFailedf("runner: broken"), time.Now(), false); kind != PlatformFailure {
		t.Fatalf("a host assertion classified %s", kind)
	}
	if kind, _, trap := classify(a, errors.New("module[x] something wazero says"), time.Now(), true); kind != Trap || trap != TrapInstantiation {
		t.Fatalf("an instantiation error classified %s/%s", kind, trap)
	}
}

// TestRun_instantiationFailures_hammer: 100 activations that fail to
// instantiate or start, on a pool of 2 cells, leave both cells usable.
func TestRun_instantiationFailures_hammer(t *testing.T) {
	e := newEnv(t)
	big := ceiling(1<<40, 1<<20, 10*time.Second)
	fixtures := []string{"oob_data", "hostile/start_trap", "echo"}
	for _, f := range fixtures {
		e.deploy(strings.ReplaceAll(f, "/", "-"), testwasm.Bytes(t, f), big)
	}
	pool, err := cellpool.New(cellpool.Config{Classes: map[vocab.CellClass]cellpool.ClassConfig{
		vocab.CellStandard: {Parallelism: 2, MemoryBytes: 1 << 20}}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = pool.Close() }()
	err = testutil.Hammer(4, 25, func(g, i int) error {
		f := fixtures[(g+i)%2] // only the failing ones
		lease, err := pool.Lease(context.Background(), vocab.CellStandard)
		if err != nil {
			return err
		}
		x := e.permit(strings.ReplaceAll(f, "/", "-"), admission.BudgetRequest{})
		out := e.r.Run(context.Background(), x, lease, nil)
		disp := cellpool.Reuse
		if out.Quarantine {
			disp = cellpool.Quarantine
		}
		err = errors.Wrapf(lease.Release(disp), "%s: release", f)
		_ = x.Release()
		if out.Kind != Trap || out.Quarantine {
			err = errors.CombineErrors(err, errors.Newf("%s: %s quarantine=%v (%v)", f, out.Kind, out.Quarantine, out.Err))
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if st := pool.Stats()[vocab.CellStandard]; st.Usable != 2 || st.Quarantined != 0 || st.LeakedLeases != 0 {
		t.Fatalf("pool after 100 failed instantiations: %+v", st)
	}
	// Both cells still run a guest.
	for range 2 {
		lease, err := pool.TryLease(vocab.CellStandard)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = lease.Release(cellpool.Reuse) }()
		x := e.permit("echo", admission.BudgetRequest{})
		out := e.r.Run(context.Background(), x, lease, []byte("still here"))
		_ = x.Release()
		if out.Kind != Success || string(out.Stdout) != "still here" {
			t.Fatalf("a cell after the hammer: %s %q (%v)", out.Kind, out.Stdout, out.Err)
		}
	}
}

// TestRun_instantiationFuel: instantiating data_big costs (128 KiB >> 6) +
// 4 pages × 1024 = 6144 units, charged before instantiating: one unit less
// is fuel-exhausted without touching the cell.
func TestRun_instantiationFuel(t *testing.T) {
	const charge = 128<<10>>6 + 4*1024
	e := newEnv(t)
	e.deploy("data_big", testwasm.Bytes(t, "hostile/data_big"), ceiling(1<<40, 1<<20, 10*time.Second))
	e.deploy("trivial", testwasm.Bytes(t, "trivial"), ceiling(1<<40, 1<<20, 10*time.Second))
	run := func(service string, budget uint64) (Outcome, *countingCell) {
		t.Helper()
		x := e.permit(service, admission.BudgetRequest{CPUFuel: budget, HasCPUFuel: true})
		defer func() { _ = x.Release() }()
		cell := &countingCell{}
		return e.r.Run(context.Background(), x, cell, nil), cell
	}
	out, cell := run("data_big", charge-1)
	if out.Kind != FuelExhausted || out.FuelUsed != charge-1 || cell.withMemory != 0 || out.MemoryPeakBytes != 0 {
		t.Fatalf("budget one short of the charge: %s used %d, cell asked %d times (%v)", out.Kind, out.FuelUsed, cell.withMemory, out.Err)
	}
	// The exact charge instantiates and runs _start, which costs nothing.
	out, cell = run("data_big", charge)
	if out.Kind != Success || out.FuelUsed != charge || cell.withMemory != 1 {
		t.Fatalf("budget = charge: %s used %d, cell asked %d times (%v)", out.Kind, out.FuelUsed, cell.withMemory, out.Err)
	}
	full, _ := run("data_big", 1<<30)
	tiny, _ := run("trivial", 1<<30)
	if full.Kind != Success || tiny.Kind != Success {
		t.Fatalf("%s, %s", full.Kind, tiny.Kind)
	}
	// Same _start; the difference is the data and the 3 extra pages.
	if d := full.FuelUsed - tiny.FuelUsed; d != charge-1024 {
		t.Fatalf("data_big used %d, trivial %d: difference %d, want %d", full.FuelUsed, tiny.FuelUsed, d, charge-1024)
	}
	t.Logf("data_big: %d fuel, trivial: %d", full.FuelUsed, tiny.FuelUsed)
}

// TestRun_stackBomb: unbounded recursion with large frames under a 4 MiB
// grant stops with the call-depth trap, reports a peak within the grant,
// and the Go heap the run allocated (the engine's stack) stays within the
// grant plus a small constant.
func TestRun_stackBomb(t *testing.T) {
	const grant = 4 << 20
	e := newEnv(t)
	e.deploy("stack_bomb", testwasm.Bytes(t, "hostile/stack_bomb"), ceiling(1<<40, grant, 10*time.Second))
	e.deploy("recursion", testwasm.Bytes(t, "recursion"), ceiling(1<<40, grant, 10*time.Second))
	_ = e.run("stack_bomb", "", admission.BudgetRequest{}) // warm up the runner's pools
	for _, name := range []string{"stack_bomb", "recursion"} {
		x := e.permit(name, admission.BudgetRequest{})
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		out := e.r.Run(context.Background(), x, plainCell{}, nil)
		runtime.ReadMemStats(&after)
		_ = x.Release()
		if out.Kind != Trap || out.TrapKind != TrapCallDepth || out.Quarantine {
			t.Fatalf("%s: want the call-depth trap, have %s/%s (%v)", name, out.Kind, out.TrapKind, out.Err)
		}
		if out.MemoryPeakBytes > grant || out.MemoryPeakBytes < grant-vocab.WasmPageBytes {
			t.Fatalf("%s: memory peak %d, want the grant (%d) less at most one page", name, out.MemoryPeakBytes, grant)
		}
		alloc := after.TotalAlloc - before.TotalAlloc
		t.Logf("%s: memory peak %d of %d; Go heap allocated during the run %d (%.2f × the grant); fuel %d",
			name, out.MemoryPeakBytes, grant, alloc, float64(alloc)/grant, out.FuelUsed)
		if alloc > grant+1<<20 {
			t.Fatalf("%s: the run allocated %d bytes of Go heap under a %d-byte grant", name, alloc, grant)
		}
	}
}

// TestRunner_moduleReferences: the compiled module lives while Inspect's
// reference or an activation's holds it, and is freed after the last.
func TestRunner_moduleReferences(t *testing.T) {
	ctx := context.Background()
	r, err := New(ctx, Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = r.Close(ctx) }()
	wasm := testwasm.Bytes(t, "hostile/data_big")
	d := digestOf(wasm)

	heap := func() uint64 {
		var ms runtime.MemStats
		runtime.GC()
		runtime.GC()
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	base := heap()
	for range 3 {
		if _, err := r.Inspect(ctx, d, wasm); err != nil {
			t.Fatal(err)
		}
	}
	if !r.Prepared(d) || r.CompiledBytes() != CompiledBytesEstimate(lenInstrumented(t, wasm)) {
		t.Fatalf("prepared %v, compiled bytes %d", r.Prepared(d), r.CompiledBytes())
	}
	held := heap()
	release, ok := r.Acquire(d)
	if !ok {
		t.Fatal("Acquire of an inspected module failed")
	}
	for range 3 {
		r.ReleaseModule(d)
	}
	if !r.Prepared(d) {
		t.Fatal("an activation's reference did not keep the module")
	}
	release.Release()
	release.Release() // once only
	if r.Prepared(d) || r.CompiledBytes() != 0 {
		t.Fatalf("released module still prepared (%v) or counted (%d bytes)", r.Prepared(d), r.CompiledBytes())
	}
	if _, ok := r.Acquire(d); ok {
		t.Fatal("Acquire of a released module succeeded")
	}
	r.ReleaseModule(d) // nothing left: no effect
	freed := heap()
	t.Logf("heap: %d before Inspect, %d while compiled, %d after the last release", base, held, freed)
	if held <= base || freed > base+(held-base)/2 {
		t.Fatalf("heap did not come back: %d before, %d while compiled, %d after", base, held, freed)
	}
	// Inspect again compiles again.
	if _, err := r.Inspect(ctx, d, wasm); err != nil || !r.Prepared(d) {
		t.Fatalf("inspect after release: %v, prepared %v", err, r.Prepared(d))
	}
}

func lenInstrumented(t *testing.T, wasm []byte) int {
	t.Helper()
	res, err := fuel.Instrument(wasm, fuel.Config{})
	if err != nil {
		t.Fatal(err)
	}
	return len(res.Module)
}

// TestInspect_compiledBytesBound: an Inspect that would take the compiled
// modules past MaxCompiledBytes is refused with ErrCompiledCacheFull and
// keeps nothing; releasing makes room again.
func TestInspect_compiledBytesBound(t *testing.T) {
	ctx := context.Background()
	small, big := testwasm.Bytes(t, "trivial"), testwasm.Bytes(t, "hostile/data_big")
	bound := CompiledBytesEstimate(lenInstrumented(t, big)) + CompiledBytesEstimate(lenInstrumented(t, small)) - 1
	r, err := New(ctx, Config{MaxCompiledBytes: bound})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = r.Close(ctx) }()
	if _, err := r.Inspect(ctx, digestOf(small), small); err != nil {
		t.Fatal(err)
	}
	_, err = r.Inspect(ctx, digestOf(big), big)
	if !errors.Is(err, ErrCompiledCacheFull) {
		t.Fatalf("want ErrCompiledCacheFull, have %v", err)
	}
	if r.Prepared(digestOf(big)) || r.CompiledBytes() != CompiledBytesEstimate(lenInstrumented(t, small)) {
		t.Fatalf("a refused Inspect kept something: %d bytes", r.CompiledBytes())
	}
	r.ReleaseModule(digestOf(small))
	if _, err := r.Inspect(ctx, digestOf(big), big); err != nil {
		t.Fatalf("after a release: %v", err)
	}
}

// tableModule is a wasi-stdio guest with an empty _start, one page of
// memory and one funcref table of exactly elems elements.
func tableModule(elems uint32) []byte {
	leb := func(v uint32) []byte {
		var b []byte
		for {
			c := byte(v & 0x7f)
			v >>= 7
			if v == 0 {
				return append(b, c)
			}
			b = append(b, c|0x80)
		}
	}
	section := func(id byte, body ...byte) []byte {
		return append(append([]byte{id}, leb(uint32(len(body)))...), body...)
	}
	table := append(append([]byte{1, 0x70, 1}, leb(elems)...), leb(elems)...)
	w := []byte{0, 'a', 's', 'm', 1, 0, 0, 0}
	w = append(w, section(1, 1, 0x60, 0, 0)...) // type () -> ()
	w = append(w, section(3, 1, 0)...)          // one function of that type
	w = append(w, section(4, table...)...)      // the table
	w = append(w, section(5, 1, 0, 1)...)       // memory, 1 page
	w = append(w, section(7, append(append([]byte{2, 6}, "_start"...), 0, 0, 6, 'm', 'e', 'm', 'o', 'r', 'y', 2, 0)...)...)
	w = append(w, section(10, 1, 2, 0, 0x0b)...) // empty body
	return w
}

// TestRun_tableBytes: the tables' Go heap (8 bytes per element at the
// table's largest size) comes out of the memory grant: a grant below the
// initial memory plus the tables is memory-exhausted before anything is
// instantiated (and quarantines nothing); a run's memory peak includes the
// tables; instantiation costs one unit of fuel per table element.
func TestRun_tableBytes(t *testing.T) {
	const elems = 1 << 16
	e := newEnv(t)
	e.deploy("tables", tableModule(elems), ceiling(1<<40, 4<<20, 10*time.Second))
	e.deploy("table1", tableModule(1), ceiling(1<<40, 4<<20, 10*time.Second))
	run := func(service string, grant uint64) (Outcome, *countingCell) {
		t.Helper()
		x := e.permit(service, admission.BudgetRequest{MemoryBytes: grant, HasMemoryBytes: true})
		defer func() { _ = x.Release() }()
		cell := &countingCell{}
		return e.r.Run(context.Background(), x, cell, nil), cell
	}
	const need = vocab.WasmPageBytes + 8*elems // one page of memory and the table
	// The module's tables are part of its capsule: admission refuses a
	// grant that cannot hold them (Run checks it again before it touches
	// the cell).
	var rej *admission.Rejection
	if x, err := e.tryPermit("tables", admission.BudgetRequest{MemoryBytes: need - vocab.WasmPageBytes, HasMemoryBytes: true}); !errors.As(err, &rej) || rej.Dimension != refusal.DimMemory {
		if x != nil {
			_ = x.Release()
		}
		t.Fatalf("a grant below initial memory and tables: %v", err)
	}
	if x, err := e.tryPermit("tables", admission.BudgetRequest{MemoryBytes: need, HasMemoryBytes: true}); err != nil {
		t.Fatalf("a grant of initial memory and tables: %v", err)
	} else {
		_ = x.Release()
	}
	var cell *countingCell
	// Negative control: the same grant runs the module with a 1-element table.
	small, _ := run("table1", need-1)
	big, cell := run("tables", 2<<20)
	if small.Kind != Success || big.Kind != Success || cell.withMemory != 1 {
		t.Fatalf("%s, %s (%v, %v)", small.Kind, big.Kind, small.Err, big.Err)
	}
	if d := big.MemoryPeakBytes - small.MemoryPeakBytes; big.MemoryPeakBytes < need || d != 8*(elems-1) {
		t.Fatalf("memory peaks %d and %d: difference %d, want %d", big.MemoryPeakBytes, small.MemoryPeakBytes, d, 8*(elems-1))
	}
	if d := big.FuelUsed - small.FuelUsed; d != elems-1 {
		t.Fatalf("fuel %d and %d: difference %d, want %d", big.FuelUsed, small.FuelUsed, d, elems-1)
	}
	t.Logf("peak %d bytes with %d table elements, %d with 1", big.MemoryPeakBytes, elems, small.MemoryPeakBytes)
}

// TestInspect_signatureBudget: wazero keeps every function signature it
// compiled. A tenant's deploys may bring at most MaxSignaturesPerTenant
// new ones: the deploy that would pass it is refused (nothing compiled),
// another tenant's budget is its own, signatures already known cost
// nothing, and inspection outside a deploy (start-up, a cluster applying a
// release) is counted but never refused. Without the deploy marker (the
// negative control of the refusal) the same module passes.
func TestInspect_signatureBudget(t *testing.T) {
	ctx := context.Background()
	r, err := New(ctx, Config{MaxSignaturesPerTenant: 250})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = r.Close(ctx) }()
	deploy := func(tenant vocab.TenantID, module []byte) error {
		_, err := r.Inspect(catalog.WithDeployingTenant(ctx, tenant), digestOf(module), module)
		return err
	}
	one, two, three := hostilewasm.ManySignatures(100, 1), hostilewasm.ManySignatures(100, 2), hostilewasm.ManySignatures(100, 3)
	if err := deploy("acme", one); err != nil {
		t.Fatal(err)
	}
	if err := deploy("acme", two); err != nil {
		t.Fatal(err)
	}
	before := r.sigs.Total()
	err = deploy("acme", three) // 200 (and the void type) + 100 > 250
	if err == nil || !strings.Contains(err.Error(), "function signatures") {
		t.Fatalf("acme's third module: %v, want the signature budget", err)
	}
	if r.Prepared(digestOf(three)) || r.sigs.Total() != before {
		t.Fatal("a refused module was compiled or counted")
	}
	if err := deploy("beta", three); err != nil { // beta's own budget
		t.Fatalf("beta: %v", err)
	}
	// acme may now deploy three: beta brought its signatures already.
	if err := deploy("acme", hostilewasm.Salted(three, 9)); err != nil {
		t.Fatalf("acme, known signatures: %v", err)
	}
	four := hostilewasm.ManySignatures(100, 4)
	if _, err := r.Inspect(ctx, digestOf(four), four); err != nil { // not a deploy
		t.Fatalf("inspection outside a deploy: %v", err)
	}
	if got := r.sigs.Total(); got < 401 {
		t.Fatalf("%d signatures counted, want at least 401", got)
	}
}

// TestRun_iovecsCharged: every iovec a guest names in fd_read, fd_write,
// fd_pread and fd_pwrite is charged before the host looks at it, including
// the zero-length ones wazero's own loop skipped for free (one call could
// spin for seconds past the deadline on one unit of fuel). Ten calls with
// 4,096 iovecs each cost at least 40,960; the call that asks for more
// iovecs than the budget has left stops the guest.
func TestRun_iovecsCharged(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []struct {
		fn string
		fd uint32
	}{{"fd_read", 0}, {"fd_write", 1}, {"fd_write", 2}, {"fd_pread", 0}, {"fd_pwrite", 1}} {
		t.Run(fmt.Sprintf("%s(%d)", tc.fn, tc.fd), func(t *testing.T) {
			name := strings.ReplaceAll(tc.fn, "_", "") + strconv.Itoa(int(tc.fd))
			e.deploy(name, hostilewasm.IovecCalls(tc.fn, tc.fd, 4096, 10), ceiling(1_000_000, 1<<20, 10*time.Second))
			out := e.run(name, "", admission.BudgetRequest{})
			if out.Kind != Success || out.FuelUsed < 10*4096 {
				t.Fatalf("%s, %d fuel for 40,960 iovecs", out.Kind, out.FuelUsed)
			}
			out = e.run(name, "", admission.BudgetRequest{CPUFuel: 30_000, HasCPUFuel: true})
			if out.Kind != FuelExhausted {
				t.Fatalf("with 30,000 fuel for 40,960 iovecs: %s", out.Kind)
			}
		})
	}
}

// TestRun_environSizesCharged: environ_sizes_get sums a WAGI revision's
// CGI environment on every call, so each call is charged one unit per
// entry: ten calls over a 1,000-entry environment cost 10,000 more than
// over none.
func TestRun_environSizesCharged(t *testing.T) {
	e := newEnv(t)
	e.deployRevision("sizes", hostilewasm.SizesCalls("environ_sizes_get", 10),
		vocab.ManifestRevision{ABI: "wagi", Ceiling: &vocab.ManifestCeiling{CPUFuel: 1_000_000, MemoryBytes: 1 << 20,
			WallTime: vocab.Duration(10 * time.Second)}})
	env := make([]string, 1000)
	for i := range env {
		env[i] = "HTTP_X_" + strconv.Itoa(i) + "=v"
	}
	with, without := e.runWith("sizes", Input{Environ: env}), e.runWith("sizes", Input{})
	// The guest writes no CGI answer: both are malformed responses, after
	// the calls.
	if with.Kind != MalformedResponse || without.Kind != MalformedResponse || with.FuelUsed-without.FuelUsed != 10*1000 {
		t.Fatalf("%s %d fuel with 1,000 entries, %s %d without: want 10,000 more", with.Kind, with.FuelUsed, without.Kind,
			without.FuelUsed)
	}
}

// TestRun_pollSubscriptionsCharged: each poll_oneoff subscription is
// charged before it is read (wazero's charged one unit per call and made a
// heap object of each): ten calls of 4,096 subscriptions cost at least
// 40,960, and 30,000 stops the guest.
func TestRun_pollSubscriptionsCharged(t *testing.T) {
	e := newEnv(t)
	e.deploy("poll", hostilewasm.PollCalls(4096, 10), ceiling(1_000_000, 1<<20, 10*time.Second))
	if out := e.run("poll", "", admission.BudgetRequest{}); out.Kind != Success || out.FuelUsed < 10*4096 {
		t.Fatalf("%s, %d fuel for 40,960 subscriptions", out.Kind, out.FuelUsed)
	}
	if out := e.run("poll", "", admission.BudgetRequest{CPUFuel: 30_000, HasCPUFuel: true}); out.Kind != FuelExhausted {
		t.Fatalf("with 30,000 fuel for 40,960 subscriptions: %s", out.Kind)
	}
}

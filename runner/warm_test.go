package runner

import (
	"context"
	"crypto/sha256"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/latent-node/latent-node/admission"
	"github.com/latent-node/latent-node/internal/testwasm"
	"github.com/latent-node/latent-node/runner/internal/image"
	"github.com/latent-node/latent-node/vocab"
)

// deployReactor deploys wasm as service name whose route "run" calls
// function on a revision of the given instance mode.
func (e *env) deployReactor(name string, wasm []byte, instance, function string) {
	e.t.Helper()
	if err := e.tryDeployReactor(name, wasm, instance, "", function); err != nil {
		e.t.Fatalf("deploy %s: %v", name, err)
	}
}

// tryDeployReactor is deployReactor with an initialisation export, returning
// the deploy's error.
func (e *env) tryDeployReactor(name string, wasm []byte, instance, init, function string) error {
	e.t.Helper()
	d := vocab.DigestOf(sha256.Sum256(wasm))
	if err := e.cat.Artifacts().Put(context.Background(), "acme", d, strings.NewReader(string(wasm))); err != nil {
		e.t.Fatal(err)
	}
	c := ceiling(1<<30, 1<<20, 10*time.Second)
	m := vocab.Manifest{Tenant: "acme", Service: vocab.ServiceName(name),
		Revisions: []vocab.ManifestRevision{{Name: "v1", Artifact: d, TrustClass: "untrusted", Ceiling: &c, Instance: instance,
			Init: vocab.FunctionName(init)}},
		Routes: []vocab.ManifestRoute{{Name: "run", Function: vocab.FunctionName(function),
			Targets: []vocab.ManifestTarget{{Revision: "v1", Weight: 1}}}}}
	_, err := e.cat.Deploy(context.Background(), m)
	return err
}

// TestPrepareSnapshot_refusesDeploy: a snapshot whose initialisation traps,
// exits with an error, or runs out of the initialisation's fuel refuses the
// deploy, naming the revision's instance field and what went wrong; the same
// modules deploy as fresh revisions (the control).
func TestPrepareSnapshot_refusesDeploy(t *testing.T) {
	e := newEnvWith(t, newRunner(t, Config{MaxOutputBytes: 64 << 10, InitFuel: 1 << 20}))
	tests := []struct {
		name, fixture, want string
	}{
		{"trap", "trap_unreachable", "trap (unreachable)"},
		{"exit", "complain", "declared-error (exit status 3); stderr: complaint: bad input"},
		{"fuel", "infinite", "fuel-exhausted"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			wasm := testwasm.Bytes(t, tc.fixture)
			err := e.tryDeployReactor("init-"+tc.name, wasm, "snapshot", "_start", "_start")
			if err == nil || !strings.Contains(err.Error(), "revisions[0].instance") || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("deploy: %v, want a problem at revisions[0].instance saying %q", err, tc.want)
			}
			if err := e.tryDeployReactor("init-"+tc.name, wasm, "fresh", "", "_start"); err != nil {
				t.Fatalf("fresh deploy: %v", err)
			}
		})
	}
	if n := e.r.SnapshotBytes("acme"); n != 0 {
		t.Errorf("%d snapshot bytes held after failed initialisations, want 0", n)
	}
}

// TestRun_instanceModes: the state fixture answers "<counter> <inited>
// <secret>" and then keeps its input as the secret (memory and a global);
// the tablestate fixture answers by a table entry it then changes. A fresh and a snapshot
// activation always start from the initialised module ("0 1 ........"),
// whatever the activations before them wrote to memory and globals; a
// reuse activation sees the state of the one before (the negative control:
// the fixture does leak when state is kept).
func TestRun_instanceModes(t *testing.T) {
	e := newEnvWith(t, newRunner(t, Config{MaxOutputBytes: 64 << 10}))
	wasm := testwasm.Bytes(t, "state")
	for _, mode := range []string{"fresh", "snapshot", "reuse"} {
		e.deployReactor("state-"+mode, wasm, mode, "handle")
	}
	tests := []struct {
		mode string
		want []string // the answers to "secret-1", "secret-2", "secret-3"
	}{
		{"fresh", []string{"0 1 ........\n", "0 1 ........\n", "0 1 ........\n"}},
		{"snapshot", []string{"0 1 ........\n", "0 1 ........\n", "0 1 ........\n"}},
		{"reuse", []string{"0 1 ........\n", "1 1 secret-1\n", "2 1 secret-2\n"}},
	}
	for _, tc := range tests {
		t.Run(tc.mode, func(t *testing.T) {
			var fuel []uint64
			for i, want := range tc.want {
				out := e.run("state-"+tc.mode, "secret-"+itoa(i+1), admission.BudgetRequest{})
				if out.Kind != Success || string(out.Stdout) != want {
					t.Fatalf("activation %d: %s %q (%v), want success %q", i+1, out.Kind, out.Stdout, out.Err, want)
				}
				fuel = append(fuel, out.FuelUsed)
			}
			if tc.mode != "reuse" && (fuel[0] != fuel[1] || fuel[1] != fuel[2]) {
				t.Errorf("fuel %v: want the same for every activation", fuel)
			}
		})
	}
	// A table the activation changed: put back in snapshot mode (by
	// recreating the instance: a module that can change tables is never
	// kept), kept in reuse mode.
	tables := testwasm.Bytes(t, "tablestate")
	for _, tc := range []struct {
		mode string
		want []string
	}{
		{"fresh", []string{"A\n", "A\n", "A\n"}},
		{"snapshot", []string{"A\n", "A\n", "A\n"}},
		{"reuse", []string{"A\n", "B\n", "B\n"}},
	} {
		e.deployReactor("tables-"+tc.mode, tables, tc.mode, "handle")
		for i, want := range tc.want {
			if out := e.run("tables-"+tc.mode, "", admission.BudgetRequest{}); out.Kind != Success || string(out.Stdout) != want {
				t.Errorf("tables %s, activation %d: %s %q (%v), want %q", tc.mode, i+1, out.Kind, out.Stdout, out.Err, want)
			}
		}
	}
	s := e.r.WarmStats()
	// The table module's snapshot activations all recreate their instance.
	s.Recreated -= 3
	s.Snapshots--
	s.Created--
	s.Reused -= 2
	if s.Snapshots != 1 || s.Restored != 2 || s.Recreated != 1 || s.Created != 1 || s.Reused != 2 {
		t.Errorf("stats %+v: want 1 snapshot, 1 recreated and 2 restored activations, 1 created and 2 reused", s)
	}
	if s.SnapshotBytes != 2*vocab.WasmPageBytes || e.r.SnapshotBytes("acme") != 2*vocab.WasmPageBytes {
		t.Errorf("snapshot bytes %d (acme %d), want one page per snapshot", s.SnapshotBytes, e.r.SnapshotBytes("acme"))
	}
}

// newRunner is a runner of the test's own (the shared one keeps warm
// instances and statistics across tests).
func newRunner(t testing.TB, cfg Config) *Runner {
	t.Helper()
	r, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close(context.Background()) })
	return r
}

// TestRun_snapshotDifferential runs every command fixture as a fresh and
// as a snapshot revision (no initialisation export: the snapshot is the
// instantiated module before its start), twice each, and requires the same
// outcome, exit status, trap kind, output and fuel from both modes and both
// activations: a snapshot activation is indistinguishable from a fresh
// instance. Fixtures whose output is not a function of their input (clocks,
// random bytes, the activation id) or that run for their deadline are left
// out; oob_data cannot be instantiated, so its snapshot refuses the deploy.
func TestRun_snapshotDifferential(t *testing.T) {
	e := newEnvWith(t, newRunner(t, Config{MaxOutputBytes: 64 << 10}))
	tests := []struct {
		fixture, input string
	}{
		{"echo", "hello there"},
		{"hello", "ada\n"},
		{"compute", "1000"},
		{"fib", "20"},
		{"trivial", ""},
		{"exit", "0"},
		{"exit", "42"},
		{"complain", ""},
		{"hostcalls", "cwsy"},
		{"trap_unreachable", ""},
		{"trap_divzero", ""},
		{"trap_oob", ""},
		{"recursion", ""},
		{"infinite", ""},
		{"grow", ""},
		{"flood", ""},
	}
	budget := admission.BudgetRequest{CPUFuel: 50_000_000, HasCPUFuel: true}
	deployed := map[string]bool{}
	for _, tc := range tests {
		t.Run(tc.fixture+"/"+tc.input, func(t *testing.T) {
			if !deployed[tc.fixture] {
				wasm := testwasm.Bytes(t, tc.fixture)
				for _, mode := range []string{"fresh", "snapshot"} {
					if err := e.tryDeployReactor(tc.fixture+"-"+mode, wasm, mode, "", "_start"); err != nil {
						t.Fatalf("deploy %s: %v", mode, err)
					}
				}
				deployed[tc.fixture] = true
			}
			var outs []Outcome
			for _, mode := range []string{"fresh", "snapshot", "fresh", "snapshot"} {
				outs = append(outs, e.run(tc.fixture+"-"+mode, tc.input, budget))
			}
			want := outs[0]
			for i, out := range outs[1:] {
				if out.Kind != want.Kind || out.ExitCode != want.ExitCode || out.TrapKind != want.TrapKind ||
					out.FuelUsed != want.FuelUsed || string(out.Stdout) != string(want.Stdout) ||
					string(out.StderrTail) != string(want.StderrTail) {
					t.Fatalf("activation %d: %s/%d/%q fuel %d stdout %d bytes (%v); the first fresh one: %s/%d/%q fuel %d stdout %d bytes",
						i+2, out.Kind, out.ExitCode, out.TrapKind, out.FuelUsed, len(out.Stdout), out.Err,
						want.Kind, want.ExitCode, want.TrapKind, want.FuelUsed, len(want.Stdout))
				}
			}
		})
	}
	if err := e.tryDeployReactor("oob-snapshot", testwasm.Bytes(t, "oob_data"), "snapshot", "", "_start"); err == nil ||
		!strings.Contains(err.Error(), "revisions[0].instance") {
		t.Errorf("snapshot of a module that cannot be instantiated: %v, want the deploy refused", err)
	}
}

// TestSweepWarm: a warm instance nobody calls again is closed once it has
// been idle for WarmIdleTimeout, by the sweep alone (no activation comes
// back to the pool to trigger it); the next activation makes a new one,
// and in reuse mode starts from the initialised module again. Before the
// timeout the sweep keeps it (the control).
func TestSweepWarm(t *testing.T) {
	const idle = time.Minute
	e := newEnvWith(t, newRunner(t, Config{MaxOutputBytes: 64 << 10, WarmIdleTimeout: idle}))
	e.deployReactor("state-reuse", testwasm.Bytes(t, "state"), "reuse", "handle")
	run := func(in, want string) {
		t.Helper()
		if out := e.run("state-reuse", in, admission.BudgetRequest{}); out.Kind != Success || string(out.Stdout) != want {
			t.Fatalf("%s %q (%v), want %q", out.Kind, out.Stdout, out.Err, want)
		}
	}
	run("secret-1", "0 1 ........\n")
	put := time.Now() // the instance went back to the pool before this
	if s := e.r.WarmStats(); s.Idle != 1 {
		t.Fatalf("%d idle instances after one activation, want 1", s.Idle)
	}
	e.r.sweepWarm(put.Add(idle / 2))
	if s := e.r.WarmStats(); s.Idle != 1 || s.Recycled != 0 {
		t.Fatalf("half the timeout: idle %d, recycled %d; want the instance kept", s.Idle, s.Recycled)
	}
	run("secret-2", "1 1 secret-1\n") // the same instance, its state kept
	e.r.sweepWarm(time.Now().Add(idle + time.Second))
	if s := e.r.WarmStats(); s.Idle != 0 || s.Recycled != 1 {
		t.Fatalf("past the timeout: idle %d, recycled %d; want it closed", s.Idle, s.Recycled)
	}
	run("secret-3", "0 1 ........\n") // a new instance
	if s := e.r.WarmStats(); s.Created != 2 {
		t.Errorf("created %d instances, want 2", s.Created)
	}
}

// TestReuse_memoryOverBlankImage: on Linux a reuse instance's linear memory
// is an image.Memory over the empty image (mapped, grown in place), not
// wazero's Go slice; Runner.Close closes idle instances and snapshots.
func TestReuse_memoryOverBlankImage(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("off Linux reuse instances keep wazero's allocator")
	}
	r, err := New(context.Background(), Config{MaxOutputBytes: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	e := newEnvWith(t, r)
	e.deployReactor("state-reuse", testwasm.Bytes(t, "state"), "reuse", "handle")
	e.deployReactor("state-snap", testwasm.Bytes(t, "state"), "snapshot", "handle")
	for _, svc := range []string{"state-reuse", "state-reuse", "state-snap"} {
		if out := e.run(svc, "x", admission.BudgetRequest{}); out.Kind != Success {
			t.Fatalf("%s: %s %v", svc, out.Kind, out.Err)
		}
	}
	r.warm.mu.Lock()
	var reuse *warmInstance
	for w := r.warm.idle.oldest; w != nil; w = w.newer {
		if w.snap == nil {
			reuse = w
		}
	}
	r.warm.mu.Unlock()
	if reuse == nil || reuse.mem == nil || reuse.mem.Len() != uint64(reuse.mod.Memory().Size()) {
		t.Fatalf("the idle reuse instance's memory is not over the blank image: %+v", reuse)
	}
	// It reserved its activation's grant, not the module's 4 GiB maximum.
	if reuse.reserved == 0 || reuse.reserved >= reuse.m.info.MaxMemoryBytes || reuse.reserved%(64<<10) != 0 {
		t.Fatalf("the reuse instance reserved %d bytes (module maximum %d)", reuse.reserved, reuse.m.info.MaxMemoryBytes)
	}
	// A larger grant than it reserved gets a new instance; a smaller one
	// the kept instance.
	e.deployReactor("state-grants", testwasm.Bytes(t, "state"), "reuse", "handle")
	small := admission.BudgetRequest{MemoryBytes: reuse.reserved / 2, HasMemoryBytes: true}
	before := r.WarmStats()
	for _, b := range []admission.BudgetRequest{small, small, {}} {
		if out := e.run("state-grants", "x", b); out.Kind != Success {
			t.Fatalf("grant %d: %s %v", b.MemoryBytes, out.Kind, out.Err)
		}
	}
	if s := r.WarmStats(); s.Created != before.Created+2 || s.Reused != before.Reused+1 || s.Recycled != before.Recycled+1 {
		t.Fatalf("two small grants then the default: %+v, before %+v; want one instance kept once, then a new one", s, before)
	}
	if s := r.WarmStats(); s.Idle != 3 || s.SnapshotBytes == 0 || s.SnapshotBytes != sumBytes(r.SnapshotBytesByTenant()) {
		t.Fatalf("before Close: %+v, by tenant %v", s, r.SnapshotBytesByTenant())
	}
	if err := r.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if s := r.WarmStats(); s.Idle != 0 || s.SnapshotBytes != 0 || len(r.SnapshotBytesByTenant()) != 0 {
		t.Fatalf("after Close: %+v, by tenant %v", s, r.SnapshotBytesByTenant())
	}
	if _, err := reuse.mem.Restore(); !errors.Is(err, image.ErrClosed) {
		t.Fatalf("the reuse instance's memory was not closed: %v", err)
	}
}

// TestWarm_releasedModuleClosesIdle: when a module's last reference goes,
// its idle warm instances and its snapshot are dropped with it, and other
// modules' stay.
func TestWarm_releasedModuleClosesIdle(t *testing.T) {
	e := newEnvWith(t, newRunner(t, Config{MaxOutputBytes: 64 << 10}))
	state, trivial := testwasm.Bytes(t, "state"), testwasm.Bytes(t, "trivial")
	e.deployReactor("state-reuse", state, "reuse", "handle")
	e.deployReactor("state-snapshot", state, "snapshot", "handle")
	e.deployReactor("trivial-reuse", trivial, "reuse", "")
	for _, svc := range []string{"state-reuse", "state-snapshot", "trivial-reuse"} {
		if out := e.run(svc, "x", admission.BudgetRequest{}); out.Kind != Success {
			t.Fatalf("%s: %s %v", svc, out.Kind, out.Err)
		}
	}
	if s := e.r.WarmStats(); s.Idle != 3 || s.SnapshotBytes == 0 || s.SnapshotBytes != sumBytes(e.r.SnapshotBytesByTenant()) {
		t.Fatalf("%+v, by tenant %v: want 3 idle and one snapshot", s, e.r.SnapshotBytesByTenant())
	}
	d := vocab.DigestOf(sha256.Sum256(state))
	for i := 0; e.r.Prepared(d); i++ {
		if i == 10 {
			t.Fatal("the module is still referenced after 10 releases")
		}
		e.r.ReleaseModule(d)
	}
	if s := e.r.WarmStats(); s.Idle != 1 || s.Recycled != 2 || s.SnapshotBytes != 0 || len(e.r.SnapshotBytesByTenant()) != 0 {
		t.Fatalf("after the state module's last reference went: %+v, by tenant %v; want its instances and snapshot dropped",
			s, e.r.SnapshotBytesByTenant())
	}
}

// TestWarm_deleteDropsSnapshot: deleting the last snapshot revision of a
// module that another service still uses (fresh, so the module stays)
// drops the snapshot and its idle instance through the catalog's
// OnSnapshotsUnused; another snapshot stays, and deploying the revision
// again makes a new snapshot that answers.
func TestWarm_deleteDropsSnapshot(t *testing.T) {
	e := newEnvWith(t, newRunner(t, Config{MaxOutputBytes: 64 << 10}))
	state, trivial := testwasm.Bytes(t, "state"), testwasm.Bytes(t, "trivial")
	e.deployReactor("state-snapshot", state, "snapshot", "handle")
	e.deployReactor("state-fresh", state, "", "handle")
	e.deployReactor("trivial-snapshot", trivial, "snapshot", "")
	for _, svc := range []string{"state-snapshot", "trivial-snapshot"} {
		if out := e.run(svc, "x", admission.BudgetRequest{}); out.Kind != Success {
			t.Fatalf("%s: %s %v", svc, out.Kind, out.Err)
		}
	}
	both := e.r.WarmStats()
	if both.Idle != 2 {
		t.Fatalf("%+v: want an idle instance of each snapshot", both)
	}
	if _, err := e.cat.Delete(context.Background(), "acme", "state-snapshot"); err != nil {
		t.Fatal(err)
	}
	if s := e.r.WarmStats(); s.Idle != 1 || s.Recycled != both.Recycled+1 || s.SnapshotBytes == 0 || s.SnapshotBytes >= both.SnapshotBytes {
		t.Fatalf("after the delete %+v (before %+v): want the state snapshot and its instance dropped, trivial's kept", s, both)
	}
	if !e.r.Prepared(vocab.DigestOf(sha256.Sum256(state))) {
		t.Fatal("the module went too: the fresh revision still uses it")
	}
	e.deployReactor("state-snapshot", state, "snapshot", "handle")
	if out := e.run("state-snapshot", "x", admission.BudgetRequest{}); out.Kind != Success {
		t.Fatalf("redeployed: %s %v", out.Kind, out.Err)
	}
	if s := e.r.WarmStats(); s.SnapshotBytes != both.SnapshotBytes {
		t.Fatalf("redeployed: %+v, want the snapshot bytes of before (%d)", s, both.SnapshotBytes)
	}
}

func sumBytes(m map[vocab.TenantID]uint64) (n uint64) {
	for _, b := range m {
		n += b
	}
	return n
}

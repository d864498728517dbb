package scheduler

import (
	"context"
	"crypto/sha256"
	"math/rand/v2"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/errors"
	"go.uber.org/goleak"

	"github.com/latent-node/latent-node/admission"
	"github.com/latent-node/latent-node/catalog"
	"github.com/latent-node/latent-node/internal/testutil"
	"github.com/latent-node/latent-node/internal/testutil/admissiontest"
	"github.com/latent-node/latent-node/internal/testutil/catalogtest"
	"github.com/latent-node/latent-node/loadsource"
	"github.com/latent-node/latent-node/refusal"
	"github.com/latent-node/latent-node/vocab"
)

// The driver's tests use real admission permits: a catalog whose module
// inspector answers catalogtest.PlainModuleInfo, a LocalQuotaProvider on a
// testutil.Clock, and fake cells and executors.

// fakeCells is a pool of cells per class; a quarantined cell leaves it.
type fakeCells struct {
	mu          sync.Mutex
	free        map[vocab.CellClass]int
	leased      int
	leases      int // successful TryLease calls
	quarantined int
	refuse      int           // the next TryLease calls to refuse
	refused     chan struct{} // signalled on each refusal, if set
	onLease     func()        // called on each successful lease, if set
	doubles     int           // cells released twice
}

var errNoCell = errors.New("fake: no idle cell")

func (f *fakeCells) TryLease(c vocab.CellClass) (Cell, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.refuse > 0 {
		f.refuse--
		if f.refused != nil {
			f.refused <- struct{}{}
		}
		return nil, errNoCell
	}
	if f.free[c] == 0 {
		return nil, errNoCell
	}
	f.free[c]--
	f.leased++
	f.leases++
	if f.onLease != nil {
		f.onLease()
	}
	return &fakeCell{pool: f, class: c}, nil
}

type fakeCell struct {
	pool     *fakeCells
	class    vocab.CellClass
	released atomic.Bool
}

func (c *fakeCell) Release(quarantine bool) error {
	f := c.pool
	f.mu.Lock()
	defer f.mu.Unlock()
	if !c.released.CompareAndSwap(false, true) {
		f.doubles++
		return errors.New("fake: released twice")
	}
	f.leased--
	if quarantine {
		f.quarantined++
		return nil
	}
	f.free[c.class]++
	return nil
}

func (f *fakeCells) snapshot() (leased, quarantined, doubles int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.leased, f.quarantined, f.doubles
}

// The driver's tests give jobs a string (a subject, a goroutine's id, a
// number) and their executors report an outcome.
type (
	testJob        = Job[string, outcome]
	testCompletion = Completion[outcome]
	testResult     = Result[outcome]
	testDeps       = Deps[string, outcome]
)

// outcome is what the tests' executors report: a note, or the error that
// ended the execution.
type outcome struct {
	note string
	err  error
}

// execFunc adapts a function to Executor.
type execFunc func(ctx context.Context, job *testJob, exec *admission.ExecutionPermit, cell Cell) testCompletion

func (f execFunc) Execute(ctx context.Context, job *testJob, exec *admission.ExecutionPermit, cell Cell) testCompletion {
	return f(ctx, job, exec, cell)
}

// gate is an executor that reports each start and holds each job until the
// test finishes it (or its context ends).
type gate struct {
	started chan *testJob
	mu      sync.Mutex
	finish  map[*testJob]chan testCompletion
}

func newGate() *gate {
	return &gate{started: make(chan *testJob, 64), finish: map[*testJob]chan testCompletion{}}
}

func (g *gate) Execute(ctx context.Context, job *testJob, _ *admission.ExecutionPermit, _ Cell) testCompletion {
	ch := make(chan testCompletion, 1)
	g.mu.Lock()
	g.finish[job] = ch
	g.mu.Unlock()
	g.started <- job
	select {
	case c := <-ch:
		return c
	case <-ctx.Done():
		return testCompletion{FuelUsed: 1, Outcome: outcome{err: context.Cause(ctx)}}
	}
}

// release finishes a started job.
func (g *gate) release(j *testJob, c testCompletion) {
	g.mu.Lock()
	ch := g.finish[j]
	g.mu.Unlock()
	ch <- c
}

// env is a catalog, an admission ledger and a scheduler on a fake clock,
// with queue classes batch (0–4) and interactive (5–9, one reserved cell).
type env struct {
	t      testing.TB
	clock  *testutil.Clock
	load   *loadsource.State
	cat    *catalog.Catalog
	prov   *admission.LocalQuotaProvider
	cells  *fakeCells
	s      *Scheduler[string, outcome]
	ticks  chan time.Time
	cancel context.CancelFunc
	done   chan error
	ids    atomic.Uint64

	waitOnce sync.Once
	runErr   error
}

var driverTenants = map[vocab.TenantID][]string{"acme": {"alice", "bob"}, "beta": {"carol"}}

// envOptions configure newEnv.
type envOptions struct {
	maxQueued   uint64 // per queue class; default 8
	parallelism int    // cells; default 2
	mutate      func(*Config, *testDeps)
	// queueDelay wires the scheduler's queue delay into admission's deadline
	// feasibility, as the node does. Off by default: tests that move the fake
	// clock by whole deadlines would see every later arrival refused.
	queueDelay bool
}

func newEnv(t testing.TB, exec Executor[string, outcome], opts envOptions) *env {
	t.Helper()
	maxQueued, mutate, parallelism := opts.maxQueued, opts.mutate, opts.parallelism
	if maxQueued == 0 {
		maxQueued = 8
	}
	if parallelism == 0 {
		parallelism = 2
	}
	e := &env{t: t, clock: testutil.NewClock(simEpoch), load: loadsource.NewState(time.Hour),
		cells: &fakeCells{free: map[vocab.CellClass]int{vocab.CellStandard: parallelism}}, ticks: make(chan time.Time)}
	cat, err := catalog.Open(context.Background(), catalog.Config{Dir: t.TempDir(), Inspector: catalogtest.Inspector{}})
	if err != nil {
		t.Fatal(err)
	}
	e.cat = cat
	module := []byte("module")
	d := vocab.DigestOf(sha256.Sum256(module))
	for tenant := range driverTenants {
		if err := cat.Artifacts().Put(context.Background(), tenant, d, strings.NewReader(string(module))); err != nil {
			t.Fatal(err)
		}
	}
	for tenant := range driverTenants {
		m := vocab.Manifest{Tenant: tenant, Service: "svc",
			Revisions: []vocab.ManifestRevision{{Name: "v1", Artifact: d, TrustClass: "untrusted",
				Ceiling: &vocab.ManifestCeiling{CPUFuel: 1_000_000, MemoryBytes: 1 << 20, WallTime: vocab.Duration(2 * time.Second)}}},
			Routes: []vocab.ManifestRoute{{Name: "run", Targets: []vocab.ManifestTarget{{Revision: "v1", Weight: 1}}}}}
		if _, err := cat.Deploy(context.Background(), m); err != nil {
			t.Fatal(err)
		}
	}
	policy := admissiontest.Policy(admissiontest.Spec{Parallelism: uint32(parallelism),
		Limits:          admission.Limits{MaxLiveActivations: 10_000, MaxQueued: 10_000, MaxReservedFuel: 1 << 60, MaxReservedMemory: 1 << 60},
		MaxPayloadBytes: 1 << 20, MaxPriority: 9, Tenants: driverTenants})
	policy.QueueClasses = []admission.QueueClassPolicy{{Name: "batch", MinPriority: 0, MaxPriority: 4, MaxQueued: maxQueued},
		{Name: "interactive", MinPriority: 5, MaxPriority: 9, MaxQueued: maxQueued, ReservedCells: 1}}
	if err := e.load.Publish(loadsource.Sample{CPU: 0, Memory: 0, TakenAt: simEpoch}); err != nil {
		t.Fatal(err)
	}
	cfg := Config{
		CellClasses: map[vocab.CellClass]CellConfig{vocab.CellStandard: {Parallelism: parallelism}},
		QueueClasses: []QueueConfig{{Name: "batch", MinPriority: 0, MaxPriority: 4, MaxQueued: int(maxQueued)},
			{Name: "interactive", MinPriority: 5, MaxPriority: 9, MaxQueued: int(maxQueued), ReservedCells: 1}},
		MaxWait: 10 * time.Second,
	}
	deps := testDeps{Cells: e.cells, Exec: exec, Clock: e.clock}
	if mutate != nil {
		mutate(&cfg, &deps)
	}
	s, err := New(cfg, deps)
	if err != nil {
		t.Fatal(err)
	}
	e.s = s
	if deps.Clock == e.clock {
		s.ticks = e.ticks
	}
	aopts := admission.Options{Clock: deps.Clock, Load: e.load}
	if opts.queueDelay {
		aopts.QueueDelay = s
	}
	if e.prov, err = admission.NewLocalQuotaProvider(policy, aopts); err != nil {
		t.Fatal(err)
	}
	return e
}

// run starts the scheduler; stop ends it and checks that nothing is left
// (a failing test stops it in its cleanup).
func (e *env) run() {
	ctx, cancel := context.WithCancel(context.Background())
	e.cancel, e.done = cancel, make(chan error, 1)
	go func() { e.done <- e.s.Run(ctx) }() // waited for by wait
	e.t.Cleanup(func() {
		e.cancel()
		e.wait()
	})
}

// wait waits for Run to return, once.
func (e *env) wait() error {
	e.waitOnce.Do(func() { e.runErr = <-e.done })
	return e.runErr
}

func (e *env) stop() {
	e.t.Helper()
	e.cancel()
	if err := e.wait(); err != nil {
		e.t.Fatal(err)
	}
	e.checkIdle()
}

// checkIdle: no reservation and no cell is held.
func (e *env) checkIdle() {
	e.t.Helper()
	u := e.prov.Snapshot().Node.Usage
	if u.LiveActivations != 0 || u.Queued != 0 {
		e.t.Errorf("admission still holds %d live, %d queued", u.LiveActivations, u.Queued)
	}
	if leased, _, doubles := e.cells.snapshot(); leased != 0 || doubles != 0 {
		e.t.Errorf("cells leased %d, released twice %d", leased, doubles)
	}
	if n := e.s.Stats().PermitErrors; n != 0 {
		e.t.Errorf("%d permit errors", n)
	}
}

// tick makes the Run loop expire and adjust (it returns once the loop took
// the tick; the results follow on the jobs' channels).
func (e *env) tick() { e.ticks <- time.Time{} }

func (e *env) admit(tenant vocab.TenantID, subject string, priority uint32) (*admission.Permit, error) {
	e.t.Helper()
	pin := e.cat.Pin()
	rev, err := pin.Resolve(vocab.Target{Tenant: tenant, Service: "svc", Route: "run"}, "")
	if err != nil {
		e.t.Fatal(err)
	}
	id := "act-" + strconv.FormatUint(e.ids.Add(1), 10)
	return e.prov.WithPolicySource(pin).Admit(&admission.Request{ActivationID: id, Revision: rev, Priority: priority,
		Principal: admission.Principal{Subject: subject, Kind: admission.KindUser, Tenant: tenant}})
}

func (e *env) submit(ctx context.Context, tenant vocab.TenantID, subject string, priority uint32) *testJob {
	e.t.Helper()
	p, err := e.admit(tenant, subject, priority)
	if err != nil {
		e.t.Fatal(err)
	}
	j, err := e.s.Submit(ctx, p, subject)
	if err != nil {
		e.t.Fatal(err)
	}
	return j
}

func result(t *testing.T, j *testJob) testResult {
	t.Helper()
	select {
	case r := <-j.Done():
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("no result after 10s")
		return testResult{}
	}
}

func TestScheduler_executes(t *testing.T) {
	defer goleak.VerifyNone(t)
	var seen atomic.Value
	e := newEnv(t, execFunc(func(ctx context.Context, job *testJob, xp *admission.ExecutionPermit, _ Cell) testCompletion {
		seen.Store(job.Obligations().Subject + "/" + job.Input() + "/" + xp.Obligations().QueueClass)
		return testCompletion{FuelUsed: 1234, Outcome: outcome{note: "out"}}
	}), envOptions{})
	e.run()
	j := e.submit(context.Background(), "acme", "alice", 7)
	r := result(t, j)
	if r.Err != nil || r.Completion.FuelUsed != 1234 || r.Completion.Outcome.note != "out" || r.Cell != vocab.CellStandard {
		t.Errorf("result %+v", r)
	}
	if have := seen.Load(); have != "alice/alice/interactive" {
		t.Errorf("executor saw %v", have)
	}
	e.stop()
	if err := e.s.Run(context.Background()); err == nil {
		t.Error("Run ran twice")
	}
}

// TestScheduler_queued covers a job's fates while it waits: expiry, the
// caller going away, fair-share eviction, a deadline that passed, a failed
// lease, shutdown.
func TestScheduler_queued(t *testing.T) {
	defer goleak.VerifyNone(t)
	g := newGate()
	e := newEnv(t, g, envOptions{maxQueued: 4})
	e.run()
	// Fill both cells: the batch class has no reserved cell, so two batch
	// jobs take the shared cell and the interactive reserved one stays free.
	r1 := e.submit(context.Background(), "acme", "alice", 0)
	<-g.started
	i1 := e.submit(context.Background(), "acme", "alice", 9)
	<-g.started
	// Now nothing runs until the gate opens.
	ctx, cancel := context.WithCancel(context.Background())
	gone := e.submit(ctx, "acme", "bob", 0)
	expiring := e.submit(context.Background(), "beta", "carol", 0)

	cancel()
	if r := result(t, gone); !errors.Is(r.Err, ErrCancelled) || !errors.Is(r.Err, context.Canceled) {
		t.Errorf("cancelled job: %v", r.Err)
	}

	e.clock.Advance(10 * time.Second)
	e.tick()
	r := result(t, expiring)
	var se *Error
	if !errors.Is(r.Err, ErrQueueWaitExceeded) || !errors.As(r.Err, &se) || !se.Retryable() ||
		se.Reason() != refusal.ReasonQueueWaitExceeded || se.Code() != refusal.CodeResourceExhausted || r.QueueWait != 10*time.Second {
		t.Errorf("expired job: %v, wait %v", r.Err, r.QueueWait)
	}
	if d := r.DoneAt.Sub(r.EnqueuedAt); r.EnqueuedAt.IsZero() || d != r.QueueWait {
		t.Errorf("expired job: enqueued %v, done %v (%v apart), want %v apart", r.EnqueuedAt, r.DoneAt, d, r.QueueWait)
	}

	// Fair share: alice floods the batch class (limit 4), carol arrives.
	var flood []*testJob
	for range 4 {
		flood = append(flood, e.submit(context.Background(), "acme", "alice", 1))
	}
	if _, err := e.admit("beta", "carol", 1); !errors.Is(err, admission.ErrCapacityExhausted) {
		t.Fatalf("admission did not refuse the arrival: %v", err)
	}
	if !e.s.YieldSlotTo(0, "beta", "carol") {
		t.Fatal("no slot yielded")
	}
	if r := result(t, flood[3]); !errors.Is(r.Err, ErrFairShare) {
		t.Errorf("victim: %v", r.Err)
	}
	carol := []*testJob{e.submit(context.Background(), "beta", "carol", 1)}
	// alice 3, carol 1: share 2, alice over it: once more.
	if !e.s.YieldSlotTo(0, "beta", "carol") {
		t.Fatal("no second slot yielded")
	}
	if r := result(t, flood[2]); !errors.Is(r.Err, ErrFairShare) {
		t.Errorf("second victim: %v", r.Err)
	}
	carol = append(carol, e.submit(context.Background(), "beta", "carol", 1))
	if e.s.YieldSlotTo(0, "beta", "carol") {
		t.Error("carol at her share took another slot")
	}

	// A deadline that passes in the queue: EnsureSchedulable refuses at
	// dispatch, before a cell is leased (the grant's wall time is 2s).
	e.clock.Advance(3 * time.Second)
	g.release(r1, testCompletion{FuelUsed: 10}) // a shared cell frees
	if r := result(t, r1); r.Err != nil {
		t.Errorf("first job: %v", r.Err)
	}
	for _, j := range append(flood[:2], carol...) {
		if r := result(t, j); !errors.Is(r.Err, admission.ErrDeadlineExpired) {
			t.Errorf("job past its deadline: %v", r.Err)
		}
	}
	e.cells.mu.Lock()
	leases := e.cells.leases
	e.cells.mu.Unlock()
	if leases != 2 {
		t.Errorf("%d leases: a job past its deadline leased a cell", leases)
	}

	// A failed lease: the job goes back to its queue and starts after the
	// next tick.
	e.cells.mu.Lock()
	e.cells.refuse = 1
	e.cells.refused = make(chan struct{}, 1)
	e.cells.mu.Unlock()
	late := e.submit(context.Background(), "acme", "bob", 0)
	<-e.cells.refused // the Run loop requeued it before it takes the tick
	e.tick()
	started := <-g.started
	if started != late {
		t.Fatal("another job started")
	}
	st := e.s.Stats()
	if st.Executing != 2 || st.Cells[0].Running != 2 {
		t.Errorf("stats %+v", st)
	}

	// Shutdown: the queued job is dropped, the running ones cancelled.
	queued := e.submit(context.Background(), "beta", "carol", 0)
	e.stop()
	if r := result(t, queued); !errors.Is(r.Err, ErrShuttingDown) {
		t.Errorf("queued at shutdown: %v", r.Err)
	}
	for _, j := range []*testJob{i1, late} {
		r := result(t, j)
		if r.Err != nil || !errors.Is(r.Completion.Outcome.err, ErrShuttingDown) {
			t.Errorf("running at shutdown: %v %v", r.Err, r.Completion.Outcome)
		}
	}
	p, err := e.admit("acme", "alice", 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.s.Submit(context.Background(), p, ""); !errors.Is(err, ErrShuttingDown) {
		t.Errorf("Submit after shutdown: %v", err)
	}
	e.checkIdle()
}

// TestScheduler_runningCancelled: a caller that goes away while its job
// runs cancels the executor's context; the permit is kept until the
// executor returned and the cell was released.
func TestScheduler_runningCancelled(t *testing.T) {
	defer goleak.VerifyNone(t)
	started := make(chan struct{})
	cancelled := make(chan struct{})
	finish := make(chan struct{})
	var e *env
	var liveAtCancel, leasedAtCancel int
	e = newEnv(t, execFunc(func(ctx context.Context, _ *testJob, _ *admission.ExecutionPermit, _ Cell) testCompletion {
		close(started)
		<-ctx.Done()
		liveAtCancel = int(e.prov.Snapshot().Node.Usage.LiveActivations)
		leasedAtCancel, _, _ = e.cells.snapshot()
		close(cancelled)
		<-finish
		return testCompletion{FuelUsed: 5}
	}), envOptions{})
	e.run()
	ctx, cancel := context.WithCancel(context.Background())
	j := e.submit(ctx, "acme", "alice", 0)
	<-started
	cancel()
	<-cancelled
	close(finish)
	r := result(t, j)
	if r.Err != nil || r.Completion.FuelUsed != 5 {
		t.Errorf("result %+v", r)
	}
	if liveAtCancel != 1 || leasedAtCancel != 1 {
		t.Errorf("while the guest ran after cancellation: %d live reservations, %d cells leased; want 1 and 1",
			liveAtCancel, leasedAtCancel)
	}
	e.stop()
}

// TestScheduler_cancelledBeforeStart: Submit with an ended context, and a
// caller gone between dispatch and lease.
func TestScheduler_cancelledBeforeStart(t *testing.T) {
	defer goleak.VerifyNone(t)
	e := newEnv(t, execFunc(func(context.Context, *testJob, *admission.ExecutionPermit, Cell) testCompletion {
		t.Error("executed a cancelled job")
		return testCompletion{}
	}), envOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	p, err := e.admit("acme", "alice", 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.s.Submit(ctx, p, ""); !errors.Is(err, ErrCancelled) {
		t.Errorf("Submit with an ended context: %v", err)
	}
	// Submitted before Run, cancelled before Run: the callback removes it.
	ctx2, cancel2 := context.WithCancel(context.Background())
	j := e.submit(ctx2, "acme", "alice", 0)
	cancel2()
	if r := result(t, j); !errors.Is(r.Err, ErrCancelled) {
		t.Errorf("result %v", r.Err)
	}
	e.run()
	e.stop()
}

// TestScheduler_executorFailures: a panicking executor and a quarantine
// request both take the cell out of service.
func TestScheduler_executorFailures(t *testing.T) {
	defer goleak.VerifyNone(t)
	e := newEnv(t, execFunc(func(_ context.Context, job *testJob, _ *admission.ExecutionPermit, _ Cell) testCompletion {
		if job.Input() == "alice" {
			panic("boom")
		}
		return testCompletion{FuelUsed: 1, Quarantine: true}
	}), envOptions{})
	e.run()
	if r := result(t, e.submit(context.Background(), "acme", "alice", 0)); !errors.Is(r.Err, ErrExecutorPanicked) {
		t.Errorf("panic: %v", r.Err)
	}
	if r := result(t, e.submit(context.Background(), "acme", "bob", 0)); r.Err != nil {
		t.Errorf("quarantine: %v", r.Err)
	}
	st := e.s.Stats().Cells[0]
	if _, q, _ := e.cells.snapshot(); q != 2 || st.Quarantined != 2 || st.Usable != 0 {
		t.Errorf("quarantined %d in the pool, stats %+v", q, st)
	}
	e.stop()
}

// TestScheduler_shutdownGrace: running jobs that finish within the grace
// period are not cancelled.
func TestScheduler_shutdownGrace(t *testing.T) {
	defer goleak.VerifyNone(t)
	g := newGate()
	e := newEnv(t, g, envOptions{mutate: func(_ *Config, d *testDeps) { d.ShutdownGrace = time.Minute }})
	e.run()
	j := e.submit(context.Background(), "acme", "alice", 0)
	<-g.started
	e.cancel()
	g.release(j, testCompletion{FuelUsed: 3, Outcome: outcome{note: "finished"}})
	if err := e.wait(); err != nil {
		t.Fatal(err)
	}
	if r := result(t, j); r.Err != nil || r.Completion.Outcome.note != "finished" {
		t.Errorf("result %+v", r)
	}
	e.checkIdle()
}

func TestScheduler_newErrors(t *testing.T) {
	cfg := simConfig(1, FairnessFuel, 1)
	if _, err := New(Config{}, testDeps{}); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("invalid config: %v", err)
	}
	if _, err := New(cfg, testDeps{}); err == nil {
		t.Error("missing deps accepted")
	}
	if _, err := New(cfg, testDeps{Cells: &fakeCells{}, Exec: newGate(), Tick: -1}); err == nil {
		t.Error("negative tick accepted")
	}
	s, err := New(cfg, testDeps{Cells: &fakeCells{}, Exec: newGate()})
	if err != nil {
		t.Fatal(err)
	}
	if s.tick != 100*time.Millisecond || s.ObservedQueueDelay(vocab.CellClass(99)) != 0 {
		t.Errorf("tick %v", s.tick)
	}
	if _, err := s.Submit(context.Background(), nil, ""); err == nil {
		t.Error("Submit without a permit")
	}
	for _, e := range []*Error{ErrQueueWaitExceeded, ErrFairShare, ErrShuttingDown, ErrCancelled, ErrExecutorPanicked} {
		if e.Scope() == refusal.ScopeNone || e.Error() == "" || (e.Retryable() != (e.Code() == refusal.CodeResourceExhausted || e.Code() == refusal.CodeUnavailable)) {
			t.Errorf("%v: scope %q dimension %q retryable %v", e, e.Scope(), e.Dimension(), e.Retryable())
		}
	}
}

// TestScheduler_queueDelay: admission reads the published queue delay.
func TestScheduler_queueDelay(t *testing.T) {
	defer goleak.VerifyNone(t)
	g := newGate()
	e := newEnv(t, g, envOptions{queueDelay: true})
	e.run()
	a := e.submit(context.Background(), "acme", "alice", 0)
	<-g.started
	b := e.submit(context.Background(), "acme", "alice", 0)
	e.clock.Advance(500 * time.Millisecond)
	g.release(a, testCompletion{FuelUsed: 1})
	<-g.started
	if d := e.s.ObservedQueueDelay(vocab.CellStandard); d <= 0 || d > 500*time.Millisecond {
		t.Errorf("observed queue delay %v", d)
	}
	g.release(b, testCompletion{FuelUsed: 1})
	result(t, a)
	result(t, b)
	e.stop()
}

// TestScheduler_hammer drives the driver from many goroutines on the wall
// clock: submitters with random tenants, principals and priorities (the
// queue classes are small, so admission refuses and YieldSlotTo evicts),
// callers that go away before or during execution, executors that take a
// random while, sometimes quarantine or panic, a monitor reading Stats and
// the queue delay, and a shutdown in the middle of it all. Every job gets
// exactly one result, and afterwards admission holds nothing and every cell
// is back or quarantined.
func TestScheduler_hammer(t *testing.T) {
	defer goleak.VerifyNone(t)
	submitters, batches, batch := 8, 40, 4
	if testing.Short() {
		batches = 10
	}
	var executed, quarantined atomic.Int64
	exec := execFunc(func(ctx context.Context, job *testJob, xp *admission.ExecutionPermit, _ Cell) testCompletion {
		executed.Add(1)
		n := int(xp.Budget().CPUFuel % 7)
		for i := 0; i < n && ctx.Err() == nil; i++ {
			runtime.Gosched()
		}
		switch id, _ := strconv.Atoi(job.Input()); id % 97 {
		case 13:
			quarantined.Add(1)
			return testCompletion{FuelUsed: 100, Quarantine: true}
		case 41:
			panic("executor failure")
		}
		return testCompletion{FuelUsed: uint64(1 + n*1000)}
	})
	e := newEnv(t, exec, envOptions{maxQueued: 6, parallelism: 16, queueDelay: true, mutate: func(c *Config, d *testDeps) {
		c.MaxWait = 20 * time.Millisecond
		d.Clock = vocab.WallClock
		d.Tick = 2 * time.Millisecond
		d.ShutdownGrace = time.Millisecond
	}})
	if err := e.load.Publish(loadsource.Sample{TakenAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	e.run()

	total := submitters * batches * batch
	var results, refused, yielded atomic.Int64
	var mu sync.Mutex
	outcomes := map[string]int{}
	count := func(k string) {
		mu.Lock()
		outcomes[k]++
		mu.Unlock()
	}
	shutdown := make(chan struct{})
	var shutdownOnce sync.Once
	// The monitor checks Stats until the shutdown, then stops the scheduler
	// while the submitters still wait for results.
	monitorDone := make(chan struct{})
	go func() { // waited for via monitorDone
		defer close(monitorDone)
		defer e.cancel()
		for {
			select {
			case <-shutdown:
				return
			default:
			}
			st := e.s.Stats()
			if st.Cells[0].Running > 16 {
				t.Errorf("%d running on 16 cells", st.Cells[0].Running)
			}
			_ = e.s.ObservedQueueDelay(vocab.CellStandard)
			runtime.Gosched()
		}
	}()
	rngs := make([]*rand.Rand, submitters)
	for g := range rngs {
		rngs[g] = rand.New(rand.NewPCG(uint64(g), 99))
	}
	tenants := []vocab.TenantID{"acme", "acme", "beta"}
	err := testutil.Hammer(submitters, batches, func(g, b int) error {
		rng := rngs[g]
		var jobs []*testJob
		var cancels []context.CancelFunc
		for i := range batch {
			ti := rng.IntN(3)
			tenant, subject := tenants[ti], driverTenants[tenants[ti]][rng.IntN(len(driverTenants[tenants[ti]]))]
			prio := uint32(rng.IntN(10))
			p, err := e.admit(tenant, subject, prio)
			if errors.Is(err, admission.ErrCapacityExhausted) {
				queue := 0
				if prio >= 5 {
					queue = 1
				}
				if e.s.YieldSlotTo(queue, tenant, subject) {
					yielded.Add(1)
					p, err = e.admit(tenant, subject, prio)
				}
			}
			if err != nil {
				refused.Add(1)
				results.Add(1)
				continue
			}
			ctx, cancel := context.WithCancel(context.Background())
			cancels = append(cancels, cancel)
			j, err := e.s.Submit(ctx, p, strconv.Itoa(g*batches*batch+b*batch+i))
			if err != nil {
				if !errors.Is(err, ErrShuttingDown) {
					t.Errorf("Submit: %v", err)
				}
				count("submit-shutting-down")
				results.Add(1)
				continue
			}
			if rng.IntN(8) == 0 {
				cancel() // the caller goes away at once
			}
			jobs = append(jobs, j)
		}
		for i, j := range jobs {
			if rng.IntN(8) == 0 {
				cancels[i]() // … or while its job queues or runs
			}
			var r testResult
			select {
			case r = <-j.Done():
			case <-time.After(10 * time.Second):
				return errors.New("no result after 10s")
			}
			select {
			case <-j.Done():
				t.Error("a second result")
			default:
			}
			var se *Error
			switch {
			case r.Err == nil:
				count("executed")
			case errors.As(r.Err, &se):
				count(se.Reason().String())
			case errors.Is(r.Err, admission.ErrDeadlineExpired):
				count("deadline")
			default:
				t.Errorf("unexpected result error: %v", r.Err)
			}
			if results.Add(1) >= int64(total*3/4) {
				shutdownOnce.Do(func() { close(shutdown) })
			}
		}
		for _, c := range cancels {
			c()
		}
		return nil
	})
	if err != nil {
		t.Error(err)
	}
	shutdownOnce.Do(func() { close(shutdown) }) // if the results never reached three quarters
	<-monitorDone
	if err := e.wait(); err != nil {
		t.Fatal(err)
	}
	e.checkIdle()
	if n := results.Load(); n != int64(total) {
		t.Errorf("%d results for %d activations", n, total)
	}
	_, q, _ := e.cells.snapshot()
	if st := e.s.Stats().Cells[0]; int64(q) != int64(st.Quarantined) || st.Running != 0 || st.Waiting != 0 {
		t.Errorf("pool quarantined %d; stats %+v", q, st)
	}
	t.Logf("%d activations: %d refused by admission, %d slots yielded, outcomes %v, executed %d (%d quarantined)",
		total, refused.Load(), yielded.Load(), outcomes, executed.Load(), quarantined.Load())
}

// TestScheduler_startFails: the deadline passes between EnsureSchedulable
// and StartExecution (here: while the cell is leased). StartExecution
// releases the reservation; the unused cell goes back to the pool.
func TestScheduler_startFails(t *testing.T) {
	defer goleak.VerifyNone(t)
	e := newEnv(t, execFunc(func(context.Context, *testJob, *admission.ExecutionPermit, Cell) testCompletion {
		t.Error("executed a job whose start failed")
		return testCompletion{}
	}), envOptions{})
	e.cells.onLease = func() { e.clock.Advance(time.Minute) }
	e.run()
	r := result(t, e.submit(context.Background(), "acme", "alice", 0))
	if !errors.Is(r.Err, admission.ErrDeadlineExpired) {
		t.Errorf("result %v", r.Err)
	}
	if st := e.s.Stats().Cells[0]; st.Running != 0 || st.Usable != 2 {
		t.Errorf("stats %+v", st)
	}
	e.stop()
}

// TestScheduler_usedPermit: a permit that is not the caller's to give (it
// was already started) is counted (the release error rides along as a
// secondary error).
func TestScheduler_usedPermit(t *testing.T) {
	e := newEnv(t, newGate(), envOptions{})
	p, err := e.admit("acme", "alice", 0)
	if err != nil {
		t.Fatal(err)
	}
	xp, err := p.StartExecution()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := e.s.Submit(ctx, p, ""); !errors.Is(err, ErrCancelled) {
		t.Errorf("Submit: %v", err)
	}
	if n := e.s.Stats().PermitErrors; n != 1 {
		t.Errorf("%d permit errors, want 1", n)
	}
	if err := xp.Release(); err != nil {
		t.Fatal(err)
	}
}

// TestScheduler_maxRunning: with Deps.MaxRunning 1, a second job waits in
// the fair queue although a cell is free, and starts when the first ends.
func TestScheduler_maxRunning(t *testing.T) {
	defer goleak.VerifyNone(t)
	g := newGate()
	e := newEnv(t, g, envOptions{mutate: func(_ *Config, d *testDeps) { d.MaxRunning = 1 }})
	e.run()
	first := e.submit(context.Background(), "acme", "alice", 0)
	second := e.submit(context.Background(), "beta", "carol", 9) // its own reserved cell is free
	started := <-g.started
	// Two ticks: the second is received only once the loop handled the
	// first, dispatch included.
	e.tick()
	e.tick()
	if st := e.s.Stats(); st.Executing != 1 || st.Cells[0].Waiting != 1 {
		t.Fatalf("with MaxRunning 1: %d executing, %d waiting; want 1 and 1", st.Executing, st.Cells[0].Waiting)
	}
	g.release(started, testCompletion{})
	other := <-g.started
	if (started == first) == (other == first) {
		t.Fatal("the same job started twice")
	}
	g.release(other, testCompletion{})
	for _, j := range []*testJob{first, second} {
		if r := result(t, j); r.Err != nil {
			t.Fatalf("job: %v", r.Err)
		}
	}
	e.stop()
}

// goid is the calling goroutine's id, from its stack header.
func goid() string {
	buf := make([]byte, 64)
	n := runtime.Stack(buf, false)
	return strings.Fields(string(buf[:n]))[1]
}

// do admits and runs a job with Do on the calling goroutine.
func (e *env) do(ctx context.Context, tenant vocab.TenantID, subject string) testResult {
	e.t.Helper()
	p, err := e.admit(tenant, subject, 0)
	if err != nil {
		e.t.Error(err)
		return testResult{Err: err}
	}
	_, r, err := e.s.Do(ctx, p, goid(), time.Time{})
	if err != nil {
		return testResult{Err: err}
	}
	return r
}

// TestScheduler_do: Do runs the job on its caller's goroutine (the
// executor sees the goroutine that called Do; Submit's jobs run on
// goroutines of their own), under MaxRunning like any job, and a job
// queued by Do ends like a submitted one when its caller leaves or the
// scheduler stops.
func TestScheduler_do(t *testing.T) {
	defer goleak.VerifyNone(t)
	var mu sync.Mutex
	ranOn := map[string]string{} // caller goroutine → executor goroutine
	release := make(chan struct{})
	started := make(chan struct{}, 8)
	e := newEnv(t, execFunc(func(ctx context.Context, job *testJob, _ *admission.ExecutionPermit, _ Cell) testCompletion {
		mu.Lock()
		ranOn[job.Input()] = goid()
		mu.Unlock()
		started <- struct{}{}
		select {
		case <-release:
		case <-ctx.Done():
		}
		return testCompletion{FuelUsed: 7}
	}), envOptions{mutate: func(_ *Config, d *testDeps) { d.MaxRunning = 1 }})

	// Called before Run: the job waits for Run, then runs on this goroutine.
	results := make(chan testResult, 3)
	go func() { results <- e.do(context.Background(), "acme", "alice") }()
	e.run()
	<-started
	go func() { results <- e.do(context.Background(), "beta", "carol") }()
	for e.s.Stats().Cells[0].Waiting != 1 { // the second waits behind MaxRunning
		runtime.Gosched()
	}
	if st := e.s.Stats(); st.Executing != 1 {
		t.Fatalf("with MaxRunning 1: %d executing", st.Executing)
	}
	release <- struct{}{} // the first ends; the second starts
	<-started
	release <- struct{}{}
	for range 2 {
		if r := <-results; r.Err != nil || r.Completion.FuelUsed != 7 {
			t.Fatalf("result %+v", r)
		}
	}
	mu.Lock()
	for caller, exec := range ranOn {
		if caller != exec {
			t.Errorf("job of goroutine %s ran on goroutine %s", caller, exec)
		}
	}
	if len(ranOn) != 2 {
		t.Errorf("ran %d jobs, want 2", len(ranOn))
	}
	mu.Unlock()

	// Submit's jobs run elsewhere (the control for the check above).
	p, err := e.admit("acme", "bob", 0)
	if err != nil {
		t.Fatal(err)
	}
	j, err := e.s.Submit(context.Background(), p, goid())
	if err != nil {
		t.Fatal(err)
	}
	<-started
	release <- struct{}{}
	if r := result(t, j); r.Err != nil {
		t.Fatal(r.Err)
	}
	mu.Lock()
	if exec := ranOn[j.Input()]; exec == j.Input() {
		t.Error("a submitted job ran on the submitting goroutine")
	}
	mu.Unlock()

	// The caller leaves while its job waits: ErrCancelled.
	go func() { results <- e.do(context.Background(), "acme", "alice") }()
	<-started
	ctx, cancel := context.WithCancel(context.Background())
	go func() { results <- e.do(ctx, "beta", "carol") }()
	for e.s.Stats().Cells[0].Waiting != 1 {
		runtime.Gosched()
	}
	cancel()
	if r := <-results; !errors.Is(r.Err, ErrCancelled) {
		t.Fatalf("cancelled while queued: %+v", r)
	}
	// Stop while one runs and one waits: the waiting one gets
	// ErrShuttingDown, the running one its context's end.
	go func() { results <- e.do(context.Background(), "beta", "carol") }()
	for e.s.Stats().Cells[0].Waiting != 1 {
		runtime.Gosched()
	}
	e.stop()
	var shut, ran int
	for range 2 {
		r := <-results
		switch {
		case errors.Is(r.Err, ErrShuttingDown):
			shut++
		case r.Err == nil:
			ran++
		}
	}
	if shut != 1 || ran != 1 {
		t.Fatalf("at shutdown: %d shut down, %d ran; want 1 and 1", shut, ran)
	}
}

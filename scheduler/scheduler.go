package scheduler

// Scheduler, the driver around the Core: the Cell, CellSource and Executor
// it is given, Jobs and their Results, Submit and Do, Run's dispatch loop
// and Pause.

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/latent-node/latent-node/admission"
	"github.com/latent-node/latent-node/vocab"
)

// Cell is a leased execution cell (the node adapts a cellpool lease).
type Cell interface {
	// Release returns the cell to its pool, or takes it out of service when
	// quarantine is true. An error means the cell is out of service anyway:
	// the scheduler counts it as lost.
	Release(quarantine bool) error
}

// CellSource leases cells without waiting (the node adapts the cellpool).
type CellSource interface {
	// TryLease returns an idle cell of the class, or an error when none is
	// available now.
	TryLease(vocab.CellClass) (Cell, error)
}

// Executor runs a started job on a leased cell (the node adapts the runner).
// In is the job's input (what Submit and Do were given), Out the outcome
// the executor reports for the caller; the scheduler never looks at either.
type Executor[In, Out any] interface {
	// Execute runs job with the execution permit's budget and deadline and
	// returns when the guest has stopped. ctx ends when the caller goes away
	// or the scheduler shuts down (cause ErrShuttingDown). Execute must not
	// release the cell or the permit: the scheduler does, in that order,
	// after Execute returned.
	Execute(ctx context.Context, job *Job[In, Out], exec *admission.ExecutionPermit, cell Cell) Completion[Out]
}

// Completion is what an execution reports.
type Completion[Out any] struct {
	// FuelUsed is the fuel the guest consumed (corrects the fair-queue charge
	// and feeds the adaptive window).
	FuelUsed uint64
	// Quarantine asks that the cell leave service (its state is uncertain).
	Quarantine bool
	// Outcome is the executor's result for the caller, opaque to the scheduler.
	Outcome Out
}

// Result is the one definite result of a job, delivered on Job.Done.
type Result[Out any] struct {
	// Err is nil when the job executed (its outcome, good or bad, is in
	// Completion). Otherwise it never executed: an *Error
	// (ErrQueueWaitExceeded, ErrFairShare, ErrShuttingDown, ErrCancelled,
	// ErrExecutorPanicked) or an admission refusal at start (a
	// *admission.Rejection such as deadline-exceeded, wrapped).
	Err        error
	Completion Completion[Out]
	// QueueWait is the time between Submit and dispatch (or removal).
	QueueWait time.Duration
	// Execution is the time Execute took, less Paused: how long the job
	// was paused for a newcomer (Pause).
	Execution, Paused time.Duration
	Cell              vocab.CellClass
	// EnqueuedAt is when Submit queued the job; DoneAt is when the result
	// was delivered (the caller measures how long it took to pick it up).
	EnqueuedAt, DoneAt time.Time
}

type jobState uint8

const (
	jobQueued   jobState = iota + 1
	jobStarting          // taken by Next; the Run loop is starting it
	jobRunning
	jobFinished
)

// Job is a submitted activation carrying an input In; its result carries
// the executor's outcome Out. It owns its admission permit until the
// scheduler starts or drops it.
type Job[In, Out any] struct {
	ctx    context.Context
	permit *admission.Permit
	input  In
	item   Item // item.Payload is the job itself
	done   chan Result[Out]

	// run receives the start of a job submitted with Do: its caller runs
	// it. nil for Submit's jobs, which run on goroutines of their own.
	run chan startedJob

	// Guarded by Scheduler.mu.
	state  jobState
	stop   func() bool             // unregisters the caller-gone callback
	cancel context.CancelCauseFunc // running: ends the executor's context
	// paused: the job paused once (Pause); resume wakes it. pausedFor is
	// how long it was paused (not counted as execution time).
	paused    bool
	resume    chan struct{}
	pausedFor time.Duration
}

// Done delivers the job's one result; the channel is buffered, so nobody has
// to read it.
func (j *Job[In, Out]) Done() <-chan Result[Out] { return j.done }

// Input is what Submit or Do was given.
func (j *Job[In, Out]) Input() In { return j.input }

// Obligations are the admitted activation's obligations.
func (j *Job[In, Out]) Obligations() admission.Obligations { return j.permit.Obligations() }

// startedJob is what a job's own goroutine needs to run it (Do).
type startedJob struct {
	ctx  context.Context
	xp   *admission.ExecutionPermit
	cell Cell
	wait time.Duration
}

func (j *Job[In, Out]) deliver(r Result[Out]) {
	r.Cell = j.item.Cell
	r.EnqueuedAt = j.item.EnqueuedAt
	j.done <- r
}

// Deps are the scheduler's collaborators.
type Deps[In, Out any] struct {
	// Cells leases cells (required).
	Cells CellSource
	// Exec runs jobs (required).
	Exec Executor[In, Out]
	// Clock defaults to the wall clock.
	Clock vocab.Clock
	// Tick is the period of expiry and adjustment (default: MaxWait/10, at
	// most 100ms, at least 1ms). Nothing waits past MaxWait plus one tick.
	Tick time.Duration
	// ShutdownGrace is how long running jobs may finish after Run's context
	// ended before their contexts are cancelled (0: at once).
	ShutdownGrace time.Duration
	// MaxRunning bounds the jobs running at once across every cell class
	// (0: only the cells bound them). The node sets it to the CPUs it may
	// use, so guests never outnumber them: the backlog then waits in the
	// fair queue instead of in the operating system's run queue.
	MaxRunning int
}

type runState uint8

const (
	stateIdle runState = iota
	stateRunning
	stateStopping
	stateStopped
)

// Scheduler is the driver around Core: it owns the permits of queued jobs,
// the dispatch and expiry loop and the executor goroutines. In is the input
// its jobs carry to the Executor, Out the outcome the Executor reports. All
// methods are safe for concurrent use.
//
// Lock order: mu is a leaf. It is never held while calling admission, the
// CellSource, the Executor or a Cell, or while delivering a result; under it
// the scheduler calls only the Clock. ObservedQueueDelay takes no lock
// (admission calls it under its own).
type Scheduler[In, Out any] struct {
	deps    Deps[In, Out]
	clock   vocab.Clock
	tick    time.Duration
	ticks   <-chan time.Time // tests replace the ticker
	classes []vocab.CellClass
	wake    chan struct{}
	delay   [len(vocab.CellClasses) + 1]atomic.Int64
	started atomic.Bool
	execs   sync.WaitGroup
	// permitErrors counts permit releases that failed: a permit given to
	// Submit that was not the caller's to give (already used).
	permitErrors atomic.Uint64
	// pauses counts jobs that paused for a newcomer (Pause).
	pauses atomic.Uint64

	mu struct {
		sync.Mutex
		core    *Core
		state   runState
		running map[*Job[In, Out]]struct{}
		// paused are running jobs that gave their slot to a newcomer
		// (Pause), oldest first; they resume before anything new starts.
		paused []*Job[In, Out]
		// handoffs counts newcomers a Pause took from the queue and is
		// starting in the paused job's slot: they hold the slot already.
		handoffs int
		blocked  [len(vocab.CellClasses) + 1]bool // TryLease failed: wait for a Done or a tick
	}
	// dispatching admits one dispatcher at a time (the Run loop, Do's
	// callers and finishing executors all dispatch); again asks the one
	// dispatching to look once more.
	dispatching sync.Mutex
	again       atomic.Bool
	// first is the index in classes dispatch starts from; it rotates, so
	// that under MaxRunning no class always takes the freed slot. Only the
	// holder of dispatching touches it.
	first int
}

var _ admission.QueueDelaySource = (*Scheduler[any, any])(nil)

// New validates cfg and deps and returns an idle scheduler. It starts
// nothing: don't forget to Run it. Jobs submitted before Run wait for it.
func New[In, Out any](cfg Config, deps Deps[In, Out]) (*Scheduler[In, Out], error) {
	core, err := NewCore(cfg)
	if err != nil {
		return nil, err
	}
	if deps.Cells == nil || deps.Exec == nil {
		return nil, errors.AssertionFailedf("scheduler: Deps.Cells and Deps.Exec are required")
	}
	if deps.Tick < 0 || deps.ShutdownGrace < 0 {
		return nil, errors.AssertionFailedf("scheduler: Deps.Tick and Deps.ShutdownGrace must not be negative")
	}
	s := &Scheduler[In, Out]{deps: deps, clock: deps.Clock, tick: deps.Tick, wake: make(chan struct{}, 1)}
	if s.clock == nil {
		s.clock = vocab.WallClock
	}
	if s.tick == 0 {
		s.tick = min(max(core.cfg.MaxWait/10, time.Millisecond), 100*time.Millisecond)
	}
	for _, c := range vocab.CellClasses {
		if core.cell(c) != nil {
			s.classes = append(s.classes, c)
		}
	}
	s.mu.core = core
	s.mu.running = map[*Job[In, Out]]struct{}{}
	return s, nil
}

// wallClock is the default clock, the one place the package reads the time.

// Submit enqueues an admitted activation. The job owns permit from now on:
// if Submit fails it releases the permit (ErrShuttingDown after Run's
// context ended, ErrCancelled if ctx already ended). When ctx ends while the
// job waits, the job is removed, its permit released and its result is
// ErrCancelled; when it ends while the job runs, the executor's context is
// cancelled and the permit is kept until the guest stopped.
func (s *Scheduler[In, Out]) Submit(ctx context.Context, permit *admission.Permit, input In) (*Job[In, Out], error) {
	j, err := s.enqueue(ctx, permit, input, false, time.Time{})
	if err != nil {
		return nil, err
	}
	s.nudge()
	return j, nil
}

// Do is Submit followed by waiting for the job's result, except that the
// job runs on the calling goroutine once it is dispatched: no goroutine is
// started for it and no other goroutine has to be woken to start it or to
// deliver its result. ctx ends the wait as it ends a submitted job's (the
// result is then ErrCancelled, or the guest's own outcome if it was
// already running). The job is returned with its result for its
// obligations and input.
//
// arrived is when the request arrived, before it was read and admitted
// (zero: now): the observed queue delay admission reads counts from it.
func (s *Scheduler[In, Out]) Do(ctx context.Context, permit *admission.Permit, input In, arrived time.Time) (*Job[In, Out], Result[Out], error) {
	j, err := s.enqueue(ctx, permit, input, true, arrived)
	if err != nil {
		return nil, Result[Out]{}, err
	}
	s.dispatchNow()
	// The caller waits here, so it watches its own context: no callback
	// (context.AfterFunc costs five allocations per job).
	gone := ctx.Done()
	for {
		select {
		case st := <-j.run:
			s.execute(st.ctx, j, st.xp, st.cell, st.wait)
			return j, <-j.done, nil
		case res := <-j.done:
			return j, res, nil
		case <-gone:
			gone = nil // removed and answered if still queued; else it started
			s.callerGone(j)
		}
	}
}

// enqueue queues a job for Submit and Do.
func (s *Scheduler[In, Out]) enqueue(ctx context.Context, permit *admission.Permit, input In, inline bool, arrived time.Time) (*Job[In, Out], error) {
	if permit == nil {
		return nil, errors.AssertionFailedf("scheduler: Submit without a permit")
	}
	ob := permit.Obligations()
	j := &Job[In, Out]{ctx: ctx, permit: permit, input: input, done: make(chan Result[Out], 1)}
	if inline {
		j.run = make(chan startedJob, 1)
	}
	j.item = Item{Tenant: ob.Tenant, Principal: ob.Subject, Cell: ob.CellClass, Queue: ob.QueueIndex, Payload: j, ArrivedAt: arrived}
	if ctx.Err() != nil {
		return nil, s.refuse(permit, ErrCancelled.withCause(context.Cause(ctx)))
	}
	now := s.clock.Now()
	s.mu.Lock()
	if s.mu.state >= stateStopping {
		s.mu.Unlock()
		return nil, s.refuse(permit, ErrShuttingDown)
	}
	if err := s.mu.core.Enqueue(now, &j.item); err != nil {
		s.mu.Unlock()
		return nil, s.refuse(permit, err)
	}
	j.state = jobQueued
	if !inline {
		// The callback runs in its own goroutine once ctx ends (never
		// inline here), takes mu and returns; finishing the job
		// unregisters it. Do's caller watches ctx itself.
		j.stop = context.AfterFunc(ctx, func() { s.callerGone(j) })
	}
	s.mu.Unlock()
	return j, nil
}

func (s *Scheduler[In, Out]) refuse(permit *admission.Permit, err error) error {
	if rerr := permit.Release(); rerr != nil {
		s.permitErrors.Add(1)
		return errors.CombineErrors(err, rerr)
	}
	return err
}

func (s *Scheduler[In, Out]) releasePermit(p *admission.Permit) {
	if p.Release() != nil {
		s.permitErrors.Add(1)
	}
}

// finishLocked marks j finished and unregisters its callback.
//
// REQUIRES: s.mu held.
func (s *Scheduler[In, Out]) finishLocked(j *Job[In, Out]) {
	j.state = jobFinished
	if j.stop != nil {
		j.stop()
	}
}

// callerGone removes a queued job whose caller went away. A starting job is
// checked by the Run loop before its lease; a running one sees its context end.
func (s *Scheduler[In, Out]) callerGone(j *Job[In, Out]) {
	now := s.clock.Now()
	s.mu.Lock()
	if j.state != jobQueued {
		s.mu.Unlock()
		return
	}
	s.mu.core.Remove(&j.item)
	s.finishLocked(j)
	s.mu.Unlock()
	s.releasePermit(j.permit)
	j.deliver(Result[Out]{Err: ErrCancelled.withCause(context.Cause(j.ctx)), QueueWait: now.Sub(j.item.EnqueuedAt), DoneAt: now})
	s.nudge()
}

// YieldSlotTo applies the pending-slot fair share of queue class queue for an
// arrival of (tenant, principal) that admission refused for the class's
// capacity (see Core.YieldSlotTo). When it returns true, a victim was
// removed, its permit released (so its queue slot is free now) and its
// result is ErrFairShare: admit the arrival again.
func (s *Scheduler[In, Out]) YieldSlotTo(queue int, tenant vocab.TenantID, principal string) bool {
	now := s.clock.Now()
	s.mu.Lock()
	it, ok := s.mu.core.YieldSlotTo(now, queue, tenant, principal)
	if !ok {
		s.mu.Unlock()
		return false
	}
	j := it.Payload.(*Job[In, Out])
	s.finishLocked(j)
	s.mu.Unlock()
	s.releasePermit(j.permit)
	j.deliver(Result[Out]{Err: ErrFairShare, QueueWait: now.Sub(it.EnqueuedAt), DoneAt: now})
	return true
}

// ObservedQueueDelay is the moving average of the queue wait of a cell class
// (admission.QueueDelaySource). It takes no lock.
func (s *Scheduler[In, Out]) ObservedQueueDelay(c vocab.CellClass) time.Duration {
	if int(c) >= len(s.delay) {
		return 0
	}
	return time.Duration(s.delay[c].Load())
}

// DriverStats is a snapshot of the scheduler.
type DriverStats struct {
	Stats
	// Executing is the number of jobs whose executor has not returned.
	Executing int
	// PermitErrors counts permits that could not be released because they
	// were already used (a caller bug; 0 in a healthy node).
	PermitErrors uint64
	// Pauses counts running jobs that paused for a newcomer (Pause).
	Pauses uint64
}

// Stats returns a snapshot for metrics. CellStats.Quarantined counts the
// cells lost to executor quarantine requests (or failed releases).
func (s *Scheduler[In, Out]) Stats() DriverStats {
	s.mu.Lock()
	st := DriverStats{Stats: s.mu.core.Stats(), Executing: len(s.mu.running)}
	s.mu.Unlock()
	st.PermitErrors = s.permitErrors.Load()
	st.Pauses = s.pauses.Load()
	return st
}

func (s *Scheduler[In, Out]) nudge() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// publishLocked copies the queue-delay averages where ObservedQueueDelay
// reads them.
//
// REQUIRES: s.mu held.
func (s *Scheduler[In, Out]) publishLocked() {
	for _, c := range s.classes {
		s.delay[c].Store(int64(s.mu.core.ObservedQueueDelay(c)))
	}
}

// Run dispatches queued jobs, expires them and adjusts the windows until ctx
// ends; then it shuts down: Submit refuses with ErrShuttingDown, queued jobs
// get ErrShuttingDown and their permits are released, running jobs get
// Deps.ShutdownGrace to finish before their contexts are cancelled, and Run
// returns once every executor returned. It returns nil, or an error if called
// twice. Every job submitted gets exactly one result.
func (s *Scheduler[In, Out]) Run(ctx context.Context) error {
	if !s.started.CompareAndSwap(false, true) {
		return errors.New("scheduler: Run called twice")
	}
	s.mu.Lock()
	s.mu.state = stateRunning
	s.mu.Unlock()
	ticks := s.ticks
	if ticks == nil {
		t := time.NewTicker(s.tick)
		defer t.Stop()
		ticks = t.C
	}
	s.dispatchNow()
	for {
		select {
		case <-ctx.Done():
			s.shutdown()
			return nil
		case <-s.wake:
			s.dispatchNow()
		case <-ticks:
			s.onTick()
			s.dispatchNow()
		}
	}
}

// onTick expires jobs past MaxWait and adjusts the windows.
func (s *Scheduler[In, Out]) onTick() {
	now := s.clock.Now()
	s.mu.Lock()
	expired := s.mu.core.Expire(now)
	for _, it := range expired {
		s.finishLocked(it.Payload.(*Job[In, Out]))
	}
	s.mu.core.Adjust(now)
	s.mu.blocked = [len(s.mu.blocked)]bool{}
	s.publishLocked()
	s.mu.Unlock()
	for _, it := range expired {
		j := it.Payload.(*Job[In, Out])
		s.releasePermit(j.permit)
		j.deliver(Result[Out]{Err: ErrQueueWaitExceeded, QueueWait: now.Sub(it.EnqueuedAt), DoneAt: now})
	}
}

// dispatchNow dispatches on the calling goroutine, or, when another
// goroutine is dispatching, makes it look once more before it stops.
func (s *Scheduler[In, Out]) dispatchNow() {
	s.again.Store(true)
	for s.again.Load() && s.dispatching.TryLock() {
		s.again.Store(false)
		s.dispatch()
		s.dispatching.Unlock()
	}
}

// dispatch starts jobs while the core allows (and, with Deps.MaxRunning,
// while fewer than that many run).
//
// REQUIRES: s.dispatching held.
func (s *Scheduler[In, Out]) dispatch() {
	first := s.first
	s.first = (first + 1) % len(s.classes)
	for i := range s.classes {
		c := s.classes[(first+i)%len(s.classes)]
		for {
			now := s.clock.Now()
			s.mu.Lock()
			if s.deps.MaxRunning > 0 && s.activeLocked() >= s.deps.MaxRunning {
				s.mu.Unlock()
				return
			}
			if len(s.mu.paused) > 0 { // a paused job takes the slot first
				p := s.mu.paused[0]
				s.mu.paused = s.mu.paused[1:]
				s.mu.Unlock()
				p.resume <- struct{}{}
				continue
			}
			if s.mu.state != stateRunning || s.mu.blocked[c] {
				s.mu.Unlock()
				break
			}
			it, ok := s.mu.core.Next(now, c)
			if !ok {
				s.publishLocked()
				s.mu.Unlock()
				break
			}
			j := it.Payload.(*Job[In, Out])
			j.state = jobStarting
			s.publishLocked()
			s.mu.Unlock()
			s.start(j, now.Sub(it.EnqueuedAt))
		}
	}
}

// Pause is called by the executor of running job j, on its goroutine, at
// a safe point of its guest (the node: every fuel slice). When every
// running slot (Deps.MaxRunning) is taken and a newcomer that the fairness
// rule puts ahead of j waits in j's lane (Core.Overtaken), j gives its
// slot to the newcomer, which starts at once, and Pause returns when a
// slot is free again: paused jobs resume before anything new is
// dispatched. j keeps its cell and its permit meanwhile, and pauses at
// most once. Otherwise Pause returns at once. It also returns when ctx
// (the executor's context) ends, so a paused guest sees its cancellation.
// It returns how long j was paused (zero: it was not), which is queue time
// to the scheduler (Result.Paused) and not the guest's execution.
//
// Without it, a quiet tenant's request waits for the rest of the guest
// that holds the slot, up to its whole run, however fair the queue.
func (s *Scheduler[In, Out]) Pause(ctx context.Context, j *Job[In, Out]) time.Duration {
	if s.deps.MaxRunning <= 0 {
		return 0
	}
	s.mu.Lock()
	if j.paused || j.state != jobRunning || s.mu.state != stateRunning || ctx.Err() != nil || s.mu.blocked[j.item.Cell] ||
		s.activeLocked() < s.deps.MaxRunning {
		s.mu.Unlock()
		return 0
	}
	// The clock only once a pause is possible: this runs at every fuel
	// check of every guest.
	now := s.clock.Now()
	it, ok := s.mu.core.NextOvertaking(now, &j.item)
	if !ok {
		s.mu.Unlock()
		return 0
	}
	next := it.Payload.(*Job[In, Out])
	next.state = jobStarting
	j.paused, j.resume = true, make(chan struct{}, 1) // once per job
	s.mu.paused = append(s.mu.paused, j)
	s.mu.handoffs++ // until next is running (or did not start)
	s.publishLocked()
	s.mu.Unlock()
	s.pauses.Add(1)
	// Pause runs inside the guest's host call, where the runner recovers
	// panics: a broken invariant of the core (must) must still end the
	// process, not leave mu held.
	defer crashOnPanic()
	s.start(next, now.Sub(it.EnqueuedAt))
	s.mu.Lock()
	s.mu.handoffs--
	s.mu.Unlock()
	s.dispatchNow() // resumes j at once if next did not start
	select {
	case <-j.resume:
	case <-ctx.Done():
		s.mu.Lock()
		if i := slices.Index(s.mu.paused, j); i >= 0 {
			s.mu.paused = slices.Delete(s.mu.paused, i, i+1)
		} // else a dispatch resumed it meanwhile: its slot is taken
		s.mu.Unlock()
	}
	j.pausedFor = s.clock.Now().Sub(now)
	return j.pausedFor
}

// activeLocked is the number of running slots taken: running jobs that are
// not paused, and newcomers a Pause is starting.
//
// REQUIRES: s.mu held.
func (s *Scheduler[In, Out]) activeLocked() int {
	return len(s.mu.running) - len(s.mu.paused) + s.mu.handoffs
}

// crashOnPanic re-raises a panic on a goroutine of its own, where nothing
// recovers it: the process ends.
func crashOnPanic() {
	if r := recover(); r != nil {
		go panic(r) // owned by nobody on purpose: it ends the process
	}
}

// start takes a dispatched job to a running executor: immediately before
// leasing a cell it checks the caller's cancellation and EnsureSchedulable;
// after the lease it calls StartExecution. Without a cell the job goes back
// to the head of its queue.
func (s *Scheduler[In, Out]) start(j *Job[In, Out], wait time.Duration) {
	class := j.item.Cell
	if j.ctx.Err() != nil {
		s.abort(j, ErrCancelled.withCause(context.Cause(j.ctx)), wait, true)
		return
	}
	if err := j.permit.EnsureSchedulable(); err != nil {
		s.abort(j, errors.Wrap(err, "scheduler: start"), wait, true)
		return
	}
	cell, err := s.deps.Cells.TryLease(class)
	if err != nil || cell == nil {
		s.mu.Lock()
		s.must(s.mu.core.Requeue(&j.item))
		j.state = jobQueued
		s.mu.blocked[class] = true
		gone := j.ctx.Err() != nil // the caller left while the job was starting
		s.mu.Unlock()
		if gone {
			s.callerGone(j)
		}
		return
	}
	xp, err := j.permit.StartExecution()
	if err != nil {
		// StartExecution released the reservation; the unused cell goes back.
		if cell.Release(false) != nil {
			s.mu.Lock()
			s.mu.core.LoseCell(class)
			s.mu.Unlock()
		}
		s.abort(j, errors.Wrap(err, "scheduler: start"), wait, false)
		return
	}
	ctx, cancel := context.WithCancelCause(j.ctx)
	s.mu.Lock()
	j.state = jobRunning
	j.cancel = cancel
	s.mu.running[j] = struct{}{}
	s.execs.Add(1)
	s.mu.Unlock()
	if j.run != nil {
		j.run <- startedJob{ctx: ctx, xp: xp, cell: cell, wait: wait} // Do's caller runs it
		return
	}
	go s.execute(ctx, j, xp, cell, wait)
}

// abort finishes a dispatched job that did not start.
func (s *Scheduler[In, Out]) abort(j *Job[In, Out], err error, wait time.Duration, release bool) {
	s.mu.Lock()
	s.must(s.mu.core.Abort(&j.item))
	s.finishLocked(j)
	s.mu.Unlock()
	if release {
		s.releasePermit(j.permit)
	}
	j.deliver(Result[Out]{Err: err, QueueWait: wait, DoneAt: s.clock.Now()})
}

// execute runs one job on its cell; the Run loop waits for it (execs).
func (s *Scheduler[In, Out]) execute(ctx context.Context, j *Job[In, Out], xp *admission.ExecutionPermit, cell Cell, wait time.Duration) {
	defer s.execs.Done()
	class := j.item.Cell
	start := s.clock.Now()
	comp, perr := s.runExecutor(ctx, j, xp, cell)
	end := s.clock.Now()
	executed := end.Sub(start) - j.pausedFor
	quarantine := comp.Quarantine || perr != nil
	lost := cell.Release(quarantine) != nil || quarantine
	if xp.Release() != nil {
		s.permitErrors.Add(1)
	}
	j.cancel(nil)
	s.mu.Lock()
	s.must(s.mu.core.Done(end, &j.item, comp.FuelUsed, executed))
	if lost {
		s.mu.core.LoseCell(class)
	}
	delete(s.mu.running, j)
	s.mu.blocked[class] = false
	s.finishLocked(j)
	s.mu.Unlock()
	// The freed slot goes to the next job before this one's result: its
	// guest starts while this caller answers.
	s.dispatchNow()
	res := Result[Out]{Completion: comp, QueueWait: wait, Execution: executed, Paused: j.pausedFor}
	if perr != nil {
		res.Err = perr
	}
	res.DoneAt = s.clock.Now()
	j.deliver(res)
}

// runExecutor calls the executor, turning a panic into ErrExecutorPanicked
// (the cell is then quarantined and the permit released as usual).
func (s *Scheduler[In, Out]) runExecutor(ctx context.Context, j *Job[In, Out], xp *admission.ExecutionPermit, cell Cell) (comp Completion[Out], err error) {
	defer func() {
		if r := recover(); r != nil {
			comp, err = Completion[Out]{}, ErrExecutorPanicked.withCause(errors.Newf("%v", r))
		}
	}()
	return s.deps.Exec.Execute(ctx, j, xp, cell), nil
}

// must panics on a broken invariant of the core: continuing would corrupt
// the accounting of cells and permits.
func (s *Scheduler[In, Out]) must(err error) {
	if err != nil {
		panic(err)
	}
}

// shutdown drops queued jobs, gives running ones the grace period, then
// cancels them and waits for every executor.
func (s *Scheduler[In, Out]) shutdown() {
	now := s.clock.Now()
	s.mu.Lock()
	s.mu.state = stateStopping
	drained := s.mu.core.Drain()
	for _, it := range drained {
		s.finishLocked(it.Payload.(*Job[In, Out]))
	}
	s.publishLocked()
	s.mu.Unlock()
	for _, it := range drained {
		j := it.Payload.(*Job[In, Out])
		s.releasePermit(j.permit)
		j.deliver(Result[Out]{Err: ErrShuttingDown, QueueWait: now.Sub(it.EnqueuedAt), DoneAt: now})
	}

	done := make(chan struct{})
	go func() { // owned: shutdown waits for done below
		s.execs.Wait()
		close(done)
	}()
	if s.deps.ShutdownGrace > 0 {
		t := time.NewTimer(s.deps.ShutdownGrace)
		select {
		case <-done:
		case <-t.C:
		}
		t.Stop()
	}
	select {
	case <-done:
	default:
		s.mu.Lock()
		for j := range s.mu.running {
			j.cancel(ErrShuttingDown)
		}
		s.mu.Unlock()
		<-done
	}
	s.mu.Lock()
	s.mu.state = stateStopped
	s.mu.Unlock()
}

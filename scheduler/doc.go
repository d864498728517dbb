// Package scheduler owns what happens between an admission permit and a
// running cell: fair queues per cell class and queue class, the order of
// queue classes (lanes), the cells each class may use, the fair share of a
// full queue's pending slots, expiry, and an adaptive concurrency window.
// Its core is a synchronous state machine that takes the time as an
// argument and starts nothing; a thin driver owns the permits of queued work
// and every goroutine. It reaches cells and the runner through interfaces it
// defines (CellSource, Cell, Executor) that the node implements.
//
// # Non-goals
//
// The scheduler does not admit (admission reserved the capacity and chose
// the cell class and queue class; the scheduler only orders what admission
// let in), does not execute or meter guests (the Executor does), does not
// stop a running guest to take its cell (it may only pause it, at the
// executor's request, for a newcomer; see The driver), and does not weigh
// tenants: every tenant of a lane has the same weight, as does every
// principal of a tenant. Fairness is per lane (cell class × queue class)
// and per node.
//
// # The fairness rule
//
// Within a lane, tenants share the cells; within a tenant, its principals
// share the tenant's turn; within a principal, items run in FIFO order. The
// same rule applies at both levels; here it is for tenants.
//
// Each tenant with work in the lane has an attained service S (fuel units
// in the default fuel mode, dispatches in round-robin mode) and a round-robin
// sequence number. The lane keeps a virtual time V: the start tag (S before
// the charge) of its last dispatch.
//
//  1. Dispatch: take the backlogged tenant with the least S (ties: the one
//     dispatched least recently), its backlogged principal with the least S,
//     and that principal's oldest item. Charge both S the item's cost c.
//  2. Catch-up: a tenant that becomes backlogged (its first waiting item)
//     starts at S ← max(S, V). A tenant seen for the first time, or again
//     after its state was dropped, starts at V.
//  3. Correction (fuel mode): c is an estimate, the moving average (α = 0.2)
//     of the fuel the principal's completed activations used, else its
//     tenant's in this lane, else the cell class's, else 1 (so before any
//     completion every activation is charged the same). At completion S is
//     corrected by actual − c, so once nothing is in flight S is exactly the
//     fuel the tenant consumed; an item that never ran (its caller left, its
//     permit expired, no cell) is refunded. In round-robin mode c = 1 and
//     nothing is corrected.
//
// Why this is max-min fair. Consider the tenants backlogged at some moment
// and C, the largest charge of one item. Claim: their attained services lie
// within C of each other, S_max − S_min ≤ C. It holds when one tenant is
// backlogged. A dispatch takes the tenant at S_min and raises it to
// S_min + c ≤ S_min + C, and the new minimum is at least the old one, so
// the spread stays within C. A tenant leaving the backlog only removes a
// value. A tenant joining starts at max(S, V), where V, the start tag of the
// last dispatch, was the minimum of the backlogged tenants then and is at
// most their minimum now; if it starts at its own higher S it already had
// more than V and must wait, which is the point: service it got is never
// forgotten while it stays known, and idle time is never banked (it cannot
// start below V to claim service for a past it did not ask for). So while
// tenants stay backlogged, their service grows at the same rate up to a
// lag of C, whatever their arrival rates: each gets an equal part of what
// the non-backlogged tenants leave. A tenant that asks for less than that
// part is not backlogged for long: its S falls behind, it starts at most at
// V, and its next item goes first — it gets its whole demand. Equal parts
// for the saturated, full demand for the others: that is the max-min fair
// (water-filling) allocation, in fuel, that is CPU. Within a tenant, the
// same argument splits the tenant's service among its principals.
//
// What bounds the lag. Between two backlogged tenants, C plus the error of
// the estimates still in flight (at most one per cell: with p cells, p·E
// for an estimate error E); a tenant with activations ten times costlier is
// charged ten times more per dispatch, so it gets a tenth of the dispatches
// and the same fuel. In time, a tenant that becomes backlogged is dispatched
// at the next free cell unless tenants tied at V come first; without a
// pause (below) the bound is one activation per cell. Tags are int64
// and are shifted down when V passes 2⁶⁰, which keeps their order.
//
// Where it stops: fairness is per lane (a tenant using two queue classes or
// cell classes is counted separately in each), estimates are averages (an
// activation's fuel is only known when it completes), and every tenant has
// the same weight.
//
// # Lanes
//
// Queue classes are served by priority, highest range first, but a class
// with waiting work is served after at most LowerClassAfter (K) consecutive
// dispatches of higher classes onto shared cells. Each class keeps skipped,
// the number of such dispatches since it was last served; it is reset when
// the class is served or has nothing waiting. Next considers the classes
// that have work and a cell they may use; among those whose skipped reached
// K it takes the lowest, otherwise the highest.
//
// Proof that skipped never exceeds K: skipped of class r grows only when a
// class q above r dispatches onto a shared cell while r waits. If skipped
// were K at that moment, a shared cell was free, so r was eligible and
// starving, and the choice was the lowest starving class — r or one below
// it, never q. So it stays at most K. Dispatches onto a class's own reserved
// cells do not count: no other class could have used those cells. With no
// reserved cells, every dispatch counts, and no waiting class ever sees more
// than K consecutive dispatches of higher classes. A failed lease counts as
// its class's turn (a reset only shortens a run). TestLanes_bound checks it
// over 10⁶ random schedules (10⁵ under -short or the race detector).
//
// # Cells
//
// Each cell class has Parallelism cells. Each queue class owns ReservedCells
// of them (in every cell class); the rest are shared. A class may start an
// item while it runs fewer than its reserved cells (its first items count
// against them), or while the shared cells in use are fewer than W − Σreserved,
// where W is the adaptive window, in [Σreserved + 1, usable]: a class without
// reserved cells always keeps at least one shared cell. A cell the executor
// quarantines (or whose release fails) leaves service: usable shrinks, and
// when no more cells are usable than are reserved, reservations are
// suspended so every class can still run. With no usable cell,
// ObservedQueueDelay reports the largest duration and admission refuses the
// class's work as infeasible.
//
// # Pending slots and expiry
//
// A queue class's MaxQueued pending slots are shared fairly
// (Core.YieldSlotTo). When admission refuses an arrival for the class's capacity,
// the node calls YieldSlotTo: with n the principals waiting in the class
// (across cell classes) counting the arrival, and share = MaxQueued ÷ n, an
// arrival holding fewer than its share takes the slot of the newest waiter
// of the principal holding the most, if that one holds more than its share
// (ties: the holder whose newest waiter is newest). The victim gets
// ErrFairShare (429, retryable); the node admits the arrival again. A
// principal alone may hold every slot, and the total never grows. An item
// that has waited MaxWait is removed with ErrQueueWaitExceeded (429,
// retryable); the driver expires every Tick, so nothing waits longer than
// MaxWait plus one tick.
//
// # Adaptive concurrency
//
// Per cell class with a TargetServiceTime (the execution time per 1M fuel
// that is healthy; 0 disables), the core keeps moving averages (α = 0.2 per
// completion) of execution time and of fuel; their ratio is the time per
// fuel, each activation weighted by its fuel, so heavy guests do not look
// like host contention and tiny ones' fixed overhead does not dominate.
// Once per AdjustInterval: if the interval saw completions and the ratio is
// above target, W ← max(Σreserved+1, ⌊0.7·W⌋); else if the window held back
// waiting work during the interval, W ← min(W+1, usable). A refinement
// against the AIMD saw-tooth under steady contention: when a cut follows a
// regrowth (the window that was cut is confirmed too large), growing back to
// it waits 10·2^(k−1) intervals (at most 160) for the k-th such cut in a
// row; reaching it healthy clears the record. A transient step is unaffected:
// after one cut the window regrows by one per interval straight back.
//
// The moving average of queue wait per cell class (ObservedQueueDelay) feeds
// admission's deadline feasibility (admission.QueueDelaySource).
//
// # The driver
//
// Scheduler wraps a Core with a mutex. It is generic over the job's input
// In and the executor's outcome Out (Scheduler[In, Out], Job[In, Out],
// Executor[In, Out], Completion[Out], Result[Out]): the node's executor gets
// its input and the caller its outcome without a type assertion. The Core
// is not generic: its Item carries the driver's *Job as an untyped
// Payload, which only the driver reads.
//
// Submit enqueues a Job, which owns its admission permit from then on (on
// failure Submit releases it); Do does the same and then waits, running
// the job on its own goroutine once it is dispatched. Dispatch happens on
// the Run loop, on Do's callers and on finishing executors, one at a time:
// for each item Next returns it checks the caller's
// context and the permit's EnsureSchedulable immediately before leasing a
// cell (failure: the permit is released, the charge refunded), leases with
// TryLease (failure: the job goes back to the head of its queue, and the
// class waits for a completion or a tick), and calls StartExecution (failure:
// the unused cell goes back; admission released the reservation). A
// submitted job's executor runs in a goroutine that Run waits for, a job of
// Do on Do's caller; afterwards the cell is
// released (or quarantined), then the execution permit, then the result is
// delivered on Job.Done. A caller that goes away while its job waits gets
// ErrCancelled and its permit is released at once; while its job runs, the
// executor's context (derived from the caller's) ends and the permit stays
// until the executor returned. When Run's context ends: Submit refuses with
// ErrShuttingDown, queued jobs get ErrShuttingDown (503, retryable) and
// their permits are released, running jobs have Deps.ShutdownGrace, then
// their contexts end with cause ErrShuttingDown; Run returns after every
// executor returned. Every job gets exactly one result.
//
// Pauses. With Deps.MaxRunning, a cell may be free while every running
// slot is taken: a newcomer then waits for the rest of a running guest,
// however fair the queue. The executor calls Pause at its guest's safe
// points (the node: every fuel slice); when the core says the job is
// overtaken (Core.Overtaken: the first tenant of the job's lane became
// backlogged after the job's dispatch, has nothing running there and had
// attained no more service than the job's tenant at that dispatch), Pause
// dispatches the next item of the job's own lane into its slot and waits
// until a slot is free again. Paused jobs keep their cells and permits,
// resume before anything new is dispatched, pause at most once, and stop
// waiting when their context ends (a cancelled job does not pause); the
// time paused is not execution time, but the job's deadline keeps running.
// The lane remembers the attained service of the last tenant that
// overtook and went idle ahead of the virtual time (one per lane), so a
// client with one request at a time does not get two items to a
// backlogged tenant's one. Tenants that
// stay backlogged were so before each other's dispatches and never pause
// each other: a pause costs a newcomer's arrival, at most one per job.
//
// Lock order: Scheduler.mu is a leaf, never held while calling admission,
// the CellSource, a Cell or the Executor. ObservedQueueDelay reads atomics,
// so admission may call it under its own lock.
//
// # Internal organization
//
//   - config.go: Config, its defaults and its one validation (ConfigError
//     names each key).
//   - core.go: Core and Item: Enqueue, Next, Done, Abort, Requeue, Remove,
//     Expire, Drain; lanes and cell classes.
//   - fairq.go: the flow tree of one lane (lane → tenants → principals →
//     FIFO), its heaps and tags; the pool that recycles idle flows.
//   - itemlist.go: the intrusive lists an Item is on (its principal's
//     FIFO, its holder's waiters, its cell class's waiters).
//   - pending.go: holders and YieldSlotTo.
//   - adaptive.go: capacity (reserved, shared, window), Adjust, Stats.
//   - scheduler.go: the driver: Scheduler, Job, Result, Deps and the
//     interfaces the node implements (Clock, CellSource, Cell, Executor).
//   - errors.go: Error and its sentinels.
//
// Memory is bounded by what waits and runs: tenant and principal state is
// dropped (into a bounded pool) when nothing of it waits or runs, a holder
// when nothing of it waits; refused work leaves nothing behind.
//
// # Usage
//
//	// exec implements Executor[*invocation, runner.Outcome].
//	s, err := scheduler.New(cfg, scheduler.Deps[*invocation, runner.Outcome]{Cells: cells, Exec: exec, ShutdownGrace: grace})
//	// Don't forget to Run it: one actor in cmd's run group.
//	g.Add(func() error { return s.Run(ctx) }, func(error) { cancel() })
//	prov, err := admission.NewLocalQuotaProvider(policy, admission.Options{…, QueueDelay: s})
//	// per request:
//	permit, err := ctrl.Admit(req)
//	var rej *admission.Rejection
//	if errors.As(err, &rej) && rej.Scope == refusal.ScopeQueueClass && rej.Dimension == refusal.DimQueued &&
//		s.YieldSlotTo(queueIndex, tenant, subject) {
//		permit, err = ctrl.Admit(req) // a slot was freed for this arrival
//	}
//	job, err := s.Submit(ctx, permit, input) // the job owns the permit
//	res := <-job.Done()                      // res.Err, or res.Completion.Outcome (a runner.Outcome)
//	// or, running the guest on this goroutine:
//	job, res, err := s.Do(ctx, permit, input, arrived)
package scheduler

// The activation's host-side state and the fuel host module (tick, grow,
// depth_exceeded); stdin.

package runner

import (
	"context"
	"io"
	"strings"
	"time"

	"github.com/cockroachdb/errors"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/sys"

	"github.com/latent-node/latent-node/runner/internal/canon"
	"github.com/latent-node/latent-node/runner/internal/fuel"
	"github.com/latent-node/latent-node/runner/internal/wasiio"
	"github.com/latent-node/latent-node/vocab"
)

// activation is the host-side state of one running guest. Host functions
// find it in the call's context.
type activation struct {
	ctx       context.Context // the caller's context (cancellation), carrying the activation
	deadline  time.Time       // the permit's deadline, bound at admission
	started   time.Time       // when the runner took the activation: the origin of its monotonic clock
	remaining uint64          // fuel not yet handed to the guest
	budget    uint64
	slice     uint64
	onSlice   func()               // Config.OnSlice
	pause     func() time.Duration // Input.OnSlice
	paused    time.Duration        // what pause held the guest, left out of its execution time
	mod       api.Module           // set after instantiation

	// grant is the activation's memory grant in bytes: linear memory, the
	// tables and the call stack together; tableBytes is the module's
	// fuel.Info.TableBytes. stack and stackLow are the module's stack
	// globals (fuel.StackExport, fuel.StackLowExport): what the guest may
	// still take, grant minus linear memory minus the tables minus the
	// stack in use, and the lowest that has been. nil until set after
	// instantiation.
	grant      uint64
	tableBytes uint64
	stack      api.MutableGlobal
	stackLow   api.MutableGlobal
	memRefused bool

	input   []byte // stdin; the guest has read input[:inputAt]
	inputAt int
	stdout  wasiio.Stdout
	stderr  wasiio.StderrTail
	args    wasiio.List
	environ wasiio.List

	// random and revision choose random_get's seed (see binding.seed).
	random   vocab.Randomness
	revision vocab.RevisionID
}

type activationKey struct{}

func activationFrom(ctx context.Context) *activation {
	a, _ := ctx.Value(activationKey{}).(*activation)
	if a == nil {
		panic(errors.AssertionFailedf("runner: host function called outside an activation"))
	}
	return a
}

// stopAt returns the typed stop that applies at now: errDeadline once the
// permit's deadline (or a deadline of the caller's context) has passed,
// errCancelled once the caller's context ended, nil otherwise.
func (a *activation) stopAt(now time.Time) error {
	if !now.Before(a.deadline) {
		return errDeadline
	}
	switch err := a.ctx.Err(); {
	case err == nil:
		return nil
	case errors.Is(err, context.DeadlineExceeded):
		return errDeadline
	}
	return errCancelled
}

// executionTime is the activation's execution time at stopped: the wall
// time since it started, less the pauses for other guests.
func (a *activation) executionTime(stopped time.Time) time.Duration {
	return max(stopped.Sub(a.started)-a.paused, 0)
}

// fuelGlobal returns the calling module's fuel global.
func fuelGlobal(mod api.Module) api.MutableGlobal {
	g, ok := mod.ExportedGlobal(fuel.FuelExport).(api.MutableGlobal)
	if !ok {
		panic(errors.AssertionFailedf("runner: instrumented module without a mutable fuel global"))
	}
	return g
}

// tick is the fuel slow path: the guest's fuel global went negative. It checks
// the run context (deadline, cancellation) and hands out the next slice of
// the budget, trapping with errFuelExhausted when the budget cannot cover
// the debt. It is also the guest's only regular safe point for Go's
// scheduler and garbage collector.
func tick(ctx context.Context, mod api.Module, _ []uint64) {
	if tickHook != nil {
		tickHook()
	}
	a := activationFrom(ctx)
	if a.onSlice != nil {
		a.onSlice()
	}
	if a.pause != nil {
		a.paused += a.pause()
	}
	if err := a.stopAt(time.Now()); err != nil {
		panic(err)
	}
	g := fuelGlobal(mod)
	cur := a.cover(int64(g.Get()))
	g.Set(uint64(cur))
	if cur < 0 {
		panic(errFuelExhausted)
	}
}

// cover hands out slices of the budget while the guest's fuel cur is
// negative and budget remains, and returns the fuel then: negative when
// the budget could not cover the debt.
func (a *activation) cover(cur int64) int64 {
	for cur < 0 && a.remaining > 0 {
		give := min(a.slice, a.remaining)
		a.remaining -= give
		cur += int64(give)
	}
	return cur
}

// tickHook, when set by a test, is called on every slow-path entry.
var tickHook func()

// settle accounts for the fuel the guest spent after its last check, once
// it has stopped with err: the rewrite checks the fuel only at function
// entries, back edges, host calls and the exits of some functions, so a
// guest can stop (trap, or in principle return) with the global negative.
// settle then hands out slices as tick would, and when the budget cannot
// cover the debt the activation ran out of fuel before it stopped: it
// returns errFuelExhausted in place of a return, an exit or a trap. The
// typed stops the host raised itself (deadline, cancellation, fuel, call
// depth) and host failures keep their err. Deterministic: whether the debt
// is covered depends only on the fuel charged and the budget.
func (a *activation) settle(err error) error {
	if a.mod == nil {
		return err
	}
	g, ok := a.mod.ExportedGlobal(fuel.FuelExport).(api.MutableGlobal)
	if !ok {
		return err
	}
	cur := a.cover(int64(g.Get()))
	g.Set(uint64(cur))
	if cur >= 0 || !guestStop(err) {
		return err
	}
	if err == nil {
		return errors.Wrap(errFuelExhausted, "runner: the guest's last checks did not cover its fuel")
	}
	return errors.Wrapf(errFuelExhausted, "runner: the guest ran out of fuel before it stopped (%v)", err)
}

// guestStop reports whether err is how the guest stopped on its own: a
// return (nil), an exit or a trap of the guest's code.
func guestStop(err error) bool {
	var exit *sys.ExitError
	switch {
	case err == nil, errors.As(err, &exit), errors.Is(err, canon.ErrTrap):
		return true
	case errors.Is(err, errFuelExhausted), errors.Is(err, errDeadline), errors.Is(err, errCancelled), errors.Is(err, errCallDepth):
		return false
	}
	msg := err.Error()
	return strings.HasPrefix(msg, "wasm error: ") || strings.HasPrefix(msg, "stack overflow")
}

// Host work is charged to the guest's fuel: hostCallFuel for a call that
// does a fixed amount of work (a clock read, a sleep, a yield), and one
// unit per 1<<ioShift bytes for work proportional to its size (stdin,
// stdout, random_get). The call operator itself costs 1 more.
const (
	hostCallFuel = 1
	ioShift      = 6
)

// hostCallsFree, when set by a test, makes clocks, sleeps, yields and
// random_get charge nothing: the baseline that shows what they charge.
var hostCallsFree bool

// chargeHostCall charges n for a host call made on the guest's behalf.
func (a *activation) chargeHostCall(n uint64) {
	if !hostCallsFree {
		a.charge(a.ctx, n)
	}
}

// charge takes n units from the guest's fuel (host work done on its behalf),
// running the slow path when that empties the global.
func (a *activation) charge(ctx context.Context, n uint64) {
	if a.mod == nil || n == 0 {
		return
	}
	g := fuelGlobal(a.mod)
	g.Set(uint64(int64(g.Get()) - int64(n)))
	if int64(g.Get()) < 0 {
		tick(ctx, a.mod, nil)
	}
}

// grow replaces memory.grow: it grows memory 0 by delta pages if linear
// memory, the new pages, the tables and the call stack in use fit in the
// activation's grant together, which is when the stack global (what the guest may still
// take) covers the new pages. On success it takes the pages from the stack
// global and its low-water mark and charges one unit of fuel per page; a
// refusal is recorded so the outcome says memory-exhausted instead of a
// silent -1.
// MaxStackReserve bounds the part of the grant memory.grow leaves to the
// call stack (see stackReserve).
const MaxStackReserve = 1 << 20

// stackReserve is how much of the grant memory.grow keeps free for the call
// stack: an eighth of the grant, at most MaxStackReserve. A guest that grows
// its memory up to the cap then gets -1 from memory.grow, its ordinary
// out-of-memory path, with room left to report it, instead of running out
// of stack on its next call.
func stackReserve(grant uint64) uint64 { return min(grant/8, MaxStackReserve) }

func grow(ctx context.Context, mod api.Module, stack []uint64) {
	a := activationFrom(ctx)
	delta := uint32(stack[0])
	mem := mod.Memory()
	if mem == nil || a.stack == nil {
		stack[0] = api.EncodeI32(-1)
		return
	}
	bytes := int64(delta) * vocab.WasmPageBytes
	avail := int64(a.stack.Get())
	if bytes > max(avail-int64(stackReserve(a.grant)), 0) {
		a.memRefused = true
		stack[0] = api.EncodeI32(-1)
		return
	}
	prev, ok := mem.Grow(delta)
	if !ok {
		a.memRefused = true
		stack[0] = api.EncodeI32(-1)
		return
	}
	avail -= bytes
	a.stack.Set(uint64(avail))
	if avail < int64(a.stackLow.Get()) {
		a.stackLow.Set(uint64(avail))
	}
	stack[0] = api.EncodeI32(int32(prev))
	if delta > 0 {
		a.charge(ctx, uint64(delta))
	}
}

// depthExceeded traps: the guest's call stack budget is spent.
func depthExceeded(context.Context, api.Module, []uint64) {
	panic(errCallDepth)
}

// instantiateHost defines the fuel host module in rt.
func instantiateHost(ctx context.Context, rt wazero.Runtime) error {
	_, err := rt.NewHostModuleBuilder(fuel.ImportModule).
		NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(tick), nil, nil).Export(fuel.TickName).
		NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(grow), []api.ValueType{api.ValueTypeI32}, []api.ValueType{api.ValueTypeI32}).Export(fuel.GrowName).
		NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(depthExceeded), nil, nil).Export(fuel.DepthName).
		Instantiate(ctx)
	return errors.Wrap(err, "runner: define the fuel host module")
}

// readInput is the guest's stdin: the input, charged as it is read.
func (a *activation) readInput(p []byte) (int, error) {
	if a.inputAt >= len(a.input) {
		return 0, io.EOF
	}
	n := copy(p, a.input[a.inputAt:])
	a.inputAt += n
	a.charge(a.ctx, uint64(n)>>ioShift)
	return n, nil
}

// nanosleep sleeps for the guest (poll_oneoff, sched) but wakes at the
// deadline or when the caller goes away; the next tick then stops the guest.
func (a *activation) nanosleep(ns int64) {
	d := min(time.Duration(ns), time.Until(a.deadline))
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-a.ctx.Done():
	}
}

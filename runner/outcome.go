package runner

import (
	"strings"
	"time"

	"github.com/cockroachdb/errors"
	"github.com/tetratelabs/wazero/sys"
)

// Kind is the outcome of one activation.
type Kind string

// Outcome kinds (the `Latent-Outcome` header values).
const (
	Success          Kind = "success"
	DeclaredError    Kind = "declared-error"
	Trap             Kind = "trap"
	FuelExhausted    Kind = "fuel-exhausted"
	MemoryExhausted  Kind = "memory-exhausted"
	OutputExceeded   Kind = "output-exceeded"
	DeadlineExceeded Kind = "deadline-exceeded"
	Cancelled        Kind = "cancelled"
	PlatformFailure  Kind = "platform-failure"
)

// Trap kinds.
const (
	TrapUnreachable        = "unreachable"
	TrapDivideByZero       = "integer-divide-by-zero"
	TrapIntegerOverflow    = "integer-overflow"
	TrapOutOfBounds        = "out-of-bounds-memory-access"
	TrapInvalidTableAccess = "invalid-table-access"
	TrapIndirectCall       = "indirect-call-type-mismatch"
	TrapInvalidConversion  = "invalid-conversion-to-integer"
	TrapStackOverflow      = "stack-overflow"
	TrapCallDepth          = "call-depth-exceeded"
	TrapOther              = "other"
)

// Outcome is what one activation did.
type Outcome struct {
	Kind     Kind
	ExitCode uint32 // for DeclaredError
	TrapKind string // for Trap
	// FuelUsed is exact and deterministic for the same module, input and grant.
	FuelUsed uint64
	// MemoryPeakBytes is the largest linear memory the guest had.
	MemoryPeakBytes uint64
	// ExecutionTime is the wall time from instantiation to the guest's stop.
	ExecutionTime time.Duration
	Stdout        []byte
	StderrTail    []byte
	// Quarantine is set when the cell's state is uncertain (platform
	// failure): the caller must release the lease with Quarantine.
	Quarantine bool
	// Err is the internal cause, for logs only; never show it to callers.
	Err error
}

// Typed stops raised by the host side of an activation. They travel through
// wazero as panics and come back wrapped in the error of the call.
var (
	errFuelExhausted = errors.New("runner: fuel exhausted")
	errDeadline      = errors.New("runner: deadline exceeded")
	errCancelled     = errors.New("runner: cancelled")
	errCallDepth     = errors.New("runner: call depth exceeded")
)

// trapKinds maps wazero's trap messages (internal error types, so matched by
// text; the wazero version is pinned and a test covers each) to trap kinds.
var trapKinds = []struct{ text, kind string }{
	{"unreachable", TrapUnreachable},
	{"integer divide by zero", TrapDivideByZero},
	{"integer overflow", TrapIntegerOverflow},
	{"out of bounds memory access", TrapOutOfBounds},
	{"invalid table access", TrapInvalidTableAccess},
	{"out of bounds table access", TrapInvalidTableAccess},
	{"indirect call type mismatch", TrapIndirectCall},
	{"invalid conversion to integer", TrapInvalidConversion},
	{"stack overflow", TrapStackOverflow},
}

// classify turns the result of running _start into an outcome kind. Order:
// what the host observed (deadline, cancellation, fuel, output, memory)
// wins over how the guest stopped.
func classify(a *activation, err error, stopped time.Time) (Kind, uint32, string) {
	late := a.stopAt(stopped)
	switch {
	case errors.Is(err, errDeadline):
		return DeadlineExceeded, 0, ""
	case errors.Is(err, errCancelled):
		return Cancelled, 0, ""
	case late != nil:
		// The guest stopped on its own, but after its deadline or after its
		// caller went away (for example woken early from a sleep).
		if errors.Is(late, errDeadline) {
			return DeadlineExceeded, 0, ""
		}
		return Cancelled, 0, ""
	case errors.Is(err, errFuelExhausted):
		return FuelExhausted, 0, ""
	case a.stdout.overflow:
		return OutputExceeded, 0, ""
	case a.memRefused:
		return MemoryExhausted, 0, ""
	case errors.Is(err, errCallDepth):
		return Trap, 0, TrapCallDepth
	}
	if err == nil {
		return Success, 0, ""
	}
	var exit *sys.ExitError
	if errors.As(err, &exit) {
		if exit.ExitCode() == 0 {
			return Success, 0, ""
		}
		return DeclaredError, exit.ExitCode(), ""
	}
	msg := err.Error()
	// Instantiation traps of the guest's own making (a data or element
	// segment out of bounds) read "data[i]: …" or "elem[i]: …".
	if strings.HasPrefix(msg, "wasm error: ") || strings.HasPrefix(msg, "stack overflow") ||
		strings.HasPrefix(msg, "data[") || strings.HasPrefix(msg, "elem[") {
		for _, t := range trapKinds {
			if strings.Contains(msg, t.text) {
				return Trap, 0, t.kind
			}
		}
		return Trap, 0, TrapOther
	}
	return PlatformFailure, 0, ""
}

// Outcome, Kind and the trap kinds, and classify, which turns what the
// host observed and how the guest stopped into an outcome.

package runner

import (
	"strings"
	"time"

	"github.com/cockroachdb/errors"
	"github.com/tetratelabs/wazero/sys"

	"github.com/latent-node/latent-node/refusal"
	"github.com/latent-node/latent-node/runner/httpabi"
	"github.com/latent-node/latent-node/runner/internal/canon"
	"github.com/latent-node/latent-node/runner/wasihttp"
)

// Kind is the outcome of one activation; its String is the
// `Latent-Outcome` header's value (the names are the refusal package's).
type Kind = refusal.Outcome

// Outcome kinds (the `Latent-Outcome` header values).
const (
	Success          = refusal.OutcomeSuccess
	DeclaredError    = refusal.OutcomeDeclaredError
	Trap             = refusal.OutcomeTrap
	FuelExhausted    = refusal.OutcomeFuelExhausted
	MemoryExhausted  = refusal.OutcomeMemoryExhausted
	OutputExceeded   = refusal.OutcomeOutputExceeded
	DeadlineExceeded = refusal.OutcomeDeadlineExceeded
	Cancelled        = refusal.OutcomeCancelled
	// MalformedResponse: an HTTP guest stopped normally without a valid
	// answer: a WAGI guest's stdout does not start with a valid CGI header
	// block, a wasi-http guest set no response or an error-code
	// (Outcome.Malformed says why).
	MalformedResponse = refusal.OutcomeMalformedResponse
	PlatformFailure   = refusal.OutcomePlatformFailure
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
	TrapInstantiation      = "instantiation"
	// TrapCanonicalABI: a component passed the host a value the canonical
	// ABI does not allow (a pointer or length out of bounds, invalid UTF-8,
	// a bad discriminant, a dangling or wrong-type handle, a full handle
	// table) or used a resource against its rules.
	TrapCanonicalABI = "canonical-abi"
	TrapOther        = "other"
)

// Outcome is what one activation did.
type Outcome struct {
	Kind     Kind
	ExitCode uint32 // for DeclaredError
	TrapKind string // for Trap
	// FuelUsed is exact and deterministic for the same module, input and grant.
	FuelUsed uint64
	// MemoryPeakBytes is the most of its memory grant the guest used at
	// once: linear memory and charged call stack together (zero when the
	// module was not instantiated).
	MemoryPeakBytes uint64
	// ExecutionTime is the wall time from instantiation to the guest's
	// stop, less what Input.OnSlice held it (pauses for other guests).
	ExecutionTime time.Duration
	Stdout        []byte
	StderrTail    []byte
	// Response is the answer of an HTTP revision's successful activation
	// (WAGI: its CGI answer, whose Body is a slice of Stdout; wasi-http:
	// the response its handler set), nil otherwise.
	Response *httpabi.Response
	// Malformed says what is wrong with a MalformedResponse's output, in
	// words that may be shown to the caller.
	Malformed string
	// Quarantine is set when the cell's state is uncertain (platform
	// failure, never the guest's doing): the caller must release the lease
	// with Quarantine.
	Quarantine bool
	// Calls are a wasi-http guest's outgoing requests, in order.
	Calls []wasihttp.Call
	// Err is the internal cause, for logs only; never show it to callers.
	Err error
}

// TrapDetail is, for a canonical-ABI trap, the rule the guest broke in
// words that may be shown to its caller ("wasihttp: output-stream.write of
// 65553 bytes, more than check-write allowed (65536)"); "" otherwise.
func (o Outcome) TrapDetail() string {
	if o.Kind != Trap || o.TrapKind != TrapCanonicalABI {
		return ""
	}
	return canon.TrapMessage(o.Err)
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

// classify turns the result of running the guest into an outcome kind.
// Order: what the host observed (deadline, cancellation, fuel, output,
// memory) wins over how the guest stopped. instantiating says err came from
// InstantiateModule: every such error is the module's doing (a data or
// element segment out of bounds, a table or memory the cell cannot hold)
// and is a trap, never a platform failure.
func classify(a *activation, err error, stopped time.Time, instantiating bool) (Kind, uint32, string) {
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
	case a.stdout.Overflow, errors.Is(err, wasihttp.ErrOutputExceeded):
		return OutputExceeded, 0, ""
	case a.memRefused:
		return MemoryExhausted, 0, ""
	case errors.Is(err, errCallDepth):
		return Trap, 0, TrapCallDepth
	case errors.Is(err, canon.ErrTrap):
		return Trap, 0, TrapCanonicalABI
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
	if instantiating {
		// Segment traps read "data[i]: …" or "elem[i]: …".
		if kind := trapKind(msg); kind != "" {
			return Trap, 0, kind
		}
		return Trap, 0, TrapInstantiation
	}
	if strings.HasPrefix(msg, "wasm error: ") || strings.HasPrefix(msg, "stack overflow") {
		if kind := trapKind(msg); kind != "" {
			return Trap, 0, kind
		}
		return Trap, 0, TrapOther
	}
	// Anything else came out of the host side of a call (a host function
	// failed an assertion or hit a Go runtime error): the host's fault.
	return PlatformFailure, 0, ""
}

// trapKind is the trap kind wazero's message msg names, or "".
func trapKind(msg string) string {
	for _, t := range trapKinds {
		if strings.Contains(msg, t.text) {
			return t.kind
		}
	}
	return ""
}

// Outcome: the outcome kinds of an executed activation (the Latent-Outcome
// header's values) and the refusal of each that failed.

package refusal

// Outcome is what an executed activation did. Its wire name (String) is the
// Latent-Outcome header's value and, for a failure, the problem's reason.
type Outcome uint8

// Outcomes. OutcomeNone is the zero value: no outcome yet.
const (
	OutcomeNone Outcome = iota
	OutcomeSuccess
	OutcomeDeclaredError
	OutcomeTrap
	OutcomeFuelExhausted
	OutcomeMemoryExhausted
	OutcomeOutputExceeded
	OutcomeDeadlineExceeded
	OutcomeCancelled
	// OutcomeMalformedResponse: a WAGI guest's stdout has no valid CGI
	// header block.
	OutcomeMalformedResponse
	OutcomePlatformFailure
	numOutcomes
)

// outcomeReasons is the reason (and so the wire name) of each failed outcome.
var outcomeReasons = [numOutcomes]Reason{
	OutcomeDeclaredError:     ReasonDeclaredError,
	OutcomeTrap:              ReasonTrap,
	OutcomeFuelExhausted:     ReasonFuelExhausted,
	OutcomeMemoryExhausted:   ReasonMemoryExhausted,
	OutcomeOutputExceeded:    ReasonOutputExceeded,
	OutcomeDeadlineExceeded:  ReasonDeadlineExceeded,
	OutcomeCancelled:         ReasonCancelled,
	OutcomeMalformedResponse: ReasonMalformedResponse,
	OutcomePlatformFailure:   ReasonPlatformFailure,
}

// String is the outcome's wire name: "success", or its reason's ("" for
// OutcomeNone).
func (o Outcome) String() string {
	if o == OutcomeSuccess {
		return "success"
	}
	if o < numOutcomes {
		return outcomeReasons[o].String()
	}
	return name(nil, o, "Outcome")
}

// Outcomes lists every outcome but OutcomeNone, success first.
func Outcomes() []Outcome { return all[Outcome](numOutcomes) }

// Refusal is the refusal of a failed outcome: execution-failed with the
// outcome as its reason in scope activation, not retryable; for
// OutcomePlatformFailure the node's own failure, internal/platform-failure in
// scope node. OutcomeNone and OutcomeSuccess have no refusal (the zero
// Refusal).
func (o Outcome) Refusal() Refusal {
	switch {
	case o == OutcomeNone || o == OutcomeSuccess || o >= numOutcomes:
		return Refusal{}
	case o == OutcomePlatformFailure:
		return Internal
	}
	return Refusal{Code: CodeExecutionFailed, Reason: outcomeReasons[o], Scope: ScopeActivation}
}

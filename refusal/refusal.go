// Refusal: the value of one refusal, and HTTP, the one mapping of a refusal
// to its status, problem type and title.

package refusal

import "net/http"

// Refusal is one structured refusal: a platform code, a stable reason, the
// limiting scope and dimension, and whether retrying the same request later
// can succeed. It is a small comparable value; its fields' wire names are
// their String.
type Refusal struct {
	Code      Code
	Reason    Reason
	Scope     Scope
	Dimension Dimension
	Retryable bool
}

// Internal is the node's own failure: internal/platform-failure in scope
// node, not retryable (the cause is logged, never answered).
var Internal = Refusal{Code: CodeInternal, Reason: ReasonPlatformFailure, Scope: ScopeNode}

// WithDimension returns r with dimension d.
func (r Refusal) WithDimension(d Dimension) Refusal {
	r.Dimension = d
	return r
}

// Matches reports whether r matches target used as a sentinel: the same
// code, and the same reason, scope and dimension where target names one.
func (r Refusal) Matches(target Refusal) bool {
	return target.Code == r.Code && (target.Reason == ReasonNone || target.Reason == r.Reason) &&
		(target.Scope == ScopeNone || target.Scope == r.Scope) &&
		(target.Dimension == DimNone || target.Dimension == r.Dimension)
}

// StatusClientClosedRequest is the status of a request whose caller went
// away (nobody reads it).
const StatusClientClosedRequest = 499

// ProblemTypeBase is the prefix of every problem type.
const ProblemTypeBase = "https://latent-node.dev/problems/"

// HTTP is how a refusal is answered: the status and the problem's type and
// title (RFC 9457).
type HTTP struct {
	Status int
	Type   string
	Title  string
}

// HTTP maps r to its status, type and title (docs/api.md, "Status of a
// structured refusal"). The status follows the code, refined by the reason;
// the type is ProblemTypeBase + the code (for execution-failed, + the
// outcome); the title is code/reason (for unauthenticated, the code alone).
func (r Refusal) HTTP() HTTP {
	h := HTTP{Status: status(r.Code, r.Reason), Type: ProblemTypeBase + r.Code.String(),
		Title: r.Code.String() + "/" + r.Reason.String()}
	switch r.Code {
	case CodeUnauthenticated:
		h.Title = r.Code.String()
	case CodeExecutionFailed:
		h.Type = ProblemTypeBase + r.Reason.String()
	}
	return h
}

// status is the HTTP status of a refusal of code and reason.
func status(code Code, reason Reason) int {
	switch code {
	case CodeUnauthenticated:
		return http.StatusUnauthorized
	case CodePermissionDenied:
		return http.StatusForbidden
	case CodeInvalidArgument:
		switch reason {
		case ReasonUnknownPath, ReasonNotClustered:
			return http.StatusNotFound
		case ReasonMethodNotAllowed:
			return http.StatusMethodNotAllowed
		case ReasonNotReloadable:
			return http.StatusConflict
		case ReasonInvalidManifest, ReasonInvalidConfiguration:
			return http.StatusUnprocessableEntity
		case ReasonEnvironmentTooLarge:
			return http.StatusRequestHeaderFieldsTooLarge
		}
		return http.StatusBadRequest
	case CodeAlreadyExists:
		return http.StatusConflict
	case CodeDeadlineExceeded:
		return http.StatusGatewayTimeout
	case CodeUnavailable:
		switch reason {
		case ReasonConcurrentChange:
			return http.StatusConflict
		case ReasonReloadFailed:
			return http.StatusInternalServerError
		}
		return http.StatusServiceUnavailable
	case CodeAdmissionRejected:
		switch reason {
		case ReasonRevisionNotAvailable, ReasonServiceNotFound, ReasonRouteNotFound:
			return http.StatusNotFound
		case ReasonQueueDeadlineInfeasible:
			return http.StatusServiceUnavailable
		}
		return http.StatusUnprocessableEntity
	case CodeResourceExhausted:
		switch reason {
		case ReasonPayloadTooLarge:
			return http.StatusRequestEntityTooLarge
		case ReasonInsufficientStorage, ReasonCatalogFull:
			return http.StatusInsufficientStorage
		case ReasonNodeOverloaded:
			return http.StatusServiceUnavailable
		}
		return http.StatusTooManyRequests
	case CodeCancelled:
		return StatusClientClosedRequest
	case CodeExecutionFailed:
		switch reason {
		case ReasonDeadlineExceeded:
			return http.StatusGatewayTimeout
		case ReasonCancelled:
			return StatusClientClosedRequest
		case ReasonPlatformFailure:
			return http.StatusInternalServerError
		}
		return http.StatusBadGateway
	}
	return http.StatusInternalServerError
}

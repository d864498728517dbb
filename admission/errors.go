package admission

// Platform codes of rejections.
const (
	CodeUnauthenticated   = "unauthenticated"
	CodePermissionDenied  = "permission-denied"
	CodeInvalidArgument   = "invalid-argument"
	CodeAdmissionRejected = "admission-rejected"
	CodeResourceExhausted = "resource-exhausted"
	CodeDeadlineExceeded  = "deadline-exceeded"
	CodeUnavailable       = "unavailable"
	CodeAlreadyExists     = "already-exists"
)

// Scopes of rejections: which layer or ledger scope refused.
const (
	ScopeRequest    = "request"
	ScopePrincipal  = "principal"
	ScopeRevision   = "revision"
	ScopeNode       = "node"
	ScopeTenant     = "tenant"
	ScopeTrustClass = "trust-class"
	ScopeQueueClass = "queue-class"
	ScopeCellClass  = "cell-class"
	ScopeLoadSource = "load-source"
)

// Rejection is the one structured refusal of admission: a platform code, a
// stable reason, the limiting scope and dimension, and whether retrying the
// same request later can succeed. Its message is built from these fields
// only, so it never echoes principals, tenants, attributes, payloads, paths,
// other tenants' counters or load numbers.
//
// Rejections are immutable values shared by every refusal of the same kind
// (the reject path allocates nothing). Compare with errors.Is against the
// exported sentinels: a sentinel with an empty Reason matches every
// rejection of its Code.
type Rejection struct {
	Code      string
	Reason    string
	Scope     string
	Dimension string
	Retryable bool
}

// Error renders code/reason and the limiting scope and dimension.
func (r *Rejection) Error() string {
	s := "admission: " + r.Code
	if r.Reason != "" {
		s += "/" + r.Reason
	}
	if r.Scope != "" {
		s += " (scope " + r.Scope
		if r.Dimension != "" {
			s += ", dimension " + r.Dimension
		}
		s += ")"
	}
	return s
}

// Is matches a sentinel of the same code (and reason, when the sentinel names one).
func (r *Rejection) Is(target error) bool {
	t, ok := target.(*Rejection)
	if !ok {
		return false
	}
	return t.Code == r.Code && (t.Reason == "" || t.Reason == r.Reason) &&
		(t.Scope == "" || t.Scope == r.Scope) && (t.Dimension == "" || t.Dimension == r.Dimension)
}

// Sentinels for errors.Is. Codes:
var (
	ErrPermissionDenied  = &Rejection{Code: CodePermissionDenied}
	ErrInvalidArgument   = &Rejection{Code: CodeInvalidArgument}
	ErrAdmissionRejected = &Rejection{Code: CodeAdmissionRejected}
	ErrResourceExhausted = &Rejection{Code: CodeResourceExhausted}
	ErrDeadlineExceeded  = &Rejection{Code: CodeDeadlineExceeded}
	ErrUnavailable       = &Rejection{Code: CodeUnavailable}
	ErrAlreadyExists     = &Rejection{Code: CodeAlreadyExists}
)

// Sentinels for errors.Is. Reasons:
var (
	ErrPrincipalNotAuthorized     = &Rejection{Code: CodePermissionDenied, Reason: "principal-not-authorized"}
	ErrPriorityNotAuthorized      = &Rejection{Code: CodePermissionDenied, Reason: "priority-not-authorized"}
	ErrTrustClassNotAuthorized    = &Rejection{Code: CodePermissionDenied, Reason: "trust-class-not-authorized"}
	ErrCellClassNotAuthorized     = &Rejection{Code: CodePermissionDenied, Reason: "cell-class-not-authorized"}
	ErrRevisionNotAvailable       = &Rejection{Code: CodeAdmissionRejected, Reason: "revision-not-available"}
	ErrServiceNotFound            = &Rejection{Code: CodeAdmissionRejected, Reason: "service-not-found"}
	ErrRouteNotFound              = &Rejection{Code: CodeAdmissionRejected, Reason: "route-not-found"}
	ErrUnsupportedRequirement     = &Rejection{Code: CodeAdmissionRejected, Reason: "unsupported-execution-requirement"}
	ErrPlacementNotCompatible     = &Rejection{Code: CodeAdmissionRejected, Reason: "placement-not-compatible"}
	ErrNoCompatibleCell           = &Rejection{Code: CodeAdmissionRejected, Reason: "no-compatible-cell"}
	ErrQueueDeadlineInfeasible    = &Rejection{Code: CodeAdmissionRejected, Reason: "queue-deadline-infeasible"}
	ErrPayloadTooLarge            = &Rejection{Code: CodeResourceExhausted, Reason: "payload-too-large"}
	ErrCapacityExhausted          = &Rejection{Code: CodeResourceExhausted, Reason: "capacity-exhausted"}
	ErrNodeOverloaded             = &Rejection{Code: CodeResourceExhausted, Reason: "node-overloaded"}
	ErrDeadlineExpired            = &Rejection{Code: CodeDeadlineExceeded, Reason: "deadline-exceeded"}
	ErrActivationIDUnavailable    = &Rejection{Code: CodeAlreadyExists, Reason: "activation-id-unavailable"}
	ErrUnsupportedBudgetDimension = &Rejection{Code: CodeInvalidArgument, Reason: "unsupported-budget-dimension"}
	ErrBudgetInfeasible           = &Rejection{Code: CodeInvalidArgument, Reason: "budget-infeasible"}
	ErrInvalidIdentifier          = &Rejection{Code: CodeInvalidArgument, Reason: "invalid-identifier"}
	ErrMetadataTooLarge           = &Rejection{Code: CodeInvalidArgument, Reason: "metadata-too-large"}
)

// The concrete rejections admission returns. They are package-level values,
// so a refusal allocates nothing.
var (
	rejPrincipal        = &Rejection{CodePermissionDenied, "principal-not-authorized", ScopePrincipal, "", false}
	rejServiceIdentity  = &Rejection{CodePermissionDenied, "principal-not-authorized", ScopePrincipal, "service-identity", false}
	rejPriorityNode     = &Rejection{CodePermissionDenied, "priority-not-authorized", ScopeNode, "priority", false}
	rejPriorityTenant   = &Rejection{CodePermissionDenied, "priority-not-authorized", ScopeTenant, "priority", false}
	rejTrustClass       = &Rejection{CodePermissionDenied, "trust-class-not-authorized", ScopeTenant, "trust-class", false}
	rejCellClass        = &Rejection{CodePermissionDenied, "cell-class-not-authorized", ScopeCellClass, "cell-class", false}
	rejActivationID     = &Rejection{CodeInvalidArgument, "invalid-identifier", ScopeRequest, "activation-id", false}
	rejSubject          = &Rejection{CodeInvalidArgument, "invalid-identifier", ScopePrincipal, "subject", false}
	rejTargetName       = &Rejection{CodeInvalidArgument, "invalid-identifier", ScopeRequest, "target", false}
	rejGeneratedID      = &Rejection{CodeInvalidArgument, "invalid-identifier", ScopeRevision, "revision-id", false}
	rejMetadataEntries  = &Rejection{CodeInvalidArgument, "metadata-too-large", ScopeRequest, "metadata-entries", false}
	rejMetadataBytes    = &Rejection{CodeInvalidArgument, "metadata-too-large", ScopeRequest, "metadata-bytes", false}
	rejMetadataKey      = &Rejection{CodeInvalidArgument, "invalid-identifier", ScopeRequest, "metadata-key", false}
	rejRevision         = &Rejection{CodeAdmissionRejected, "revision-not-available", ScopeRevision, "", false}
	rejPlacement        = &Rejection{CodeAdmissionRejected, "placement-not-compatible", ScopeNode, "placement", false}
	rejThreading        = &Rejection{CodeAdmissionRejected, "unsupported-execution-requirement", ScopeCellClass, "threading", false}
	rejFeatures         = &Rejection{CodeAdmissionRejected, "unsupported-execution-requirement", ScopeCellClass, "features", false}
	rejNoCell           = &Rejection{CodeAdmissionRejected, "no-compatible-cell", ScopeCellClass, "memory", false}
	rejInfeasible       = &Rejection{CodeAdmissionRejected, "queue-deadline-infeasible", ScopeCellClass, "wall-time", true}
	rejPayloadNode      = &Rejection{CodeResourceExhausted, "payload-too-large", ScopeNode, "payload-bytes", false}
	rejPayloadTenant    = &Rejection{CodeResourceExhausted, "payload-too-large", ScopeTenant, "payload-bytes", false}
	rejOverloadCPU      = &Rejection{CodeResourceExhausted, "node-overloaded", ScopeNode, "cpu", true}
	rejOverloadMemory   = &Rejection{CodeResourceExhausted, "node-overloaded", ScopeNode, "memory", true}
	rejDeadline         = &Rejection{CodeDeadlineExceeded, "deadline-exceeded", ScopeRequest, "wall-time", false}
	rejDuplicate        = &Rejection{CodeAlreadyExists, "activation-id-unavailable", ScopeRequest, "activation-id", false}
	rejZeroFuel         = &Rejection{CodeInvalidArgument, "budget-infeasible", ScopeRequest, "cpu-fuel", false}
	rejZeroMemory       = &Rejection{CodeInvalidArgument, "budget-infeasible", ScopeRequest, "memory", false}
	rejZeroWall         = &Rejection{CodeInvalidArgument, "budget-infeasible", ScopeRequest, "wall-time", false}
	rejMemoryBelowMin   = &Rejection{CodeInvalidArgument, "budget-infeasible", ScopeRevision, "memory", false}
	rejNetworkDimension = &Rejection{CodeInvalidArgument, "unsupported-budget-dimension", ScopeRequest, "network-egress-bytes", false}
	rejStorageDimension = &Rejection{CodeInvalidArgument, "unsupported-budget-dimension", ScopeRequest, "storage-bytes", false}
	rejAccelDimension   = &Rejection{CodeInvalidArgument, "unsupported-budget-dimension", ScopeRequest, "accelerators", false}
	rejArithmetic       = &Rejection{CodeResourceExhausted, "capacity-exhausted", ScopeNode, "arithmetic", true}
)

// Capacity rejections per scope and dimension.
var rejCapacity = func() (t [numScopes][numDims]*Rejection) {
	scopes := [numScopes]string{ScopeNode, ScopeTenant, ScopeTrustClass, ScopeQueueClass}
	dims := [numDims]string{"live-activations", "queued", "cpu-fuel", "memory"}
	for s := range t {
		for d := range t[s] {
			t[s][d] = &Rejection{CodeResourceExhausted, "capacity-exhausted", scopes[s], dims[d], true}
		}
	}
	return t
}()

type scope uint8

const (
	scopeNode scope = iota
	scopeTenant
	scopeTrust
	scopeQueue
	numScopes
)

type dim uint8

const (
	dimLive dim = iota
	dimQueued
	dimFuel
	dimMemory
	numDims
)

// unavailable returns the rejection for a load-source failure with the
// source's sanitized reason. The set of reasons is fixed, so the values are
// built once.
func unavailable(reason string) *Rejection {
	if r, ok := rejUnavailable[reason]; ok {
		return r
	}
	return rejUnavailableOther
}

var rejUnavailableOther = &Rejection{CodeUnavailable, "load-source-unavailable", ScopeLoadSource, "", true}

var rejUnavailable = func() map[string]*Rejection {
	m := map[string]*Rejection{}
	for _, r := range []string{"load-sample-missing", "load-sample-malformed", "load-sample-out-of-order", "load-sample-future", "load-sample-stale"} {
		m[r] = &Rejection{CodeUnavailable, r, ScopeLoadSource, "", true}
	}
	return m
}()

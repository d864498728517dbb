package admission

// Rejection, admission's structured refusal: its sentinels for errors.Is and
// the shared rejection values admission returns.

import "github.com/latent-node/latent-node/refusal"

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
//
// A Rejection is a refusal.Refusal (the same fields, converted for free).
type Rejection refusal.Refusal

// Refusal is r as the refusal value.
func (r *Rejection) Refusal() refusal.Refusal { return refusal.Refusal(*r) }

// Error renders code/reason and the limiting scope and dimension.
func (r *Rejection) Error() string {
	s := "admission: " + r.Code.String()
	if r.Reason != refusal.ReasonNone {
		s += "/" + r.Reason.String()
	}
	if r.Scope != refusal.ScopeNone {
		s += " (scope " + r.Scope.String()
		if r.Dimension != refusal.DimNone {
			s += ", dimension " + r.Dimension.String()
		}
		s += ")"
	}
	return s
}

// Is matches a sentinel of the same code (and reason, scope and dimension,
// when the sentinel names them).
func (r *Rejection) Is(target error) bool {
	t, ok := target.(*Rejection)
	return ok && r.Refusal().Matches(t.Refusal())
}

// Sentinels for errors.Is. Codes:
var (
	ErrPermissionDenied  = &Rejection{Code: refusal.CodePermissionDenied}
	ErrInvalidArgument   = &Rejection{Code: refusal.CodeInvalidArgument}
	ErrAdmissionRejected = &Rejection{Code: refusal.CodeAdmissionRejected}
	ErrResourceExhausted = &Rejection{Code: refusal.CodeResourceExhausted}
	ErrDeadlineExceeded  = &Rejection{Code: refusal.CodeDeadlineExceeded}
	ErrUnavailable       = &Rejection{Code: refusal.CodeUnavailable}
	ErrAlreadyExists     = &Rejection{Code: refusal.CodeAlreadyExists}
)

// Sentinels for errors.Is. Reasons:
var (
	ErrPrincipalNotAuthorized     = &Rejection{Code: refusal.CodePermissionDenied, Reason: refusal.ReasonPrincipalNotAuthorized}
	ErrPriorityNotAuthorized      = &Rejection{Code: refusal.CodePermissionDenied, Reason: refusal.ReasonPriorityNotAuthorized}
	ErrTrustClassNotAuthorized    = &Rejection{Code: refusal.CodePermissionDenied, Reason: refusal.ReasonTrustClassNotAuthorized}
	ErrCellClassNotAuthorized     = &Rejection{Code: refusal.CodePermissionDenied, Reason: refusal.ReasonCellClassNotAuthorized}
	ErrRevisionNotAvailable       = &Rejection{Code: refusal.CodeAdmissionRejected, Reason: refusal.ReasonRevisionNotAvailable}
	ErrServiceNotFound            = &Rejection{Code: refusal.CodeAdmissionRejected, Reason: refusal.ReasonServiceNotFound}
	ErrRouteNotFound              = &Rejection{Code: refusal.CodeAdmissionRejected, Reason: refusal.ReasonRouteNotFound}
	ErrUnsupportedRequirement     = &Rejection{Code: refusal.CodeAdmissionRejected, Reason: refusal.ReasonUnsupportedExecutionRequirement}
	ErrPlacementNotCompatible     = &Rejection{Code: refusal.CodeAdmissionRejected, Reason: refusal.ReasonPlacementNotCompatible}
	ErrNoCompatibleCell           = &Rejection{Code: refusal.CodeAdmissionRejected, Reason: refusal.ReasonNoCompatibleCell}
	ErrQueueDeadlineInfeasible    = &Rejection{Code: refusal.CodeAdmissionRejected, Reason: refusal.ReasonQueueDeadlineInfeasible}
	ErrPayloadTooLarge            = &Rejection{Code: refusal.CodeResourceExhausted, Reason: refusal.ReasonPayloadTooLarge}
	ErrCapacityExhausted          = &Rejection{Code: refusal.CodeResourceExhausted, Reason: refusal.ReasonCapacityExhausted}
	ErrNodeOverloaded             = &Rejection{Code: refusal.CodeResourceExhausted, Reason: refusal.ReasonNodeOverloaded}
	ErrDeadlineExpired            = &Rejection{Code: refusal.CodeDeadlineExceeded, Reason: refusal.ReasonDeadlineExceeded}
	ErrActivationIDUnavailable    = &Rejection{Code: refusal.CodeAlreadyExists, Reason: refusal.ReasonActivationIDUnavailable}
	ErrUnsupportedBudgetDimension = &Rejection{Code: refusal.CodeInvalidArgument, Reason: refusal.ReasonUnsupportedBudgetDimension}
	ErrBudgetInfeasible           = &Rejection{Code: refusal.CodeInvalidArgument, Reason: refusal.ReasonBudgetInfeasible}
	ErrInvalidIdentifier          = &Rejection{Code: refusal.CodeInvalidArgument, Reason: refusal.ReasonInvalidIdentifier}
	ErrMetadataTooLarge           = &Rejection{Code: refusal.CodeInvalidArgument, Reason: refusal.ReasonMetadataTooLarge}
)

// The concrete rejections admission returns. They are package-level values,
// so a refusal allocates nothing.
var (
	rejPrincipal        = &Rejection{refusal.CodePermissionDenied, refusal.ReasonPrincipalNotAuthorized, refusal.ScopePrincipal, refusal.DimNone, false}
	rejServiceIdentity  = &Rejection{refusal.CodePermissionDenied, refusal.ReasonPrincipalNotAuthorized, refusal.ScopePrincipal, refusal.DimServiceIdentity, false}
	rejPriorityNode     = &Rejection{refusal.CodePermissionDenied, refusal.ReasonPriorityNotAuthorized, refusal.ScopeNode, refusal.DimPriority, false}
	rejPriorityTenant   = &Rejection{refusal.CodePermissionDenied, refusal.ReasonPriorityNotAuthorized, refusal.ScopeTenant, refusal.DimPriority, false}
	rejTrustClass       = &Rejection{refusal.CodePermissionDenied, refusal.ReasonTrustClassNotAuthorized, refusal.ScopeTenant, refusal.DimTrustClass, false}
	rejCellClass        = &Rejection{refusal.CodePermissionDenied, refusal.ReasonCellClassNotAuthorized, refusal.ScopeCellClass, refusal.DimCellClass, false}
	rejActivationID     = &Rejection{refusal.CodeInvalidArgument, refusal.ReasonInvalidIdentifier, refusal.ScopeRequest, refusal.DimActivationID, false}
	rejSubject          = &Rejection{refusal.CodeInvalidArgument, refusal.ReasonInvalidIdentifier, refusal.ScopePrincipal, refusal.DimSubject, false}
	rejTargetName       = &Rejection{refusal.CodeInvalidArgument, refusal.ReasonInvalidIdentifier, refusal.ScopeRequest, refusal.DimTarget, false}
	rejGeneratedID      = &Rejection{refusal.CodeInvalidArgument, refusal.ReasonInvalidIdentifier, refusal.ScopeRevision, refusal.DimRevisionID, false}
	rejMetadataEntries  = &Rejection{refusal.CodeInvalidArgument, refusal.ReasonMetadataTooLarge, refusal.ScopeRequest, refusal.DimMetadataEntries, false}
	rejMetadataBytes    = &Rejection{refusal.CodeInvalidArgument, refusal.ReasonMetadataTooLarge, refusal.ScopeRequest, refusal.DimMetadataBytes, false}
	rejMetadataKey      = &Rejection{refusal.CodeInvalidArgument, refusal.ReasonInvalidIdentifier, refusal.ScopeRequest, refusal.DimMetadataKey, false}
	rejRevision         = &Rejection{refusal.CodeAdmissionRejected, refusal.ReasonRevisionNotAvailable, refusal.ScopeRevision, refusal.DimNone, false}
	rejPlacement        = &Rejection{refusal.CodeAdmissionRejected, refusal.ReasonPlacementNotCompatible, refusal.ScopeNode, refusal.DimPlacement, false}
	rejThreading        = &Rejection{refusal.CodeAdmissionRejected, refusal.ReasonUnsupportedExecutionRequirement, refusal.ScopeCellClass, refusal.DimThreading, false}
	rejFeatures         = &Rejection{refusal.CodeAdmissionRejected, refusal.ReasonUnsupportedExecutionRequirement, refusal.ScopeCellClass, refusal.DimFeatures, false}
	rejNoCell           = &Rejection{refusal.CodeAdmissionRejected, refusal.ReasonNoCompatibleCell, refusal.ScopeCellClass, refusal.DimMemory, false}
	rejInfeasible       = &Rejection{refusal.CodeAdmissionRejected, refusal.ReasonQueueDeadlineInfeasible, refusal.ScopeCellClass, refusal.DimWallTime, true}
	rejPayloadNode      = &Rejection{refusal.CodeResourceExhausted, refusal.ReasonPayloadTooLarge, refusal.ScopeNode, refusal.DimPayloadBytes, false}
	rejPayloadTenant    = &Rejection{refusal.CodeResourceExhausted, refusal.ReasonPayloadTooLarge, refusal.ScopeTenant, refusal.DimPayloadBytes, false}
	rejOverloadCPU      = &Rejection{refusal.CodeResourceExhausted, refusal.ReasonNodeOverloaded, refusal.ScopeNode, refusal.DimCPU, true}
	rejOverloadMemory   = &Rejection{refusal.CodeResourceExhausted, refusal.ReasonNodeOverloaded, refusal.ScopeNode, refusal.DimMemory, true}
	rejDeadline         = &Rejection{refusal.CodeDeadlineExceeded, refusal.ReasonDeadlineExceeded, refusal.ScopeRequest, refusal.DimWallTime, false}
	rejDuplicate        = &Rejection{refusal.CodeAlreadyExists, refusal.ReasonActivationIDUnavailable, refusal.ScopeRequest, refusal.DimActivationID, false}
	rejZeroFuel         = &Rejection{refusal.CodeInvalidArgument, refusal.ReasonBudgetInfeasible, refusal.ScopeRequest, refusal.DimCPUFuel, false}
	rejZeroMemory       = &Rejection{refusal.CodeInvalidArgument, refusal.ReasonBudgetInfeasible, refusal.ScopeRequest, refusal.DimMemory, false}
	rejZeroWall         = &Rejection{refusal.CodeInvalidArgument, refusal.ReasonBudgetInfeasible, refusal.ScopeRequest, refusal.DimWallTime, false}
	rejMemoryBelowMin   = &Rejection{refusal.CodeInvalidArgument, refusal.ReasonBudgetInfeasible, refusal.ScopeRevision, refusal.DimMemory, false}
	rejNetworkDimension = &Rejection{refusal.CodeInvalidArgument, refusal.ReasonUnsupportedBudgetDimension, refusal.ScopeRequest, refusal.DimNetworkEgressBytes, false}
	rejStorageDimension = &Rejection{refusal.CodeInvalidArgument, refusal.ReasonUnsupportedBudgetDimension, refusal.ScopeRequest, refusal.DimStorageBytes, false}
	rejAccelDimension   = &Rejection{refusal.CodeInvalidArgument, refusal.ReasonUnsupportedBudgetDimension, refusal.ScopeRequest, refusal.DimAccelerators, false}
	rejArithmetic       = &Rejection{refusal.CodeResourceExhausted, refusal.ReasonCapacityExhausted, refusal.ScopeNode, refusal.DimArithmetic, true}
)

// Capacity rejections per scope and dimension.
var rejCapacity = func() (t [numScopes][numDims]*Rejection) {
	scopes := [numScopes]refusal.Scope{refusal.ScopeNode, refusal.ScopeTenant, refusal.ScopeTrustClass, refusal.ScopeQueueClass}
	dims := [numDims]refusal.Dimension{refusal.DimLiveActivations, refusal.DimQueued, refusal.DimCPUFuel, refusal.DimMemory}
	for s := range t {
		for d := range t[s] {
			t[s][d] = &Rejection{refusal.CodeResourceExhausted, refusal.ReasonCapacityExhausted, scopes[s], dims[d], true}
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
func unavailable(reason refusal.Reason) *Rejection {
	if r, ok := rejUnavailable[reason]; ok {
		return r
	}
	return rejUnavailableOther
}

var rejUnavailableOther = &Rejection{refusal.CodeUnavailable, refusal.ReasonLoadSourceUnavailable, refusal.ScopeLoadSource, refusal.DimNone, true}

var rejUnavailable = func() map[refusal.Reason]*Rejection {
	m := map[refusal.Reason]*Rejection{}
	for _, r := range []refusal.Reason{refusal.ReasonLoadSampleMissing, refusal.ReasonLoadSampleMalformed,
		refusal.ReasonLoadSampleOutOfOrder, refusal.ReasonLoadSampleFuture, refusal.ReasonLoadSampleStale} {
		m[r] = &Rejection{refusal.CodeUnavailable, r, refusal.ScopeLoadSource, refusal.DimNone, true}
	}
	return m
}()

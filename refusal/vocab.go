// The vocabulary of a refusal: the enums Code, Reason, Scope and Dimension,
// their wire names (String) and their enumeration (Codes, Reasons, Scopes,
// Dimensions).

package refusal

import "strconv"

// Code is the platform code of a refusal (the problem's "code").
type Code uint8

// Codes. CodeNone is the zero value: no code (a sentinel matching any).
const (
	CodeNone Code = iota
	CodeUnauthenticated
	CodePermissionDenied
	CodeInvalidArgument
	CodeAdmissionRejected
	CodeResourceExhausted
	CodeDeadlineExceeded
	CodeUnavailable
	CodeAlreadyExists
	CodeCancelled
	CodeInternal
	// CodeExecutionFailed is the code of an executed activation that did not
	// succeed; its reason is the outcome (Outcome.Refusal).
	CodeExecutionFailed
	numCodes
)

var codeNames = [numCodes]string{
	CodeUnauthenticated:   "unauthenticated",
	CodePermissionDenied:  "permission-denied",
	CodeInvalidArgument:   "invalid-argument",
	CodeAdmissionRejected: "admission-rejected",
	CodeResourceExhausted: "resource-exhausted",
	CodeDeadlineExceeded:  "deadline-exceeded",
	CodeUnavailable:       "unavailable",
	CodeAlreadyExists:     "already-exists",
	CodeCancelled:         "cancelled",
	CodeInternal:          "internal",
	CodeExecutionFailed:   "execution-failed",
}

// String is the code's wire name ("" for CodeNone).
func (c Code) String() string { return name(codeNames[:], c, "Code") }

// Codes lists every code but CodeNone, in declaration order.
func Codes() []Code { return all[Code](numCodes) }

// Scope is which layer or ledger scope refused (the problem's "scope").
type Scope uint8

// Scopes. ScopeNone is the zero value.
const (
	ScopeNone Scope = iota
	ScopeRequest
	ScopePrincipal
	ScopeRevision
	ScopeNode
	ScopeTenant
	ScopeTrustClass
	ScopeQueueClass
	ScopeCellClass
	ScopeLoadSource
	// ScopeActivation is the scope of an executed activation that failed.
	ScopeActivation
	numScopes
)

var scopeNames = [numScopes]string{
	ScopeRequest:    "request",
	ScopePrincipal:  "principal",
	ScopeRevision:   "revision",
	ScopeNode:       "node",
	ScopeTenant:     "tenant",
	ScopeTrustClass: "trust-class",
	ScopeQueueClass: "queue-class",
	ScopeCellClass:  "cell-class",
	ScopeLoadSource: "load-source",
	ScopeActivation: "activation",
}

// String is the scope's wire name ("" for ScopeNone).
func (s Scope) String() string { return name(scopeNames[:], s, "Scope") }

// Scopes lists every scope but ScopeNone, in declaration order.
func Scopes() []Scope { return all[Scope](numScopes) }

// Reason is the stable reason of a refusal (the problem's "reason").
type Reason uint8

// Reasons. ReasonNone is the zero value: no reason (a sentinel matching any
// reason of its code).
const (
	ReasonNone Reason = iota
	// Authentication, authorization and the request's form.
	ReasonUnauthenticated
	ReasonRoleNotAuthorized
	ReasonPrincipalNotAuthorized
	ReasonPriorityNotAuthorized
	ReasonTrustClassNotAuthorized
	ReasonCellClassNotAuthorized
	ReasonCrossSiteRequest
	ReasonHostNotAllowed
	ReasonNotPending
	ReasonUnknownPath
	ReasonMethodNotAllowed
	ReasonInvalidHeader
	ReasonInvalidIdentifier
	ReasonInvalidPath
	ReasonInvalidTarget
	ReasonInvalidGeneration
	ReasonInvalidDigest
	ReasonInvalidQuery
	ReasonDigestMismatch
	ReasonMalformedBody
	ReasonMetadataTooLarge
	ReasonEnvironmentTooLarge
	ReasonInvalidManifest
	ReasonInvalidConfiguration
	ReasonNotReloadable
	ReasonNotClustered
	ReasonUnsupportedBudgetDimension
	ReasonBudgetInfeasible
	// Admission's view of the revision and the cells.
	ReasonRevisionNotAvailable
	ReasonServiceNotFound
	ReasonRouteNotFound
	ReasonUnsupportedExecutionRequirement
	ReasonPlacementNotCompatible
	ReasonNoCompatibleCell
	ReasonQueueDeadlineInfeasible
	// Capacity.
	ReasonPayloadTooLarge
	ReasonCapacityExhausted
	ReasonNodeOverloaded
	ReasonTenantQuotaExceeded
	ReasonInsufficientStorage
	ReasonCatalogFull
	ReasonQueueWaitExceeded
	ReasonFairShareOfWaitingSlots
	ReasonActivationIDUnavailable
	// Time and availability.
	ReasonDeadlineExceeded
	ReasonLoadSampleMissing
	ReasonLoadSampleMalformed
	ReasonLoadSampleOutOfOrder
	ReasonLoadSampleFuture
	ReasonLoadSampleStale
	ReasonLoadSourceUnavailable
	ReasonShuttingDown
	ReasonHealthChecksBusy
	ReasonReloadFailed
	ReasonClusterUnavailable
	ReasonCommitUnknown
	ReasonConcurrentChange
	ReasonPeerBusy
	ReasonCancelled
	ReasonPlatformFailure
	// The outcomes of an executed activation that failed (with
	// ReasonDeadlineExceeded, ReasonCancelled and ReasonPlatformFailure).
	ReasonDeclaredError
	ReasonTrap
	ReasonFuelExhausted
	ReasonMemoryExhausted
	ReasonOutputExceeded
	ReasonMalformedResponse
	numReasons
)

var reasonNames = [numReasons]string{
	ReasonUnauthenticated:                 "unauthenticated",
	ReasonRoleNotAuthorized:               "role-not-authorized",
	ReasonPrincipalNotAuthorized:          "principal-not-authorized",
	ReasonPriorityNotAuthorized:           "priority-not-authorized",
	ReasonTrustClassNotAuthorized:         "trust-class-not-authorized",
	ReasonCellClassNotAuthorized:          "cell-class-not-authorized",
	ReasonCrossSiteRequest:                "cross-site-request",
	ReasonHostNotAllowed:                  "host-not-allowed",
	ReasonNotPending:                      "not-pending",
	ReasonUnknownPath:                     "unknown-path",
	ReasonMethodNotAllowed:                "method-not-allowed",
	ReasonInvalidHeader:                   "invalid-header",
	ReasonInvalidIdentifier:               "invalid-identifier",
	ReasonInvalidPath:                     "invalid-path",
	ReasonInvalidTarget:                   "invalid-target",
	ReasonInvalidGeneration:               "invalid-generation",
	ReasonInvalidDigest:                   "invalid-digest",
	ReasonInvalidQuery:                    "invalid-query",
	ReasonDigestMismatch:                  "digest-mismatch",
	ReasonMalformedBody:                   "malformed-body",
	ReasonMetadataTooLarge:                "metadata-too-large",
	ReasonEnvironmentTooLarge:             "environment-too-large",
	ReasonInvalidManifest:                 "invalid-manifest",
	ReasonInvalidConfiguration:            "invalid-configuration",
	ReasonNotReloadable:                   "not-reloadable",
	ReasonNotClustered:                    "not-clustered",
	ReasonUnsupportedBudgetDimension:      "unsupported-budget-dimension",
	ReasonBudgetInfeasible:                "budget-infeasible",
	ReasonRevisionNotAvailable:            "revision-not-available",
	ReasonServiceNotFound:                 "service-not-found",
	ReasonRouteNotFound:                   "route-not-found",
	ReasonUnsupportedExecutionRequirement: "unsupported-execution-requirement",
	ReasonPlacementNotCompatible:          "placement-not-compatible",
	ReasonNoCompatibleCell:                "no-compatible-cell",
	ReasonQueueDeadlineInfeasible:         "queue-deadline-infeasible",
	ReasonPayloadTooLarge:                 "payload-too-large",
	ReasonCapacityExhausted:               "capacity-exhausted",
	ReasonNodeOverloaded:                  "node-overloaded",
	ReasonTenantQuotaExceeded:             "tenant-quota-exceeded",
	ReasonInsufficientStorage:             "insufficient-storage",
	ReasonCatalogFull:                     "catalog-full",
	ReasonQueueWaitExceeded:               "queue-wait-exceeded",
	ReasonFairShareOfWaitingSlots:         "fair-share-of-waiting-slots",
	ReasonActivationIDUnavailable:         "activation-id-unavailable",
	ReasonDeadlineExceeded:                "deadline-exceeded",
	ReasonLoadSampleMissing:               "load-sample-missing",
	ReasonLoadSampleMalformed:             "load-sample-malformed",
	ReasonLoadSampleOutOfOrder:            "load-sample-out-of-order",
	ReasonLoadSampleFuture:                "load-sample-future",
	ReasonLoadSampleStale:                 "load-sample-stale",
	ReasonLoadSourceUnavailable:           "load-source-unavailable",
	ReasonShuttingDown:                    "shutting-down",
	ReasonHealthChecksBusy:                "health-checks-busy",
	ReasonReloadFailed:                    "reload-failed",
	ReasonClusterUnavailable:              "cluster-unavailable",
	ReasonCommitUnknown:                   "commit-unknown",
	ReasonConcurrentChange:                "concurrent-change",
	ReasonPeerBusy:                        "peer-busy",
	ReasonCancelled:                       "cancelled",
	ReasonPlatformFailure:                 "platform-failure",
	ReasonDeclaredError:                   "declared-error",
	ReasonTrap:                            "trap",
	ReasonFuelExhausted:                   "fuel-exhausted",
	ReasonMemoryExhausted:                 "memory-exhausted",
	ReasonOutputExceeded:                  "output-exceeded",
	ReasonMalformedResponse:               "malformed-response",
}

// String is the reason's wire name ("" for ReasonNone).
func (r Reason) String() string { return name(reasonNames[:], r, "Reason") }

// Reasons lists every reason but ReasonNone, in declaration order.
func Reasons() []Reason { return all[Reason](numReasons) }

// Dimension is which limit or part of the request refused (the problem's
// "dimension").
type Dimension uint8

// Dimensions. DimNone is the zero value: no dimension.
const (
	DimNone Dimension = iota
	// Parts of the request.
	DimPath
	DimMethod
	DimHost
	DimOrigin
	DimBody
	DimHeaders
	DimTarget
	DimDigest
	DimLimit
	DimAfter
	DimManifest
	DimConfiguration
	DimCluster
	DimService
	DimRoute
	DimServiceIdentity
	DimSubject
	DimActivationID
	DimRevisionID
	DimMetadataKey
	DimMetadataEntries
	DimMetadataBytes
	DimPriority
	DimTrustClass
	DimCellClass
	DimPlacement
	DimThreading
	DimFeatures
	// The Latent-* request headers, named as the header (invalid-header).
	DimHeaderActivationID
	DimHeaderRoutingKey
	DimHeaderStderr
	DimHeaderPriority
	DimHeaderTimeoutMs
	DimHeaderDeadlineUnixMs
	DimHeaderBudget
	DimHeaderMeta
	// Budgets and capacities.
	DimCPUFuel
	DimMemory
	DimWallTime
	DimWaitTime
	DimCPU
	DimNetworkEgressBytes
	DimStorageBytes
	DimAccelerators
	DimArithmetic
	DimLiveActivations
	DimQueued
	DimPayloadBytes
	DimArtifactBytes
	DimManifestBytes
	DimCompiledBytes
	DimServices
	DimArtifacts
	DimDeployedBytes
	DimCatalogWrites
	DimExecutor
	// The ingress pools' slots and bytes.
	DimDataSlots
	DimDataBytes
	DimControlSlots
	DimControlBytes
	numDims
)

var dimNames = [numDims]string{
	DimPath:                 "path",
	DimMethod:               "method",
	DimHost:                 "host",
	DimOrigin:               "origin",
	DimBody:                 "body",
	DimHeaders:              "headers",
	DimTarget:               "target",
	DimDigest:               "digest",
	DimLimit:                "limit",
	DimAfter:                "after",
	DimManifest:             "manifest",
	DimConfiguration:        "configuration",
	DimCluster:              "cluster",
	DimService:              "service",
	DimRoute:                "route",
	DimServiceIdentity:      "service-identity",
	DimSubject:              "subject",
	DimActivationID:         "activation-id",
	DimRevisionID:           "revision-id",
	DimMetadataKey:          "metadata-key",
	DimMetadataEntries:      "metadata-entries",
	DimMetadataBytes:        "metadata-bytes",
	DimPriority:             "priority",
	DimTrustClass:           "trust-class",
	DimCellClass:            "cell-class",
	DimPlacement:            "placement",
	DimThreading:            "threading",
	DimFeatures:             "features",
	DimHeaderActivationID:   "Latent-Activation-Id",
	DimHeaderRoutingKey:     "Latent-Routing-Key",
	DimHeaderStderr:         "Latent-Stderr",
	DimHeaderPriority:       "Latent-Priority",
	DimHeaderTimeoutMs:      "Latent-Timeout-Ms",
	DimHeaderDeadlineUnixMs: "Latent-Deadline-Unix-Ms",
	DimHeaderBudget:         "Latent-Budget",
	DimHeaderMeta:           "Latent-Meta-*",
	DimCPUFuel:              "cpu-fuel",
	DimMemory:               "memory",
	DimWallTime:             "wall-time",
	DimWaitTime:             "wait-time",
	DimCPU:                  "cpu",
	DimNetworkEgressBytes:   "network-egress-bytes",
	DimStorageBytes:         "storage-bytes",
	DimAccelerators:         "accelerators",
	DimArithmetic:           "arithmetic",
	DimLiveActivations:      "live-activations",
	DimQueued:               "queued",
	DimPayloadBytes:         "payload-bytes",
	DimArtifactBytes:        "artifact-bytes",
	DimManifestBytes:        "manifest-bytes",
	DimCompiledBytes:        "compiled-bytes",
	DimServices:             "services",
	DimArtifacts:            "artifacts",
	DimDeployedBytes:        "deployed-bytes",
	DimCatalogWrites:        "catalog-writes",
	DimExecutor:             "executor",
	DimDataSlots:            "data-slots",
	DimDataBytes:            "data-bytes",
	DimControlSlots:         "control-slots",
	DimControlBytes:         "control-bytes",
}

// String is the dimension's wire name ("" for DimNone).
func (d Dimension) String() string { return name(dimNames[:], d, "Dimension") }

// Dimensions lists every dimension but DimNone, in declaration order.
func Dimensions() []Dimension { return all[Dimension](numDims) }

// enum is what name and all need of the four enums and Outcome.
type enum interface {
	~uint8
}

// name is names[v], or kind(v) for a value outside the enum.
func name[E enum](names []string, v E, kind string) string {
	if int(v) < len(names) {
		return names[v]
	}
	return kind + "(" + strconv.Itoa(int(v)) + ")"
}

// all lists the values 1..n-1 of an enum whose zero is "none".
func all[E enum](n E) []E {
	out := make([]E, 0, n-1)
	for v := E(1); v < n; v++ {
		out = append(out, v)
	}
	return out
}

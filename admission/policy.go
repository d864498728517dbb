package admission

// Policy, the node's admission configuration: its limits and classes,
// tenants, overload, deadline, metadata and placement, and its validation.

import (
	"maps"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/latent-node/latent-node/vocab"
)

// Policy is the node's admission configuration. It is validated
// once, by NewLocalQuotaProvider, and immutable afterwards. There is no
// permissive default tenant and no wildcard: everything a caller may use is
// listed. Zero in a limit grants no capacity.
type Policy struct {
	// BudgetCeiling is the hard per-activation ceiling; all three Phase 1
	// dimensions must be positive (the wall time is finite by construction).
	BudgetCeiling vocab.Budget
	// Limits are the node-scope limits, including the payload and priority ceilings.
	Limits TenantLimits
	// QueueClasses are named, non-overlapping priority ranges; every priority
	// from 0 to Limits.MaxPriority maps to exactly one.
	QueueClasses []QueueClassPolicy
	// CellClasses are the configured cell classes (a subset of the five).
	CellClasses map[vocab.CellClass]CellClassPolicy
	// TrustClasses are the configured trust classes.
	TrustClasses map[vocab.TrustClass]TrustClassPolicy
	// Tenants are the configured tenants.
	Tenants map[vocab.TenantID]TenantPolicy
	// Overload sets the load-pressure thresholds.
	Overload OverloadPolicy
	// Deadline sets the queue-feasibility estimate.
	Deadline DeadlinePolicy
	// Metadata bounds identifiers and metadata.
	Metadata MetadataPolicy
	// Placement is this node's identity, checked against revision placement.
	Placement NodePlacement
}

// Limits are the four concurrent-reservation limits of a scope.
type Limits struct {
	MaxLiveActivations uint64 `json:"max_live_activations"` // queued + executing
	MaxQueued          uint64 `json:"max_queued"`
	MaxReservedFuel    uint64 `json:"max_reserved_fuel"`
	MaxReservedMemory  uint64 `json:"max_reserved_memory_bytes"` // bytes
}

// TenantLimits are Limits plus the payload and priority ceilings that exist
// at node and tenant scope.
type TenantLimits struct {
	Limits
	MaxPayloadBytes uint64 `json:"max_payload_bytes"` // equality is accepted
	MaxPriority     uint32 `json:"max_priority"`
}

// QueueClassPolicy is one queue class.
type QueueClassPolicy struct {
	Name          string
	MinPriority   uint32
	MaxPriority   uint32 // inclusive
	MaxQueued     uint64
	ReservedCells uint32 // per cell class; used by the scheduler
}

// CellClassPolicy is the capability of one configured cell class.
type CellClassPolicy struct {
	MemoryBytes uint64 // > 0
	Parallelism uint32 // > 0; must equal the usable pool capacity
	Threading   []vocab.Threading
	Features    vocab.FeatureSet
}

// TrustClassPolicy is one trust class.
type TrustClassPolicy struct {
	CellClasses []vocab.CellClass
	Limits      Limits
}

// PrincipalKind is the kind of an authenticated principal.
type PrincipalKind uint8

// Principal kinds.
const (
	KindUser PrincipalKind = iota + 1
	KindService
)

// String returns the configuration name.
func (k PrincipalKind) String() string {
	switch k {
	case KindUser:
		return "user"
	case KindService:
		return "service"
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// TenantPolicy is one tenant's authorization and limits. Empty allowlists deny.
type TenantPolicy struct {
	TrustClasses []vocab.TrustClass
	CellClasses  []vocab.CellClass
	Subjects     []string
	Kinds        []PrincipalKind
	Limits       TenantLimits
}

// OverloadPolicy sets load thresholds: pressure at or above a threshold rejects.
type OverloadPolicy struct {
	CPUThreshold      float64 // (0, 1]
	MemoryThreshold   float64 // (0, 1]
	MaxObservationAge time.Duration
}

// DeadlinePolicy sets the bounded-backlog feasibility estimate.
type DeadlinePolicy struct {
	EstimatedServiceTime time.Duration
	MinimumExecutionTime time.Duration
	SafetyMargin         time.Duration
}

// MetadataPolicy bounds caller-selected identifiers and metadata.
type MetadataPolicy struct {
	MaxIdentifierBytes int // caller-chosen activation ids and target names
	MaxEntries         int // across claims, request attributes and revision attributes
	MaxBytes           int // keys + values, across the same
}

// NodePlacement is the node's placement identity.
type NodePlacement struct {
	Architecture, Region, Zone string
}

// PolicyError lists every problem in a policy. Each problem's Field is a
// vocab.FieldPath in the Go terms of Policy
// (`Tenants["acme"].Limits.MaxPriority`); a caller that reads the policy
// from a file maps the paths onto its own keys.
type PolicyError struct {
	Problems []vocab.FieldError
}

func (e *PolicyError) Error() string {
	return vocab.JoinFieldErrors("admission: invalid policy", e.Problems)
}

// ErrInvalidPolicy marks a *PolicyError.
var ErrInvalidPolicy = errors.New("admission: invalid policy")

// Is makes errors.Is(err, ErrInvalidPolicy) hold.
func (e *PolicyError) Is(target error) bool { return target == ErrInvalidPolicy }

type policyProblems []vocab.FieldError

func (p *policyProblems) add(field vocab.FieldPath, problem string) {
	*p = append(*p, field.Error(problem))
}

// CheckQueueClasses returns the problems of the shape of a list of queue
// classes, each named by its path under list: every class needs a valid
// name that no other class has and a non-empty priority range, and no two
// ranges overlap. It does not check coverage (Validate does, against the
// node's maximum priority), nor MaxQueued and ReservedCells. Validate and
// the scheduler's configuration apply it.
func CheckQueueClasses(list vocab.FieldPath, classes []QueueClassPolicy) []vocab.FieldError {
	var probs policyProblems
	if len(classes) == 0 {
		probs.add(list, "at least one queue class is required")
	}
	names := map[string]bool{}
	for i, q := range classes {
		f := list.Index(i)
		if err := vocab.ValidateName(q.Name); err != nil {
			probs.add(f.Field("Name"), err.Error())
		} else if names[q.Name] {
			probs.add(f.Field("Name"), "duplicate queue class")
		}
		names[q.Name] = true
		if q.MinPriority > q.MaxPriority {
			probs.add(f.Field("MinPriority"), "the range is empty: the first priority is above the last")
		}
		for j, o := range classes[:i] {
			if q.MinPriority <= o.MaxPriority && o.MinPriority <= q.MaxPriority {
				probs.add(f.Field("MinPriority"), "overlaps the priorities of queue class "+strconv.Itoa(j)+
					" ("+strconv.Quote(o.Name)+")")
			}
		}
	}
	return probs
}

// Validate checks the policy and returns a *PolicyError listing every problem.
func (p *Policy) Validate() error {
	var probs policyProblems
	ceiling := vocab.FieldPath("BudgetCeiling")
	b := p.BudgetCeiling
	if b.CPUFuel == 0 {
		probs.add(ceiling.Field("CPUFuel"), "must be positive")
	}
	if b.MemoryBytes == 0 {
		probs.add(ceiling.Field("MemoryBytes"), "must be positive")
	}
	if b.WallTime <= 0 {
		probs.add(ceiling.Field("WallTime"), "must be positive and finite")
	}
	if b.CheckPhase1() != nil {
		probs.add(ceiling, "later-phase dimensions must be zero")
	}
	if p.Limits.MaxPriority > maxPriority {
		probs.add(vocab.FieldPath("Limits").Field("MaxPriority"), "must be at most "+strconv.Itoa(maxPriority))
	}

	// Queue classes: named, non-overlapping, covering 0..node max priority.
	probs = append(probs, CheckQueueClasses("QueueClasses", p.QueueClasses)...)
	if p.Limits.MaxPriority <= maxPriority {
		for prio := uint32(0); prio <= p.Limits.MaxPriority; prio++ {
			if !slices.ContainsFunc(p.QueueClasses, func(q QueueClassPolicy) bool { return q.MinPriority <= prio && prio <= q.MaxPriority }) {
				probs.add("QueueClasses", "priority "+strconv.Itoa(int(prio))+" maps to no queue class, and the node's limits allow priorities up to "+
					strconv.FormatUint(uint64(p.Limits.MaxPriority), 10))
				break
			}
		}
	}

	// Cell classes.
	cells := vocab.FieldPath("CellClasses")
	if len(p.CellClasses) == 0 {
		probs.add(cells, "at least one cell class is required")
	}
	for _, c := range slices.Sorted(maps.Keys(p.CellClasses)) {
		cc := p.CellClasses[c]
		f := cells.Key(c.String())
		if !c.Valid() {
			probs.add(cells, "unknown cell class")
			continue
		}
		if cc.MemoryBytes == 0 {
			probs.add(f.Field("MemoryBytes"), "must be positive")
		}
		if cc.Parallelism == 0 {
			probs.add(f.Field("Parallelism"), "must be positive")
		}
		if len(cc.Threading) == 0 {
			probs.add(f.Field("Threading"), "at least one threading model is required")
		}
	}

	// Trust classes.
	trust := vocab.FieldPath("TrustClasses")
	for _, name := range slices.Sorted(maps.Keys(p.TrustClasses)) {
		tc := p.TrustClasses[name]
		f := trust.Key(string(name))
		if err := vocab.ValidateName(string(name)); err != nil {
			probs.add(trust, "invalid trust class name: "+err.Error())
		}
		for _, c := range tc.CellClasses {
			if _, ok := p.CellClasses[c]; !ok {
				probs.add(f.Field("CellClasses"), "names "+c.String()+", which is not a configured cell class")
			}
		}
	}

	// Tenants.
	tenants := vocab.FieldPath("Tenants")
	if len(p.Tenants) == 0 {
		probs.add(tenants, "at least one tenant is required (there is no default tenant)")
	}
	for _, name := range slices.Sorted(maps.Keys(p.Tenants)) {
		t := p.Tenants[name]
		f := tenants.Key(string(name))
		if err := vocab.ValidatePathName(string(name)); err != nil {
			probs.add(tenants, "invalid tenant name: "+err.Error())
		}
		for _, tc := range t.TrustClasses {
			if _, ok := p.TrustClasses[tc]; !ok {
				probs.add(f.Field("TrustClasses"), "names a trust class that is not configured")
			}
		}
		for _, c := range t.CellClasses {
			if _, ok := p.CellClasses[c]; !ok {
				probs.add(f.Field("CellClasses"), "names "+c.String()+", which is not a configured cell class")
			}
		}
		for _, s := range t.Subjects {
			if err := vocab.ValidateName(s); err != nil {
				probs.add(f.Field("Subjects"), "invalid subject: "+err.Error())
			}
		}
		for _, k := range t.Kinds {
			if k != KindUser && k != KindService {
				probs.add(f.Field("Kinds"), "unknown principal kind")
			}
		}
		if t.Limits.MaxPriority > maxPriority {
			probs.add(f.Field("Limits").Field("MaxPriority"), "must be at most "+strconv.Itoa(maxPriority))
		}
	}

	// Load and deadline.
	overload := vocab.FieldPath("Overload")
	o := p.Overload
	if !(o.CPUThreshold > 0 && o.CPUThreshold <= 1) {
		probs.add(overload.Field("CPUThreshold"), "must be in (0, 1]")
	}
	if !(o.MemoryThreshold > 0 && o.MemoryThreshold <= 1) {
		probs.add(overload.Field("MemoryThreshold"), "must be in (0, 1]")
	}
	if o.MaxObservationAge <= 0 {
		probs.add(overload.Field("MaxObservationAge"), "must be positive")
	}
	deadline := vocab.FieldPath("Deadline")
	d := p.Deadline
	if d.EstimatedServiceTime < 0 {
		probs.add(deadline.Field("EstimatedServiceTime"), "must not be negative")
	}
	if d.MinimumExecutionTime < 0 {
		probs.add(deadline.Field("MinimumExecutionTime"), "must not be negative")
	}
	if d.SafetyMargin < 0 {
		probs.add(deadline.Field("SafetyMargin"), "must not be negative")
	}

	metadata := vocab.FieldPath("Metadata")
	m := p.Metadata
	if m.MaxIdentifierBytes < 1 || m.MaxIdentifierBytes > vocab.MaxNameBytes {
		probs.add(metadata.Field("MaxIdentifierBytes"), "must be from 1 to "+strconv.Itoa(vocab.MaxNameBytes))
	}
	if m.MaxEntries < 0 || m.MaxEntries > math.MaxInt32 {
		probs.add(metadata.Field("MaxEntries"), "must not be negative")
	}
	if m.MaxBytes < 0 || m.MaxBytes > math.MaxInt32 {
		probs.add(metadata.Field("MaxBytes"), "must not be negative")
	}
	placement := vocab.FieldPath("Placement")
	for _, v := range []struct{ field, value string }{
		{"Architecture", p.Placement.Architecture}, {"Region", p.Placement.Region}, {"Zone", p.Placement.Zone},
	} {
		if err := vocab.ValidateName(v.value); err != nil {
			probs.add(placement.Field(v.field), err.Error())
		}
	}
	if len(probs) > 0 {
		return &PolicyError{Problems: probs}
	}
	return nil
}

// maxPriority bounds configured priorities so that validation stays cheap.
const maxPriority = 1000

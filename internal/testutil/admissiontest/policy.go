// Package admissiontest builds admission policies for tests that need a
// valid one and care about a few of its numbers only.
package admissiontest

import (
	"time"

	"github.com/latent-node/latent-node/admission"
	"github.com/latent-node/latent-node/vocab"
)

// Spec is what tests vary in a Policy; a zero field takes the default in its
// comment.
type Spec struct {
	Cell            vocab.CellClass             // the only cell class; vocab.CellStandard
	Parallelism     uint32                      // of that cell class; 8
	Limits          admission.Limits            // at node, trust class and tenant scope; DefaultLimits
	MaxPayloadBytes uint64                      // at node and tenant scope; 1<<24
	MaxPriority     uint32                      // at node and tenant scope and of the queue class; 0
	Tenants         map[vocab.TenantID][]string // tenant → its user subjects; {"acme": {"alice"}}
}

// DefaultLimits are the limits of a Spec that sets none: 64 live and 64
// queued activations, reserved fuel and memory practically unbounded.
var DefaultLimits = admission.Limits{MaxLiveActivations: 64, MaxQueued: 64, MaxReservedFuel: 1 << 60,
	MaxReservedMemory: 1 << 40}

// Features are the Wasm features of the policy's cell class: every feature
// but threads.
var Features = vocab.FeatureSetOf(vocab.FeatureBulkMemory, vocab.FeatureSIMD, vocab.FeatureMultiValue,
	vocab.FeatureSignExtension, vocab.FeatureNontrappingF2I, vocab.FeatureReferenceTypes)

// Policy returns a valid policy with one cell class (1 GiB, single-threaded,
// Features), one trust class "untrusted" allowing it, one queue class "all"
// for priorities 0..MaxPriority holding Limits.MaxQueued, and the spec's
// tenants, each allowed "untrusted" for its subjects as users. Budgets are
// capped at 1<<40 fuel, 1 GiB and a minute; overload never triggers and
// load samples stay fresh for an hour; no deadline policy; placement
// x86_64 in region "r", zone "z"; call depth 1000. Every call returns fresh
// maps and slices, so the caller may change the result.
func Policy(s Spec) admission.Policy {
	if s.Cell == 0 {
		s.Cell = vocab.CellStandard
	}
	if s.Parallelism == 0 {
		s.Parallelism = 8
	}
	if s.Limits == (admission.Limits{}) {
		s.Limits = DefaultLimits
	}
	if s.MaxPayloadBytes == 0 {
		s.MaxPayloadBytes = 1 << 24
	}
	if s.Tenants == nil {
		s.Tenants = map[vocab.TenantID][]string{"acme": {"alice"}}
	}
	limits := admission.TenantLimits{Limits: s.Limits, MaxPayloadBytes: s.MaxPayloadBytes, MaxPriority: s.MaxPriority}
	p := admission.Policy{
		BudgetCeiling: vocab.Budget{CPUFuel: 1 << 40, MemoryBytes: 1 << 30, WallTime: time.Minute},
		Limits:        limits,
		QueueClasses: []admission.QueueClassPolicy{{Name: "all", MinPriority: 0, MaxPriority: s.MaxPriority,
			MaxQueued: s.Limits.MaxQueued}},
		CellClasses: map[vocab.CellClass]admission.CellClassPolicy{s.Cell: {MemoryBytes: 1 << 30,
			Parallelism: s.Parallelism, Threading: []vocab.Threading{vocab.ThreadingSingle}, Features: Features}},
		TrustClasses: map[vocab.TrustClass]admission.TrustClassPolicy{"untrusted": {
			CellClasses: []vocab.CellClass{s.Cell}, Limits: s.Limits}},
		Tenants:   make(map[vocab.TenantID]admission.TenantPolicy, len(s.Tenants)),
		Overload:  admission.OverloadPolicy{CPUThreshold: 1, MemoryThreshold: 1, MaxObservationAge: time.Hour},
		Metadata:  admission.MetadataPolicy{MaxIdentifierBytes: 64, MaxEntries: 8, MaxBytes: 512},
		Placement: admission.NodePlacement{Architecture: "x86_64", Region: "r", Zone: "z"},
	}
	for tenant, subjects := range s.Tenants {
		p.Tenants[tenant] = admission.TenantPolicy{TrustClasses: []vocab.TrustClass{"untrusted"},
			CellClasses: []vocab.CellClass{s.Cell}, Subjects: append([]string(nil), subjects...),
			Kinds: []admission.PrincipalKind{admission.KindUser}, Limits: limits}
	}
	return p
}

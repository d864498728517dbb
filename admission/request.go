package admission

// What admission takes in: the load and queue-delay sources, the Principal,
// the Request and its BudgetRequest, and the Obligations it hands back.

import (
	"time"

	"github.com/latent-node/latent-node/catalog"
	"github.com/latent-node/latent-node/loadsource"
	"github.com/latent-node/latent-node/vocab"
)

// LoadSource supplies trusted node-wide load observations; *loadsource.State
// implements it. Reads fail closed.
type LoadSource interface {
	Read(now time.Time) (loadsource.Sample, error)
}

// QueueDelaySource reports the observed queue delay of a cell class (the
// scheduler's EWMA). A node that loses usable capacity must report a
// conservative delay.
type QueueDelaySource interface {
	ObservedQueueDelay(vocab.CellClass) time.Duration
}

// Principal is an authenticated caller. The node derives every field from
// the caller's API key, never from request headers or the body.
type Principal struct {
	Subject         string
	Kind            PrincipalKind
	Tenant          vocab.TenantID
	ServiceIdentity string // required for KindService
	// Claims are untrusted labels; they count against the metadata bounds and
	// never grant access, priority, trust or cells.
	Claims []vocab.Attribute
}

// BudgetRequest is what a caller asks for; the grant can only be lower.
// A dimension that is not Has… adds no restriction at the request layer.
type BudgetRequest struct {
	CPUFuel     uint64
	MemoryBytes uint64
	WallTime    time.Duration

	HasCPUFuel, HasMemoryBytes, HasWallTime bool

	// Later-phase dimensions: must be zero.
	NetworkEgressBytes, StorageBytes, Accelerators uint64
}

// Request is one activation to admit. It comes from the authenticated adapter
// (the node), which measured PayloadBytes from the body it read.
type Request struct {
	ActivationID string
	Principal    Principal
	// Revision is what the same pin's Resolve returned; Admit verifies it
	// against the controller's pin.
	Revision     catalog.ResolvedRevision
	Budget       BudgetRequest
	Deadline     time.Time // the caller's absolute deadline; zero: none
	PayloadBytes uint64
	Priority     uint32
	// Attributes are untrusted request metadata (Latent-Meta-* headers).
	Attributes []vocab.Attribute
}

// Obligations are what an admitted activation must be executed with.
type Obligations struct {
	Tenant     vocab.TenantID
	Subject    string
	Service    vocab.ServiceName
	Route      vocab.RouteName
	Function   vocab.FunctionName
	Revision   vocab.RevisionID
	Release    vocab.ReleaseID
	Artifact   vocab.Digest
	CellClass  vocab.CellClass
	QueueClass string
	QueueIndex int // index into Policy.QueueClasses
	TrustClass vocab.TrustClass
	Priority   uint32
	Threading  vocab.Threading
	Features   vocab.FeatureSet
	// Random is the revision's random_get source (the runner seeds it).
	Random vocab.Randomness
	// ABI is the revision's guest ABI (the runner builds the environment
	// and reads the output by it).
	ABI vocab.ABI
	// Instance and Init are the revision's instance mode and initialisation
	// export (the runner keeps warm instances by them).
	Instance vocab.InstanceMode
	Init     vocab.FunctionName
	// Outbound are the hosts the guest may send requests to.
	Outbound vocab.OutboundHosts
}

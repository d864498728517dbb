package catalog

import (
	"context"
	"slices"

	"github.com/cockroachdb/errors"

	"github.com/latent-node/latent-node/vocab"
)

// ModuleInspector examines a module at deploy time: it validates the binary,
// refuses imports outside the guest ABI, reads the features and memory limits
// the module uses, and prepares it for execution (the runner instruments and
// compiles it). The catalog calls it once per artifact on deploy and again when
// it reopens its records after a restart; it never calls it while pins are
// read. Implementations must be safe for concurrent use and deterministic: the
// same bytes give the same ModuleInfo.
type ModuleInspector interface {
	// Inspect returns what the catalog needs to know about module, whose
	// sha256 digest is digest. An error means the module cannot be deployed;
	// its message is shown to the deployer, so it must say what to fix (for
	// example which import is not allowed) and must not contain host paths.
	// An error marked ErrHostFault or ErrStorageFull is the host's, not the
	// module's: the deploy fails with it as is, not with a field problem.
	Inspect(ctx context.Context, digest vocab.Digest, module []byte) (ModuleInfo, error)
}

// ErrHostFault marks an Inspect error that is not the module's fault (the
// inspector could not compile or keep a valid module): a deploy failing with
// it is the node's failure and may succeed later.
var ErrHostFault = errors.New("catalog: the host could not prepare the module")

// ModuleReleaser is an optional interface of a ModuleInspector that keeps
// prepared (compiled) modules alive by reference. If the inspector implements
// it, every successful Inspect hands the catalog one reference to that
// digest's module, and the catalog calls ReleaseModule exactly once per
// reference when it no longer needs it: at once when the deploy that
// inspected fails for any reason (validation, quota, catalog full, disk, a
// cancelled context), and for a published release when a later generation
// replaces or deletes its service (the new release's references take the old
// one's place). A deploy inspects each distinct artifact once, so a service
// holds one reference per distinct artifact of its revisions; Open takes
// them for every service it loads. The catalog never calls ReleaseModule
// with its lock held. Pins are not counted: an old pin may still name a
// revision whose module was released (the runner refuses it as not
// available).
type ModuleReleaser interface {
	ReleaseModule(digest vocab.Digest)
}

// ModuleAcquirer is an optional interface of a ModuleInspector that is
// also a ModuleReleaser: AcquireModule hands out another reference to a
// module it holds already (inspected and not yet released by every
// holder), with its ModuleInfo, without the module's bytes; false when it
// holds none. The catalog tries it before reading and inspecting an
// artifact, so deploying or loading the thousandth service of a shared
// module neither reads nor hashes the module again. Ownership is checked
// before, as for Inspect.
type ModuleAcquirer interface {
	AcquireModule(digest vocab.Digest) (ModuleInfo, bool)
}

// SnapshotPreparer is an optional interface of a ModuleInspector that
// initialises modules at deploy time (the runner's snapshot instance mode).
// The catalog calls PrepareSnapshot for each revision of instance mode
// InstanceSnapshot, after its module was inspected and before the release
// is published; an error refuses the deploy as that revision's problem (one
// marked ErrHostFault or ErrStorageFull as the host's). The snapshot's
// lifetime is the preparer's business (the runner keeps it while it keeps
// the module).
type SnapshotPreparer interface {
	PrepareSnapshot(ctx context.Context, s SnapshotSpec) error
}

// SnapshotSpec is what a snapshot is made of: the tenant's module, the
// initialisation export (empty: the module's _initialize, if any), the
// random source, and the memory the initialisation may use (the revision's
// ceiling).
type SnapshotSpec struct {
	Tenant      vocab.TenantID
	Artifact    vocab.Digest
	Init        vocab.FunctionName
	Random      vocab.Randomness
	MemoryBytes uint64
}

// ModuleInfo is what inspection learns from a module's binary.
type ModuleInfo struct {
	// MinMemoryBytes and MaxMemoryBytes are the module's own memory limits
	// (initial size; declared maximum or MaxWasm32MemoryBytes).
	MinMemoryBytes uint64 `json:"min_memory_bytes"`
	MaxMemoryBytes uint64 `json:"max_memory_bytes"`
	// FixedMemoryBytes is what every activation of the module takes from
	// its memory grant besides linear memory and call stack (the runner:
	// its tables). It depends on the node's deploy limits as well as on the
	// module, so it is not compared with the recorded facts at Open.
	FixedMemoryBytes uint64 `json:"fixed_memory_bytes,omitempty"`
	// Features are the post-MVP features the module uses.
	Features vocab.FeatureSet `json:"features"`
	// Threading is ThreadingShared when the module uses shared memory.
	Threading vocab.Threading `json:"threading"`
	// Exports are the names of the exported functions, sorted.
	Exports []vocab.FunctionName `json:"exports"`
}

// ErrModuleRejected marks an inspector's refusal of a module.
var ErrModuleRejected = errors.New("catalog: module rejected")

func (m ModuleInfo) validate() error {
	switch {
	case m.MaxMemoryBytes > vocab.MaxWasm32MemoryBytes:
		return errors.New("module info: maximum memory exceeds the wasm32 limit")
	case m.MinMemoryBytes > m.MaxMemoryBytes:
		return errors.New("module info: initial memory exceeds maximum")
	case m.Threading != vocab.ThreadingSingle && m.Threading != vocab.ThreadingShared:
		return errors.New("module info: unknown threading model")
	case !m.Features.Valid():
		return errors.New("module info: unknown feature")
	case !slices.IsSorted(m.Exports):
		return errors.New("module info: exports are not sorted")
	}
	return nil
}

func (m ModuleInfo) exports(f vocab.FunctionName) bool {
	_, ok := slices.BinarySearch(m.Exports, f)
	return ok
}

func (m ModuleInfo) equal(o ModuleInfo) bool {
	return m.MinMemoryBytes == o.MinMemoryBytes && m.MaxMemoryBytes == o.MaxMemoryBytes &&
		m.Features == o.Features && m.Threading == o.Threading && slices.Equal(m.Exports, o.Exports)
}

type deployingKey struct{}

// DeployingTenant reports the tenant whose deploy ctx inspects a module
// for: set by Check and Deploy, which admit a release, and absent when the
// catalog re-inspects what it already holds (Open) or applies a history
// decided elsewhere (Apply, Replace). An Inspector may refuse a module for
// its tenant's own budgets only when it is set.
func DeployingTenant(ctx context.Context) (vocab.TenantID, bool) {
	t, ok := ctx.Value(deployingKey{}).(vocab.TenantID)
	return t, ok
}

// WithDeployingTenant marks ctx as a deploy's for tenant t (Check and
// Deploy do; an Inspector's tests may).
func WithDeployingTenant(ctx context.Context, t vocab.TenantID) context.Context {
	return context.WithValue(ctx, deployingKey{}, t)
}

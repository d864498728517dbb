// ModuleInspector and its optional interfaces (ModuleReleaser,
// ModuleAcquirer, SnapshotPreparer), ModuleInfo, and modules: the
// catalog's side of the inspector.

package catalog

import (
	"context"
	"slices"
	"strconv"
	"time"

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
	// Component is set when the artifact is a WebAssembly component (the
	// wasi-http ABI) rather than a core module; its Exports are empty: the
	// node calls the component's wasi:http/incoming-handler.
	Component bool `json:"component,omitempty"`
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
		m.Features == o.Features && m.Threading == o.Threading && slices.Equal(m.Exports, o.Exports) &&
		m.Component == o.Component
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

// modules is the catalog's side of its ModuleInspector: it reads a
// release's artifacts, has them inspected (each distinct one once),
// has snapshots prepared, and gives module references back. It holds no
// state that changes; the catalog holds one (Catalog.mods).
type modules struct {
	inspector ModuleInspector
	releaser  ModuleReleaser     // nil: the inspector hands out no references
	acquirer  ModuleAcquirer     // nil: every deploy reads and inspects its modules
	read      artifactStore      // the artifacts' bytes (tests replace it)
	maxBytes  int64              // Config.MaxArtifactBytes
	onInspect func(InspectEvent) // Config.OnInspect
	clock     vocab.Clock        // Config.Clock, timing onInspect's events
}

// InspectEvent is one call of Config.OnInspect: the module of digest, of
// bytes bytes, deployed (or loaded at Open) by the service; when Done,
// how long the Inspector took (compile slot wait included) and its error.
type InspectEvent struct {
	Tenant  vocab.TenantID
	Service vocab.ServiceName
	Digest  vocab.Digest
	Bytes   int
	Done    bool
	Took    time.Duration
	Err     error
}

// ErrText is the event's error as text, "" when there is none.
func (e InspectEvent) ErrText() string {
	if e.Err == nil {
		return ""
	}
	return e.Err.Error()
}

// inspect is m.inspector.Inspect of the module data of service s, told
// to onInspect.
func (m *modules) inspect(ctx context.Context, s vocab.Spec, digest vocab.Digest, data []byte) (ModuleInfo, error) {
	if m.onInspect == nil {
		return m.inspector.Inspect(ctx, digest, data)
	}
	ev := InspectEvent{Tenant: s.Tenant, Service: s.Service, Digest: digest, Bytes: len(data)}
	m.onInspect(ev)
	start := m.clock.Now()
	info, err := m.inspector.Inspect(ctx, digest, data)
	ev.Done, ev.Took, ev.Err = true, m.clock.Now().Sub(start), err
	m.onInspect(ev)
	return info, err
}

// newModules is the modules of inspector, reading artifacts from read.
func newModules(inspector ModuleInspector, read artifactStore, maxBytes int64) modules {
	m := modules{inspector: inspector, read: read, maxBytes: maxBytes}
	m.releaser, _ = inspector.(ModuleReleaser)
	if m.releaser != nil {
		m.acquirer, _ = inspector.(ModuleAcquirer)
	}
	return m
}

// inspectAll loads and inspects the artifact of every revision (each distinct
// digest once). Missing or refused modules are reported per revision field;
// with owns set, an artifact the manifest's tenant does not own is reported
// exactly like a missing one, without reading it. It returns the distinct
// digests inspected, one module reference each; on error it has released
// them. A seen map (for an inspector without references: Apply and Replace
// of many services) answers digests inspected before and records new ones.
func (m *modules) inspectAll(ctx context.Context, s vocab.Spec, owns func(vocab.TenantID, vocab.Digest) bool, seen map[vocab.Digest]ModuleInfo) (_ []ModuleInfo, refs []vocab.Digest, err error) {
	defer func() {
		if err != nil {
			m.release(refs)
			refs = nil
		}
	}()
	var p vocab.Problems
	modules := make([]ModuleInfo, len(s.Revisions))
	done := map[vocab.Digest]int{}
	for i, r := range s.Revisions {
		if j, ok := done[r.Artifact]; ok {
			modules[i] = modules[j]
			continue
		}
		f := "revisions[" + strconv.Itoa(i) + "].artifact"
		if owns != nil && !owns(s.Tenant, r.Artifact) {
			p.Add(f, unknownArtifact)
			continue
		}
		if m.acquirer != nil {
			if info, ok := m.acquirer.AcquireModule(r.Artifact); ok {
				refs = append(refs, r.Artifact)
				modules[i], done[r.Artifact] = info, i
				continue
			}
		}
		if info, ok := seen[r.Artifact]; ok {
			modules[i], done[r.Artifact] = info, i
			continue
		}
		data, err := m.read.get(r.Artifact, m.maxBytes)
		switch {
		case errors.Is(err, ErrArtifactNotFound):
			p.Add(f, unknownArtifact)
			continue
		case err != nil:
			return nil, refs, err
		}
		info, err := m.inspect(ctx, s, r.Artifact, data)
		if err != nil {
			if ctxErr := ctx.Err(); ctxErr != nil {
				return nil, refs, errors.Wrap(ctxErr, "catalog: inspect")
			}
			if errors.Is(err, ErrHostFault) || errors.Is(err, ErrStorageFull) {
				return nil, refs, err // the host's fault, not the module's: no field problem
			}
			p.AddErr(f, errors.Wrap(err, "module rejected"))
			continue
		}
		refs = append(refs, r.Artifact)
		info.Exports = slices.Clone(info.Exports)
		modules[i], done[r.Artifact] = info, i
		if seen != nil {
			seen[r.Artifact] = info
		}
	}
	if err := p.Err(); err != nil {
		return nil, refs, err
	}
	return modules, refs, nil
}

// unknownArtifact is the problem reported for an artifact the tenant cannot
// use: never uploaded, uploaded by another tenant only, or collected.
const unknownArtifact = "no artifact with this digest was uploaded"

// release hands module references back to the inspector, one per digest
// listed. It must not be called with the catalog's lock held.
func (m *modules) release(refs []vocab.Digest) {
	if m.releaser == nil {
		return
	}
	for _, d := range refs {
		m.releaser.ReleaseModule(d)
	}
}

// prepareSnapshots has the inspector initialise the module of every
// snapshot revision of s (SnapshotPreparer). A revision whose module does
// not export its init is left to the release's validation, which names the
// field.
func (m *modules) prepareSnapshots(ctx context.Context, s vocab.Spec, modules []ModuleInfo) error {
	sp, ok := m.inspector.(SnapshotPreparer)
	if !ok {
		return nil
	}
	var p vocab.Problems
	for i, r := range s.Revisions {
		if r.Instance != vocab.InstanceSnapshot || (r.Init != "" && !modules[i].exports(r.Init)) {
			continue
		}
		err := sp.PrepareSnapshot(ctx, SnapshotSpec{Tenant: s.Tenant, Artifact: r.Artifact, Init: r.Init,
			Random: r.Random, MemoryBytes: r.Ceiling.MemoryBytes})
		switch {
		case err == nil:
		case ctx.Err() != nil:
			return errors.Wrap(ctx.Err(), "catalog: prepare snapshot")
		case errors.Is(err, ErrHostFault), errors.Is(err, ErrStorageFull):
			return err
		default:
			p.AddErr("revisions["+strconv.Itoa(i)+"].instance", err)
		}
	}
	return p.Err()
}

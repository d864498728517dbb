package admission

import (
	"context"
	"crypto/sha256"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/latent-node/latent-node/catalog"
	"github.com/latent-node/latent-node/internal/testutil"
	"github.com/latent-node/latent-node/internal/testutil/catalogtest"
	"github.com/latent-node/latent-node/loadsource"
	"github.com/latent-node/latent-node/vocab"
)

var epoch = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

const mib = 1 << 20

func testPolicy() Policy {
	all := vocab.FeatureSetOf(vocab.FeatureBulkMemory, vocab.FeatureSIMD, vocab.FeatureMultiValue,
		vocab.FeatureSignExtension, vocab.FeatureNontrappingF2I, vocab.FeatureReferenceTypes)
	single := []vocab.Threading{vocab.ThreadingSingle}
	return Policy{
		BudgetCeiling: vocab.Budget{CPUFuel: 1_000_000_000, MemoryBytes: 512 * mib, WallTime: 30 * time.Second},
		Limits: TenantLimits{Limits: Limits{MaxLiveActivations: 8, MaxQueued: 6, MaxReservedFuel: 10_000_000_000,
			MaxReservedMemory: 4096 * mib}, MaxPayloadBytes: 1 * mib, MaxPriority: 9},
		QueueClasses: []QueueClassPolicy{
			{Name: "batch", MinPriority: 0, MaxPriority: 4, MaxQueued: 4},
			{Name: "interactive", MinPriority: 5, MaxPriority: 9, MaxQueued: 4, ReservedCells: 1},
		},
		CellClasses: map[vocab.CellClass]CellClassPolicy{
			vocab.CellTiny:     {MemoryBytes: 16 * mib, Parallelism: 2, Threading: single, Features: all},
			vocab.CellSmall:    {MemoryBytes: 64 * mib, Parallelism: 2, Threading: single, Features: all},
			vocab.CellStandard: {MemoryBytes: 256 * mib, Parallelism: 1, Threading: []vocab.Threading{vocab.ThreadingSingle, vocab.ThreadingShared}, Features: all | vocab.FeatureSetOf(vocab.FeatureThreads)},
			vocab.CellXLarge:   {MemoryBytes: 1024 * mib, Parallelism: 1, Threading: single, Features: all},
		},
		TrustClasses: map[vocab.TrustClass]TrustClassPolicy{
			"untrusted": {CellClasses: []vocab.CellClass{vocab.CellTiny, vocab.CellSmall, vocab.CellStandard},
				Limits: Limits{MaxLiveActivations: 6, MaxQueued: 5, MaxReservedFuel: 10_000_000_000, MaxReservedMemory: 4096 * mib}},
			"trusted": {CellClasses: []vocab.CellClass{vocab.CellTiny, vocab.CellSmall, vocab.CellStandard, vocab.CellXLarge},
				Limits: Limits{MaxLiveActivations: 6, MaxQueued: 6, MaxReservedFuel: 10_000_000_000, MaxReservedMemory: 4096 * mib}},
		},
		Tenants: map[vocab.TenantID]TenantPolicy{
			"acme": {TrustClasses: []vocab.TrustClass{"untrusted"},
				CellClasses: []vocab.CellClass{vocab.CellTiny, vocab.CellSmall, vocab.CellStandard},
				Subjects:    []string{"alice", "thumbnailer"}, Kinds: []PrincipalKind{KindUser, KindService},
				Limits: TenantLimits{Limits: Limits{MaxLiveActivations: 4, MaxQueued: 4, MaxReservedFuel: 5_000_000_000,
					MaxReservedMemory: 1024 * mib}, MaxPayloadBytes: 1024, MaxPriority: 6}},
			"beta": {TrustClasses: []vocab.TrustClass{"untrusted", "trusted"},
				CellClasses: []vocab.CellClass{vocab.CellTiny, vocab.CellSmall, vocab.CellStandard, vocab.CellXLarge},
				Subjects:    []string{"bob"}, Kinds: []PrincipalKind{KindUser},
				Limits: TenantLimits{Limits: Limits{MaxLiveActivations: 4, MaxQueued: 4, MaxReservedFuel: 5_000_000_000,
					MaxReservedMemory: 2048 * mib}, MaxPayloadBytes: 4096, MaxPriority: 9}},
		},
		Overload: OverloadPolicy{CPUThreshold: 0.9, MemoryThreshold: 0.9, MaxObservationAge: 2 * time.Second},
		Deadline: DeadlinePolicy{EstimatedServiceTime: 20 * time.Millisecond, MinimumExecutionTime: time.Millisecond,
			SafetyMargin: 2 * time.Millisecond},
		Metadata:  MetadataPolicy{MaxIdentifierBytes: 64, MaxEntries: 4, MaxBytes: 128},
		Placement: NodePlacement{Architecture: "x86_64", Region: "local", Zone: "local-a"},
	}
}

// inspector answers by the module text: "shared" uses shared memory,
// "small-capsule" caps memory at 4 MiB, "big-initial" starts with 8 MiB;
// any other module is plain.
var inspector = func() catalog.ModuleInspector {
	shared, capsule, big := catalogtest.PlainModuleInfo(), catalogtest.PlainModuleInfo(), catalogtest.PlainModuleInfo()
	shared.Threading = vocab.ThreadingShared
	shared.Features = vocab.FeatureSetOf(vocab.FeatureThreads)
	capsule.MaxMemoryBytes = 4 * mib
	big.MinMemoryBytes = 8 * mib
	return catalogtest.Inspector{ByModule: map[string]catalog.ModuleInfo{
		"shared": shared, "small-capsule": capsule, "big-initial": big}}
}()

type service struct {
	tenant     vocab.TenantID
	name       vocab.ServiceName
	module     string
	trust      vocab.TrustClass
	threading  string
	features   []string
	ceiling    vocab.ManifestCeiling
	placement  *vocab.ManifestPlacement
	attributes map[string]string
	random     string
}

// testServices are deployed by newHarness; each has one route "run".
var testServices = []service{
	{tenant: "acme", name: "images", module: "plain", trust: "untrusted",
		ceiling: vocab.ManifestCeiling{CPUFuel: 100_000_000, MemoryBytes: 32 * mib, WallTime: vocab.Duration(2 * time.Second)}},
	{tenant: "acme", name: "tiny", module: "plain", trust: "untrusted",
		ceiling: vocab.ManifestCeiling{CPUFuel: 1_000_000, MemoryBytes: 8 * mib, WallTime: vocab.Duration(time.Second)}},
	{tenant: "acme", name: "big", module: "plain", trust: "untrusted",
		ceiling: vocab.ManifestCeiling{CPUFuel: 100_000_000, MemoryBytes: 200 * mib, WallTime: vocab.Duration(2 * time.Second)}},
	{tenant: "acme", name: "huge", module: "plain", trust: "untrusted",
		ceiling: vocab.ManifestCeiling{CPUFuel: 100_000_000, MemoryBytes: 400 * mib, WallTime: vocab.Duration(2 * time.Second)}},
	{tenant: "acme", name: "simd", module: "plain", trust: "untrusted", features: []string{"simd"},
		ceiling: vocab.ManifestCeiling{CPUFuel: 100_000_000, MemoryBytes: 8 * mib, WallTime: vocab.Duration(2 * time.Second)}},
	{tenant: "acme", name: "threads", module: "shared", trust: "untrusted", threading: "shared",
		ceiling: vocab.ManifestCeiling{CPUFuel: 100_000_000, MemoryBytes: 8 * mib, WallTime: vocab.Duration(2 * time.Second)}},
	{tenant: "acme", name: "eu", module: "plain", trust: "untrusted", placement: &vocab.ManifestPlacement{Regions: []string{"eu"}},
		ceiling: vocab.ManifestCeiling{CPUFuel: 100_000_000, MemoryBytes: 8 * mib, WallTime: vocab.Duration(2 * time.Second)}},
	{tenant: "acme", name: "trusted", module: "plain", trust: "trusted",
		ceiling: vocab.ManifestCeiling{CPUFuel: 100_000_000, MemoryBytes: 8 * mib, WallTime: vocab.Duration(2 * time.Second)}},
	{tenant: "acme", name: "capsule", module: "small-capsule", trust: "untrusted",
		ceiling: vocab.ManifestCeiling{CPUFuel: 100_000_000, MemoryBytes: 32 * mib, WallTime: vocab.Duration(2 * time.Second)}},
	{tenant: "acme", name: "labelled", module: "plain", trust: "untrusted", attributes: map[string]string{"team": "media", "tier": "gold"},
		ceiling: vocab.ManifestCeiling{CPUFuel: 100_000_000, MemoryBytes: 8 * mib, WallTime: vocab.Duration(2 * time.Second)}},
	{tenant: "acme", name: "replay", module: "plain", trust: "untrusted", random: "deterministic",
		ceiling: vocab.ManifestCeiling{CPUFuel: 100_000_000, MemoryBytes: 8 * mib, WallTime: vocab.Duration(2 * time.Second)}},
	{tenant: "beta", name: "pool", module: "plain", trust: "trusted",
		ceiling: vocab.ManifestCeiling{CPUFuel: 100_000_000, MemoryBytes: 800 * mib, WallTime: vocab.Duration(2 * time.Second)}},
	{tenant: "beta", name: "images", module: "plain", trust: "untrusted",
		ceiling: vocab.ManifestCeiling{CPUFuel: 100_000_000, MemoryBytes: 32 * mib, WallTime: vocab.Duration(2 * time.Second)}},
}

type harness struct {
	t     testing.TB
	clock *testutil.Clock
	load  *loadsource.State
	cat   *catalog.Catalog
	prov  *LocalQuotaProvider
	delay map[vocab.CellClass]time.Duration
}

func (h *harness) ObservedQueueDelay(c vocab.CellClass) time.Duration { return h.delay[c] }

// sharedCat is the catalog of testServices that harnesses share: deploying
// them takes most of a harness's set-up, and no harness changes it (a test
// that deploys uses newHarnessOwnCatalog). TestMain removes its directory.
var sharedCat struct {
	once sync.Once
	dir  string
	cat  *catalog.Catalog
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if sharedCat.dir != "" {
		_ = os.RemoveAll(sharedCat.dir)
	}
	os.Exit(code)
}

func newHarness(t testing.TB, policy Policy) *harness {
	t.Helper()
	sharedCat.once.Do(func() {
		if sharedCat.dir, sharedCat.err = os.MkdirTemp("", "admission-catalog-"); sharedCat.err == nil {
			sharedCat.cat, sharedCat.err = deployTestServices(sharedCat.dir)
		}
	})
	if sharedCat.err != nil {
		t.Fatal(sharedCat.err)
	}
	return harnessWith(t, policy, sharedCat.cat)
}

// newHarnessOwnCatalog is newHarness with a catalog of the test's own, which
// the test may change.
func newHarnessOwnCatalog(t testing.TB, policy Policy) *harness {
	t.Helper()
	cat, err := deployTestServices(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return harnessWith(t, policy, cat)
}

// deployTestServices opens a catalog in dir and deploys testServices.
func deployTestServices(dir string) (*catalog.Catalog, error) {
	ctx := context.Background()
	cat, err := catalog.Open(ctx, catalog.Config{Dir: dir, Inspector: inspector})
	if err != nil {
		return nil, err
	}
	for _, s := range testServices {
		d := vocab.DigestOf(sha256.Sum256([]byte(s.module)))
		if err := cat.Artifacts().Put(ctx, s.tenant, d, strings.NewReader(s.module)); err != nil {
			return nil, err
		}
		ceiling := s.ceiling
		m := vocab.Manifest{Tenant: s.tenant, Service: s.name,
			Revisions: []vocab.ManifestRevision{{Name: "v1", Artifact: d, TrustClass: s.trust, Threading: s.threading, Random: s.random,
				Features: s.features, Ceiling: &ceiling, Placement: s.placement, Attributes: s.attributes}},
			Routes: []vocab.ManifestRoute{{Name: "run", Targets: []vocab.ManifestTarget{{Revision: "v1", Weight: 1}}}}}
		if _, err := cat.Deploy(ctx, m); err != nil {
			return nil, errors.Wrapf(err, "deploy %s/%s", s.tenant, s.name)
		}
	}
	return cat, nil
}

func harnessWith(t testing.TB, policy Policy, cat *catalog.Catalog) *harness {
	t.Helper()
	h := &harness{t: t, clock: testutil.NewClock(epoch), load: loadsource.NewState(time.Minute), delay: map[vocab.CellClass]time.Duration{},
		cat: cat}
	h.setLoad(0.1, 0.1)
	prov, err := NewLocalQuotaProvider(policy, Options{Clock: h.clock, Load: h.load, QueueDelay: h})
	if err != nil {
		t.Fatal(err)
	}
	h.prov = prov
	return h
}

// setLoad publishes a sample taken now (a sample must be newer than the last;
// the fake clock moves by 1ns to keep samples ordered).
func (h *harness) setLoad(cpu, mem float64) {
	h.clock.Advance(time.Nanosecond)
	if err := h.load.Publish(loadsource.Sample{CPU: cpu, Memory: mem, TakenAt: h.clock.Now()}); err != nil {
		h.t.Fatalf("publish: %v", err)
	}
}

// request builds a request for tenant/service/run by alice of acme.
func (h *harness) request(id string, tenant vocab.TenantID, svc vocab.ServiceName) *Request {
	h.t.Helper()
	pin := h.cat.Pin()
	rev, err := pin.Resolve(vocab.Target{Tenant: tenant, Service: svc, Route: "run"}, id)
	if err != nil {
		h.t.Fatalf("resolve %s/%s: %v", tenant, svc, err)
	}
	return &Request{ActivationID: id, Revision: rev,
		Principal: Principal{Subject: "alice", Kind: KindUser, Tenant: "acme"}}
}

func (h *harness) admit(req *Request) (*Permit, error) {
	return h.prov.WithPolicySource(h.cat.Pin()).Admit(req)
}

func loadSampleNow() loadsource.Sample {
	return loadsource.Sample{CPU: 0.1, Memory: 0.1, TakenAt: time.Now()}
}

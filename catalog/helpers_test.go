package catalog

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"maps"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/latent-node/latent-node/internal/testutil"
	"github.com/latent-node/latent-node/vocab"
)

const digestA = vocab.Digest("sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa")
const digestB = vocab.Digest("sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb")

// validManifest is acme/images with v1 and v2 split 90/10 on "thumbnail".
func validManifest() vocab.Manifest {
	return vocab.Manifest{
		Tenant: "acme", Service: "images",
		Revisions: []vocab.ManifestRevision{revision("v1", digestA), revision("v2", digestB)},
		Routes:    []vocab.ManifestRoute{mroute("thumbnail", target("v1", 90), target("v2", 10))},
	}
}

// fakeInspector answers from a table keyed by digest; unknown digests get
// defaultInfo. It counts calls so tests can prove when inspection happens.
// It implements ModuleReleaser: refs counts the references it handed out and
// not got back, and overReleased the ReleaseModule calls without one.
type fakeInspector struct {
	mu           sync.Mutex
	infos        map[vocab.Digest]ModuleInfo
	errs         map[vocab.Digest]error
	refs         map[vocab.Digest]int
	overReleased int
	calls        atomic.Int64
	onCall       func()
}

func newFakeInspector() *fakeInspector {
	return &fakeInspector{infos: map[vocab.Digest]ModuleInfo{}, errs: map[vocab.Digest]error{}, refs: map[vocab.Digest]int{}}
}

// ReleaseModule implements ModuleReleaser.
func (f *fakeInspector) ReleaseModule(d vocab.Digest) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.refs[d] == 0 {
		f.overReleased++
		return
	}
	if f.refs[d]--; f.refs[d] == 0 {
		delete(f.refs, d)
	}
}

// held returns a copy of the references held.
func (f *fakeInspector) held() map[vocab.Digest]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return maps.Clone(f.refs)
}

func defaultInfo() ModuleInfo {
	return ModuleInfo{
		MinMemoryBytes: vocab.WasmPageBytes, MaxMemoryBytes: vocab.MaxWasm32MemoryBytes,
		Threading: vocab.ThreadingSingle, Exports: []vocab.FunctionName{"_start", "helper"},
	}
}

func (f *fakeInspector) set(d vocab.Digest, info ModuleInfo) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.infos[d] = info
}

func (f *fakeInspector) reject(d vocab.Digest, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.errs[d] = err
}

func (f *fakeInspector) Inspect(ctx context.Context, d vocab.Digest, module []byte) (ModuleInfo, error) {
	f.calls.Add(1)
	if f.onCall != nil {
		f.onCall()
	}
	if vocab.DigestOf(sha256.Sum256(module)) != d {
		return ModuleInfo{}, errors.New("fake inspector: bytes do not match digest")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.errs[d]; err != nil {
		return ModuleInfo{}, err
	}
	f.refs[d]++
	if info, ok := f.infos[d]; ok {
		return info, nil
	}
	return defaultInfo(), nil
}

type fixture struct {
	t     testing.TB
	dir   string
	insp  *fakeInspector
	cat   *Catalog
	clock *testutil.Clock
	tune  func(o *Config) // applied by open, if set
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	return newFixtureWith(t, nil)
}

func newFixtureWith(t testing.TB, tune func(o *Config)) *fixture {
	t.Helper()
	fx := &fixture{t: t, dir: t.TempDir(), insp: newFakeInspector(), clock: testutil.NewClock(t0), tune: tune}
	fx.cat = fx.open()
	return fx
}

func (fx *fixture) options() Config {
	o := Config{Dir: fx.dir, Inspector: fx.insp, Clock: fx.clock}
	if fx.tune != nil {
		fx.tune(&o)
	}
	return o
}

func (fx *fixture) open() *Catalog {
	fx.t.Helper()
	c, err := Open(context.Background(), fx.options())
	if err != nil {
		fx.t.Fatalf("open: %v", err)
	}
	return c
}

// module uploads distinct bytes for tenant acme and returns their digest.
func (fx *fixture) module(content string) vocab.Digest {
	fx.t.Helper()
	return fx.moduleFor("acme", content)
}

// moduleFor uploads bytes for tenant and returns their digest.
func (fx *fixture) moduleFor(tenant vocab.TenantID, content string) vocab.Digest {
	fx.t.Helper()
	d := digestOf(content)
	if err := fx.cat.Artifacts().Put(context.Background(), tenant, d, strings.NewReader(content)); err != nil {
		fx.t.Fatalf("put artifact: %v", err)
	}
	return d
}

func digestOf(content string) vocab.Digest { return vocab.DigestOf(sha256.Sum256([]byte(content))) }

func (fx *fixture) deploy(m vocab.Manifest) vocab.Deployment {
	fx.t.Helper()
	d, err := fx.cat.Deploy(context.Background(), m)
	if err != nil {
		fx.t.Fatalf("deploy: %v", err)
	}
	return d
}

func revision(name string, art vocab.Digest) vocab.ManifestRevision {
	return vocab.ManifestRevision{
		Name: vocab.RevisionName(name), Artifact: art, TrustClass: "untrusted",
		Ceiling: &vocab.ManifestCeiling{CPUFuel: 1_000_000, MemoryBytes: 32 << 20, WallTime: vocab.Duration(2e9)},
	}
}

func mroute(name string, targets ...vocab.ManifestTarget) vocab.ManifestRoute {
	return vocab.ManifestRoute{Name: vocab.RouteName(name), Function: "_start", Targets: targets}
}

func target(rev string, weight int64) vocab.ManifestTarget {
	return vocab.ManifestTarget{Revision: vocab.RevisionName(rev), Weight: weight}
}

// twoRevisions is acme/images with v1 and v2 split 90/10 on "thumbnail" and
// v1 alone on "stable".
func twoRevisions(a, b vocab.Digest) vocab.Manifest {
	return vocab.Manifest{
		Tenant: "acme", Service: "images",
		Revisions: []vocab.ManifestRevision{revision("v1", a), revision("v2", b)},
		Routes: []vocab.ManifestRoute{
			mroute("thumbnail", target("v1", 90), target("v2", 10)),
			mroute("stable", target("v1", 1)),
		},
	}
}

// poisonStore counts and refuses every artifact access.
type poisonStore struct{ touched *atomic.Int64 }

func (p poisonStore) get(vocab.Digest, int64) ([]byte, error) {
	p.touched.Add(1)
	return nil, errors.New("poisoned")
}

func problemFields(t *testing.T, err error) []string {
	t.Helper()
	var ve *vocab.ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("want a *ValidationError, have %T: %v", err, err)
	}
	var out []string
	for _, p := range ve.Problems {
		out = append(out, p.Field)
	}
	return out
}

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// all returns the services of the pin as a map (tests compare views).
func (p Pin) all() map[serviceKey]*service {
	out := map[serviceKey]*service{}
	p.s.each(func(svc *service) bool {
		out[serviceKey{svc.tenant, svc.name}] = svc
		return true
	})
	return out
}

// svc returns the service under k in the pin, nil when there is none.
func (p Pin) svc(k serviceKey) *service {
	svc, _ := p.s.get(k)
	return svc
}

// edit rewrites the file name with f applied to its bytes.
func edit(t *testing.T, name string, f func([]byte) []byte) {
	t.Helper()
	data, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, f(data), 0o600); err != nil {
		t.Fatal(err)
	}
}

// cloneManifest is a deep copy of m (through its JSON).
func cloneManifest(m vocab.Manifest) vocab.Manifest {
	var out vocab.Manifest
	if err := json.Unmarshal(encodeManifest(m), &out); err != nil {
		panic(err)
	}
	return out
}

package catalog

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/errors"

	"github.com/latent-node/latent-node/vocab"
)

// acquiringInspector is the fake inspector with ModuleAcquirer: a digest
// it holds a reference to is acquired without its bytes.
type acquiringInspector struct {
	*fakeInspector
	acquired int
}

func (a *acquiringInspector) AcquireModule(d vocab.Digest) (ModuleInfo, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.refs[d] == 0 || a.errs[d] != nil {
		return ModuleInfo{}, false
	}
	a.refs[d]++
	a.acquired++
	info, ok := a.infos[d]
	if !ok {
		info = defaultInfo()
	}
	return info, true
}

// shapedManifest is service i of a tenant as a platform deploys many: one
// to three revisions over a few shared artifacts, one to four routes, a
// snapshot revision now and then. variant changes the release.
func shapedManifest(tenant vocab.TenantID, service vocab.ServiceName, i, variant int, arts []vocab.Digest) vocab.Manifest {
	m := vocab.Manifest{Tenant: tenant, Service: service}
	for r := range 1 + i%3 {
		rev := revision("v"+strconv.Itoa(r), arts[(i+r)%len(arts)])
		rev.Ceiling.CPUFuel += uint64(variant)
		if (i+r)%5 == 0 {
			rev.Instance = "snapshot"
		}
		m.Revisions = append(m.Revisions, rev)
	}
	for k := range 1 + i%4 {
		rt := mroute("r" + strconv.Itoa(k))
		for r := range m.Revisions {
			rt.Targets = append(rt.Targets, target(string(m.Revisions[r].Name), int64(1+r)))
		}
		m.Routes = append(m.Routes, rt)
	}
	return m
}

// oracleView is the catalog as a plain map, copied whole at every
// generation: what the copy-on-write index must always agree with.
type oracleView struct {
	generation vocab.Generation
	releases   map[serviceKey]vocab.ReleaseID
}

// checkView compares a pin with the oracle: every service (through
// lookups and through the ordered walks), the per-tenant listing and its
// pages, the count.
func checkView(t *testing.T, label string, p Pin, want oracleView, tenants []vocab.TenantID) {
	t.Helper()
	if p.Generation() != want.generation {
		t.Fatalf("%s: generation %d, want %d", label, p.Generation(), want.generation)
	}
	have := map[serviceKey]vocab.ReleaseID{}
	for _, d := range p.AllServices() {
		have[serviceKey{d.Tenant, d.Service}] = d.Release
	}
	if !maps.Equal(have, want.releases) {
		t.Fatalf("%s: services %v, want %v", label, have, want.releases)
	}
	for k, rel := range want.releases {
		d, ok := p.Deployment(k.tenant, k.service)
		if !ok || d.Release != rel {
			t.Fatalf("%s: %v: deployment %v %v, want release %s", label, k, ok, d.Release, rel)
		}
	}
	for _, tenant := range tenants {
		var names []vocab.ServiceName
		for k := range want.releases {
			if k.tenant == tenant {
				names = append(names, k.service)
			}
		}
		slices.Sort(names)
		var listed []vocab.ServiceName
		for _, d := range p.Services(tenant) {
			listed = append(listed, d.Service)
		}
		if !slices.Equal(listed, names) {
			t.Fatalf("%s: %s lists %v, want %v", label, tenant, listed, names)
		}
		// Pages of 3 cover the same list, in order, once.
		var paged []vocab.ServiceName
		after := vocab.ServiceName("")
		for {
			page, more := p.ServicesPage(tenant, after, 3)
			for _, d := range page {
				paged = append(paged, d.Service)
			}
			if !more {
				break
			}
			after = page[len(page)-1].Service
		}
		if !slices.Equal(paged, names) {
			t.Fatalf("%s: %s pages %v, want %v", label, tenant, paged, names)
		}
	}
}

// TestIndex_againstOracle runs random deploys, replacements, deletes and
// pins against the oracle: every pin, including pins held across many later
// generations, keeps matching the oracle's copy of its generation; the
// counters the deploy path reads match a recount; the hash depends only on
// the content; a reopened catalog matches the last view.
func TestIndex_againstOracle(t *testing.T) {
	for seed := range uint64(6) {
		t.Run("seed="+strconv.FormatUint(seed, 10), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 7))
			fx := newFixtureWith(t, func(o *Config) { o.MaxServicesPerTenant = 12; o.MaxServices = 30 })
			tenants := []vocab.TenantID{"acme", "beta", "gamma"}
			arts := map[vocab.TenantID][]vocab.Digest{}
			for _, tenant := range tenants {
				for i := range 4 {
					arts[tenant] = append(arts[tenant], fx.moduleFor(tenant, string(tenant)+strconv.Itoa(i)))
				}
			}
			cur := oracleView{releases: map[serviceKey]vocab.ReleaseID{}}
			type held struct {
				pin  Pin
				want oracleView
			}
			var pins []held
			for step := range 300 {
				ti := rng.IntN(len(tenants))
				tenant := tenants[ti]
				// acme has up to 16 services, beta 4, gamma 1: tenants
				// that keep going from none to one service and back.
				name := vocab.ServiceName("s" + strconv.Itoa(rng.IntN(16>>(2*ti))))
				k := serviceKey{tenant, name}
				label := fmt.Sprintf("step %d", step)
				switch op := rng.IntN(10); {
				case op < 6:
					m := shapedManifest(tenant, name, rng.IntN(12), rng.IntN(3), arts[tenant])
					d, err := fx.cat.Deploy(context.Background(), m)
					_, exists := cur.releases[k]
					perTenant := 0
					for o := range cur.releases {
						if o.tenant == tenant {
							perTenant++
						}
					}
					switch {
					case !exists && perTenant >= 12:
						if !errors.Is(err, ErrTenantQuota) {
							t.Fatalf("%s: deploy over the tenant's quota: %v", label, err)
						}
					case !exists && len(cur.releases) >= 30:
						if !errors.Is(err, ErrCatalogFull) {
							t.Fatalf("%s: deploy into a full catalog: %v", label, err)
						}
					case err != nil:
						t.Fatalf("%s: deploy: %v", label, err)
					default:
						cur = oracleView{generation: d.Generation, releases: maps.Clone(cur.releases)}
						cur.releases[k] = d.Release
					}
				case op < 8:
					gen, err := fx.cat.Delete(context.Background(), tenant, name)
					if _, exists := cur.releases[k]; !exists {
						if !errors.Is(err, ErrServiceNotFound) {
							t.Fatalf("%s: delete of a missing service: %v", label, err)
						}
						break
					} else if err != nil {
						t.Fatalf("%s: delete: %v", label, err)
					}
					cur = oracleView{generation: gen, releases: maps.Clone(cur.releases)}
					delete(cur.releases, k)
				default:
					pins = append(pins, held{fx.cat.Pin(), cur})
				}
				checkView(t, label, fx.cat.Pin(), cur, tenants)
				checkCounters(t, label, fx.cat)
				if step%25 == 0 {
					for i, h := range pins {
						checkView(t, fmt.Sprintf("%s, pin %d", label, i), h.pin, h.want, tenants)
					}
				}
			}
			// The hash is the content's: a catalog filled in another order
			// with the same releases has it too.
			other := newFixture(t)
			keys := slices.Collect(maps.Keys(cur.releases))
			rng.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
			for _, k := range keys {
				_, m, err := fx.cat.Manifest(k.tenant, k.service)
				if err != nil {
					t.Fatal(err)
				}
				for _, r := range m.Revisions {
					other.moduleFor(k.tenant, string(k.tenant)+artifactIndex(arts[k.tenant], r.Artifact))
				}
				other.deploy(m)
			}
			if fx.cat.Pin().Hash() != other.cat.Pin().Hash() {
				t.Fatal("the same releases deployed in another order hash differently")
			}
			if len(keys) > 0 {
				if _, err := other.cat.Delete(context.Background(), keys[0].tenant, keys[0].service); err != nil {
					t.Fatal(err)
				}
				if fx.cat.Pin().Hash() == other.cat.Pin().Hash() {
					t.Fatal("a catalog with a service less hashes the same (negative control)")
				}
			}
			// A restart rebuilds the same view, counters and generation.
			before := fx.cat.Pin()
			fx.cat = fx.open()
			checkView(t, "reopened", fx.cat.Pin(), cur, tenants)
			if fx.cat.Pin().Hash() != before.Hash() {
				t.Fatal("the reopened catalog hashes differently")
			}
			checkCounters(t, "reopened", fx.cat)
		})
	}
}

func artifactIndex(arts []vocab.Digest, d vocab.Digest) string {
	return strconv.Itoa(slices.Index(arts, d))
}

// checkCounters recounts what the writer's counters say from the
// published view.
func checkCounters(t *testing.T, label string, c *Catalog) {
	t.Helper()
	want := map[vocab.TenantID]*tenantUse{}
	c.Pin().s.each(func(svc *service) bool {
		u := want[svc.tenant]
		if u == nil {
			u = &tenantUse{name: svc.tenant, artifacts: map[vocab.Digest]int{}, snapshots: map[SnapshotSpec]int{}}
			want[svc.tenant] = u
		}
		u.count(svc, 1, new([]SnapshotSpec))
		return true
	})
	c.mu.Lock()
	defer c.mu.Unlock()
	if !reflect.DeepEqual(c.mu.index.use, want) {
		t.Fatalf("%s: counters %+v, recount %+v", label, c.mu.index.use, want)
	}
	if c.mu.index.tree.Len() != c.Pin().s.len() {
		t.Fatalf("%s: the writer has %d services, the view %d", label, c.mu.index.tree.Len(), c.Pin().s.len())
	}
}

// TestSnapshotsInUse: the snapshots a tenant needs follow its deploys and
// deletes, one per artifact, init and random source, and only the tenant's.
func TestSnapshotsInUse(t *testing.T) {
	fx := newFixture(t)
	a, b := fx.module("a"), fx.module("b")
	other := fx.moduleFor("beta", "c")
	snap := func(m vocab.Manifest) vocab.Manifest {
		for i := range m.Revisions {
			m.Revisions[i].Instance = "snapshot"
		}
		return m
	}
	fx.deploy(snap(oneRevision("acme", "one", a)))
	fx.deploy(snap(oneRevision("acme", "two", a)))
	fx.deploy(oneRevision("acme", "three", b)) // fresh: needs no snapshot
	fx.deploy(snap(oneRevision("beta", "one", other)))
	want := []SnapshotSpec{{Tenant: "acme", Artifact: a, Random: vocab.RandomSecure}}
	if have := fx.cat.SnapshotsInUse("acme"); !reflect.DeepEqual(have, want) {
		t.Fatalf("in use %+v, want %+v", have, want)
	}
	if _, err := fx.cat.Delete(context.Background(), "acme", "one"); err != nil {
		t.Fatal(err)
	}
	if have := fx.cat.SnapshotsInUse("acme"); !reflect.DeepEqual(have, want) {
		t.Fatalf("after deleting one of two users: %+v, want %+v", have, want)
	}
	fx.deploy(oneRevision("acme", "two", a)) // replaced by a fresh revision
	if have := fx.cat.SnapshotsInUse("acme"); len(have) != 0 {
		t.Fatalf("after the last user went: %+v", have)
	}
}

// TestAcquire_skipsTheBytes: with a ModuleAcquirer, deploying another
// service of a module the inspector holds reads no artifact, and the
// references still balance.
func TestAcquire_skipsTheBytes(t *testing.T) {
	insp := &acquiringInspector{fakeInspector: newFakeInspector()}
	fx := &fixture{t: t, dir: t.TempDir(), insp: insp.fakeInspector}
	c, err := Open(context.Background(), Config{Dir: fx.dir, Inspector: insp})
	if err != nil {
		t.Fatal(err)
	}
	fx.cat = c
	a := fx.module("a")
	fx.deploy(oneRevision("acme", "one", a))
	calls := insp.calls.Load()
	fx.deploy(oneRevision("acme", "two", a))
	if insp.calls.Load() != calls || insp.acquired != 1 {
		t.Fatalf("second service: %d inspections, %d acquisitions", insp.calls.Load()-calls, insp.acquired)
	}
	if have := insp.held()[a]; have != 2 {
		t.Fatalf("%d references held, want 2", have)
	}
	if _, err := c.Delete(context.Background(), "acme", "one"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Delete(context.Background(), "acme", "two"); err != nil {
		t.Fatal(err)
	}
	if have := insp.held(); len(have) != 0 || insp.overReleased != 0 {
		t.Fatalf("references left %v, over-released %d", have, insp.overReleased)
	}
	// Nothing held: the next deploy reads and inspects again.
	fx.deploy(oneRevision("acme", "three", a))
	if insp.calls.Load() != calls+1 {
		t.Fatal("a module nobody holds was acquired instead of inspected")
	}
}

// benchDir is where the catalog benchmarks keep their data: tmpfs when
// the machine has one, so that fsync (about 0.75 ms here, the same at every
// size) does not hide what the catalog's own work costs.
func benchDir(b *testing.B) string {
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		dir, err := os.MkdirTemp("/dev/shm", "latent-catalog-bench-")
		if err == nil {
			b.Cleanup(func() { _ = os.RemoveAll(dir) })
			return dir
		}
	}
	return b.TempDir()
}

// filledCatalog is a catalog on benchDir(b) holding n services of acme
// (shaped manifests over the artifacts of modules distinct contents),
// deployed through Deploy, with the acquiring fake inspector.
func filledCatalog(b *testing.B, n, modules int) (*fixture, []vocab.Digest) {
	insp := &acquiringInspector{fakeInspector: newFakeInspector()}
	c, err := Open(context.Background(), Config{Dir: benchDir(b), Inspector: insp,
		MaxServices: n, MaxServicesPerTenant: n})
	if err != nil {
		b.Fatal(err)
	}
	fx := &fixture{t: b, dir: c.store.root, insp: insp.fakeInspector, cat: c}
	var arts []vocab.Digest
	for i := range modules {
		arts = append(arts, fx.module("module "+strconv.Itoa(i)))
	}
	for i := range n {
		fx.deploy(shapedManifest("acme", vocab.ServiceName("svc-"+strconv.Itoa(i)), i, 0, arts))
	}
	return fx, arts
}

// BenchmarkDeploy replaces services of one tenant in a catalog of N
// services (shaped manifests over 8 shared artifacts): ns/op and B/op must
// not grow with N.
func BenchmarkDeploy(b *testing.B) {
	for _, n := range []int{1_000, 10_000, 100_000} {
		b.Run("services="+strconv.Itoa(n), func(b *testing.B) {
			fx, arts := filledCatalog(b, n, 8)
			runtime.GC()
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				j := (i * 7919) % n
				fx.deploy(shapedManifest("acme", vocab.ServiceName("svc-"+strconv.Itoa(j)), j, 1+i%2, arts))
				i++
			}
		})
	}
}

// BenchmarkResolve resolves a route in a catalog of N services.
func BenchmarkResolve(b *testing.B) {
	for _, n := range []int{1_000, 100_000} {
		b.Run("services="+strconv.Itoa(n), func(b *testing.B) {
			fx, _ := filledCatalog(b, n, 1)
			pin := fx.cat.Pin()
			runtime.GC() // the fill's garbage is not the loop's
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				target := vocab.Target{Tenant: "acme", Service: vocab.ServiceName("svc-" + strconv.Itoa((i*7919)%n)), Route: "r0"}
				if _, err := pin.Resolve(target, "key"); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}

// BenchmarkOpen opens a catalog of N services (shaped manifests over 8
// shared artifacts, on tmpfs): what a restart costs per service, and the
// Go heap a loaded service keeps (live-B/service: decoded from records,
// as after a restart; the catalog's part of the node's memory per service).
func BenchmarkOpen(b *testing.B) {
	for _, n := range []int{10_000} {
		b.Run("services="+strconv.Itoa(n), func(b *testing.B) {
			fx, _ := filledCatalog(b, n, 8)
			dir := fx.dir
			fx = nil
			var live float64
			b.ReportAllocs()
			for b.Loop() {
				var before, after runtime.MemStats
				b.StopTimer()
				runtime.GC()
				runtime.ReadMemStats(&before)
				b.StartTimer()
				insp := &acquiringInspector{fakeInspector: newFakeInspector()}
				opened, err := Open(context.Background(), Config{Dir: dir, Inspector: insp, MaxServices: n, MaxServicesPerTenant: n})
				if err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				runtime.GC()
				runtime.ReadMemStats(&after)
				live = float64(after.HeapAlloc-before.HeapAlloc) / float64(n)
				runtime.KeepAlive(opened)
				b.StartTimer()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/service")
			b.ReportMetric(live, "live-B/service")
		})
	}
}

// TestOpen_failureReleasesReferences: Open loads records in parallel; when
// one in the middle is corrupt, it fails naming that file and gives back
// every module reference the services loaded before and after it took.
func TestOpen_failureReleasesReferences(t *testing.T) {
	fx := newFixture(t)
	arts := []vocab.Digest{fx.module("a"), fx.module("b"), fx.module("c")}
	for i := range 40 {
		fx.deploy(shapedManifest("acme", vocab.ServiceName("svc-"+strconv.Itoa(i)), i, 0, arts))
	}
	bad := filepath.Join(fx.dir, ServiceRecordPath("acme", "svc-17"))
	edit(t, bad, func(b []byte) []byte { b[len(b)-2] ^= 1; return b })
	for _, insp := range []ModuleInspector{newFakeInspector(), &acquiringInspector{fakeInspector: newFakeInspector()}} {
		_, err := Open(context.Background(), Config{Dir: fx.dir, Inspector: insp})
		if err == nil || !errors.Is(err, ErrCorruptRecord) || !strings.Contains(err.Error(), bad) {
			t.Fatalf("Open: %v, want the corrupt %s", err, bad)
		}
		f, ok := insp.(*fakeInspector)
		if !ok {
			f = insp.(*acquiringInspector).fakeInspector
		}
		if held := f.held(); len(held) != 0 || f.overReleased != 0 {
			t.Fatalf("%T: references left %v, over-released %d", insp, held, f.overReleased)
		}
	}
}

// TestSnapshotsUnused: after every deploy, delete, Apply and Replace of a
// random sequence, Config.OnSnapshotsUnused names exactly the snapshots
// SnapshotsInUse had before and has no more (the oracle), across tenants;
// a change that moves a snapshot from one service to another names
// nothing.
func TestSnapshotsUnused(t *testing.T) {
	var told []SnapshotSpec
	fx := newFixtureWith(t, func(o *Config) {
		o.OnSnapshotsUnused = func(specs []SnapshotSpec) { told = append(told, specs...) }
	})
	ctx := context.Background()
	tenants := []vocab.TenantID{"acme", "beta"}
	arts := map[vocab.TenantID][]vocab.Digest{}
	for _, tn := range tenants {
		for i := range 3 {
			arts[tn] = append(arts[tn], fx.moduleFor(tn, string(tn)+"-"+strconv.Itoa(i)))
		}
	}
	inUse := func() map[SnapshotSpec]bool {
		all := map[SnapshotSpec]bool{}
		for _, tn := range tenants {
			for _, sp := range fx.cat.SnapshotsInUse(tn) {
				all[sp] = true
			}
		}
		return all
	}
	manifest := func(r *rand.Rand, tn vocab.TenantID, svc string) vocab.Manifest {
		m := oneRevision(tn, vocab.ServiceName(svc), arts[tn][r.IntN(3)])
		if r.IntN(4) > 0 {
			m.Revisions[0].Instance = "snapshot"
		}
		return m
	}
	r := rand.New(rand.NewPCG(7, 36))
	for step := range 400 {
		before := inUse()
		told = nil
		tn := tenants[r.IntN(2)]
		svc := "s" + strconv.Itoa(r.IntN(5))
		var what string
		switch op := r.IntN(10); {
		case op < 5:
			what = "deploy " + svc
			if _, err := fx.cat.Deploy(ctx, manifest(r, tn, svc)); err != nil {
				t.Fatal(err)
			}
		case op < 7:
			what = "delete " + svc
			if _, err := fx.cat.Delete(ctx, tn, vocab.ServiceName(svc)); err != nil && !errors.Is(err, ErrServiceNotFound) {
				t.Fatal(err)
			}
		case op < 9:
			// Two changes at once: a snapshot may move from one service to
			// the other, and then nothing is named.
			what = "apply " + svc + " and t"
			a := manifest(r, tn, svc)
			changes := []Change{{Tenant: tn, Service: a.Service, Manifest: &a}, {Tenant: tn, Service: "t"}}
			if r.IntN(2) == 0 {
				b := manifest(r, tn, "t")
				changes[1].Manifest = &b
			}
			if err := fx.cat.Apply(ctx, fx.cat.Pin().Generation()+1, changes); err != nil {
				t.Fatal(err)
			}
		default:
			what = "replace with two services"
			a, b := manifest(r, "acme", "s0"), manifest(r, "beta", "s1")
			if err := fx.cat.Replace(ctx, fx.cat.Pin().Generation()+1, []vocab.Manifest{a, b}); err != nil {
				t.Fatal(err)
			}
		}
		after := inUse()
		want := map[SnapshotSpec]bool{}
		for sp := range before {
			if !after[sp] {
				want[sp] = true
			}
		}
		have := map[SnapshotSpec]bool{}
		for _, sp := range told {
			if have[sp] {
				t.Fatalf("step %d (%s): %+v named twice", step, what, sp)
			}
			have[sp] = true
		}
		for sp := range have {
			if !want[sp] {
				t.Fatalf("step %d (%s): named %+v, which is still in use or was never", step, what, sp)
			}
		}
		for sp := range want {
			if !have[sp] {
				t.Fatalf("step %d (%s): %+v lost its last revision and was not named", step, what, sp)
			}
		}
	}
}

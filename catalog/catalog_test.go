package catalog

import (
	"context"
	"crypto/sha256"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/errors"

	"github.com/latent-node/latent-node/vocab"
)

var images = vocab.Target{Tenant: "acme", Service: "images", Route: "thumbnail"}

func TestDeploy_identities(t *testing.T) {
	fx := newFixture(t)
	a, b := fx.module("module-a"), fx.module("module-b")
	d1 := fx.deploy(twoRevisions(a, b))
	if d1.Generation != 1 || len(d1.Revisions) != 2 {
		t.Fatalf("unexpected deployment %+v", d1)
	}
	for _, id := range []string{string(d1.Release), string(d1.Revisions[0].ID), string(d1.Revisions[1].ID)} {
		if len(id) > vocab.MaxGeneratedIDBytes || vocab.ValidateGeneratedID(id) != nil {
			t.Fatalf("generated id %q is not well-formed", id)
		}
	}
	if d1.Revisions[0].ID == d1.Revisions[1].ID {
		t.Fatal("distinct revisions share an id")
	}

	// The same content spelled differently (JSON order, sizes as strings,
	// attribute order) gives the same ids, under a new generation.
	m := twoRevisions(a, b)
	m.Revisions[0].Ceiling.MemoryBytes = 32 << 20
	d2 := fx.deploy(cloneManifest(m))
	if d2.Release != d1.Release || !slices.Equal(d2.Revisions, d1.Revisions) || d2.Generation != 2 {
		t.Fatalf("same content, different ids: %+v vs %+v", d1, d2)
	}

	// Any change of content changes the ids it reaches.
	changes := map[string]func(m *vocab.Manifest){
		"weight":      func(m *vocab.Manifest) { m.Routes[0].Targets[0].Weight = 80 },
		"fuel":        func(m *vocab.Manifest) { m.Revisions[1].Ceiling.CPUFuel++ },
		"trust class": func(m *vocab.Manifest) { m.Revisions[1].TrustClass = "trusted" },
		"feature":     func(m *vocab.Manifest) { m.Revisions[1].Features = []string{"simd"} },
		"random":      func(m *vocab.Manifest) { m.Revisions[1].Random = "deterministic" },
		"abi":         func(m *vocab.Manifest) { m.Revisions[1].ABI = "wagi" },
		"placement":   func(m *vocab.Manifest) { m.Revisions[1].Placement = &vocab.ManifestPlacement{Zones: []string{"z"}} },
		"attribute":   func(m *vocab.Manifest) { m.Revisions[1].Attributes = map[string]string{"team": "x"} },
		"artifact":    func(m *vocab.Manifest) { m.Revisions[1].Artifact = a },
		"route name":  func(m *vocab.Manifest) { m.Routes[1].Name = "other" },
	}
	for name, change := range changes {
		m := twoRevisions(a, b)
		change(&m)
		d := fx.deploy(m)
		if d.Release == d1.Release {
			t.Errorf("%s: release id unchanged", name)
		}
		if name != "weight" && name != "route name" && d.Revisions[1].ID == d1.Revisions[1].ID {
			t.Errorf("%s: revision id unchanged", name)
		}
		if d.Revisions[0].ID != d1.Revisions[0].ID {
			t.Errorf("%s: the untouched revision changed id", name)
		}
	}

	// Another service with the same content gets other ids.
	m = twoRevisions(a, b)
	m.Service = "videos"
	if d := fx.deploy(m); d.Release == d1.Release || d.Revisions[0].ID == d1.Revisions[0].ID {
		t.Error("ids do not depend on the service")
	}
}

func TestPin_generationReplacement(t *testing.T) {
	fx := newFixture(t)
	a, b, c := fx.module("a"), fx.module("b"), fx.module("c")
	fx.deploy(twoRevisions(a, b))
	oldPin := fx.cat.Pin()
	oldRev, err := oldPin.Resolve(images, "key")
	if err != nil {
		t.Fatal(err)
	}
	oldPolicy, err := oldPin.Policy(oldRev)
	if err != nil {
		t.Fatal(err)
	}

	// Replace v1/v2 by v3 alone.
	m := vocab.Manifest{Tenant: "acme", Service: "images",
		Revisions: []vocab.ManifestRevision{revision("v3", c)},
		Routes:    []vocab.ManifestRoute{mroute("thumbnail", target("v3", 1))}}
	m.Revisions[0].Ceiling.CPUFuel = 777
	fx.deploy(m)
	newPin := fx.cat.Pin()

	// The old pin keeps serving its exact policy.
	again, err := oldPin.Resolve(images, "key")
	if err != nil || !reflect.DeepEqual(again, oldRev) {
		t.Fatalf("old pin resolves differently: %+v %v", again, err)
	}
	if p, err := oldPin.Policy(oldRev); err != nil || !reflect.DeepEqual(p, oldPolicy) {
		t.Fatalf("old pin's policy changed: %+v %v", p, err)
	}
	if _, err := oldPin.Resolve(vocab.Target{Tenant: "acme", Service: "images", Route: "stable"}, ""); err != nil {
		t.Fatalf("old pin lost a route: %v", err)
	}
	// The new pin refuses the old generation and serves the new release.
	if _, err := newPin.Policy(oldRev); !errors.Is(err, ErrRevisionNotAvailable) {
		t.Fatalf("new pin accepted the old generation: %v", err)
	}
	newRev, err := newPin.Resolve(images, "key")
	if err != nil {
		t.Fatal(err)
	}
	p, err := newPin.Policy(newRev)
	if err != nil || p.Name != "v3" || p.Ceiling.CPUFuel != 777 || p.Generation != 2 {
		t.Fatalf("new pin policy: %+v %v", p, err)
	}
	if _, err := newPin.Resolve(vocab.Target{Tenant: "acme", Service: "images", Route: "stable"}, ""); !errors.Is(err, ErrRevisionNotAvailable) {
		t.Fatalf("new pin still has the removed route: %v", err)
	}

	// Deletion is a generation too; both older pins keep serving.
	gen, err := fx.cat.Delete(context.Background(), "acme", "images")
	if err != nil || gen != 3 {
		t.Fatalf("delete: %d %v", gen, err)
	}
	deleted := fx.cat.Pin()
	if _, err := deleted.Resolve(images, "key"); !errors.Is(err, ErrRevisionNotAvailable) {
		t.Fatalf("deleted service resolves: %v", err)
	}
	if _, err := deleted.Policy(newRev); !errors.Is(err, ErrRevisionNotAvailable) {
		t.Fatalf("deleted service has policy: %v", err)
	}
	if _, err := oldPin.Policy(oldRev); err != nil {
		t.Fatalf("old pin lost its policy after delete: %v", err)
	}
	if _, err := newPin.Policy(newRev); err != nil {
		t.Fatalf("newer pin lost its policy after delete: %v", err)
	}
	if _, err := fx.cat.Delete(context.Background(), "acme", "images"); !errors.Is(err, ErrServiceNotFound) {
		t.Fatalf("second delete: %v", err)
	}

	// Redeploying the identical first release gets the same ids but a new
	// generation, so resolutions from the old pins stay refused.
	d := fx.deploy(twoRevisions(a, b))
	if d.Generation != 4 || d.Release != oldRev.Release {
		t.Fatalf("redeploy: %+v", d)
	}
	if _, err := fx.cat.Pin().Policy(oldRev); !errors.Is(err, ErrRevisionNotAvailable) {
		t.Fatalf("a pin after redeploy accepted generation 1: %v", err)
	}
}

func TestPin_policyVerifiesTuple(t *testing.T) {
	fx := newFixture(t)
	a, b := fx.module("a"), fx.module("b")
	m := twoRevisions(a, b)
	m.Revisions[0].Attributes = map[string]string{"team": "media"}
	fx.deploy(m)
	other := twoRevisions(a, b)
	other.Service = "other"
	fx.deploy(other)
	pin := fx.cat.Pin()
	stableRev, err := pin.Resolve(vocab.Target{Tenant: "acme", Service: "images", Route: "stable"}, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(stableRev.Attributes) != 1 || stableRev.Attributes[0] != (vocab.Attribute{Key: "team", Value: "media"}) {
		t.Fatalf("attributes not resolved: %+v", stableRev.Attributes)
	}
	v2 := pin.svc(serviceKey{"acme", "images"}).policies[1].ID

	tests := []struct {
		name   string
		mutate func(r *ResolvedRevision)
		ok     bool
	}{
		{"as resolved", func(r *ResolvedRevision) {}, true},
		{"forged attributes are ignored", func(r *ResolvedRevision) {
			r.Attributes = []vocab.Attribute{{Key: "trust_class", Value: "trusted"}, {Key: "cell_class", Value: "xlarge"}, {Key: "cpu_fuel", Value: "1e18"}}
		}, true},
		{"other tenant", func(r *ResolvedRevision) { r.Tenant = "evil" }, false},
		{"other service", func(r *ResolvedRevision) { r.Service = "other" }, false},
		{"unknown route", func(r *ResolvedRevision) { r.Route = "nope" }, false},
		{"other function", func(r *ResolvedRevision) { r.Function = "helper" }, false},
		{"revision the route does not target", func(r *ResolvedRevision) { r.Revision = v2 }, false},
		{"unknown revision", func(r *ResolvedRevision) { r.Revision = "rev1-00" }, false},
		{"other release", func(r *ResolvedRevision) { r.Release = "rel1-00" }, false},
		{"older generation", func(r *ResolvedRevision) { r.Generation-- }, false},
		{"newer generation", func(r *ResolvedRevision) { r.Generation++ }, false},
		{"zero value", func(r *ResolvedRevision) { *r = ResolvedRevision{} }, false},
	}
	want, err := pin.Policy(stableRev)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := stableRev
			r.Attributes = slices.Clone(r.Attributes)
			tc.mutate(&r)
			have, err := pin.Policy(r)
			if tc.ok {
				if err != nil || !reflect.DeepEqual(have, want) {
					t.Fatalf("want the pinned policy, have %+v %v", have, err)
				}
				return
			}
			if !errors.Is(err, ErrRevisionNotAvailable) {
				t.Fatalf("want ErrRevisionNotAvailable, have %v", err)
			}
			if strings.Contains(err.Error(), "acme") || strings.Contains(err.Error(), "images") {
				t.Fatalf("error echoes identities: %v", err)
			}
		})
	}
	// Mutating what Resolve returned does not change the pin.
	stableRev.Attributes[0].Value = "forged"
	again, _ := pin.Resolve(vocab.Target{Tenant: "acme", Service: "images", Route: "stable"}, "")
	if again.Attributes[0].Value != "media" {
		t.Fatal("resolved attributes alias the pin")
	}
	if (Pin{}).Generation() != 0 {
		t.Fatal("zero pin has a generation")
	}
	if _, err := (Pin{}).Resolve(images, ""); !errors.Is(err, ErrRevisionNotAvailable) {
		t.Fatal("zero pin resolves")
	}
}

func TestPin_policyContent(t *testing.T) {
	fx := newFixture(t)
	a := fx.module("a")
	fx.insp.set(a, ModuleInfo{MinMemoryBytes: 2 * vocab.WasmPageBytes, MaxMemoryBytes: 64 * vocab.WasmPageBytes, Threading: vocab.ThreadingSingle,
		Features: vocab.FeatureSetOf(vocab.FeatureBulkMemory), Exports: []vocab.FunctionName{"_start"}})
	m := vocab.Manifest{Tenant: "acme", Service: "images",
		Revisions: []vocab.ManifestRevision{revision("v1", a)},
		Routes:    []vocab.ManifestRoute{mroute("thumbnail", target("v1", 1))}}
	m.Revisions[0].Features = []string{"simd"}
	m.Revisions[0].Placement = &vocab.ManifestPlacement{Architectures: []string{"x86_64"}, Regions: []string{"eu"}}
	d := fx.deploy(m)
	pin := fx.cat.Pin()
	r, err := pin.Resolve(images, "")
	if err != nil {
		t.Fatal(err)
	}
	p, err := pin.Policy(r)
	if err != nil {
		t.Fatal(err)
	}
	want := vocab.RevisionPolicy{
		Tenant: "acme", Service: "images", Name: "v1", ID: d.Revisions[0].ID, Release: d.Release, Generation: 1,
		Artifact: a, TrustClass: "untrusted",
		Ceiling:      vocab.Budget{CPUFuel: 1_000_000, MemoryBytes: 32 << 20, WallTime: 2e9},
		Capsule:      vocab.Capsule{MinMemoryBytes: 2 * vocab.WasmPageBytes, MaxMemoryBytes: 64*vocab.WasmPageBytes + vocab.CallStackBytes},
		Requirements: vocab.Requirements{Threading: vocab.ThreadingSingle, Features: vocab.FeatureSetOf(vocab.FeatureSIMD, vocab.FeatureBulkMemory)},
		Placement:    vocab.NewPlacement([]string{"x86_64"}, []string{"eu"}, nil),
	}
	if !reflect.DeepEqual(p, want) {
		t.Fatalf("policy:\nwant %+v\nhave %+v", want, p)
	}
	if r.Function != "_start" || r.Route != "thumbnail" {
		t.Fatalf("resolution: %+v", r)
	}
	dep, ok := pin.Deployment("acme", "images")
	if !ok || !reflect.DeepEqual(dep, d) {
		t.Fatalf("Deployment: %+v %v", dep, ok)
	}
	dep2, man, err := fx.cat.Manifest("acme", "images")
	if err != nil || !reflect.DeepEqual(dep2, d) || man.Revisions[0].Placement.Architectures[0] != "x86_64" {
		t.Fatalf("Manifest: %+v %+v %v", dep2, man, err)
	}
	man.Revisions[0].Placement.Architectures[0] = "mutated"
	if _, again, _ := fx.cat.Manifest("acme", "images"); again.Revisions[0].Placement.Architectures[0] != "x86_64" {
		t.Fatal("Manifest aliases the catalog")
	}
	if _, _, err := fx.cat.Manifest("acme", "nope"); !errors.Is(err, ErrServiceNotFound) {
		t.Fatalf("Manifest of a service never deployed: %v", err)
	}
	if svcs := pin.Services("acme"); len(svcs) != 1 || svcs[0].Service != "images" {
		t.Fatalf("Services: %+v", svcs)
	}
	if arts := pin.Artifacts(); !slices.Equal(arts, []vocab.Digest{a}) {
		t.Fatalf("Artifacts: %v", arts)
	}
}

// TestPin_noArtifactAccess proves that resolution and policy lookup are
// in-memory index operations: with the artifact store poisoned and the data
// directory gone, every lookup still works and nothing is inspected.
func TestPin_noArtifactAccess(t *testing.T) {
	fx := newFixture(t)
	fx.deploy(twoRevisions(fx.module("a"), fx.module("b")))
	var touched atomic.Int64
	fx.cat.mods.read = poisonStore{&touched}
	inspected := fx.insp.calls.Load()
	if err := os.RemoveAll(fx.dir); err != nil {
		t.Fatal(err)
	}
	pin := fx.cat.Pin()
	for i := 0; i < 1000; i++ {
		r, err := pin.Resolve(images, fmt.Sprint("key-", i))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := pin.Policy(r); err != nil {
			t.Fatal(err)
		}
	}
	if touched.Load() != 0 || fx.insp.calls.Load() != inspected {
		t.Fatalf("policy lookup touched the artifact store %d times, inspected %d modules",
			touched.Load(), fx.insp.calls.Load()-inspected)
	}
	// Negative control: a deploy does read artifacts, and the poison sees it.
	if _, err := fx.cat.Deploy(context.Background(), twoRevisions(digestOf("a"), digestOf("b"))); err == nil || touched.Load() == 0 {
		t.Fatalf("the poisoned store did not notice a deploy (%v): the test cannot detect artifact access", err)
	}
}

func TestResolve_split(t *testing.T) {
	fx := newFixture(t)
	arts := []vocab.Digest{fx.module("a"), fx.module("b"), fx.module("c"), fx.module("d")}
	configs := [][]int64{{90, 10}, {50, 50}, {1, 1, 1}, {70, 20, 10}, {1, 99}, {1, 2, 3, 4}, {9999, 1}}
	const keys = 100_000
	for _, weights := range configs {
		t.Run(fmt.Sprint(weights), func(t *testing.T) {
			m := vocab.Manifest{Tenant: "acme", Service: "images"}
			var targets []vocab.ManifestTarget
			var total int64
			for i, w := range weights {
				name := fmt.Sprint("v", i)
				m.Revisions = append(m.Revisions, revision(name, arts[i]))
				targets = append(targets, target(name, w))
				total += w
			}
			m.Routes = []vocab.ManifestRoute{mroute("thumbnail", targets...)}
			d := fx.deploy(m)
			pin := fx.cat.Pin()
			counts := map[vocab.RevisionID]int{}
			for k := 0; k < keys; k++ {
				r, err := pin.Resolve(images, fmt.Sprint("user-", k))
				if err != nil {
					t.Fatal(err)
				}
				counts[r.Revision]++
			}
			for i, w := range weights {
				want := float64(w) / float64(total)
				have := float64(counts[d.Revisions[i].ID]) / keys
				if math.Abs(have-want) > 0.015 {
					t.Errorf("revision %d: want share %.4f ± 0.015, have %.4f", i, want, have)
				}
			}
			// The same key gives the same revision, every time and in a new pin
			// of the same release.
			for k := 0; k < 1000; k++ {
				key := fmt.Sprint("user-", k)
				r1, _ := pin.Resolve(images, key)
				r2, _ := fx.cat.Pin().Resolve(images, key)
				if r1.Revision != r2.Revision {
					t.Fatalf("key %q moved between pins", key)
				}
			}
		})
	}
}

func TestRoutingHash_stable(t *testing.T) {
	// Pinned values, computed independently from the documented definition
	// (FNV-1a 64 over the 0x00-separated parts, then SplitMix64). A change to
	// the routing hash moves every caller's sticky revision, so it must be
	// deliberate and documented.
	tests := []struct {
		target vocab.Target
		key    string
		want   uint64
	}{
		{images, "", 4212748543935812445},
		{images, "user-1", 12433992954935394434},
		{vocab.Target{Tenant: "t", Service: "s", Route: "r"}, "k", 10611752491701725611},
	}
	for _, tc := range tests {
		if have := routingHash(tc.target, tc.key); have != tc.want {
			t.Errorf("routingHash(%v, %q): want %d, have %d", tc.target, tc.key, tc.want, have)
		}
	}
	if routingHash(vocab.Target{Tenant: "ab", Service: "c", Route: "r"}, "k") == routingHash(vocab.Target{Tenant: "a", Service: "bc", Route: "r"}, "k") {
		t.Error("separators do not separate")
	}
}

func TestRestart(t *testing.T) {
	fx := newFixture(t)
	a, b, c := fx.module("a"), fx.module("b"), fx.moduleFor("beta", "c")
	fx.insp.set(c, ModuleInfo{MinMemoryBytes: 0, MaxMemoryBytes: 1 << 20, Threading: vocab.ThreadingShared,
		Features: vocab.FeatureSetOf(vocab.FeatureThreads, vocab.FeatureSIMD), Exports: []vocab.FunctionName{"_start"}})
	fx.deploy(twoRevisions(a, b))
	other := twoRevisions(a, b)
	other.Service = "videos"
	fx.deploy(other)
	shared := vocab.Manifest{Tenant: "beta", Service: "pool",
		Revisions: []vocab.ManifestRevision{revision("v1", c)},
		Routes:    []vocab.ManifestRoute{mroute("run", target("v1", 1))}}
	shared.Revisions[0].Threading = "shared"
	shared.Revisions[0].Attributes = map[string]string{"k": "v"}
	fx.deploy(shared)
	doomed := twoRevisions(a, b)
	doomed.Service = "doomed"
	fx.deploy(doomed)
	if _, err := fx.cat.Delete(context.Background(), "acme", "doomed"); err != nil {
		t.Fatal(err)
	}
	before := fx.cat.Pin()

	calls := fx.insp.calls.Load()
	reopened := fx.open()
	after := reopened.Pin()
	if fx.insp.calls.Load() == calls {
		t.Fatal("Open did not inspect the artifacts again")
	}
	if !reflect.DeepEqual(before.s.generation, after.s.generation) || after.Generation() != 5 {
		t.Fatalf("generation: before %d after %d", before.Generation(), after.Generation())
	}
	if len(after.all()) != 3 {
		t.Fatalf("want 3 services after restart, have %d", len(after.all()))
	}
	for key, svc := range before.all() {
		re := after.svc(key)
		if re == nil {
			t.Fatalf("%v lost on restart", key)
		}
		if !reflect.DeepEqual(svc.policies, re.policies) || !reflect.DeepEqual(svc.deployment(), re.deployment()) ||
			!reflect.DeepEqual(svc.attributes, re.attributes) {
			t.Errorf("%v differs after restart", key)
		}
	}
	// A resolution from before the restart is accepted by the rebuilt catalog:
	// identities are content-derived and generations persisted.
	r, _ := before.Resolve(images, "k")
	if _, err := after.Policy(r); err != nil {
		t.Fatalf("pre-restart resolution refused after restart: %v", err)
	}
	// The counter continues: no generation is reused after a restart.
	fx.cat = reopened
	if d := fx.deploy(doomed); d.Generation != 6 {
		t.Fatalf("want generation 6 after restart, have %d", d.Generation)
	}
}

func TestOpen_corruption(t *testing.T) {
	setup := func(t *testing.T) (*fixture, string) {
		fx := newFixture(t)
		fx.deploy(twoRevisions(fx.module("a"), fx.module("b")))
		return fx, filepath.Join(fx.dir, ServiceRecordPath("acme", "images"))
	}
	tests := []struct {
		name    string
		corrupt func(t *testing.T, fx *fixture, rec string) string // returns the file the error must name
	}{
		{"truncated record", func(t *testing.T, fx *fixture, rec string) string {
			edit(t, rec, func(b []byte) []byte { return b[:len(b)-10] })
			return rec
		}},
		{"extended record", func(t *testing.T, fx *fixture, rec string) string {
			edit(t, rec, func(b []byte) []byte { return append(b, ' ') })
			return rec
		}},
		{"flipped payload byte", func(t *testing.T, fx *fixture, rec string) string {
			edit(t, rec, func(b []byte) []byte { b[len(b)-20] ^= 1; return b })
			return rec
		}},
		{"empty record", func(t *testing.T, fx *fixture, rec string) string {
			edit(t, rec, func(b []byte) []byte { return nil })
			return rec
		}},
		{"bad header", func(t *testing.T, fx *fixture, rec string) string {
			edit(t, rec, func(b []byte) []byte { return append([]byte("x"), b...) })
			return rec
		}},
		{"record under another name", func(t *testing.T, fx *fixture, rec string) string {
			other := filepath.Join(filepath.Dir(rec), strings.Repeat("0", 64)+".rec")
			if err := os.Rename(rec, other); err != nil {
				t.Fatal(err)
			}
			return other
		}},
		{"unexpected file", func(t *testing.T, fx *fixture, rec string) string {
			name := filepath.Join(filepath.Dir(rec), "notes.txt")
			if err := os.WriteFile(name, []byte("hi"), 0o600); err != nil {
				t.Fatal(err)
			}
			return name
		}},
		{"state missing", func(t *testing.T, fx *fixture, rec string) string {
			if err := os.Remove(filepath.Join(fx.dir, StateFile)); err != nil {
				t.Fatal(err)
			}
			return filepath.Join(fx.dir, StateFile)
		}},
		{"state corrupt", func(t *testing.T, fx *fixture, rec string) string {
			name := filepath.Join(fx.dir, StateFile)
			edit(t, name, func(b []byte) []byte { b[len(b)-2] ^= 1; return b })
			return name
		}},
		{"artifact modified", func(t *testing.T, fx *fixture, rec string) string {
			d := vocab.DigestOf(sha256.Sum256([]byte("a")))
			name := filepath.Join(fx.dir, ArtifactsDir, d.Hex())
			edit(t, name, func(b []byte) []byte { return append(b, '!') })
			return name
		}},
		{"artifact missing", func(t *testing.T, fx *fixture, rec string) string {
			d := vocab.DigestOf(sha256.Sum256([]byte("b")))
			if err := os.Remove(filepath.Join(fx.dir, ArtifactsDir, d.Hex())); err != nil {
				t.Fatal(err)
			}
			return filepath.Join(fx.dir, OwnerRecordPath("acme", d))
		}},
		{"inspector changed its mind", func(t *testing.T, fx *fixture, rec string) string {
			info := defaultInfo()
			info.Features = vocab.FeatureSetOf(vocab.FeatureSIMD)
			fx.insp.set(vocab.DigestOf(sha256.Sum256([]byte("a"))), info)
			return rec
		}},
		{"recorded ids tampered with a valid checksum", func(t *testing.T, fx *fixture, rec string) string {
			edit(t, rec, func(b []byte) []byte {
				payload := b[strings.IndexByte(string(b), '\n')+1:]
				forged := strings.Replace(string(payload), `"release":"rel1-`, `"release":"rel1-f`, 1)
				forged = strings.Replace(forged, `","generation"`, `","generation"`, 1)
				return encodeRecord("service", []byte(forged))
			})
			return rec
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fx, rec := setup(t)
			want := tc.corrupt(t, fx, rec)
			_, err := Open(context.Background(), Config{Dir: fx.dir, Inspector: fx.insp})
			if err == nil {
				t.Fatal("Open accepted a corrupt catalog")
			}
			if !strings.Contains(err.Error(), want) {
				t.Fatalf("error does not name %s: %v", want, err)
			}
			if !errors.Is(err, ErrCorruptRecord) {
				t.Fatalf("error not marked ErrCorruptRecord: %v", err)
			}
		})
	}
}

func TestOpen_removesStaleTemps(t *testing.T) {
	fx := newFixture(t)
	fx.deploy(twoRevisions(fx.module("a"), fx.module("b")))
	stale := filepath.Join(fx.dir, ServicesDir, tmpPrefix+"crashed")
	if err := os.WriteFile(stale, []byte("half"), 0o600); err != nil {
		t.Fatal(err)
	}
	fx.open()
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Fatalf("stale temp file survived: %v", err)
	}
	if _, err := Open(context.Background(), Config{Inspector: fx.insp}); err == nil {
		t.Fatal("Open without a directory succeeded")
	}
	if _, err := Open(context.Background(), Config{Dir: fx.dir}); err == nil {
		t.Fatal("Open without an inspector succeeded")
	}
}

// TestDeploy_badInputKeepsServing: every refused deploy names its field,
// changes nothing in memory or on disk, and the previous release serves.
func TestDeploy_badInputKeepsServing(t *testing.T) {
	fx := newFixture(t)
	a, b := fx.module("a"), fx.module("b")
	good := fx.deploy(twoRevisions(a, b))
	rejected := fx.module("rejected")
	fx.insp.reject(rejected, errors.New("import env.host_log is not allowed"))
	big := fx.module("big")
	fx.insp.set(big, ModuleInfo{MinMemoryBytes: 64 << 20, MaxMemoryBytes: 128 << 20, Threading: vocab.ThreadingSingle,
		Exports: []vocab.FunctionName{"_start"}})
	shared := fx.module("shared")
	fx.insp.set(shared, ModuleInfo{MaxMemoryBytes: 1 << 20, Threading: vocab.ThreadingShared, Exports: []vocab.FunctionName{"_start"}})
	tables := fx.module("tables")
	fx.insp.set(tables, ModuleInfo{MinMemoryBytes: vocab.WasmPageBytes, MaxMemoryBytes: 128 << 20, FixedMemoryBytes: 64 << 20,
		Threading: vocab.ThreadingSingle, Exports: []vocab.FunctionName{"_start"}})
	noStart := fx.module("nostart")
	fx.insp.set(noStart, ModuleInfo{MaxMemoryBytes: 1 << 20, Threading: vocab.ThreadingSingle, Exports: []vocab.FunctionName{"main"}})
	missing := vocab.DigestOf(sha256.Sum256([]byte("never uploaded")))

	tests := []struct {
		name    string
		mutate  func(m *vocab.Manifest)
		field   string
		message string
	}{
		{"invalid manifest", func(m *vocab.Manifest) { m.Routes[0].Targets[0].Weight = 0 }, "routes[0].targets[0].weight", "from 1"},
		{"artifact not uploaded", func(m *vocab.Manifest) { m.Revisions[1].Artifact = missing }, "revisions[1].artifact", "no artifact"},
		{"module rejected", func(m *vocab.Manifest) { m.Revisions[1].Artifact = rejected }, "revisions[1].artifact", "env.host_log"},
		{"ceiling below initial memory", func(m *vocab.Manifest) { m.Revisions[1].Artifact = big }, "revisions[1].ceiling.memory_bytes", "initial memory"},
		{"ceiling below initial memory and tables", func(m *vocab.Manifest) { m.Revisions[1].Artifact = tables }, "revisions[1].ceiling.memory_bytes", "initial memory and tables"},
		{"shared memory undeclared", func(m *vocab.Manifest) { m.Revisions[1].Artifact = shared }, "revisions[1].threading", "shared"},
		{"function not exported", func(m *vocab.Manifest) { m.Revisions[1].Artifact = noStart }, "routes[0].function", "does not export"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := fx.cat.Pin()
			stateBefore, _ := os.ReadFile(filepath.Join(fx.dir, StateFile))
			m := twoRevisions(a, b)
			tc.mutate(&m)
			_, err := fx.cat.Deploy(context.Background(), m)
			if !errors.Is(err, vocab.ErrInvalidManifest) {
				t.Fatalf("want ErrInvalidManifest, have %v", err)
			}
			fields := problemFields(t, err)
			if !slices.Contains(fields, tc.field) || !strings.Contains(err.Error(), tc.message) {
				t.Fatalf("want field %s mentioning %q, have %v", tc.field, tc.message, err)
			}
			after := fx.cat.Pin()
			if after.s != before.s {
				t.Fatal("a refused deploy published a snapshot")
			}
			if d, _ := after.Deployment("acme", "images"); !reflect.DeepEqual(d, good) {
				t.Fatalf("previous release no longer serves: %+v", d)
			}
			stateAfter, _ := os.ReadFile(filepath.Join(fx.dir, StateFile))
			if string(stateBefore) != string(stateAfter) {
				t.Fatal("a refused deploy consumed a generation")
			}
		})
	}
}

// TestDeploy_persistFailure: when the record cannot be written, nothing is
// published and the previous release serves, in memory and after restart.
func TestDeploy_persistFailure(t *testing.T) {
	fx := newFixture(t)
	a, b := fx.module("a"), fx.module("b")
	good := fx.deploy(twoRevisions(a, b))
	dir := filepath.Join(fx.dir, ServicesDir)
	moved := dir + ".moved"
	if err := os.Rename(dir, moved); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dir, nil, 0o600); err != nil { // a file where the directory was
		t.Fatal(err)
	}
	m := twoRevisions(a, b)
	m.Routes[0].Targets[0].Weight = 1
	if _, err := fx.cat.Deploy(context.Background(), m); err == nil {
		t.Fatal("deploy succeeded without a services directory")
	}
	if _, err := fx.cat.Delete(context.Background(), "acme", "images"); err == nil {
		t.Fatal("delete succeeded without a services directory")
	}
	if d, _ := fx.cat.Pin().Deployment("acme", "images"); !reflect.DeepEqual(d, good) {
		t.Fatalf("a failed deploy changed the active release: %+v", d)
	}
	if err := os.Remove(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(moved, dir); err != nil {
		t.Fatal(err)
	}
	d := fx.deploy(m)
	if d.Generation <= good.Generation {
		t.Fatalf("generation went backwards: %d after %d", d.Generation, good.Generation)
	}
	re := fx.open().Pin()
	if have, _ := re.Deployment("acme", "images"); !reflect.DeepEqual(have, d) {
		t.Fatalf("after restart: want %+v, have %+v", d, have)
	}
}

func TestPutArtifact(t *testing.T) {
	fx := newFixture(t)
	ctx := context.Background()
	d := vocab.DigestOf(sha256.Sum256([]byte("module")))
	if err := fx.cat.Artifacts().Put(ctx, "acme", d, strings.NewReader("module")); err != nil {
		t.Fatal(err)
	}
	if err := fx.cat.Artifacts().Put(ctx, "acme", d, strings.NewReader("module")); err != nil {
		t.Fatalf("idempotent put: %v", err)
	}
	if err := fx.cat.Artifacts().Put(ctx, "acme", d, strings.NewReader("other")); !errors.Is(err, ErrDigestMismatch) {
		t.Fatalf("want digest mismatch, have %v", err)
	}
	if err := fx.cat.Artifacts().Put(ctx, "acme", "sha256:nothex", strings.NewReader("x")); !errors.Is(err, vocab.ErrInvalidName) {
		t.Fatalf("want invalid digest, have %v", err)
	}
	small, err := Open(ctx, Config{Dir: fx.dir, Inspector: fx.insp, MaxArtifactBytes: 4})
	if err != nil {
		t.Fatal(err)
	}
	if err := small.Artifacts().Put(ctx, "acme", d, strings.NewReader("module")); !errors.Is(err, ErrArtifactTooLarge) {
		t.Fatalf("want too large, have %v", err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if err := fx.cat.Artifacts().Put(cancelled, "acme", d, strings.NewReader("module")); !errors.Is(err, context.Canceled) {
		t.Fatalf("want cancelled, have %v", err)
	}
	entries, _ := os.ReadDir(filepath.Join(fx.dir, ArtifactsDir))
	if len(entries) != 1 || entries[0].Name() != d.Hex() {
		t.Fatalf("artifact directory holds %v", entries)
	}
	data, err := fx.cat.store.get(d, 1<<20)
	if err != nil || string(data) != "module" {
		t.Fatalf("get: %q %v", data, err)
	}
}

func TestDeploy_catalogFull(t *testing.T) {
	fx := newFixture(t)
	c, err := Open(context.Background(), Config{Dir: fx.dir, Inspector: fx.insp, MaxServices: 2})
	if err != nil {
		t.Fatal(err)
	}
	fx.cat = c
	a, b := fx.module("a"), fx.module("b")
	for _, name := range []vocab.ServiceName{"one", "two"} {
		m := twoRevisions(a, b)
		m.Service = name
		fx.deploy(m)
	}
	m := twoRevisions(a, b)
	m.Service = "three"
	if _, err := c.Deploy(context.Background(), m); !errors.Is(err, ErrCatalogFull) {
		t.Fatalf("want catalog full, have %v", err)
	}
	m.Service = "two" // replacing an existing service is still allowed
	fx.deploy(m)
	if _, err := Open(context.Background(), Config{Dir: fx.dir, Inspector: fx.insp, MaxServices: 1}); !errors.Is(err, ErrCatalogFull) {
		t.Fatalf("want catalog full on open, have %v", err)
	}
}

func TestDeploy_cancelled(t *testing.T) {
	fx := newFixture(t)
	a, b := fx.module("a"), fx.module("b")
	ctx, cancel := context.WithCancel(context.Background())
	fx.insp.onCall = cancel
	if _, err := fx.cat.Deploy(ctx, twoRevisions(a, b)); !errors.Is(err, context.Canceled) {
		t.Fatalf("want cancelled, have %v", err)
	}
	if fx.cat.Pin().Generation() != 0 {
		t.Fatal("a cancelled deploy took a generation")
	}
}

// TestPin_raceWithDeploys reads pins while deploys and deletes happen
// (run under -race). Every pin is internally consistent: whatever it
// resolves, its own Policy accepts.
func TestPin_raceWithDeploys(t *testing.T) {
	fx := newFixture(t)
	a, b := fx.module("a"), fx.module("b")
	fx.deploy(twoRevisions(a, b))
	deploys, readers := 40, 4
	if testing.Short() {
		deploys = 15
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	errs := make(chan error, readers+2)
	for r := 0; r < readers; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				pin := fx.cat.Pin()
				rev, err := pin.Resolve(images, fmt.Sprint(i))
				if errors.Is(err, ErrRevisionNotAvailable) {
					continue // between a delete and a redeploy
				}
				if err != nil {
					errs <- err
					return
				}
				if p, err := pin.Policy(rev); err != nil || p.Generation != rev.Generation {
					errs <- errors.Newf("pin inconsistent: %+v %v", p, err)
					return
				}
			}
		}()
	}
	var gens sync.Map
	var deployers sync.WaitGroup
	for w := 0; w < 2; w++ {
		deployers.Add(1)
		go func() {
			defer deployers.Done()
			for i := 0; i < deploys; i++ {
				m := twoRevisions(a, b)
				m.Routes[0].Targets[0].Weight = int64(1 + (i*7+w)%100)
				d, err := fx.cat.Deploy(context.Background(), m)
				if err != nil {
					errs <- err
					return
				}
				if _, dup := gens.LoadOrStore(d.Generation, true); dup {
					errs <- errors.Newf("generation %d issued twice", d.Generation)
					return
				}
				if i%5 == 4 {
					if _, err := fx.cat.Delete(context.Background(), "acme", "images"); err != nil && !errors.Is(err, ErrServiceNotFound) {
						errs <- err
						return
					}
				}
			}
		}()
	}
	deployers.Wait()
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	// What is served equals what a restart rebuilds.
	want, _ := fx.cat.Pin().Deployment("acme", "images")
	have, _ := fx.open().Pin().Deployment("acme", "images")
	if !reflect.DeepEqual(want, have) {
		t.Fatalf("served %+v, restart rebuilt %+v", want, have)
	}
}

func BenchmarkPin_resolvePolicy(b *testing.B) {
	fx := newFixture(b)
	fx.deploy(twoRevisions(fx.module("a"), fx.module("b")))
	keys := make([]string, 1024)
	for i := range keys {
		keys[i] = fmt.Sprint("user-", i)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		pin := fx.cat.Pin()
		r, err := pin.Resolve(images, keys[i%len(keys)])
		if err != nil {
			b.Fatal(err)
		}
		if _, err := pin.Policy(r); err != nil {
			b.Fatal(err)
		}
	}
}

// TestDeploy_hostFaultIsNotTheModules: an inspector failure marked
// ErrHostFault or ErrStorageFull fails the deploy as is, not as a field
// problem that blames the module; the previous release keeps serving.
func TestDeploy_hostFaultIsNotTheModules(t *testing.T) {
	for _, mark := range []error{ErrHostFault, ErrStorageFull} {
		t.Run(mark.Error(), func(t *testing.T) {
			fx := newFixture(t)
			a, b := fx.module("a"), fx.module("b")
			good := fx.deploy(twoRevisions(a, b))
			faulty := fx.module("faulty")
			fx.insp.reject(faulty, errors.Mark(errors.New("compile failed"), mark))
			m := twoRevisions(a, faulty)
			_, err := fx.cat.Deploy(context.Background(), m)
			if !errors.Is(err, mark) || errors.Is(err, vocab.ErrInvalidManifest) {
				t.Fatalf("want %v and not ErrInvalidManifest, have %v", mark, err)
			}
			if d, _ := fx.cat.Pin().Deployment("acme", "images"); !reflect.DeepEqual(d, good) {
				t.Fatalf("previous release no longer serves: %+v", d)
			}
		})
	}
}

// TestRestart_fixedMemoryNotCompared: the fixed memory depends on the
// node's deploy limits too, so a restart under other limits loads the
// recorded release and takes the new value into the capsule.
func TestRestart_fixedMemoryNotCompared(t *testing.T) {
	fx := newFixture(t)
	a, b := fx.module("a"), fx.module("b")
	info := ModuleInfo{MinMemoryBytes: vocab.WasmPageBytes, MaxMemoryBytes: 1 << 20, FixedMemoryBytes: vocab.WasmPageBytes,
		Threading: vocab.ThreadingSingle, Exports: []vocab.FunctionName{"_start"}}
	fx.insp.set(a, info)
	fx.deploy(twoRevisions(a, b))
	info.FixedMemoryBytes = 2 * vocab.WasmPageBytes
	fx.insp.set(a, info)
	reopened := fx.open()
	pol := reopened.Pin().svc(serviceKey{"acme", "images"}).policies[0]
	if pol.Artifact != a {
		t.Fatalf("revision 0 runs %s, want %s", pol.Artifact, a)
	}
	if want := uint64(vocab.WasmPageBytes + 2*vocab.WasmPageBytes); pol.Capsule.MinMemoryBytes != want {
		t.Fatalf("capsule minimum after restart: have %d, want %d", pol.Capsule.MinMemoryBytes, want)
	}
}

package catalog

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/latent-node/latent-node/vocab"
)

// oneRevision is tenant/service with one revision using art.
func oneRevision(tenant vocab.TenantID, service vocab.ServiceName, art vocab.Digest) vocab.Manifest {
	return vocab.Manifest{Tenant: tenant, Service: service,
		Revisions: []vocab.ManifestRevision{revision("v1", art)},
		Routes:    []vocab.ManifestRoute{mroute("run", target("v1", 1))}}
}

// serviceFiles lists the service directory, temporary files included.
func serviceFiles(t *testing.T, fx *fixture) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(fx.dir, ServicesDir))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

func artifactFiles(t *testing.T, fx *fixture) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(fx.dir, ArtifactsDir))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

// TestPutArtifact_tenantScoped: a digest another tenant uploaded answers
// exactly like one nobody uploaded; the same bytes from two tenants are
// stored once.
func TestPutArtifact_tenantScoped(t *testing.T) {
	fx := newFixture(t)
	ctx := context.Background()
	shared := fx.moduleFor("acme", "shared module")
	never := digestOf("never uploaded")

	_, errOther := fx.cat.Deploy(ctx, oneRevision("beta", "svc", shared))
	_, errNever := fx.cat.Deploy(ctx, oneRevision("beta", "svc", never))
	if errOther == nil || errNever == nil {
		t.Fatalf("beta deployed what it does not own: %v / %v", errOther, errNever)
	}
	if errOther.Error() != errNever.Error() || !reflect.DeepEqual(problemFields(t, errOther), problemFields(t, errNever)) {
		t.Fatalf("another tenant's artifact answers differently from an unknown one:\n%v\n%v", errOther, errNever)
	}
	if inspected := fx.insp.calls.Load(); inspected != 0 {
		t.Fatalf("another tenant's artifact was inspected %d times", inspected)
	}
	// Negative control: the owner deploys it.
	fx.deploy(oneRevision("acme", "svc", shared))

	// beta proves it has the bytes; they are stored once.
	fx.moduleFor("beta", "shared module")
	fx.deploy(oneRevision("beta", "svc", shared))
	if files := artifactFiles(t, fx); len(files) != 1 || files[0] != shared.Hex() {
		t.Fatalf("artifact directory holds %v", files)
	}
	// Claiming a digest without its bytes gives nothing.
	if err := fx.cat.Artifacts().Put(ctx, "gamma", shared, strings.NewReader("other bytes")); !errors.Is(err, ErrDigestMismatch) {
		t.Fatalf("want digest mismatch, have %v", err)
	}
	if _, err := fx.cat.Deploy(ctx, oneRevision("gamma", "svc", shared)); err == nil || err.Error() != errNever.Error() {
		t.Fatalf("a failed upload gave ownership: %v", err)
	}
	if err := fx.cat.Artifacts().Put(ctx, "bad/tenant", shared, strings.NewReader("shared module")); !errors.Is(err, vocab.ErrInvalidName) {
		t.Fatalf("want invalid tenant, have %v", err)
	}

	// Ownership survives a restart.
	fx.cat = fx.open()
	if _, err := fx.cat.Deploy(ctx, oneRevision("gamma", "svc", shared)); err == nil || err.Error() != errNever.Error() {
		t.Fatalf("after restart: %v", err)
	}
	fx.deploy(oneRevision("beta", "other", shared))
}

func wantQuota(t *testing.T, err error, want QuotaError) {
	t.Helper()
	var qe *QuotaError
	if !errors.Is(err, ErrTenantQuota) || !errors.As(err, &qe) {
		t.Fatalf("want a tenant quota error, have %v", err)
	}
	if *qe != want {
		t.Fatalf("want %+v, have %+v", want, *qe)
	}
	if !strings.Contains(err.Error(), want.Dimension) {
		t.Fatalf("message %q does not name %s", err, want.Dimension)
	}
}

func TestQuota(t *testing.T) {
	ctx := context.Background()
	t.Run("services", func(t *testing.T) {
		fx := newFixtureWith(t, func(o *Config) { o.MaxServicesPerTenant = 2; o.MaxServices = 10 })
		a, b := fx.module("a"), fx.moduleFor("beta", "b")
		fx.deploy(oneRevision("acme", "one", a))
		fx.deploy(oneRevision("acme", "two", a))
		inspected := fx.insp.calls.Load()
		_, err := fx.cat.Deploy(ctx, oneRevision("acme", "three", a))
		wantQuota(t, err, QuotaError{Dimension: QuotaServices, Limit: 2, Used: 2})
		if fx.insp.calls.Load() != inspected {
			t.Fatal("a deploy over quota was inspected")
		}
		fx.deploy(oneRevision("acme", "two", a)) // replacing stays allowed
		fx.deploy(oneRevision("beta", "one", b)) // another tenant is unaffected
		fx.deploy(oneRevision("beta", "two", b))
		if _, err := fx.cat.Delete(ctx, "acme", "one"); err != nil {
			t.Fatal(err)
		}
		fx.deploy(oneRevision("acme", "three", a))
	})
	t.Run("node bound", func(t *testing.T) {
		// 2 tenants × 2 services fit a node bound of 4: one tenant cannot
		// exhaust it; a third tenant then finds the node full.
		fx := newFixtureWith(t, func(o *Config) { o.MaxServicesPerTenant = 2; o.MaxServices = 4 })
		for _, tenant := range []vocab.TenantID{"acme", "beta"} {
			a := fx.moduleFor(tenant, "a")
			for _, name := range []vocab.ServiceName{"one", "two", "three"} {
				_, err := fx.cat.Deploy(ctx, oneRevision(tenant, name, a))
				if name == "three" {
					wantQuota(t, err, QuotaError{Dimension: QuotaServices, Limit: 2, Used: 2})
				} else if err != nil {
					t.Fatal(err)
				}
			}
		}
		a := fx.moduleFor("gamma", "a")
		if _, err := fx.cat.Deploy(ctx, oneRevision("gamma", "one", a)); !errors.Is(err, ErrCatalogFull) || errors.Is(err, ErrTenantQuota) {
			t.Fatalf("want catalog full, have %v", err)
		}
	})
	t.Run("artifacts", func(t *testing.T) {
		fx := newFixtureWith(t, func(o *Config) { o.MaxArtifactsPerTenant = 2 })
		fx.module("a")
		fx.module("b")
		fx.module("a") // owned already: not a new artifact
		err := fx.cat.Artifacts().Put(ctx, "acme", digestOf("c"), strings.NewReader("c"))
		wantQuota(t, err, QuotaError{Dimension: QuotaArtifacts, Limit: 2, Used: 2})
		// The upload was refused before its bytes were read.
		err = fx.cat.Artifacts().Put(ctx, "acme", digestOf("c"), failingReader{})
		wantQuota(t, err, QuotaError{Dimension: QuotaArtifacts, Limit: 2, Used: 2})
		fx.moduleFor("beta", "c")
		fx.moduleFor("beta", "a")
		if files := artifactFiles(t, fx); len(files) != 3 {
			t.Fatalf("artifact directory holds %v", files)
		}
	})
	t.Run("artifact bytes", func(t *testing.T) {
		fx := newFixtureWith(t, func(o *Config) { o.MaxArtifactBytesPerTenant = 10 })
		fx.module("12345")
		fx.module("1234")
		err := fx.cat.Artifacts().Put(ctx, "acme", digestOf("12"), strings.NewReader("12"))
		wantQuota(t, err, QuotaError{Dimension: QuotaArtifactBytes, Limit: 10, Used: 9})
		fx.module("1")
		fx.moduleFor("beta", "0123456789")
		if files := artifactFiles(t, fx); len(files) != 4 {
			t.Fatalf("artifact directory holds %v (a refused upload stayed)", files)
		}
	})
	t.Run("release artifacts", func(t *testing.T) {
		// A release's artifact is stored whatever the tenant's quota here
		// and counts towards it: the tenant's next upload is refused.
		fx := newFixtureWith(t, func(o *Config) { o.MaxArtifactsPerTenant = 1; o.MaxArtifactBytesPerTenant = 10 })
		fx.module("12345678")
		if err := fx.cat.Artifacts().PutRelease(ctx, "acme", digestOf("abcdef"), strings.NewReader("abcdef")); err != nil {
			t.Fatalf("release artifact over the quotas: %v", err)
		}
		if !fx.cat.Artifacts().Has("acme", digestOf("abcdef")) {
			t.Fatal("the release artifact is not the tenant's")
		}
		err := fx.cat.Artifacts().Put(ctx, "acme", digestOf("x"), strings.NewReader("x"))
		wantQuota(t, err, QuotaError{Dimension: QuotaArtifacts, Limit: 1, Used: 2})
		// The digest and the size bound still hold.
		if err := fx.cat.Artifacts().PutRelease(ctx, "acme", digestOf("y"), strings.NewReader("not y")); err == nil {
			t.Fatal("a release artifact with another digest was stored")
		}
	})
}

type failingReader struct{}

func (failingReader) Read([]byte) (int, error) { return 0, errors.New("the body was read") }

func TestCollectGarbage(t *testing.T) {
	ctx := context.Background()
	const grace = time.Hour
	fx := newFixtureWith(t, func(o *Config) { o.ArtifactGrace = grace })
	used, unused := fx.module("used"), fx.module("unused")
	shared := fx.moduleFor("beta", "shared")
	fx.clock.Advance(time.Minute)
	fx.moduleFor("acme", "shared") // acme's ownership is one minute younger
	fx.deploy(oneRevision("acme", "svc", used))
	if _, err := fx.cat.Deploy(ctx, oneRevision("beta", "svc", used)); !errors.Is(err, vocab.ErrInvalidManifest) {
		t.Fatalf("beta deployed an artifact it does not own: %v", err)
	}
	fx.moduleFor("beta", "used")
	fx.deploy(oneRevision("beta", "svc", used))

	steps := []struct {
		name     string
		at       time.Duration // after t0
		act      func(t *testing.T)
		want     GCStats
		wantKept []vocab.Digest
	}{
		{"within grace", grace, nil, GCStats{}, []vocab.Digest{used, unused, shared}},
		{"beta's shared expires, acme still owns it", grace + time.Second, nil, GCStats{Released: 2, Deleted: 1, DeletedBytes: 6, DeletedDigests: []vocab.Digest{unused}}, []vocab.Digest{used, shared}},
		{"acme's shared expires", grace + time.Minute + time.Second, nil, GCStats{Released: 1, Deleted: 1, DeletedBytes: 6, DeletedDigests: []vocab.Digest{shared}}, []vocab.Digest{used}},
		{"used stays while a service uses it", 10 * grace, nil, GCStats{}, []vocab.Digest{used}},
		{"acme deletes its service; beta's keeps the bytes", 10 * grace, func(t *testing.T) {
			if _, err := fx.cat.Delete(ctx, "acme", "svc"); err != nil {
				t.Fatal(err)
			}
		}, GCStats{Released: 1}, []vocab.Digest{used}},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			if st.act != nil {
				st.act(t)
			}
			have, err := fx.cat.Artifacts().CollectGarbage(ctx, t0.Add(st.at))
			if err != nil || !reflect.DeepEqual(have, st.want) {
				t.Fatalf("want %+v, have %+v, %v", st.want, have, err)
			}
			var want []string
			for _, d := range st.wantKept {
				want = append(want, d.Hex())
			}
			files := artifactFiles(t, fx)
			if !sameSet(files, want) {
				t.Fatalf("kept %v, want %v", files, want)
			}
		})
	}
	// acme's ownership of used is gone (unknown), beta's stays, across a restart.
	fx.cat = fx.open()
	if _, err := fx.cat.Deploy(ctx, oneRevision("acme", "svc", used)); !errors.Is(err, vocab.ErrInvalidManifest) {
		t.Fatalf("collected ownership still deploys: %v", err)
	}
	fx.deploy(oneRevision("beta", "other", used))
	// Re-uploading restarts the grace period.
	fx.clock.Advance(20 * grace)
	fx.module("used")
	if st, err := fx.cat.Artifacts().CollectGarbage(ctx, fx.clock.Now().Add(grace)); err != nil || !reflect.DeepEqual(st, GCStats{}) {
		t.Fatalf("a fresh upload was collected: %+v %v", st, err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := fx.cat.Artifacts().CollectGarbage(cancelled, fx.clock.Now().Add(2*grace)); !errors.Is(err, context.Canceled) {
		t.Fatalf("want cancelled, have %v", err)
	}
}

func sameSet(a, b []string) bool {
	m := map[string]int{}
	for _, s := range a {
		m[s]++
	}
	for _, s := range b {
		m[s]--
	}
	for _, n := range m {
		if n != 0 {
			return false
		}
	}
	return true
}

// TestCollectGarbage_raceWithDeploy: a collection that runs while a deploy
// inspects the artifact makes the deploy answer "unknown" instead of
// publishing a release without its artifact.
func TestCollectGarbage_raceWithDeploy(t *testing.T) {
	for _, collect := range []bool{false, true} {
		t.Run(fmt.Sprint("collect=", collect), func(t *testing.T) {
			fx := newFixture(t)
			a := fx.module("a")
			var gcErr error
			var st GCStats
			fx.insp.onCall = func() {
				if collect {
					st, gcErr = fx.cat.Artifacts().CollectGarbage(context.Background(), t0.Add(2*DefaultArtifactGrace))
				}
			}
			_, err := fx.cat.Deploy(context.Background(), oneRevision("acme", "svc", a))
			if gcErr != nil {
				t.Fatal(gcErr)
			}
			if !collect {
				if err != nil {
					t.Fatalf("negative control: %v", err)
				}
				return
			}
			if st.Deleted != 1 {
				t.Fatalf("the collection did not delete the artifact: %+v", st)
			}
			if !errors.Is(err, vocab.ErrInvalidManifest) || !strings.Contains(err.Error(), unknownArtifact) {
				t.Fatalf("want the artifact unknown, have %v", err)
			}
			if _, ok := fx.cat.Pin().Deployment("acme", "svc"); ok {
				t.Fatal("a release without its artifact was published")
			}
			if held := fx.insp.held(); len(held) != 0 {
				t.Fatalf("references held after the refused deploy: %v", held)
			}
		})
	}
}

// TestOpen_settlesArtifacts: an artifact nobody owns is deleted at Open; a
// service whose tenant has no ownership record (a data directory from before
// ownership) gets one.
func TestOpen_settlesArtifacts(t *testing.T) {
	fx := newFixture(t)
	a := fx.module("a")
	fx.module("unused")
	fx.deploy(oneRevision("acme", "svc", a))
	orphan := filepath.Join(fx.dir, ArtifactsDir, digestOf("orphan").Hex())
	if err := os.WriteFile(orphan, []byte("orphan"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(fx.dir, OwnersDir)); err != nil {
		t.Fatal(err)
	}
	fx.cat = fx.open()
	if files := artifactFiles(t, fx); !sameSet(files, []string{a.Hex()}) {
		t.Fatalf("after Open the artifact directory holds %v", files)
	}
	fx.deploy(oneRevision("acme", "other", a))
	if _, err := os.Stat(filepath.Join(fx.dir, OwnerRecordPath("acme", a))); err != nil {
		t.Fatalf("no ownership record adopted: %v", err)
	}
	// The adopted ownership is stamped at Open.
	if st, err := fx.cat.Artifacts().CollectGarbage(context.Background(), t0.Add(2*DefaultArtifactGrace)); err != nil || !reflect.DeepEqual(st, GCStats{}) {
		t.Fatalf("collected a used artifact: %+v %v", st, err)
	}
}

func TestOpen_corruptOwnership(t *testing.T) {
	tests := []struct {
		name    string
		corrupt func(t *testing.T, rec string) string
	}{
		{"flipped byte", func(t *testing.T, rec string) string {
			data, _ := os.ReadFile(rec)
			data[len(data)-3] ^= 1
			if err := os.WriteFile(rec, data, 0o600); err != nil {
				t.Fatal(err)
			}
			return rec
		}},
		{"under another tenant", func(t *testing.T, rec string) string {
			dir := filepath.Join(filepath.Dir(filepath.Dir(rec)), strings.Repeat("0", 64))
			if err := os.Mkdir(dir, 0o750); err != nil {
				t.Fatal(err)
			}
			other := filepath.Join(dir, filepath.Base(rec))
			if err := os.Rename(rec, other); err != nil {
				t.Fatal(err)
			}
			return other
		}},
		{"unexpected file", func(t *testing.T, rec string) string {
			name := filepath.Join(filepath.Dir(rec), "notes.txt")
			if err := os.WriteFile(name, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			return name
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fx := newFixture(t)
			a := fx.module("a")
			want := tc.corrupt(t, filepath.Join(fx.dir, OwnerRecordPath("acme", a)))
			_, err := Open(context.Background(), fx.options())
			if !errors.Is(err, ErrCorruptRecord) || !strings.Contains(err.Error(), want) {
				t.Fatalf("want ErrCorruptRecord naming %s, have %v", want, err)
			}
		})
	}
}

// noSpaceFile is a temporary file whose writes fail like a full disk, with
// an error naming a host path.
type noSpaceFile struct {
	*os.File
	errno syscall.Errno
}

func (f noSpaceFile) Write([]byte) (int, error) {
	return 0, &os.PathError{Op: "write", Path: f.Name(), Err: f.errno}
}

// failWrites makes every write whose file (a record's path, or
// "artifact-<hex>") contains pattern fail with errno.
func failWrites(fx *fixture, pattern string, errno syscall.Errno) {
	fx.cat.store.wrap = func(f *os.File, what string) tempFile {
		if !strings.Contains(what, pattern) {
			return f
		}
		return noSpaceFile{File: f, errno: errno}
	}
}

func TestStorageFull(t *testing.T) {
	ctx := context.Background()
	ops := []struct {
		name    string
		pattern string // of the temporary file that fails
		op      func(fx *fixture) error
		check   func(t *testing.T, fx *fixture)
	}{
		{"artifact", "artifact-", func(fx *fixture) error {
			return fx.cat.Artifacts().Put(ctx, "acme", digestOf("new"), strings.NewReader("new"))
		}, func(t *testing.T, fx *fixture) {
			if _, err := fx.cat.Deploy(ctx, oneRevision("acme", "new", digestOf("new"))); !errors.Is(err, vocab.ErrInvalidManifest) {
				t.Fatalf("the failed upload is usable: %v", err)
			}
		}},
		{"ownership record", digestOf("new").Hex(), func(fx *fixture) error {
			return fx.cat.Artifacts().Put(ctx, "acme", digestOf("new"), strings.NewReader("new"))
		}, func(t *testing.T, fx *fixture) {
			if _, err := fx.cat.Deploy(ctx, oneRevision("acme", "new", digestOf("new"))); !errors.Is(err, vocab.ErrInvalidManifest) {
				t.Fatalf("the failed upload is usable: %v", err)
			}
			if files := artifactFiles(t, fx); len(files) != 1 {
				t.Fatalf("the unowned artifact stayed: %v", files)
			}
		}},
		{"service record", "catalog/services/", func(fx *fixture) error {
			_, err := fx.cat.Deploy(ctx, oneRevision("acme", "new", digestOf("a")))
			return err
		}, nil},
		{"full listing", "catalog/services/", func(fx *fixture) error {
			return fx.cat.Replace(ctx, 100, []vocab.Manifest{oneRevision("acme", "svc", fx.module("b")), oneRevision("acme", "new", digestOf("a"))})
		}, func(t *testing.T, fx *fixture) {
			if names := serviceFiles(t, fx); len(names) != 1 {
				t.Fatalf("a failed full listing left files: %v", names)
			}
			// The same listing retried applies: the failed attempt
			// published nothing, so its generation is still free.
			if err := fx.cat.Replace(ctx, 100, []vocab.Manifest{oneRevision("acme", "svc", digestOf("b")), oneRevision("acme", "new", digestOf("a"))}); err != nil {
				t.Fatalf("the retried listing: %v", err)
			}
		}},
		{"delete", "state.rec", func(fx *fixture) error {
			_, err := fx.cat.Delete(ctx, "acme", "svc")
			return err
		}, nil},
	}
	for _, op := range ops {
		for _, errno := range []syscall.Errno{syscall.ENOSPC, syscall.EDQUOT, syscall.EIO} {
			t.Run(op.name+"/"+errno.Error(), func(t *testing.T) {
				fx := newFixture(t)
				fx.deploy(oneRevision("acme", "svc", fx.module("a")))
				before := fx.cat.Pin()
				held := fx.insp.held()
				failWrites(fx, op.pattern, errno)
				err := op.op(fx)
				if err == nil {
					t.Fatal("the write did not fail: the seam is not reached")
				}
				if full := errno != syscall.EIO; errors.Is(err, ErrStorageFull) != full {
					t.Fatalf("ErrStorageFull=%v for %v: %v", !full, errno, err)
				}
				if !errors.Is(err, errno) {
					t.Fatalf("the cause is lost: %v", err)
				}
				if errno != syscall.EIO && (strings.Contains(err.Error(), fx.dir) || strings.Contains(err.Error(), "/")) {
					t.Fatalf("the message names a host path: %v", err)
				}
				if !strings.Contains(fmt.Sprintf("%+v", err), fx.dir) {
					t.Fatalf("the detailed form lost the path: %+v", err)
				}
				if fx.cat.Pin().s != before.s {
					t.Fatal("a failed write published a snapshot")
				}
				if have := fx.insp.held(); !reflect.DeepEqual(have, held) {
					t.Fatalf("references: before %v, after %v", held, have)
				}
				fx.cat.store.wrap = nil
				if op.check != nil {
					op.check(t, fx)
				}
			})
		}
	}
}

// TestModuleReferences is a property test: after any sequence of uploads,
// deploys (successful, replacing, refused for validation, quota, node bound,
// ownership, a full disk or cancellation), deletes, collections and
// restarts, the references the inspector handed out and did not get back
// are exactly one per distinct (service, artifact) of the current view.
func TestModuleReferences(t *testing.T) {
	seeds, steps := 8, 150
	if testing.Short() {
		seeds, steps = 3, 100
	}
	outcomes := map[string]int{}
	for seed := 0; seed < seeds; seed++ {
		rng := rand.New(rand.NewPCG(uint64(seed), 7))
		fx := newFixtureWith(t, func(o *Config) {
			o.MaxServicesPerTenant = 2
			o.MaxServices = 3
			o.MaxArtifactsPerTenant = 3
			o.MaxDeployedBytesPerTenant = 6 // the modules are 2, 3 and 8 bytes
		})
		configure := func(in *fakeInspector) {
			in.reject(digestOf("rejected"), errors.New("import env.x is not allowed"))
			in.set(digestOf("big"), ModuleInfo{MinMemoryBytes: 64 << 20, MaxMemoryBytes: 128 << 20,
				Threading: vocab.ThreadingSingle, Exports: []vocab.FunctionName{"_start"}})
		}
		configure(fx.insp)
		contents := []string{"m0", "m1", "m2", "rejected", "big"}
		tenants := []vocab.TenantID{"acme", "beta"}
		services := []vocab.ServiceName{"s0", "s1", "s2"}
		for step := 0; step < steps; step++ {
			var err error
			kind := ""
			switch op := rng.IntN(10); {
			case op < 2:
				kind = "upload"
				c := contents[rng.IntN(len(contents))]
				err = fx.cat.Artifacts().Put(context.Background(), tenants[rng.IntN(2)], digestOf(c), strings.NewReader(c))
			case op < 7:
				kind = "deploy"
				m := vocab.Manifest{Tenant: tenants[rng.IntN(2)], Service: services[rng.IntN(3)]}
				for i := 0; i <= rng.IntN(3); i++ {
					name := fmt.Sprint("v", i)
					m.Revisions = append(m.Revisions, revision(name, digestOf(contents[rng.IntN(len(contents))])))
					m.Routes = append(m.Routes, mroute("r"+name, target(name, 1)))
				}
				ctx, cancel := context.WithCancel(context.Background())
				switch rng.IntN(8) {
				case 0:
					failWrites(fx, "catalog/services/", syscall.ENOSPC)
				case 1:
					fx.insp.onCall = cancel
				}
				_, err = fx.cat.Deploy(ctx, m)
				cancel()
				fx.cat.store.wrap, fx.insp.onCall = nil, nil
			case op < 8:
				kind = "delete"
				_, err = fx.cat.Delete(context.Background(), tenants[rng.IntN(2)], services[rng.IntN(3)])
			case op < 9:
				kind = "collect"
				_, err = fx.cat.Artifacts().CollectGarbage(context.Background(), fx.clock.Advance(time.Duration(rng.IntN(3))*time.Hour))
			default:
				kind = "restart"
				fx.insp = newFakeInspector()
				configure(fx.insp)
				fx.cat = fx.open()
			}
			outcomes[kind+" "+outcome(err)]++
			if qe := (*QuotaError)(nil); errors.As(err, &qe) && qe.Dimension == QuotaDeployedBytes {
				outcomes["deploy deployed-bytes"]++
			}
			want := map[vocab.Digest]int{}
			for _, svc := range fx.cat.Pin().all() {
				for _, d := range svc.artifacts() {
					want[d]++
				}
			}
			if have := fx.insp.held(); !reflect.DeepEqual(have, want) || fx.insp.overReleased != 0 {
				t.Fatalf("seed %d step %d (%s: %v): references held %v, want %v, over-released %d",
					seed, step, kind, err, have, want, fx.insp.overReleased)
			}
		}
	}
	// The sequences reached every kind of outcome the property is about.
	for _, k := range []string{"deploy ok", "deploy invalid", "deploy quota", "deploy deployed-bytes", "deploy full", "deploy storage-full",
		"deploy cancelled", "delete ok", "restart ok"} {
		if outcomes[k] == 0 {
			t.Errorf("no %q in the random sequences: %v", k, outcomes)
		}
	}
}

func outcome(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, vocab.ErrInvalidManifest):
		return "invalid"
	case errors.Is(err, ErrTenantQuota):
		return "quota"
	case errors.Is(err, ErrCatalogFull):
		return "full"
	case errors.Is(err, ErrStorageFull):
		return "storage-full"
	case errors.Is(err, context.Canceled):
		return "cancelled"
	case errors.Is(err, ErrServiceNotFound):
		return "not-found"
	}
	return "other: " + err.Error()
}

func TestMarkStorageFull(t *testing.T) {
	pathErr := &os.PathError{Op: "write", Path: "/data/secret/x", Err: syscall.ENOSPC}
	tests := []struct {
		name string
		err  error
		full bool
	}{
		{"nil", nil, false},
		{"ENOSPC", errors.Wrap(pathErr, "compile cache"), true},
		{"EDQUOT", &os.PathError{Op: "write", Path: "/data/x", Err: syscall.EDQUOT}, true},
		{"EIO", &os.PathError{Op: "write", Path: "/data/x", Err: syscall.EIO}, false},
		{"other", errors.New("boom"), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := MarkStorageFull(tc.err, "write compiled module")
			if errors.Is(err, ErrStorageFull) != tc.full {
				t.Fatalf("marked %v: %v", !tc.full, err)
			}
			if !tc.full {
				if err != tc.err {
					t.Fatalf("changed: %v", err)
				}
				return
			}
			if strings.Contains(err.Error(), "/data") || !strings.Contains(err.Error(), "write compiled module") {
				t.Fatalf("message: %q", err.Error())
			}
		})
	}
}

// BenchmarkPutArtifact uploads a 64 KiB module that the tenant owns already
// (stream, verify, fsync, rename, ownership record).
func BenchmarkPutArtifact(b *testing.B) {
	fx := newFixture(b)
	data := strings.Repeat("x", 64<<10)
	d := digestOf(data)
	b.SetBytes(int64(len(data)))
	for i := 0; i < b.N; i++ {
		if err := fx.cat.Artifacts().Put(context.Background(), "acme", d, strings.NewReader(data)); err != nil {
			b.Fatal(err)
		}
	}
}

func TestQuota_deployedBytes(t *testing.T) {
	ctx := context.Background()
	limit10 := func(o *Config) { o.MaxDeployedBytesPerTenant = 10 }
	t.Run("bound", func(t *testing.T) {
		fx := newFixtureWith(t, limit10)
		a5, b3, c5, d1 := fx.module("aaaaa"), fx.module("bbb"), fx.module("ccccc"), fx.module("d")
		fx.deploy(oneRevision("acme", "one", a5))
		fx.deploy(oneRevision("acme", "two", a5)) // shared: counted once (5)
		fx.deploy(oneRevision("acme", "three", b3))
		fx.deploy(oneRevision("acme", "three", c5)) // replaces b3: 5 + 5, at the bound
		held, inspected := fx.insp.held(), fx.insp.calls.Load()
		_, err := fx.cat.Deploy(ctx, oneRevision("acme", "four", d1)) // one byte over
		wantQuota(t, err, QuotaError{Dimension: QuotaDeployedBytes, Limit: 10, Used: 10})
		if fx.insp.calls.Load() != inspected {
			t.Fatal("a deploy over the deployed bytes was inspected")
		}
		if have := fx.insp.held(); !reflect.DeepEqual(have, held) {
			t.Fatalf("references held %v, want %v", have, held)
		}
		if fx.cat.Pin().svc(serviceKey{"acme", "four"}) != nil {
			t.Fatal("the refused service was published")
		}
		// Another tenant is unaffected by acme being at its bound.
		fx.deploy(oneRevision("beta", "one", fx.moduleFor("beta", "0123456789")))
		// Two revisions of a new release: both count, the replaced one not.
		m := twoRevisions(b3, d1)
		m.Service = "three"
		fx.deploy(m) // 5 + 3 + 1
		if _, err := fx.cat.Delete(ctx, "acme", "one"); err != nil {
			t.Fatal(err)
		}
		_, err = fx.cat.Deploy(ctx, oneRevision("acme", "four", c5)) // a5 is still used by two: 9 + 5
		wantQuota(t, err, QuotaError{Dimension: QuotaDeployedBytes, Limit: 10, Used: 9})
		if _, err := fx.cat.Delete(ctx, "acme", "two"); err != nil {
			t.Fatal(err)
		}
		fx.deploy(oneRevision("acme", "four", c5)) // 4 + 5
		if got := fx.insp.held(); !reflect.DeepEqual(got, map[vocab.Digest]int{b3: 1, d1: 1, c5: 1, digestOf("0123456789"): 1}) {
			t.Fatalf("references held %v", got)
		}
	})
	t.Run("checked under the lock", func(t *testing.T) {
		// A deploy that passed the early check loses to one that published
		// while it was being inspected: the check before publishing refuses it.
		fx := newFixtureWith(t, limit10)
		a6, b6 := fx.module("aaaaaa"), fx.module("bbbbbb")
		var inner error
		fx.insp.onCall = func() {
			fx.insp.onCall = nil
			_, inner = fx.cat.Deploy(ctx, oneRevision("acme", "second", b6))
		}
		_, err := fx.cat.Deploy(ctx, oneRevision("acme", "first", a6))
		if inner != nil {
			t.Fatalf("the inner deploy: %v", inner)
		}
		wantQuota(t, err, QuotaError{Dimension: QuotaDeployedBytes, Limit: 10, Used: 6})
		if got := fx.insp.held(); !reflect.DeepEqual(got, map[vocab.Digest]int{b6: 1}) {
			t.Fatalf("references held %v, want only the published service's", got)
		}
	})
	t.Run("lowered bound at open", func(t *testing.T) {
		fx := newFixtureWith(t, limit10)
		a5, b3, c2, d4 := fx.module("aaaaa"), fx.module("bbb"), fx.module("cc"), fx.module("dddd")
		fx.deploy(oneRevision("acme", "one", a5))
		fx.deploy(oneRevision("acme", "two", b3))
		fx.deploy(oneRevision("acme", "three", c2))
		fx.tune = func(o *Config) { o.MaxDeployedBytesPerTenant = 5 }
		fx.insp = newFakeInspector()
		fx.cat = fx.open() // 10 deployed above a bound of 5: loads anyway
		// Growing to 11 is refused.
		_, err := fx.cat.Deploy(ctx, oneRevision("acme", "two", d4))
		wantQuota(t, err, QuotaError{Dimension: QuotaDeployedBytes, Limit: 5, Used: 10})
		fx.deploy(oneRevision("acme", "three", fx.module("c"))) // shrinks to 9, still above
		if _, err := fx.cat.Delete(ctx, "acme", "two"); err != nil {
			t.Fatal(err)
		}
		_, err = fx.cat.Deploy(ctx, oneRevision("acme", "two", b3)) // back to 9 from 6: grows
		wantQuota(t, err, QuotaError{Dimension: QuotaDeployedBytes, Limit: 5, Used: 6})
	})
	t.Run("default", func(t *testing.T) {
		fx := newFixture(t)
		if fx.cat.opts.MaxDeployedBytesPerTenant != DefaultMaxDeployedBytesPerTenant || DefaultMaxDeployedBytesPerTenant != 128<<20 {
			t.Fatalf("default deployed bytes %d", fx.cat.opts.MaxDeployedBytesPerTenant)
		}
	})
}

// sharedArtifactsFixture is a catalog with acme/images (two artifacts),
// beta/tools (an artifact acme owns too) and one artifact acme uploaded and
// never used.
func sharedArtifactsFixture(t *testing.T) *fixture {
	t.Helper()
	fx := newFixture(t)
	a, b := fx.module("module a"), fx.module("module b")
	fx.module("unused")
	fx.deploy(twoRevisions(a, b))
	fx.deploy(oneRevision("beta", "tools", fx.moduleFor("beta", "module a")))
	return fx
}

func TestCatalog_PlanGarbage(t *testing.T) {
	fx := sharedArtifactsFixture(t)
	later := fx.clock.Now().Add(2 * DefaultArtifactGrace)
	plan := fx.cat.Artifacts().PlanGarbage(later)
	// Only acme's "unused" expires; "module a" is used by both owners.
	if plan.Released != 1 || plan.Deleted != 1 || plan.DeletedBytes != uint64(len("unused")) || len(plan.DeletedDigests) != 1 {
		t.Fatalf("plan %+v", plan)
	}
	got, err := fx.cat.Artifacts().CollectGarbage(context.Background(), later)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, plan) {
		t.Fatalf("collected %+v, planned %+v", got, plan)
	}
	if again := fx.cat.Artifacts().PlanGarbage(later); !reflect.DeepEqual(again, GCStats{}) {
		t.Fatalf("after collecting, the plan is %+v", again)
	}
}

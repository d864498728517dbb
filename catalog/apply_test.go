package catalog

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/cockroachdb/errors"

	"github.com/latent-node/latent-node/vocab"
)

// oneRoute is acme/<service> with revision v1 of art on route "run".
func oneRoute(service vocab.ServiceName, art vocab.Digest) vocab.Manifest {
	return vocab.Manifest{Tenant: "acme", Service: service, Revisions: []vocab.ManifestRevision{revision("v1", art)},
		Routes: []vocab.ManifestRoute{mroute("run", target("v1", 1))}}
}

// TestApply_externalGenerations: changes apply at the generation given,
// which must grow; a delete is a change without a manifest; the result is
// persisted (a reopened catalog serves it); Check publishes nothing.
func TestApply_externalGenerations(t *testing.T) {
	fx := newFixture(t)
	ctx := context.Background()
	a, b := fx.module("module a"), fx.module("module b")
	ma, mb := oneRoute("a", a), oneRoute("b", b)

	dep, err := fx.cat.Check(ctx, ma)
	if err != nil || dep.Generation != 0 || dep.Release == "" {
		t.Fatalf("check: %+v, %v", dep, err)
	}
	if fx.cat.Pin().Generation() != 0 {
		t.Fatal("Check published something")
	}
	if err := fx.cat.Apply(ctx, 7, []Change{{Tenant: "acme", Service: "a", Manifest: &ma}, {Tenant: "acme", Service: "b", Manifest: &mb}}); err != nil {
		t.Fatal(err)
	}
	pin := fx.cat.Pin()
	if got, ok := pin.Deployment("acme", "a"); pin.Generation() != 7 || !ok || got.Generation != 7 || got.Release != dep.Release {
		t.Fatalf("after apply at 7: generation %d, a %+v", pin.Generation(), got)
	}
	for _, gen := range []vocab.Generation{7, 3} {
		if err := fx.cat.Apply(ctx, gen, []Change{{Tenant: "acme", Service: "a"}}); !errors.Is(err, ErrGenerationNotNewer) {
			t.Fatalf("apply at %d: %v", gen, err)
		}
	}
	if err := fx.cat.Apply(ctx, 9, []Change{{Tenant: "acme", Service: "a"}}); err != nil { // a delete
		t.Fatal(err)
	}
	if _, ok := fx.cat.Pin().Deployment("acme", "a"); ok {
		t.Fatal("a survived its delete")
	}
	// A manifest naming an artifact the tenant does not own changes nothing.
	bad := oneRoute("c", digestOf("never uploaded"))
	if err := fx.cat.Apply(ctx, 10, []Change{{Tenant: "acme", Service: "c", Manifest: &bad}}); err == nil {
		t.Fatal("applied a release without its artifact")
	}
	if fx.cat.Pin().Generation() != 9 {
		t.Fatalf("a refused apply moved the generation to %d", fx.cat.Pin().Generation())
	}
	// A change whose manifest names another service is refused.
	if err := fx.cat.Apply(ctx, 10, []Change{{Tenant: "acme", Service: "x", Manifest: &mb}}); err == nil {
		t.Fatal("applied a manifest under another service's name")
	}
	hash := fx.cat.Pin().Hash()
	reopened := fx.open()
	if p := reopened.Pin(); p.Generation() != 9 || p.Hash() != hash {
		t.Fatalf("reopened at %d (hash equal %v), want 9", p.Generation(), p.Hash() == hash)
	}
}

// TestReplace_wholeListing: a listing replaces every service at its
// generation; the same listing at the same generation is no change; other
// content at the same generation, or an older generation, is refused.
func TestReplace_wholeListing(t *testing.T) {
	fx := newFixture(t)
	ctx := context.Background()
	a, b := fx.module("module a"), fx.module("module b")
	ma, mb := oneRoute("a", a), oneRoute("b", b)
	if err := fx.cat.Replace(ctx, 5, []vocab.Manifest{ma, mb}); err != nil {
		t.Fatal(err)
	}
	if err := fx.cat.Replace(ctx, 5, []vocab.Manifest{mb, ma}); err != nil {
		t.Fatalf("the same listing again: %v", err)
	}
	if err := fx.cat.Replace(ctx, 5, []vocab.Manifest{ma}); !errors.Is(err, ErrGenerationNotNewer) {
		t.Fatalf("other content at the same generation: %v", err)
	}
	if err := fx.cat.Replace(ctx, 4, []vocab.Manifest{ma}); !errors.Is(err, ErrGenerationNotNewer) {
		t.Fatalf("an older generation: %v", err)
	}
	if err := fx.cat.Replace(ctx, 8, []vocab.Manifest{mb}); err != nil {
		t.Fatal(err)
	}
	pin := fx.cat.Pin()
	if _, ok := pin.Deployment("acme", "a"); ok || pin.Generation() != 8 || len(pin.AllServices()) != 1 {
		t.Fatalf("after replacing with b only: generation %d, services %v", pin.Generation(), pin.AllServices())
	}
	if reopened := fx.open(); reopened.Pin().Hash() != pin.Hash() {
		t.Fatal("the replaced catalog did not persist")
	}
}

// TestReplace_keepsUnchanged: a full listing that repeats a service's
// release keeps that service as it was (its generation, its record file)
// and gives back the references preparing it took; changed and new
// services are written together (writeBulk) at the listing's generation,
// and a reopened catalog serves the same.
func TestReplace_keepsUnchanged(t *testing.T) {
	fx := newFixture(t)
	ctx := context.Background()
	a, b := fx.module("module a"), fx.module("module b")
	ma, mb := oneRoute("a", a), oneRoute("b", a)
	if err := fx.cat.Apply(ctx, 5, []Change{{Tenant: "acme", Service: "a", Manifest: &ma}, {Tenant: "acme", Service: "b", Manifest: &mb}}); err != nil {
		t.Fatal(err)
	}
	recA := filepath.Join(fx.dir, ServiceRecordPath("acme", "a"))
	before, err := os.Stat(recA)
	if err != nil {
		t.Fatal(err)
	}
	mb2, mc := oneRoute("b", b), oneRoute("c", b)
	if err := fx.cat.Replace(ctx, 8, []vocab.Manifest{ma, mb2, mc}); err != nil {
		t.Fatal(err)
	}
	check := func(label string, c *Catalog) {
		t.Helper()
		pin := c.Pin()
		for svc, want := range map[vocab.ServiceName]vocab.Generation{"a": 5, "b": 8, "c": 8} {
			if d, ok := pin.Deployment("acme", svc); !ok || d.Generation != want {
				t.Fatalf("%s: %s at %+v, want generation %d", label, svc, d, want)
			}
		}
		if pin.Generation() != 8 {
			t.Fatalf("%s: catalog at %d, want 8", label, pin.Generation())
		}
	}
	check("replaced", fx.cat)
	after, err := os.Stat(recA)
	if err != nil || !os.SameFile(before, after) || !after.ModTime().Equal(before.ModTime()) {
		t.Fatalf("the unchanged service's record was rewritten (%v)", err)
	}
	if held := fx.insp.held(); held[a] != 1 || held[b] != 2 || fx.insp.overReleased != 0 {
		t.Fatalf("references %v (over-released %d), want a once (service a), b twice (b and c)", held, fx.insp.overReleased)
	}
	check("reopened", fx.open())
}

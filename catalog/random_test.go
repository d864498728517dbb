package catalog

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/latent-node/latent-node/vocab"
)

// recordWithoutRandom is the payload of acme/images deployed as
// twoRevisions(module "a", module "b"), as the catalog stored it before
// revisions had a random source.
const recordWithoutRandom = `{"tenant":"acme","service":"images","generation":1,` +
	`"release":"rel1-be7cde47b002b09d58640127d44206db8ad3784908dc9fd9dc4a7b10c22c1a56",` +
	`"revisions":[{"name":"v1","id":"rev1-ffcb1f5e5c9daab575622392ea62d035a2d4b2571cdc68f33ca6f35c1e76cb27"},` +
	`{"name":"v2","id":"rev1-f88ad1acc0e593e8520c7b034fc52d360101e001d75969f9e0b5d5224f0c2114"}],` +
	`"modules":[{"min_memory_bytes":65536,"max_memory_bytes":4294967296,"features":[],"threading":"single","exports":["_start","helper"]},` +
	`{"min_memory_bytes":65536,"max_memory_bytes":4294967296,"features":[],"threading":"single","exports":["_start","helper"]}],` +
	`"manifest":{"tenant":"acme","service":"images","revisions":[` +
	`{"name":"v1","artifact":"sha256:ca978112ca1bbdcafac231b39a23dc4da786eff8147c4e72b9807785afee48bb","trust_class":"untrusted",` +
	`"ceiling":{"cpu_fuel":1000000,"memory_bytes":33554432,"wall_time":"2s"}},` +
	`{"name":"v2","artifact":"sha256:3e23e8160039594a33894f6564e1b1348bbd7a0088d42c4acb73eeaed59c009d","trust_class":"untrusted",` +
	`"ceiling":{"cpu_fuel":1000000,"memory_bytes":33554432,"wall_time":"2s"}}],` +
	`"routes":[{"name":"thumbnail","function":"_start","targets":[{"revision":"v1","weight":90},{"revision":"v2","weight":10}]},` +
	`{"name":"stable","function":"_start","targets":[{"revision":"v1","weight":1}]}]}}`

// policies returns the revision policies of acme/images in fx's catalog.
func policies(t *testing.T, c *Catalog) []vocab.RevisionPolicy {
	t.Helper()
	svc := c.Pin().svc(serviceKey{"acme", "images"})
	if svc == nil {
		t.Fatal("acme/images is not deployed")
	}
	return svc.policies
}

// TestRandom_recordsWithoutTheField: a release stored before revisions had
// a random source loads with the secure default and its ids unchanged, and
// deploying the same manifest today stores the same bytes.
func TestRandom_recordsWithoutTheField(t *testing.T) {
	fx := newFixture(t)
	fx.module("a")
	fx.module("b")
	write := func(name string, data []byte) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(fx.dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(ServiceRecordPath("acme", "images"), encodeRecord("service", []byte(recordWithoutRandom)))
	write(StateFile, encodeRecord("state", []byte(`{"generation":1}`)))
	loaded := policies(t, fx.open())
	for _, p := range loaded {
		if p.Random != vocab.RandomSecure {
			t.Errorf("%s: random source %s, want secure", p.Name, p.Random)
		}
	}
	if loaded[0].ID != "rev1-ffcb1f5e5c9daab575622392ea62d035a2d4b2571cdc68f33ca6f35c1e76cb27" {
		t.Errorf("v1 id changed: %s", loaded[0].ID)
	}

	// Deployed today, the same manifest gets the same ids and record.
	fresh := newFixture(t)
	fresh.deploy(twoRevisions(fresh.module("a"), fresh.module("b")))
	data, err := os.ReadFile(filepath.Join(fresh.dir, ServiceRecordPath("acme", "images")))
	if err != nil {
		t.Fatal(err)
	}
	if want := encodeRecord("service", []byte(recordWithoutRandom)); !bytes.Equal(data, want) {
		t.Fatalf("record of a manifest without a random source changed:\nhave %s\nwant %s", data, want)
	}
}

// TestRandom_deploy: the manifest's random source reaches the revision
// policy, survives the record's JSON and a restart, and gives the revision
// another id; "secure" spelled out is the default.
func TestRandom_deploy(t *testing.T) {
	fx := newFixture(t)
	a, b := fx.module("a"), fx.module("b")
	plain := fx.deploy(twoRevisions(a, b))

	secure := twoRevisions(a, b)
	secure.Revisions[0].Random = "secure"
	if d := fx.deploy(secure); d.Release != plain.Release || !reflect.DeepEqual(d.Revisions, plain.Revisions) {
		t.Fatalf(`random = "secure" changed the ids: %+v vs %+v`, d, plain)
	}

	replay := twoRevisions(a, b)
	replay.Revisions[0].Random = "deterministic"
	d := fx.deploy(replay)
	if d.Revisions[0].ID == plain.Revisions[0].ID || d.Release == plain.Release {
		t.Fatal("the random source does not change the revision's id")
	}
	if d.Revisions[1].ID != plain.Revisions[1].ID {
		t.Fatal("the untouched revision changed id")
	}
	want := []vocab.Randomness{vocab.RandomDeterministic, vocab.RandomSecure}
	check := func(c *Catalog, when string) {
		t.Helper()
		for i, p := range policies(t, c) {
			if p.Random != want[i] {
				t.Errorf("%s: %s has random source %s, want %s", when, p.Name, p.Random, want[i])
			}
		}
	}
	check(fx.cat, "deployed")

	// The release record round-trips through JSON with the field.
	data, err := os.ReadFile(filepath.Join(fx.dir, ServiceRecordPath("acme", "images")))
	if err != nil {
		t.Fatal(err)
	}
	var rec serviceRecord
	if err := decodeRecord("service", data, &rec); err != nil {
		t.Fatal(err)
	}
	if rec.Manifest.Revisions[0].Random != "deterministic" || rec.Manifest.Revisions[1].Random != "" {
		t.Fatalf("recorded random sources %q, %q", rec.Manifest.Revisions[0].Random, rec.Manifest.Revisions[1].Random)
	}
	again, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	if _, payload, _ := bytes.Cut(data, []byte("\n")); !bytes.Equal(again, payload) {
		t.Fatalf("record JSON does not round-trip:\nhave %s\nwant %s", again, payload)
	}

	check(fx.open(), "after a restart")
}

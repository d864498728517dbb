package catalog

import (
	"cmp"
	"context"
	"reflect"
	"slices"
	"testing"

	"github.com/cockroachdb/errors"

	"github.com/latent-node/latent-node/vocab"
)

// reactorInfo is what inspection reports for a reactor: _initialize and
// handle, no _start.
func reactorInfo() ModuleInfo {
	info := defaultInfo()
	info.Exports = []vocab.FunctionName{"_initialize", "handle", "wizer.initialize"}
	return info
}

// TestInstance_deploy: checks that need the module. A named init must be
// exported; every route's function must be exported by each revision it
// targets, whatever the mode; a reactor (no _start) deploys in every mode,
// fresh included, when its routes name its exports.
func TestInstance_deploy(t *testing.T) {
	tests := []struct {
		name           string
		instance, init string
		function       vocab.FunctionName // of both routes; "" keeps _start
		fields         []string
	}{
		{name: "reactor fresh", function: "handle"},
		{name: "reactor snapshot", instance: "snapshot", function: "handle"},
		{name: "reactor reuse", instance: "reuse", function: "handle"},
		{name: "reactor snapshot, init named", instance: "snapshot", init: "wizer.initialize", function: "handle"},
		{name: "init not exported", instance: "snapshot", init: "setup", function: "handle",
			fields: []string{"revisions[0].init"}},
		{name: "reuse, init not exported", instance: "reuse", init: "_start", function: "handle",
			fields: []string{"revisions[0].init"}},
		// Negative control of the function check: a reactor has no _start.
		{name: "reactor routed to _start", instance: "snapshot",
			fields: []string{"routes[0].function", "routes[1].function"}},
		{name: "route function not exported", instance: "snapshot", function: "serve",
			fields: []string{"routes[0].function", "routes[1].function"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fx := newFixture(t)
			a := fx.module("reactor")
			fx.insp.set(a, reactorInfo())
			m := vocab.Manifest{Tenant: "acme", Service: "images", Revisions: []vocab.ManifestRevision{revision("v1", a)},
				Routes: []vocab.ManifestRoute{mroute("thumbnail", target("v1", 1)), mroute("stable", target("v1", 1))}}
			m.Revisions[0].Instance, m.Revisions[0].Init = tc.instance, vocab.FunctionName(tc.init)
			for i := range m.Routes {
				if tc.function != "" {
					m.Routes[i].Function = tc.function
				}
			}
			_, err := fx.cat.Deploy(context.Background(), m)
			if tc.fields == nil {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				p := policies(t, fx.cat)[0]
				want, _ := vocab.ParseInstanceMode(cmp.Or(tc.instance, "fresh"))
				if p.Instance != want || p.Init != vocab.FunctionName(tc.init) {
					t.Fatalf("policy has instance %s init %q, want %s %q", p.Instance, p.Init, want, tc.init)
				}
				return
			}
			if !errors.Is(err, vocab.ErrInvalidManifest) {
				t.Fatalf("want ErrInvalidManifest, have %v", err)
			}
			if have := problemFields(t, err); !slices.Equal(have, tc.fields) {
				t.Fatalf("fields %q, want %q (%v)", have, tc.fields, err)
			}
		})
	}
}

// TestInstance_policySurvivesRestart: the mode and the init reach the
// revision policy and come back the same from the catalog's records.
func TestInstance_policySurvivesRestart(t *testing.T) {
	fx := newFixture(t)
	a, b := fx.module("a"), fx.module("b")
	fx.insp.set(a, reactorInfo())
	fx.insp.set(b, reactorInfo())
	m := twoRevisions(a, b)
	m.Revisions[0].Instance, m.Revisions[0].Init = "snapshot", "wizer.initialize"
	m.Revisions[1].Instance = "reuse"
	for i := range m.Routes {
		m.Routes[i].Function = "handle"
	}
	fx.deploy(m)
	type got struct {
		Instance vocab.InstanceMode
		Init     vocab.FunctionName
	}
	want := []got{{vocab.InstanceSnapshot, "wizer.initialize"}, {vocab.InstanceReuse, ""}}
	for _, when := range []string{"deployed", "after a restart"} {
		c := fx.cat
		if when != "deployed" {
			c = fx.open()
		}
		var have []got
		for _, p := range policies(t, c) {
			have = append(have, got{p.Instance, p.Init})
		}
		if !reflect.DeepEqual(have, want) {
			t.Errorf("%s: %+v, want %+v", when, have, want)
		}
	}
}

// Revision ids of v1 and the release id of twoRevisions(module "a", module
// "b"): the ids every release deployed before instance modes existed has
// (the same as recordWithoutRandom's).
const (
	goldenFreshV1      = "rev1-ffcb1f5e5c9daab575622392ea62d035a2d4b2571cdc68f33ca6f35c1e76cb27"
	goldenFreshV2      = "rev1-f88ad1acc0e593e8520c7b034fc52d360101e001d75969f9e0b5d5224f0c2114"
	goldenFreshRelease = "rel1-be7cde47b002b09d58640127d44206db8ad3784908dc9fd9dc4a7b10c22c1a56"
)

// TestInstance_ids: a fresh revision, with the mode left out or spelled
// out, keeps its id byte for byte; snapshot, reuse and each init give v1 an
// id of its own (and the release another id), and leave v2's alone.
func TestInstance_ids(t *testing.T) {
	fx := newFixture(t)
	a, b := fx.module("a"), fx.module("b")
	info := defaultInfo()
	info.Exports = []vocab.FunctionName{"_initialize", "_start", "helper", "wizer.initialize"}
	fx.insp.set(a, info)
	tests := []struct {
		name, instance, init string
		fresh                bool // v1 keeps the golden id
	}{
		{name: "left out", fresh: true},
		{name: "fresh", instance: "fresh", fresh: true},
		{name: "snapshot", instance: "snapshot"},
		{name: "reuse", instance: "reuse"},
		{name: "snapshot init _initialize", instance: "snapshot", init: "_initialize"},
		{name: "snapshot init wizer", instance: "snapshot", init: "wizer.initialize"},
		{name: "reuse init wizer", instance: "reuse", init: "wizer.initialize"},
	}
	seen := map[vocab.RevisionID]string{}
	for _, tc := range tests {
		m := twoRevisions(a, b)
		m.Revisions[0].Instance, m.Revisions[0].Init = tc.instance, vocab.FunctionName(tc.init)
		d := fx.deploy(m)
		v1, v2 := d.Revisions[0].ID, d.Revisions[1].ID
		if v2 != goldenFreshV2 {
			t.Errorf("%s: the untouched v2 has id %s", tc.name, v2)
		}
		if tc.fresh {
			if v1 != goldenFreshV1 || d.Release != goldenFreshRelease {
				t.Errorf("%s: fresh ids changed: v1 %s release %s", tc.name, v1, d.Release)
			}
			continue
		}
		if v1 == goldenFreshV1 || d.Release == goldenFreshRelease {
			t.Errorf("%s: v1 or the release kept the fresh id", tc.name)
		}
		if other, dup := seen[v1]; dup {
			t.Errorf("%s: v1 has the id of %s", tc.name, other)
		}
		seen[v1] = tc.name
	}
}

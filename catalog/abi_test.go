package catalog

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/latent-node/latent-node/vocab"
)

// TestABI_deploy: the manifest's guest ABI reaches the revision policy and
// survives a restart; "stdio" spelled out is the default and keeps the ids,
// "wagi" gives the revision another id.
func TestABI_deploy(t *testing.T) {
	fx := newFixture(t)
	a, b := fx.module("a"), fx.module("b")
	plain := fx.deploy(twoRevisions(a, b))

	stdio := twoRevisions(a, b)
	stdio.Revisions[0].ABI = "stdio"
	if d := fx.deploy(stdio); d.Release != plain.Release || !reflect.DeepEqual(d.Revisions, plain.Revisions) {
		t.Fatalf(`abi = "stdio" changed the ids: %+v vs %+v`, d, plain)
	}

	wagi := twoRevisions(a, b)
	wagi.Revisions[0].ABI = "wagi"
	d := fx.deploy(wagi)
	if d.Revisions[0].ID == plain.Revisions[0].ID || d.Release == plain.Release {
		t.Fatal("the guest ABI does not change the revision's id")
	}
	if d.Revisions[1].ID != plain.Revisions[1].ID {
		t.Fatal("the untouched revision changed id")
	}
	want := []vocab.ABI{vocab.ABIWAGI, vocab.ABIStdio}
	check := func(c *Catalog, when string) {
		t.Helper()
		for i, p := range policies(t, c) {
			if p.ABI != want[i] {
				t.Errorf("%s: %s has ABI %s, want %s", when, p.Name, p.ABI, want[i])
			}
		}
		// A resolution carries its revision's ABI (the node shapes the
		// input by it before admission reads the policy).
		pin, seen := c.Pin(), map[vocab.ABI]bool{}
		for k := range 64 {
			rev, err := pin.Resolve(vocab.Target{Tenant: "acme", Service: "images", Route: "thumbnail"}, fmt.Sprint(k))
			if err != nil {
				t.Fatal(err)
			}
			pol, err := pin.Policy(rev)
			if err != nil || rev.ABI != pol.ABI {
				t.Fatalf("%s: %s resolved with ABI %s, its policy's is %s (%v)", when, rev.Revision, rev.ABI, pol.ABI, err)
			}
			seen[rev.ABI] = true
		}
		if !seen[vocab.ABIWAGI] || !seen[vocab.ABIStdio] {
			t.Errorf("%s: 64 keys resolved to ABIs %v, want both", when, seen)
		}
	}
	check(fx.cat, "deployed")
	check(fx.open(), "after a restart")
}

package catalog

import (
	"testing"

	"github.com/cockroachdb/errors"

	"github.com/latent-node/latent-node/vocab"
)

// TestPin_resolveNotFound: Resolve says which part of the target it did not
// find, and both answers stay ErrRevisionNotAvailable.
func TestPin_resolveNotFound(t *testing.T) {
	fx := newFixture(t)
	fx.deploy(twoRevisions(fx.module("a"), fx.module("b")))
	pin := fx.cat.Pin()
	tests := []struct {
		name   string
		target vocab.Target
		want   error // nil: resolves
		not    error
	}{
		{"found", vocab.Target{Tenant: "acme", Service: "images", Route: "stable"}, nil, nil},
		{"unknown service", vocab.Target{Tenant: "acme", Service: "videos", Route: "stable"}, ErrServiceNotFound, ErrRouteNotFound},
		{"unknown route", vocab.Target{Tenant: "acme", Service: "images", Route: "nope"}, ErrRouteNotFound, ErrServiceNotFound},
		{"another tenant's service", vocab.Target{Tenant: "beta", Service: "images", Route: "stable"}, ErrServiceNotFound, ErrRouteNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := pin.Resolve(tt.target, "key")
			if tt.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, tt.want) || !errors.Is(err, ErrRevisionNotAvailable) || errors.Is(err, tt.not) {
				t.Fatalf("want %v and %v (not %v), have %v", tt.want, ErrRevisionNotAvailable, tt.not, err)
			}
		})
	}
	if _, err := (Pin{}).Resolve(vocab.Target{Tenant: "acme", Service: "images", Route: "stable"}, ""); !errors.Is(err, ErrServiceNotFound) {
		t.Fatalf("zero pin: %v", err)
	}
	if n := testing.AllocsPerRun(100, func() { _, _ = pin.Resolve(vocab.Target{Tenant: "acme", Service: "images", Route: "nope"}, "") }); n != 0 {
		t.Fatalf("resolving an unknown route allocates %v times", n)
	}
}

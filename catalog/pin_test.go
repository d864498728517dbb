package catalog

import (
	"testing"

	"github.com/cockroachdb/errors"
)

// TestPin_resolveNotFound: Resolve says which part of the target it did not
// find, and both answers stay ErrRevisionNotAvailable.
func TestPin_resolveNotFound(t *testing.T) {
	fx := newFixture(t)
	fx.deploy(twoRevisions(fx.module("a"), fx.module("b")))
	pin := fx.cat.Pin()
	tests := []struct {
		name   string
		target Target
		want   error // nil: resolves
		not    error
	}{
		{"found", Target{"acme", "images", "stable"}, nil, nil},
		{"unknown service", Target{"acme", "videos", "stable"}, ErrServiceNotFound, ErrRouteNotFound},
		{"unknown route", Target{"acme", "images", "nope"}, ErrRouteNotFound, ErrServiceNotFound},
		{"another tenant's service", Target{"beta", "images", "stable"}, ErrServiceNotFound, ErrRouteNotFound},
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
	if _, err := (Pin{}).Resolve(Target{"acme", "images", "stable"}, ""); !errors.Is(err, ErrServiceNotFound) {
		t.Fatalf("zero pin: %v", err)
	}
	if n := testing.AllocsPerRun(100, func() { _, _ = pin.Resolve(Target{"acme", "images", "nope"}, "") }); n != 0 {
		t.Fatalf("resolving an unknown route allocates %v times", n)
	}
}

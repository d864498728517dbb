// Helpers of the package's tests: manifests to validate and a reader of
// the fields a validation error names.

package vocab

import (
	"encoding/json"
	"testing"

	"github.com/cockroachdb/errors"
)

const digestA = Digest("sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa")
const digestB = Digest("sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb")

func revision(name string, art Digest) ManifestRevision {
	return ManifestRevision{
		Name: RevisionName(name), Artifact: art, TrustClass: "untrusted",
		Ceiling: &ManifestCeiling{CPUFuel: 1_000_000, MemoryBytes: 32 << 20, WallTime: Duration(2e9)},
	}
}

func mroute(name string, targets ...ManifestTarget) ManifestRoute {
	return ManifestRoute{Name: RouteName(name), Function: "_start", Targets: targets}
}

func target(rev string, weight int64) ManifestTarget {
	return ManifestTarget{Revision: RevisionName(rev), Weight: weight}
}

// twoRevisions is acme/images with v1 and v2 split 90/10 on "thumbnail" and
// v1 alone on "stable".
func twoRevisions(a, b Digest) Manifest {
	return Manifest{
		Tenant: "acme", Service: "images",
		Revisions: []ManifestRevision{revision("v1", a), revision("v2", b)},
		Routes: []ManifestRoute{
			mroute("thumbnail", target("v1", 90), target("v2", 10)),
			mroute("stable", target("v1", 1)),
		},
	}
}

func problemFields(t *testing.T, err error) []string {
	t.Helper()
	var ve *ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("want a *ValidationError, have %T: %v", err, err)
	}
	var out []string
	for _, p := range ve.Problems {
		out = append(out, p.Field)
	}
	return out
}

// cloneManifest is a deep copy of m (through its JSON).
func cloneManifest(m Manifest) Manifest {
	data, err := json.Marshal(m)
	if err != nil {
		panic(err)
	}
	var out Manifest
	if err := json.Unmarshal(data, &out); err != nil {
		panic(err)
	}
	return out
}

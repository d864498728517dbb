// Helpers of the package's tests: a catalog in a temporary data directory
// (modules inspected by catalogtest.Inspector, uploads stamped by a manual
// clock) and the manifests the tests deploy into it.

package backup

import (
	"context"
	"crypto/sha256"
	"strings"
	"testing"
	"time"

	"github.com/latent-node/latent-node/catalog"
	"github.com/latent-node/latent-node/internal/testutil"
	"github.com/latent-node/latent-node/internal/testutil/catalogtest"
	"github.com/latent-node/latent-node/vocab"
)

// fixture is a catalog open on dir.
type fixture struct {
	t     testing.TB
	dir   string
	cat   *catalog.Catalog
	clock *testutil.Clock
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	fx := &fixture{t: t, dir: t.TempDir(), clock: testutil.NewClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))}
	c, err := catalog.Open(context.Background(), catalog.Config{Dir: fx.dir, Inspector: catalogtest.Inspector{}, Clock: fx.clock})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	fx.cat = c
	return fx
}

// module uploads distinct bytes for tenant acme and returns their digest.
func (fx *fixture) module(content string) vocab.Digest {
	fx.t.Helper()
	return fx.moduleFor("acme", content)
}

// moduleFor uploads bytes for tenant and returns their digest.
func (fx *fixture) moduleFor(tenant vocab.TenantID, content string) vocab.Digest {
	fx.t.Helper()
	d := digestOf(content)
	if err := fx.cat.Artifacts().Put(context.Background(), tenant, d, strings.NewReader(content)); err != nil {
		fx.t.Fatalf("put artifact: %v", err)
	}
	return d
}

func (fx *fixture) deploy(m vocab.Manifest) vocab.Deployment {
	fx.t.Helper()
	d, err := fx.cat.Deploy(context.Background(), m)
	if err != nil {
		fx.t.Fatalf("deploy: %v", err)
	}
	return d
}

func digestOf(content string) vocab.Digest { return vocab.DigestOf(sha256.Sum256([]byte(content))) }

func revision(name string, art vocab.Digest) vocab.ManifestRevision {
	return vocab.ManifestRevision{
		Name: vocab.RevisionName(name), Artifact: art, TrustClass: "untrusted",
		Ceiling: &vocab.ManifestCeiling{CPUFuel: 1_000_000, MemoryBytes: 32 << 20, WallTime: vocab.Duration(2e9)},
	}
}

func mroute(name string, targets ...vocab.ManifestTarget) vocab.ManifestRoute {
	return vocab.ManifestRoute{Name: vocab.RouteName(name), Function: "_start", Targets: targets}
}

func target(rev string, weight int64) vocab.ManifestTarget {
	return vocab.ManifestTarget{Revision: vocab.RevisionName(rev), Weight: weight}
}

func oneRevision(tenant vocab.TenantID, service vocab.ServiceName, art vocab.Digest) vocab.Manifest {
	return vocab.Manifest{Tenant: tenant, Service: service,
		Revisions: []vocab.ManifestRevision{revision("v1", art)},
		Routes:    []vocab.ManifestRoute{mroute("run", target("v1", 1))}}
}

// twoRevisions is acme/images with v1 and v2 split 90/10 on "thumbnail" and
// v1 alone on "stable".
func twoRevisions(a, b vocab.Digest) vocab.Manifest {
	return vocab.Manifest{
		Tenant: "acme", Service: "images",
		Revisions: []vocab.ManifestRevision{revision("v1", a), revision("v2", b)},
		Routes: []vocab.ManifestRoute{
			mroute("thumbnail", target("v1", 90), target("v2", 10)),
			mroute("stable", target("v1", 1)),
		},
	}
}

package node

import (
	"bytes"
	"context"
	"crypto/sha256"
	_ "embed" // the demo guest

	"github.com/cockroachdb/errors"

	"github.com/latent-node/latent-node/catalog"
)

// DemoHello is the embedded `hello` guest of `serve --demo` (a copy of
// testdata/wasm/hello.wasm; a test keeps them identical).
//
//go:embed demo/hello.wasm
var DemoHello []byte

// DemoTarget is the demo route.
var DemoTarget = catalog.Target{Tenant: "demo", Service: "hello", Route: "greet"}

// DeployDemo uploads the hello guest and activates demo/hello with the route
// greet.
func (n *Node) DeployDemo(ctx context.Context) (catalog.Deployment, error) {
	d := catalog.DigestOf(sha256.Sum256(DemoHello))
	if err := n.cat.PutArtifact(ctx, DemoTarget.Tenant, d, bytes.NewReader(DemoHello)); err != nil {
		return catalog.Deployment{}, errors.Wrap(err, "node: demo artifact")
	}
	return n.cat.Deploy(ctx, catalog.Manifest{Tenant: DemoTarget.Tenant, Service: DemoTarget.Service,
		Revisions: []catalog.ManifestRevision{{Name: "v1", Artifact: d, TrustClass: "untrusted",
			Ceiling: &catalog.ManifestCeiling{CPUFuel: 100_000_000, MemoryBytes: 16 << 20, WallTime: catalog.Duration(2e9)}}},
		Routes: []catalog.ManifestRoute{{Name: DemoTarget.Route, Targets: []catalog.ManifestTarget{{Revision: "v1", Weight: 1}}}}})
}

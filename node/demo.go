package node

// The demo of `serve --demo`: the embedded hello guest, its route, and
// DeployDemo.

import (
	"bytes"
	"context"
	"crypto/sha256"
	_ "embed" // the demo guest

	"github.com/cockroachdb/errors"

	"github.com/latent-node/latent-node/vocab"
)

// DemoHello is the embedded `hello` guest of `serve --demo` (a copy of
// testdata/wasm/hello.wasm; a test keeps them identical).
//
//go:embed demo/hello.wasm
var DemoHello []byte

// DemoTarget is the demo route.
var DemoTarget = vocab.Target{Tenant: "demo", Service: "hello", Route: "greet"}

// DeployDemo uploads the hello guest and activates demo/hello with the route
// greet.
func (n *Node) DeployDemo(ctx context.Context) (vocab.Deployment, error) {
	d := vocab.DigestOf(sha256.Sum256(DemoHello))
	if err := n.cat.Artifacts().Put(ctx, DemoTarget.Tenant, d, bytes.NewReader(DemoHello)); err != nil {
		return vocab.Deployment{}, errors.Wrap(err, "node: demo artifact")
	}
	return n.cat.Deploy(ctx, vocab.Manifest{Tenant: DemoTarget.Tenant, Service: DemoTarget.Service,
		Revisions: []vocab.ManifestRevision{{Name: "v1", Artifact: d, TrustClass: "untrusted",
			Ceiling: &vocab.ManifestCeiling{CPUFuel: 100_000_000, MemoryBytes: 16 << 20, WallTime: vocab.Duration(2e9)}}},
		Routes: []vocab.ManifestRoute{{Name: DemoTarget.Route, Targets: []vocab.ManifestTarget{{Revision: "v1", Weight: 1}}}}})
}

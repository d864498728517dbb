package runner

import (
	"context"
	"crypto/sha256"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/latent-node/latent-node/admission"
	"github.com/latent-node/latent-node/internal/testwasm"
	"github.com/latent-node/latent-node/vocab"
)

// BenchmarkRun_instanceModes: one activation of the state reactor, and of
// the Go router reactor named by $LATENT_BENCH_ROUTER (a WAGI GET /hello)
// when set, in each instance mode through Run (admission, permit, run).
func BenchmarkRun_instanceModes(b *testing.B) {
	type guest struct {
		name, function string
		wasm           []byte
		abi            string
		environ        []string
	}
	guests := []guest{{name: "state", function: "handle", wasm: testwasm.Bytes(b, "state")}}
	if p := os.Getenv("LATENT_BENCH_ROUTER"); p != "" {
		wasm, err := os.ReadFile(p)
		if err != nil {
			b.Fatal(err)
		}
		guests = append(guests, guest{name: "router", function: "web", wasm: wasm, abi: "wagi",
			environ: []string{"REQUEST_METHOD=GET", "PATH_INFO=/hello", "QUERY_STRING=name=Ada", "SERVER_PROTOCOL=HTTP/1.1"}})
	}
	e := newEnvWith(b, newRunner(b, Config{MaxOutputBytes: 64 << 10}))
	for _, g := range guests {
		for _, mode := range []string{"fresh", "snapshot", "reuse"} {
			svc := g.name + "-" + mode
			d := vocab.DigestOf(sha256.Sum256(g.wasm))
			if err := e.cat.Artifacts().Put(context.Background(), "acme", d, strings.NewReader(string(g.wasm))); err != nil {
				b.Fatal(err)
			}
			c := ceiling(1<<32, 64<<20, 10*time.Second)
			m := vocab.Manifest{Tenant: "acme", Service: vocab.ServiceName(svc),
				Revisions: []vocab.ManifestRevision{{Name: "v1", Artifact: d, TrustClass: "untrusted", Ceiling: &c, Instance: mode, ABI: g.abi}},
				Routes: []vocab.ManifestRoute{{Name: "run", Function: vocab.FunctionName(g.function),
					Targets: []vocab.ManifestTarget{{Revision: "v1", Weight: 1}}}}}
			if _, err := e.cat.Deploy(context.Background(), m); err != nil {
				b.Fatalf("deploy %s: %v", svc, err)
			}
			b.Run(svc, func(b *testing.B) {
				var fuel uint64
				for b.Loop() {
					x := e.permit(svc, admission.BudgetRequest{})
					out := e.r.RunWith(context.Background(), x, plainCell{}, Input{Body: []byte("abc"), Environ: g.environ})
					_ = x.Release()
					if out.Kind != Success {
						b.Fatalf("%s: %v %s", out.Kind, out.Err, out.StderrTail)
					}
					fuel = out.FuelUsed
				}
				b.ReportMetric(float64(fuel), "fuel/op")
			})
		}
	}
}

package runner

import (
	"context"
	"crypto/sha256"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/latent-node/latent-node/admission"
	"github.com/latent-node/latent-node/internal/testwasm"
	"github.com/latent-node/latent-node/vocab"
)

// BenchmarkRun_instanceModes: one activation of the state reactor, of the
// Go router reactor named by $LATENT_BENCH_ROUTER (a WAGI GET /hello) when
// set, and of the wasi:http components, in each instance mode through Run
// (admission, permit, run).
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
	// The Rust wasi:http handler (four core modules, flattened), and the
	// JavaScript one (examples/js/app.wasm, 12.9 MB) named by
	// $LATENT_BENCH_JS when set: a POST / each.
	components := []guest{{name: "rust-http", wasm: testwasm.Component(b, "adapted"), abi: "wasi-http"}}
	if p := os.Getenv("LATENT_BENCH_JS"); p != "" {
		wasm, err := os.ReadFile(p)
		if err != nil {
			b.Fatal(err)
		}
		components = append(components, guest{name: "js-http", wasm: wasm, abi: "wasi-http"})
	}
	guests = append(guests, components...)
	e := newEnvWith(b, newRunner(b, Config{MaxOutputBytes: 64 << 10}))
	for _, g := range guests {
		for _, mode := range []string{"fresh", "snapshot", "reuse"} {
			if g.abi == "wasi-http" && mode == "reuse" {
				continue // components run fresh or from a snapshot
			}
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

// BenchmarkWarmPool_putTake is one activation's bookkeeping in the warm
// pool (take an idle instance, put it back) while n other revisions have an
// instance idle: what a warm activation pays for the pool's size.
func BenchmarkWarmPool_putTake(b *testing.B) {
	for _, n := range []int{16, 1_000, 100_000} {
		b.Run("idle="+strconv.Itoa(n), func(b *testing.B) {
			p := newWarmPool(nil, nil, nil, Config{})
			now := time.Unix(0, 0)
			for i := range n + 1 {
				now = now.Add(time.Microsecond)
				w := &warmInstance{key: warmKey{"acme", vocab.RevisionID("r" + strconv.Itoa(i))}, m: &module{digest: "sha256:d"}}
				if closing := p.put(w, now, n+1, time.Hour); len(closing) != 0 {
					b.Fatalf("%d closed while filling", len(closing))
				}
			}
			k := warmKey{"acme", "r0"}
			for b.Loop() {
				w, _ := p.take(k, false, 0)
				now = now.Add(time.Microsecond)
				if w == nil || len(p.put(w, now, n+1, time.Hour)) != 0 {
					b.Fatal("the pool lost or closed an instance")
				}
			}
		})
	}
}

// BenchmarkWarmPool_evictOneRevision is a put at the pool's bound when one
// revision holds all n idle instances: each put evicts that revision's
// longest idle instance.
func BenchmarkWarmPool_evictOneRevision(b *testing.B) {
	for _, n := range []int{16, 1_000, 100_000} {
		b.Run("idle="+strconv.Itoa(n), func(b *testing.B) {
			p := newWarmPool(nil, nil, nil, Config{})
			now := time.Unix(0, 0)
			k := warmKey{"acme", "r0"}
			put := func() []*warmInstance {
				now = now.Add(time.Microsecond)
				return p.put(&warmInstance{key: k, m: &module{digest: "sha256:d"}}, now, n, time.Hour)
			}
			for range n {
				if len(put()) != 0 {
					b.Fatal("closed while filling")
				}
			}
			for b.Loop() {
				if len(put()) != 1 {
					b.Fatal("want one instance evicted")
				}
			}
		})
	}
}

// BenchmarkWarmPool_dropDigest is a module's last release (a deploy that
// replaced its revision) while n other modules each have an idle instance
// and a snapshot: the pool drops the one module's instance and snapshot.
func BenchmarkWarmPool_dropDigest(b *testing.B) {
	for _, n := range []int{16, 1_000, 100_000} {
		b.Run("modules="+strconv.Itoa(n), func(b *testing.B) {
			p := newWarmPool(nil, nil, nil, Config{})
			now := time.Unix(0, 0)
			add := func(i int) {
				m := &module{digest: vocab.Digest("sha256:" + strconv.Itoa(i))}
				now = now.Add(time.Microsecond)
				p.put(&warmInstance{key: warmKey{"acme", vocab.RevisionID("r" + strconv.Itoa(i))}, m: m}, now, n+1, time.Hour)
				p.mu.Lock()
				p.addSnapshotLocked(&snapshot{key: snapKey{tenant: "acme", digest: m.digest}})
				p.mu.Unlock()
			}
			for i := range n + 1 {
				add(i)
			}
			for b.Loop() {
				if len(p.dropDigest("sha256:0")) != 1 {
					b.Fatal("want the module's one instance")
				}
				add(0)
			}
		})
	}
}

// BenchmarkWarmStats is a metrics scrape's read of the warm pool while n
// tenants hold snapshots (it holds the lock warm activations take).
func BenchmarkWarmStats(b *testing.B) {
	for _, n := range []int{16, 1_000, 100_000} {
		b.Run("tenants="+strconv.Itoa(n), func(b *testing.B) {
			r := &Runner{warm: newWarmPool(nil, nil, nil, Config{})}
			for i := range n {
				r.warm.snapBytes[vocab.TenantID("t"+strconv.Itoa(i))] = 64 << 10
				r.warm.snapTotal += 64 << 10
			}
			for b.Loop() {
				if r.WarmStats().SnapshotBytes != uint64(n)<<16 {
					b.Fatal("wrong total")
				}
			}
		})
	}
}

// BenchmarkWarmPool_dropSnapshot is a deploy that leaves one snapshot
// unused while the tenant has n snapshot revisions, each snapshot with an
// idle instance: the pool drops that snapshot and its instance. What it
// costs must not grow with n (the catalog names the one snapshot; nothing
// lists the tenant's others).
func BenchmarkWarmPool_dropSnapshot(b *testing.B) {
	for _, n := range []int{16, 1_000, 100_000} {
		b.Run("snapshots="+strconv.Itoa(n), func(b *testing.B) {
			p := newWarmPool(nil, nil, nil, Config{})
			now := time.Unix(0, 0)
			key := func(i int) snapKey {
				return snapKey{tenant: "acme", digest: vocab.Digest("sha256:" + strconv.Itoa(i))}
			}
			add := func(i int) {
				s := &snapshot{key: key(i), ready: make(chan struct{})}
				close(s.ready)
				p.mu.Lock()
				p.addSnapshotLocked(s)
				p.mu.Unlock()
				now = now.Add(time.Microsecond)
				w := &warmInstance{key: warmKey{"acme", vocab.RevisionID("r" + strconv.Itoa(i))}, m: &module{digest: s.key.digest}, snap: s}
				p.put(w, now, n+1, time.Hour)
			}
			for i := range n {
				add(i)
			}
			for b.Loop() {
				if closing := p.drop([]snapKey{key(0)}); len(closing) != 1 {
					b.Fatalf("closed %d instances, want the snapshot's one", len(closing))
				}
				add(0)
			}
		})
	}
}

package cluster

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"strconv"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/latent-node/latent-node/catalog"
	"github.com/latent-node/latent-node/internal/testutil/catalogtest"
	"github.com/latent-node/latent-node/internal/testutil/etcdtest"
	"github.com/latent-node/latent-node/vocab"
)

// applyAt100 is the per-change time of the services=100 case, for the
// ratio the larger case reports (sub-benchmarks run in order).
var applyAt100 float64

// BenchmarkCluster_applyAtScale fills etcd with N services, starts a node
// on an empty catalog (which lists them and replaces its catalog: the
// replace-ms metric), then times single changes: one service's record put
// in etcd until the node has applied it (ns/op: etcd's commit, the watch,
// the catalog's apply and its fsync). A change must cost the same at 100
// and at 100,000 services: ratio-vs-100 is the per-change time over the
// services=100 case's in the same run.
//
//	go test -run '^$' -bench BenchmarkCluster_applyAtScale -benchtime 100x ./cluster/
func BenchmarkCluster_applyAtScale(b *testing.B) {
	for _, n := range []int{100, 100_000} {
		b.Run("services="+strconv.Itoa(n), func(b *testing.B) {
			endpoint := etcdtest.Start(b, 1).ClientURLs()[0]
			cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second})
			if err != nil {
				b.Fatal(err)
			}
			defer func() { _ = cli.Close() }()
			ctx := context.Background()
			dir := b.TempDir()
			cat, err := catalog.Open(ctx, catalog.Config{Dir: dir, Inspector: catalogtest.Inspector{}})
			if err != nil {
				b.Fatal(err)
			}
			module := []byte("\x00asm\x01\x00\x00\x00")
			d := vocab.DigestOf(sha256.Sum256(module))
			if err := cat.Artifacts().Put(ctx, "acme", d, bytes.NewReader(module)); err != nil {
				b.Fatal(err)
			}
			k := keys{prefix: "/test"}
			put := func(i int, weight int64) clientv3.Op {
				m := manifest("acme", "svc-"+strconv.Itoa(i), d, weight)
				value, err := json.Marshal(record{Manifest: m})
				if err != nil {
					b.Fatal(err)
				}
				return clientv3.OpPut(k.service(m.Tenant, m.Service), string(value))
			}
			for from := 0; from < n; from += 64 {
				var ops []clientv3.Op
				for i := from; i < min(n, from+64); i++ {
					ops = append(ops, put(i, 1))
				}
				ops = append(ops, clientv3.OpPut(k.head(), "{}"))
				if _, err := cli.Txn(ctx).Then(ops...).Commit(); err != nil {
					b.Fatal(err)
				}
			}
			start := time.Now()
			m := startMemberOpts(b, []string{endpoint}, "a", dir, "/test",
				catalog.Config{MaxServices: n + 1, MaxServicesPerTenant: n + 1})
			waitFor(b, "the listing replaced", 5*time.Minute, func() bool { return m.cat.Pin().Len() == n })
			replace := time.Since(start)
			change := func(i int) {
				resp, err := cli.Txn(ctx).Then(put(i%n, int64(2+i%2)), clientv3.OpPut(k.head(), "{}")).Commit()
				if err != nil {
					b.Fatal(err)
				}
				wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				ok := m.c.WaitApplied(wctx, vocab.Generation(resp.Header.Revision))
				cancel()
				if !ok {
					b.Fatalf("change %d not applied", i)
				}
			}
			// The listing's writes are still being flushed by the kernel:
			// untimed changes first.
			for i := range 50 {
				change(n - 1 - i)
			}
			i := 0
			for b.Loop() {
				change(i)
				i++
			}
			perChange := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
			b.ReportMetric(float64(replace.Milliseconds()), "replace-ms")
			if n == 100 {
				applyAt100 = perChange
			} else if applyAt100 > 0 {
				b.ReportMetric(perChange/applyAt100, "ratio-vs-100")
			}
		})
	}
}

package cluster

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"runtime"
	"strconv"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/latent-node/latent-node/catalog"
	"github.com/latent-node/latent-node/internal/testutil"
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
			ls := listServices(b, n, func(int) int64 { return 1 })
			ctx, cli, k, put := context.Background(), ls.cli, ls.k, ls.put
			runtime.GC()
			resetPeak := testutil.ResetPeakRSS()
			before, _, _ := testutil.ProcStatus("self") // the process's, etcd's server included
			start := time.Now()
			m := startMemberOpts(b, []string{ls.endpoint}, "a", ls.dir, "/test",
				catalog.Config{MaxServices: n + 1, MaxServicesPerTenant: n + 1})
			waitFor(b, "the listing replaced", 5*time.Minute, func() bool { return m.cat.Pin().Len() == n })
			replace := time.Since(start)
			extra := -1.0 // unknown: the kernel's peak could not be reset
			if _, peak, ok := testutil.ProcStatus("self"); resetPeak && ok {
				extra = float64(peak-before) / (1 << 20)
			}
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
			b.ReportMetric(extra, "replace-peak-extra-MiB") // after b.Loop, whose first call drops the metrics reported before
			if n == 100 {
				applyAt100 = perChange
			} else if applyAt100 > 0 {
				b.ReportMetric(perChange/applyAt100, "ratio-vs-100")
			}
		})
	}
}

// listedServices is etcd holding n service records of tenant acme
// (svc-0, svc-1, …), each one revision of the same module, and the data
// directory of a catalog that owns the module: what a node listing them
// starts from.
type listedServices struct {
	endpoint, dir string
	cli           *clientv3.Client
	k             keys
	// put is the record of svc-i with its route's weight.
	put func(i int, weight int64) clientv3.Op
}

// listServices writes the n records, 64 to a transaction with the head,
// svc-i's route weighing weight(i).
func listServices(tb testing.TB, n int, weight func(i int) int64) *listedServices {
	tb.Helper()
	ls := &listedServices{endpoint: etcdtest.Start(tb, 1).ClientURLs()[0], dir: tb.TempDir(), k: keys{prefix: "/test"}}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{ls.endpoint}, DialTimeout: 5 * time.Second})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = cli.Close() })
	ls.cli = cli
	ctx := context.Background()
	cat, err := catalog.Open(ctx, catalog.Config{Dir: ls.dir, Inspector: catalogtest.Inspector{}})
	if err != nil {
		tb.Fatal(err)
	}
	module := []byte("\x00asm\x01\x00\x00\x00")
	d := vocab.DigestOf(sha256.Sum256(module))
	if err := cat.Artifacts().Put(ctx, "acme", d, bytes.NewReader(module)); err != nil {
		tb.Fatal(err)
	}
	ls.put = func(i int, weight int64) clientv3.Op {
		m := manifest("acme", "svc-"+strconv.Itoa(i), d, weight)
		value, err := json.Marshal(record{Manifest: m})
		if err != nil {
			tb.Fatal(err)
		}
		return clientv3.OpPut(ls.k.service(m.Tenant, m.Service), string(value))
	}
	for from := 0; from < n; from += 64 {
		var ops []clientv3.Op
		for i := from; i < min(n, from+64); i++ {
			ops = append(ops, ls.put(i, weight(i)))
		}
		ops = append(ops, clientv3.OpPut(ls.k.head(), "{}"))
		if _, err := cli.Txn(ctx).Then(ops...).Commit(); err != nil {
			tb.Fatal(err)
		}
	}
	return ls
}

// TestCluster_relistPages: a node starting on an empty catalog lists the
// services in pages (two records a read here) and gets every one, each
// with its own record, at the head's revision.
func TestCluster_relistPages(t *testing.T) {
	const n = 9
	ls := listServices(t, n, func(i int) int64 { return int64(1 + i%3) })
	head, err := ls.cli.Get(context.Background(), ls.k.head())
	if err != nil {
		t.Fatal(err)
	}
	m := startMemberOpts(t, []string{ls.endpoint}, "a", ls.dir, "/test", catalog.Config{}, func(c *Config) { c.ListPage = 2 })
	waitFor(t, "the listing replaced", 30*time.Second, func() bool { return m.cat.Pin().Len() == n })
	pin := m.cat.Pin()
	if pin.Generation() != vocab.Generation(head.Kvs[0].ModRevision) {
		t.Fatalf("generation %d, want the head's revision %d", pin.Generation(), head.Kvs[0].ModRevision)
	}
	for i := range n {
		_, man, err := m.cat.Manifest("acme", vocab.ServiceName("svc-"+strconv.Itoa(i)))
		if err != nil {
			t.Fatalf("svc-%d: %v", i, err)
		}
		if w := man.Routes[0].Targets[0].Weight; w != int64(1+i%3) {
			t.Fatalf("svc-%d: weight %d, want %d (another service's record)", i, w, 1+i%3)
		}
	}
}

// Command catalogbench fills a real latent-node with services through its
// HTTP API and measures how the costs grow with the catalog: deploy latency
// and the bytes the node allocates per deploy, invoke latency, resident
// memory, the time to list a tenant's services and to restart. It is
// `make bench-catalog`; bench/README.md says how to read the results.
//
// One tenant deploys -services services (svc-000000, ...) one after the
// other over one keep-alive connection, as a platform filling a node
// would: each manifest has one to three revisions over three shared
// artifacts and one to four routes. At each checkpoint (1,000, then every
// -block services) the harness records the deploy latencies of the
// services deployed since the previous checkpoint, the node's allocated
// bytes over them (go_memstats_alloc_bytes_total from /metrics), invoke
// latency over a sample of the deployed services, the node's RSS and a
// full listing through the client (which follows the pages). At the end it
// restarts the node and times readiness and the first served invoke.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/latent-node/latent-node/bench/internal/nodeproc"
	"github.com/latent-node/latent-node/bench/internal/stats"
	"github.com/latent-node/latent-node/client"
	"github.com/latent-node/latent-node/internal/testutil/nodeconf"
)

type options struct {
	services, block, invokes int
	out, plot, bin           string
}

func main() {
	var o options
	flag.IntVar(&o.services, "services", 100_000, "services to deploy")
	flag.IntVar(&o.block, "block", 10_000, "services between checkpoints (after the first, at 1,000)")
	flag.IntVar(&o.invokes, "invokes", 400, "invocations measured at each checkpoint")
	flag.StringVar(&o.out, "out", "bench/results/catalog.json", "where to write the results")
	flag.StringVar(&o.plot, "plot", "bench/results/catalog.svg", "where to write the plot")
	flag.StringVar(&o.bin, "bin", "", "latent-node binary (default: go build ./cmd/latent-node)")
	flag.Parse()
	if err := run(context.Background(), o); err != nil {
		fmt.Fprintln(os.Stderr, "catalogbench:", err)
		os.Exit(1)
	}
}

// checkpoint is the node after its first Services services.
type checkpoint struct {
	Services int `json:"services"`
	// Deploys since the previous checkpoint: latency at the client and
	// bytes the node allocated per deploy.
	Deploys          int     `json:"deploys"`
	DeployP50Ms      float64 `json:"deploy_p50_ms"`
	DeployP99Ms      float64 `json:"deploy_p99_ms"`
	DeployAllocBytes float64 `json:"deploy_alloc_bytes"`
	InvokeP50Ms      float64 `json:"invoke_p50_ms"`
	InvokeP99Ms      float64 `json:"invoke_p99_ms"`
	RSSBytes         int64   `json:"rss_bytes"`
	ListMs           float64 `json:"list_ms"`
}

type results struct {
	Date     string            `json:"date"`
	Machine  map[string]any    `json:"machine"`
	Config   map[string]any    `json:"config"`
	EmptyRSS int64             `json:"empty_rss_bytes"`
	Points   []checkpoint      `json:"checkpoints"`
	Restart  map[string]any    `json:"restart"`
	Bars     map[string]bar    `json:"bars"`
	Notes    []string          `json:"notes"`
	Files    map[string]string `json:"files"`
}

type bar struct {
	Value float64 `json:"value"`
	Max   float64 `json:"max"`
	Met   bool    `json:"met"`
	What  string  `json:"what"`
}

const tenant = "fleet"

func run(ctx context.Context, o options) error {
	root, err := nodeproc.ModuleRoot()
	if err != nil {
		return err
	}
	if o.bin == "" {
		dir, bin, err := nodeproc.Build(ctx)
		if err != nil {
			return err
		}
		defer func() { _ = os.RemoveAll(dir) }()
		o.bin = bin
	}
	key, hash, err := nodeproc.Keygen(ctx, o.bin)
	if err != nil {
		return err
	}
	work, err := os.MkdirTemp("", "catalogbench-")
	if err != nil {
		return errors.Wrap(err, "catalogbench: temp dir")
	}
	defer func() { _ = os.RemoveAll(work) }()
	cfgPath := filepath.Join(work, "node.toml")
	if err := os.WriteFile(cfgPath, []byte(configTOML(filepath.Join(work, "data"), hash, o.services)), 0o600); err != nil {
		return errors.Wrap(err, "catalogbench: write config")
	}
	n, err := nodeproc.Start(ctx, o.bin, cfgPath, "")
	if err != nil {
		return err
	}
	defer func() { n.Stop() }()

	c, err := client.New(n.URL, key, client.WithRetry(client.RetryPolicy{}))
	if err != nil {
		return err
	}
	var arts []string
	for _, name := range []string{"hello", "echo", "trivial"} {
		wasm, err := os.ReadFile(filepath.Join(root, "testdata", "wasm", name+".wasm"))
		if err != nil {
			return errors.Wrap(err, "catalogbench: fixture")
		}
		d, err := c.UploadArtifact(ctx, wasm)
		if err != nil {
			return err
		}
		arts = append(arts, d)
	}
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}, Timeout: 30 * time.Second}
	res := results{Date: time.Now().UTC().Format(time.RFC3339),
		Machine: map[string]any{"goos": runtime.GOOS, "goarch": runtime.GOARCH, "num_cpu": runtime.NumCPU(), "go_version": runtime.Version()},
		Config:  map[string]any{"services": o.services, "block": o.block, "invokes": o.invokes, "artifacts": len(arts)},
		Files:   map[string]string{"plot": filepath.Base(o.plot)}}
	if res.EmptyRSS, err = rss(n.PID); err != nil {
		return err
	}
	marks := []int{min(1000, o.services)}
	for s := o.block; s <= o.services; s += o.block {
		if s > marks[len(marks)-1] {
			marks = append(marks, s)
		}
	}
	if marks[len(marks)-1] != o.services {
		marks = append(marks, o.services)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	deployed := 0
	for _, mark := range marks {
		alloc0, err := allocated(ctx, hc, n.URL, key)
		if err != nil {
			return err
		}
		var lat []time.Duration
		for ; deployed < mark; deployed++ {
			d, err := deploy(ctx, hc, n.URL, key, deployed, arts)
			if err != nil {
				return errors.Wrapf(err, "service %d\n%s", deployed, n.Stderr())
			}
			lat = append(lat, d)
		}
		alloc1, err := allocated(ctx, hc, n.URL, key)
		if err != nil {
			return err
		}
		p := checkpoint{Services: mark, Deploys: len(lat), DeployAllocBytes: float64(alloc1-alloc0) / float64(len(lat))}
		p.DeployP50Ms, p.DeployP99Ms = pct(lat, 0.5), pct(lat, 0.99)
		var inv []time.Duration
		for range o.invokes {
			d, err := invoke(ctx, hc, n.URL, key, rng.IntN(deployed))
			if err != nil {
				return errors.Wrapf(err, "invoke\n%s", n.Stderr())
			}
			inv = append(inv, d)
		}
		p.InvokeP50Ms, p.InvokeP99Ms = pct(inv, 0.5), pct(inv, 0.99)
		if p.RSSBytes, err = rss(n.PID); err != nil {
			return err
		}
		start := time.Now()
		l, err := c.ListDeployments(ctx, tenant)
		if err != nil {
			return err
		}
		if len(l.Services) != mark {
			return errors.Newf("catalogbench: the listing has %d services, want %d", len(l.Services), mark)
		}
		p.ListMs = ms(time.Since(start))
		res.Points = append(res.Points, p)
		fmt.Fprintf(os.Stderr, "%7d services: deploy p50 %.3f p99 %.3f ms, %.0f B/deploy; invoke p50 %.3f ms; RSS %.1f MiB; list %.0f ms\n",
			mark, p.DeployP50Ms, p.DeployP99Ms, p.DeployAllocBytes, p.InvokeP50Ms, float64(p.RSSBytes)/(1<<20), p.ListMs)
	}

	// Restart: from exec to /readyz 200, then the first served invoke.
	n.Stop()
	start := time.Now()
	n, err = nodeproc.Start(ctx, o.bin, cfgPath, "")
	if err != nil {
		return err
	}
	ready := time.Since(start)
	if _, err := invoke(ctx, hc, n.URL, key, rng.IntN(deployed)); err != nil {
		return errors.Wrapf(err, "first invoke after the restart\n%s", n.Stderr())
	}
	first := time.Since(start)
	restartRSS, err := rss(n.PID)
	if err != nil {
		return err
	}
	res.Restart = map[string]any{"services": deployed, "ready_ms": ms(ready), "first_invoke_ms": ms(first), "rss_bytes": restartRSS}
	fmt.Fprintf(os.Stderr, "restart at %d services: ready in %.0f ms, first invoke at %.0f ms, RSS %.1f MiB\n",
		deployed, ms(ready), ms(first), float64(restartRSS)/(1<<20))

	first1k, last := res.Points[0], res.Points[len(res.Points)-1]
	perService := float64(last.RSSBytes-res.EmptyRSS) / float64(last.Services)
	res.Bars = map[string]bar{
		"deploy_p50_growth": {Value: last.DeployP50Ms / first1k.DeployP50Ms, Max: 1.5,
			What: "deploy p50 over the last block / over the first 1,000"},
		"deploy_p50_at_1k_ms": {Value: first1k.DeployP50Ms, Max: 2, What: "deploy p50 over the first 1,000 services, ms"},
		"invoke_p50_growth": {Value: last.InvokeP50Ms / first1k.InvokeP50Ms, Max: 1.2,
			What: "invoke p50 at the last checkpoint / at 1,000"},
		"restart_first_invoke_s": {Value: ms(first) / 1000, Max: 10, What: "restart to the first served invoke, s"},
		"rss_per_service_bytes": {Value: perService, Max: 2048,
			What: "(RSS at the last checkpoint - the empty node's) / services"},
	}
	for k, b := range res.Bars {
		b.Met = b.Value <= b.Max
		res.Bars[k] = b
	}
	res.Notes = []string{
		"Deploy latency is measured at the client, over one keep-alive connection, including the node's fsync of the service record; deploy_alloc_bytes is the node's go_memstats_alloc_bytes_total over the block divided by its deploys (everything the node allocated meanwhile).",
		"Invoke latency is the client's, for hello/echo/trivial routes of services drawn at random from those deployed.",
		"list_ms is a full listing of the tenant through the client, which follows the node's pages of 1,000.",
	}
	if err := writeJSON(o.out, res); err != nil {
		return err
	}
	return writeSVG(o.plot, res)
}

func configTOML(dataDir, keyHash string, services int) string {
	limits := nodeconf.Limits{MaxLiveActivations: 64, MaxQueued: 64, MaxReservedFuel: 10_000_000_000_000, MaxReservedMemory: "4GiB"}
	cfg := nodeconf.Config{
		DataDir:       dataDir,
		ShutdownGrace: "2s",
		Limits:        limits,
		Cells:         []nodeconf.Cell{{Class: "tiny", Memory: "16MiB", Parallelism: 2}},
		TrustClasses:  []nodeconf.TrustClass{{Name: "untrusted", Cells: []string{"tiny"}, Limits: limits}},
		Tenants: []nodeconf.Tenant{{Name: tenant, TrustClasses: []string{"untrusted"}, Cells: []string{"tiny"},
			Subjects: []string{tenant}, Limits: limits}},
		Principals: []nodeconf.Principal{{Subject: tenant, Tenant: tenant, Roles: []string{"invoke", "deploy", "admin"},
			APIKeys: []string{keyHash}}},
		Extra: fmt.Sprintf("[catalog]\nmax_services = %d\nmax_services_per_tenant = %d\n", services, services),
	}
	return cfg.TOML()
}

// manifest is service i: 1 + i%3 revisions over the shared artifacts,
// 1 + i%4 routes, each over every revision.
func manifest(i int, arts []string) []byte {
	type target struct {
		Revision string `json:"revision"`
		Weight   int    `json:"weight"`
	}
	type route struct {
		Name    string   `json:"name"`
		Targets []target `json:"targets"`
	}
	var revs []map[string]any
	var targets []target
	for r := range 1 + i%3 {
		name := "v" + strconv.Itoa(r)
		revs = append(revs, map[string]any{"name": name, "artifact": arts[(i+r)%len(arts)], "trust_class": "untrusted",
			"ceiling": map[string]any{"cpu_fuel": 100_000_000, "memory_bytes": "8MiB", "wall_time": "5s"}})
		targets = append(targets, target{name, 1 + r})
	}
	var routes []route
	for k := range 1 + i%4 {
		routes = append(routes, route{"r" + strconv.Itoa(k), targets})
	}
	b, _ := json.Marshal(map[string]any{"tenant": tenant, "service": serviceName(i), "revisions": revs, "routes": routes})
	return b
}

func serviceName(i int) string { return fmt.Sprintf("svc-%06d", i) }

func deploy(ctx context.Context, hc *http.Client, url, key string, i int, arts []string) (time.Duration, error) {
	body := manifest(i, arts)
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, url+"/v1/deployments/"+tenant+"/"+serviceName(i), bytes.NewReader(body))
	if err != nil {
		return 0, errors.Wrap(err, "catalogbench: request")
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	return timed(hc, req)
}

func invoke(ctx context.Context, hc *http.Client, url, key string, i int) (time.Duration, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/invoke/"+tenant+"/"+serviceName(i)+"/r0", strings.NewReader("ada"))
	if err != nil {
		return 0, errors.Wrap(err, "catalogbench: request")
	}
	req.Header.Set("Authorization", "Bearer "+key)
	return timed(hc, req)
}

// timed sends req, reads the answer and fails on anything but 200.
func timed(hc *http.Client, req *http.Request) (time.Duration, error) {
	start := time.Now()
	resp, err := hc.Do(req)
	if err != nil {
		return 0, errors.Wrapf(err, "catalogbench: %s %s", req.Method, req.URL.Path)
	}
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	d := time.Since(start)
	if err != nil || resp.StatusCode != http.StatusOK {
		return 0, errors.Newf("catalogbench: %s %s: %d %s", req.Method, req.URL.Path, resp.StatusCode, bytes.TrimSpace(body))
	}
	return d, nil
}

// allocated reads the node's go_memstats_alloc_bytes_total.
func allocated(ctx context.Context, hc *http.Client, url, key string) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/metrics", nil)
	if err != nil {
		return 0, errors.Wrap(err, "catalogbench: request")
	}
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := hc.Do(req)
	if err != nil {
		return 0, errors.Wrap(err, "catalogbench: metrics")
	}
	defer func() { _ = resp.Body.Close() }()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "go_memstats_alloc_bytes_total "); ok {
			f, err := strconv.ParseFloat(v, 64)
			return int64(f), errors.Wrap(err, "catalogbench: go_memstats_alloc_bytes_total")
		}
	}
	return 0, errors.Newf("catalogbench: /metrics (%d) has no go_memstats_alloc_bytes_total", resp.StatusCode)
}

// rss reads VmRSS of pid.
func rss(pid int) (int64, error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, errors.Wrap(err, "catalogbench: rss")
	}
	for _, l := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10, errors.Wrap(err, "catalogbench: VmRSS")
		}
	}
	return 0, errors.New("catalogbench: no VmRSS")
}

func pct(ds []time.Duration, p float64) float64 {
	s := slices.Clone(ds)
	slices.Sort(s)
	return ms(s[min(len(s)-1, int(p*float64(len(s))))])
}

var ms = stats.Ms // the benchmarks' shared one

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return errors.Wrap(err, "catalogbench: encode results")
	}
	return errors.Wrap(os.WriteFile(path, append(b, '\n'), 0o644), "catalogbench: write results")
}

// Command componentbench measures the wasi:http examples on the real binary
// against the reference host, jco serve, on the same machine in the same
// run: the JavaScript hello handler (examples/js/hello.js, componentize-js),
// the JavaScript example app (app.js) and the Rust handler
// (examples/rust/http.rs) in every instance mode a component has
// (fresh, snapshot, reuse) on the node, and under jco serve with a fresh instance
// per request (worker isolation) and with one shared instance. Each target
// gets K closed-loop keep-alive clients asking GET / for a few seconds per
// round; the targets take turns within a round, and the figures are
// medians over rounds. It writes bench/results/components.json and a bar
// plot, components.svg.
//
//	make bench-components    # go run ./bench/componentbench
//
// It needs Node.js and npm (examples/build.sh installs componentize-js and
// jco) and a rustc for WASI; a target that cannot be built or does not
// answer is recorded as failed with the reason, not measured.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"html"
	"io"
	"maps"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/latent-node/latent-node/bench/internal/nodeproc"
	"github.com/latent-node/latent-node/bench/internal/stats"
	"github.com/latent-node/latent-node/client"
	"github.com/latent-node/latent-node/internal/testutil/nodeconf"
	"github.com/latent-node/latent-node/internal/testwasm"
)

const tenant = "bench"

// options are the flags.
type options struct {
	duration, warmup time.Duration
	rounds, clients  int
	bin, out, svg    string
}

func main() {
	var o options
	flag.DurationVar(&o.duration, "duration", 5*time.Second, "measured duration of each target per round")
	flag.DurationVar(&o.warmup, "warmup", time.Second, "warm-up of each target before measuring")
	flag.IntVar(&o.rounds, "rounds", 3, "rounds; the targets take turns and figures are medians over rounds")
	flag.IntVar(&o.clients, "clients", 8, "closed-loop keep-alive clients per target")
	flag.StringVar(&o.bin, "bin", "", "latent-node binary; empty: go build ./cmd/latent-node into a temporary directory")
	flag.StringVar(&o.out, "out", "bench/results/components.json", "where to write the results (relative: to the module root)")
	flag.StringVar(&o.svg, "svg", "bench/results/components.svg", "where to write the plot (empty: none)")
	flag.Parse()
	if o.rounds < 1 || o.clients < 1 || o.duration <= 0 || o.warmup < 0 {
		fmt.Fprintln(os.Stderr, "componentbench: want -rounds ≥ 1, -clients ≥ 1, -duration > 0, -warmup ≥ 0")
		os.Exit(2)
	}
	if err := run(context.Background(), o); err != nil {
		fmt.Fprintf(os.Stderr, "componentbench: %+v\n", err)
		os.Exit(1)
	}
}

// target is one server and component under load.
type target struct {
	Name      string  `json:"name"`
	Server    string  `json:"server"` // latent-node or jco-serve
	Component string  `json:"component"`
	Mode      string  `json:"mode"` // fresh, snapshot; for jco serve isolated or shared
	Failed    string  `json:"failed,omitempty"`
	Rounds    []round `json:"rounds,omitempty"`
	Median    round   `json:"median"`

	url, key string
	want     string // what the body must start with
}

// round is one target's figures in one round.
type round struct {
	RPS       float64 `json:"rps"` // 2xx answers per second
	P50Ms     float64 `json:"p50_ms"`
	P99Ms     float64 `json:"p99_ms"`
	ExecP50Ms float64 `json:"server_exec_p50_ms,omitempty"` // the node's Server-Timing exec
	Other     int     `json:"non_2xx"`
	Errors    int     `json:"errors"`
}

// results is the file written.
type results struct {
	Date    string            `json:"date"`
	CPUs    int               `json:"cpus"`
	Clients int               `json:"clients"`
	Config  map[string]any    `json:"config"`
	Targets []*target         `json:"targets"`
	Summary map[string]any    `json:"summary"`
	Notes   map[string]string `json:"notes"`
}

func run(ctx context.Context, o options) error {
	root, err := nodeproc.ModuleRoot()
	if err != nil {
		return err
	}
	built, err := os.MkdirTemp("", "componentbench-")
	if err != nil {
		return errors.Wrap(err, "componentbench: temp dir")
	}
	defer func() { _ = os.RemoveAll(built) }()
	components := map[string]string{} // component name → its built file; absent: failed[name] says why
	failed := map[string]string{}
	langErr := map[string]error{} // each language's examples are built once
	for _, lang := range []string{"js", "rust"} {
		dir := filepath.Join(built, lang)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return errors.Wrap(err, "componentbench: build dir")
		}
		langErr[lang] = testwasm.BuildExamples(ctx, lang, dir)
	}
	// js is the hello handler (hello.js, the incoming-handler export);
	// js-app the example app (app.js, a fetch event listener).
	for _, c := range []struct{ name, lang, file string }{{"js", "js", "hello.wasm"}, {"js-app", "js", "app.wasm"}, {"rust", "rust", "http.wasm"}} {
		dir := filepath.Join(built, c.lang)
		err := langErr[c.lang]
		if _, serr := os.Stat(filepath.Join(dir, c.file)); err == nil && serr != nil {
			err = errors.Newf("examples/build.sh %s built no %s (is Node.js with npm installed?)", c.lang, c.file)
		}
		if err != nil {
			failed[c.name] = err.Error()
			fmt.Fprintf(os.Stderr, "componentbench: %s: %v\n", c.name, err)
			continue
		}
		components[c.name] = filepath.Join(dir, c.file)
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
	cfgPath := filepath.Join(built, "node.toml")
	if err := os.WriteFile(cfgPath, []byte(configTOML(filepath.Join(built, "data"), hash)), 0o600); err != nil {
		return errors.Wrap(err, "componentbench: config")
	}
	n, err := nodeproc.Start(ctx, o.bin, cfgPath, "")
	if err != nil {
		return err
	}
	defer n.Stop()

	var targets []*target
	for _, c := range []struct{ name, memory, fuel, want string }{
		{"js", "64MiB", "5000000000", "hello from JavaScript"},
		{"js-app", "64MiB", "5000000000", "hello from JavaScript"},
		{"rust", "16MiB", "1000000000", "hello from Rust"},
	} {
		modes := []string{"snapshot", "reuse", "fresh"}
		path, ok := components[c.name]
		for _, mode := range modes {
			targets = append(targets, &target{Name: c.name + "/node-" + mode, Server: "latent-node", Component: c.name, Mode: mode,
				url: n.URL + "/v1/invoke/" + tenant + "/" + c.name + "/" + mode + "/", key: key, want: c.want, Failed: failed[c.name]})
		}
		for _, mode := range []string{"isolated", "shared"} {
			targets = append(targets, &target{Name: c.name + "/jco-" + mode, Server: "jco-serve", Component: c.name, Mode: mode,
				want: c.want, Failed: failed[c.name]})
		}
		if !ok {
			continue
		}
		began := time.Now()
		if err := deploy(ctx, n.URL, key, c.name, path, c.memory, c.fuel, modes); err != nil {
			return errors.Wrapf(err, "%s", n.Stderr())
		}
		fmt.Printf("deployed %s (%s, in each instance mode) in %.1f s\n", c.name, filepath.Base(path), time.Since(began).Seconds())
	}
	jco, jcoErr := jcoPath()
	for _, t := range targets {
		if t.Failed != "" || t.Server != "jco-serve" {
			continue
		}
		if jcoErr != nil {
			t.Failed = jcoErr.Error()
			continue
		}
		stop, url, err := startJco(ctx, jco, components[t.Component], t.Mode == "isolated")
		if err != nil {
			t.Failed = err.Error()
			continue
		}
		defer stop()
		t.url = url
	}
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: o.clients + 2, DisableCompression: true}}
	for _, t := range targets {
		if t.Failed == "" {
			if err := check(ctx, hc, t); err != nil {
				t.Failed = err.Error()
			}
		}
		if t.Failed != "" {
			fmt.Printf("%-22s failed: %s\n", t.Name, firstLine(t.Failed))
		}
	}
	for r := range o.rounds {
		for i := range targets {
			t := targets[(i+r)%len(targets)]
			if t.Failed != "" {
				continue
			}
			rr := load(ctx, hc, t, o.clients, o.warmup, o.duration)
			t.Rounds = append(t.Rounds, rr)
			fmt.Printf("round %d/%d %-22s %8.0f answers/s  p50 %7.2f ms  p99 %7.2f ms  exec p50 %6.3f ms  non-2xx %d  errors %d\n",
				r+1, o.rounds, t.Name, rr.RPS, rr.P50Ms, rr.P99Ms, rr.ExecP50Ms, rr.Other, rr.Errors)
			if rr.RPS == 0 && rr.Errors > 0 {
				t.Failed = "no answers under load (the server stopped answering)"
			}
		}
	}
	for _, t := range targets {
		t.Median = medianRound(t.Rounds)
	}
	res := results{Date: time.Now().UTC().Format(time.DateOnly), CPUs: runtime.NumCPU(), Clients: o.clients,
		Config:  map[string]any{"duration": o.duration.String(), "warmup": o.warmup.String(), "rounds": o.rounds},
		Targets: targets, Summary: summary(targets),
		Notes: map[string]string{
			"load":     "closed-loop keep-alive clients on the same machine, GET / of each target; the targets take turns within a round",
			"node":     "the real binary (latent-node serve) with a fixed calm host load (LATENT_NODE_LOAD_SOURCE), the JS handlers under a 64 MiB ceiling, the Rust one under 16 MiB; exec is Server-Timing",
			"js":       "js is examples/js/hello.js, a handler of the wasi:http incoming-handler export; js-app is examples/js/app.js, a fetch event listener, which StarlingMonkey dispatches once per instance: its reuse and jco serve's shared instance fail on the second request",
			"jco":      "jco serve (Node.js, V8) on the same component: isolated = --isolate-requests worker (a fresh instance per request, 4 workers); shared = one instance for every request",
			"failures": "a target that could not be built or started, or stopped answering, is recorded with the reason and not measured",
		}}
	for _, k := range slices.Sorted(maps.Keys(res.Summary)) {
		fmt.Printf("%s: %v\n", k, res.Summary[k])
	}
	out := o.out
	if !filepath.IsAbs(out) {
		out = filepath.Join(root, out)
	}
	js, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return errors.Wrap(err, "componentbench: encode")
	}
	if err := os.WriteFile(out, append(js, '\n'), 0o644); err != nil {
		return errors.Wrap(err, "componentbench: write results")
	}
	if o.svg != "" {
		svg := o.svg
		if !filepath.IsAbs(svg) {
			svg = filepath.Join(root, svg)
		}
		if err := os.WriteFile(svg, plot(targets), 0o644); err != nil {
			return errors.Wrap(err, "componentbench: write plot")
		}
	}
	return nil
}

// configTOML is a node with tenant bench on tiny (16 MiB) and small (64
// MiB) cells, with limits that let the clients queue instead of being
// refused.
func configTOML(dataDir, keyHash string) string {
	cells := []string{"tiny", "small"}
	wide := nodeconf.Limits{MaxLiveActivations: 256, MaxQueued: 256, MaxReservedFuel: 10_000_000_000_000, MaxReservedMemory: "64GiB"}
	cfg := nodeconf.Config{DataDir: dataDir, ShutdownGrace: "2s", Limits: wide,
		Cells:        []nodeconf.Cell{{Class: "tiny", Memory: "16MiB", Parallelism: 2}, {Class: "small", Memory: "64MiB", Parallelism: 2}},
		TrustClasses: []nodeconf.TrustClass{{Name: "untrusted", Cells: cells, Limits: wide}},
		Tenants: []nodeconf.Tenant{{Name: tenant, TrustClasses: []string{"untrusted"}, Cells: cells, Subjects: []string{tenant},
			Limits: wide}},
		Principals: []nodeconf.Principal{{Subject: tenant, Tenant: tenant, Roles: []string{"invoke", "deploy"}, APIKeys: []string{keyHash}}},
	}
	return cfg.TOML()
}

// deploy uploads the component at path and deploys service name with one
// wasi-http revision and route per mode.
func deploy(ctx context.Context, url, key, name, path, memory, fuel string, modes []string) error {
	c, err := client.New(url, key, client.WithRetry(client.RetryPolicy{}))
	if err != nil {
		return err
	}
	wasm, err := os.ReadFile(path)
	if err != nil {
		return errors.Wrap(err, "componentbench: read component")
	}
	digest, err := c.UploadArtifact(ctx, wasm)
	if err != nil {
		return errors.Wrapf(err, "componentbench: upload %s", name)
	}
	f, _ := strconv.ParseUint(fuel, 10, 64)
	var revs, routes []any
	for _, m := range modes {
		revs = append(revs, map[string]any{"name": m, "artifact": digest, "trust_class": "untrusted", "abi": "wasi-http", "instance": m,
			"ceiling": map[string]any{"cpu_fuel": f, "memory_bytes": memory, "wall_time": "10s"}})
		routes = append(routes, map[string]any{"name": m, "targets": []any{map[string]any{"revision": m, "weight": 100}}})
	}
	manifest := map[string]any{"tenant": tenant, "service": name, "revisions": revs, "routes": routes}
	if _, err := c.Deploy(ctx, tenant, name, manifest); err != nil {
		return errors.Wrapf(err, "componentbench: deploy %s", name)
	}
	return nil
}

// jcoPath is the jco that examples/build.sh installed.
func jcoPath() (string, error) {
	dir := os.Getenv("JCO_DIR")
	if dir == "" {
		cache, err := os.UserCacheDir()
		if err != nil {
			return "", errors.Wrap(err, "componentbench: no cache directory for jco")
		}
		dir = filepath.Join(cache, "latent-node", "jco")
	}
	jco := filepath.Join(dir, "node_modules", ".bin", "jco")
	if _, err := os.Stat(jco); err != nil {
		return "", errors.Wrapf(err, "componentbench: no jco serve (examples/build.sh js installs it)")
	}
	return jco, nil
}

// startJco runs jco serve on component, a fresh instance per request when
// isolated, and returns how to stop it and its URL once it answers.
func startJco(ctx context.Context, jco, component string, isolated bool) (stop func(), url string, err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", errors.Wrap(err, "componentbench: free port")
	}
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	_ = ln.Close()
	args := []string{"serve", "--port", port, "--host", "127.0.0.1"}
	if isolated {
		args = append(args, "--isolate-requests", "worker", "--isolate-worker-pool-size", "4")
	}
	cctx, cancel := context.WithCancel(ctx)
	cmd := exec.CommandContext(cctx, jco, append(args, component)...)
	cmd.Dir = filepath.Dir(filepath.Dir(filepath.Dir(jco)))
	cmd.WaitDelay = 2 * time.Second
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		cancel()
		return nil, "", errors.Wrap(err, "componentbench: start jco serve")
	}
	stop = func() { cancel(); _ = cmd.Wait() }
	url = "http://127.0.0.1:" + port + "/"
	hc := &http.Client{Timeout: 2 * time.Second}
	for range 600 {
		if resp, err := hc.Get(url); err == nil {
			_ = resp.Body.Close()
			return stop, url, nil
		}
		<-time.After(100 * time.Millisecond) // bounded poll: jco transpiles the component first
	}
	stop()
	return nil, "", errors.Newf("componentbench: jco serve never answered: %s", log.String())
}

// check sends t's request twice (a shared instance must answer more than
// once) and wants 200 and the greeting each time.
func check(ctx context.Context, hc *http.Client, t *target) error {
	for i := range 2 {
		status, body, _, err := get(ctx, hc, t)
		if err != nil {
			return errors.Wrapf(err, "request %d of 2", i+1)
		}
		if status != http.StatusOK || !strings.HasPrefix(string(body), t.want) {
			return errors.Newf("answered %d %q, want 200 and %q", status, firstLine(string(body)), t.want)
		}
	}
	return nil
}

// get is one GET of t: the status, body and Server-Timing exec (0: none).
func get(ctx context.Context, hc *http.Client, t *target) (int, []byte, time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, t.url, nil)
	if err != nil {
		return 0, nil, 0, err
	}
	if t.key != "" {
		req.Header.Set("Authorization", "Bearer "+t.key)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, nil, 0, err
	}
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode, body, execTiming(resp.Header.Get("Server-Timing")), err
}

// execTiming is the exec entry of a Server-Timing header, 0 without one.
func execTiming(h string) time.Duration {
	for _, part := range strings.Split(h, ",") {
		name, rest, _ := strings.Cut(strings.TrimSpace(part), ";")
		if name != "exec" {
			continue
		}
		if v, ok := strings.CutPrefix(strings.TrimSpace(rest), "dur="); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err == nil {
				return time.Duration(f * float64(time.Millisecond))
			}
		}
	}
	return 0
}

// load runs clients closed-loop clients on t for warmup, then measures for
// d.
func load(ctx context.Context, hc *http.Client, t *target, clients int, warmup, d time.Duration) round {
	from := time.Now().Add(warmup)
	to := from.Add(d)
	var (
		mu         sync.Mutex
		lat, execs []time.Duration
		r          round
		wg         sync.WaitGroup
	)
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				began := time.Now()
				if !began.Before(to) {
					return
				}
				status, _, exec, err := get(ctx, hc, t)
				took := time.Since(began)
				if began.Before(from) {
					continue
				}
				mu.Lock()
				switch {
				case err != nil:
					r.Errors++
				case status/100 == 2:
					lat = append(lat, took)
					if exec > 0 {
						execs = append(execs, exec)
					}
				default:
					r.Other++
				}
				mu.Unlock()
				if err != nil {
					<-time.After(10 * time.Millisecond) // a server that stopped answering is not spun on
				}
			}
		}()
	}
	wg.Wait()
	slices.Sort(lat)
	slices.Sort(execs)
	r.RPS = float64(len(lat)) / d.Seconds()
	r.P50Ms, r.P99Ms, r.ExecP50Ms = stats.Ms(stats.Percentile(lat, 0.5)), stats.Ms(stats.Percentile(lat, 0.99)), stats.Ms(stats.Percentile(execs, 0.5))
	return r
}

func medianRound(rs []round) round {
	col := func(f func(round) float64) float64 {
		xs := make([]float64, len(rs))
		for i, r := range rs {
			xs[i] = f(r)
		}
		return stats.Median(xs)
	}
	return round{RPS: col(func(r round) float64 { return r.RPS }), P50Ms: col(func(r round) float64 { return r.P50Ms }),
		P99Ms: col(func(r round) float64 { return r.P99Ms }), ExecP50Ms: col(func(r round) float64 { return r.ExecP50Ms }),
		Other: int(col(func(r round) float64 { return float64(r.Other) })), Errors: int(col(func(r round) float64 { return float64(r.Errors) }))}
}

// summary is the headline: each target's median rate, the node's ratios
// against jco serve on the same component, and the bars.
func summary(ts []*target) map[string]any {
	by := map[string]*target{}
	s := map[string]any{}
	for _, t := range ts {
		by[t.Name] = t
		if t.Failed != "" {
			s[t.Name+"_failed"] = firstLine(t.Failed)
			continue
		}
		s[t.Name+"_rps"] = round1(t.Median.RPS)
		if t.Median.ExecP50Ms > 0 {
			s[t.Name+"_exec_p50_ms"] = math.Round(t.Median.ExecP50Ms*1000) / 1000
		}
	}
	ratio := func(name, a, b string) {
		if x, y := by[a], by[b]; x != nil && y != nil && x.Failed == "" && y.Failed == "" && y.Median.RPS > 0 {
			s[name] = math.Round(x.Median.RPS/y.Median.RPS*100) / 100
		}
	}
	ratio("js_node_snapshot_vs_jco_isolated", "js/node-snapshot", "js/jco-isolated")
	ratio("js_node_snapshot_vs_jco_shared", "js/node-snapshot", "js/jco-shared")
	ratio("js_node_fresh_vs_jco_isolated", "js/node-fresh", "js/jco-isolated")
	ratio("rust_node_fresh_vs_jco_isolated", "rust/node-fresh", "rust/jco-isolated")
	ratio("js_node_reuse_vs_jco_shared", "js/node-reuse", "js/jco-shared")
	ratio("rust_node_reuse_vs_jco_shared", "rust/node-reuse", "rust/jco-shared")
	if t := by["js/node-snapshot"]; t != nil && t.Failed == "" {
		s["bar_js_snapshot_500_rps"] = t.Median.RPS >= 500
		s["bar_js_snapshot_exec_p50_3ms"] = t.Median.ExecP50Ms <= 3
	}
	for _, c := range []string{"js", "js-app", "rust"} {
		reuse, shared := by[c+"/node-reuse"], by[c+"/jco-shared"]
		if reuse != nil && reuse.Failed == "" && shared != nil {
			// jco serve's shared instance as the bar; one that cannot
			// serve the handler twice sets none the node could miss.
			s["bar_"+c+"_reuse_vs_jco_shared"] = shared.Failed != "" || reuse.Median.RPS >= shared.Median.RPS
		}
	}
	if t := by["rust/node-fresh"]; t != nil && t.Failed == "" {
		s["bar_rust_fresh_2000_rps"] = t.Median.RPS >= 2000
	}
	return s
}

func round1(x float64) float64 { return math.Round(x*10) / 10 }

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	if len(s) > 160 {
		s = s[:160] + "…"
	}
	return s
}

// plot is a horizontal bar chart of the targets' median answers/s, on a
// log scale (jco serve's isolated mode and the node's snapshot differ by
// more than an order of magnitude); a failed target is a labelled gap.
func plot(ts []*target) []byte {
	const left, width, rowH, top = 190.0, 480.0, 26.0, 40.0
	var b bytes.Buffer
	h := top + rowH*float64(len(ts)) + 40
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" font-family="sans-serif" font-size="12">`+"\n", left+width+90, h)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/><text x="10" y="20" font-size="14">wasi:http examples, GET /, answers per second (log scale), median of rounds</text>`+"\n")
	scale := func(rps float64) float64 { // 1 .. 10,000 answers/s across the width
		if rps < 1 {
			return 0
		}
		return width * min(1, math.Log10(rps)/4)
	}
	for _, tick := range []float64{1, 10, 100, 1000, 10000} {
		x := left + scale(tick)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.0f" x2="%.1f" y2="%.0f" stroke="#ddd"/><text x="%.1f" y="%.0f" text-anchor="middle" fill="#555">%s</text>`+"\n",
			x, top-6, x, h-30, x, h-14, strconv.FormatFloat(tick, 'f', 0, 64))
	}
	for i, t := range ts {
		y := top + rowH*float64(i)
		colour := "#0072b2" // the node
		if t.Server == "jco-serve" {
			colour = "#e69f00"
		}
		fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" text-anchor="end">%s</text>`+"\n", left-8, y+15, t.Name)
		if t.Failed != "" {
			fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" fill="#a00">failed: %s</text>`+"\n", left+4, y+15, html.EscapeString(firstLine(t.Failed)[:min(60, len(firstLine(t.Failed)))]))
			continue
		}
		w := scale(t.Median.RPS)
		fmt.Fprintf(&b, `<rect x="%.0f" y="%.0f" width="%.1f" height="18" fill="%s"/><text x="%.1f" y="%.0f">%.0f/s</text>`+"\n",
			left, y+2, w, colour, left+w+4, y+15, t.Median.RPS)
	}
	b.WriteString("</svg>\n")
	return b.Bytes()
}

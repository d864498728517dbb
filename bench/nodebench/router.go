package main

// The router scenario: the Go example's WAGI router, built, deployed fresh
// and as a snapshot, measured and reported.

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/latent-node/latent-node/client"
	"github.com/latent-node/latent-node/internal/testwasm"
)

// The router scenario: the Go example's WAGI router (examples/go/router)
// deployed twice for tenant routerTenant, service routerService, as
// examples/go/manifest.toml deploys it: a fresh command revision and a
// snapshot reactor revision.
const (
	routerTenant  = "router"
	routerService = "router"
	// routerPath is what every client asks, below the route.
	routerPath = "/hello?name=Ada"
	// routerGreeting is what the answer's body must contain.
	routerGreeting = `"greeting":"hello, Ada"`
	// routerBarRPS is the bar for the snapshot mode: requests per second
	// on two cores (the node on one, the generator on the other).
	routerBarRPS = 2000
)

// routerModes are the two deployments: mode name, revision, module built
// by examples/build.sh, instance mode, route and its function.
var routerModes = []struct {
	name, revision, module, instance, route, function string
}{
	{name: "fresh", revision: "web", module: "router.wasm", instance: "fresh", route: "web", function: "_start"},
	{name: "snapshot", revision: "web-snap", module: "router-reactor.wasm", instance: "snapshot", route: "web-snap", function: "web"},
}

// routerRound is one mode's figures in one round.
type routerRound struct {
	RPS       float64 `json:"rps"` // 2xx answers per second
	P50Ms     float64 `json:"p50_ms"`
	P99Ms     float64 `json:"p99_ms"`
	ExecP50Ms float64 `json:"server_exec_p50_ms"` // the node's Server-Timing exec
	Refusals  float64 `json:"refusals"`
	Errors    float64 `json:"errors"`
	NodeCPU   float64 `json:"node_cpu_utilization"`
	GenCPU    float64 `json:"generator_cpu_utilization"`
	OthersCPU float64 `json:"others_on_node_cpu"`
	// RPSPerNodeCPU is RPS over NodeCPU: the rate one whole CPU would
	// serve, steadier than RPS when other processes crowd the node's CPU.
	RPSPerNodeCPU float64 `json:"rps_per_node_cpu"`
}

type routerMode struct {
	Name     string        `json:"name"` // fresh or snapshot
	Revision string        `json:"revision"`
	Instance string        `json:"instance"`
	Module   string        `json:"module"`
	Route    string        `json:"route"`
	Function string        `json:"function"`
	Request  string        `json:"request"` // method and invoke path
	Rounds   []routerRound `json:"rounds"`
	Median   routerRound   `json:"median"`
}

// routerSection is K closed-loop clients asking the Go example router for
// a greeting, once per instance mode and round. Skipped says why it did not
// run (the Go toolchain could not build the example); then nothing else is
// set.
type routerSection struct {
	Skipped string       `json:"skipped,omitempty"`
	Clients int          `json:"clients,omitempty"`
	Modes   []routerMode `json:"modes,omitempty"`
	// Snapshot over fresh, of the medians.
	SnapshotVsFreshRPS     float64 `json:"snapshot_vs_fresh_rps,omitempty"`
	SnapshotVsFreshP50     float64 `json:"snapshot_vs_fresh_p50,omitempty"`
	SnapshotVsFreshP99     float64 `json:"snapshot_vs_fresh_p99,omitempty"`
	SnapshotVsFreshExecP50 float64 `json:"snapshot_vs_fresh_exec_p50,omitempty"`
	SnapshotVsFreshPerCPU  float64 `json:"snapshot_vs_fresh_rps_per_node_cpu,omitempty"`
	// The bar: the snapshot mode's median rate ≥ BarRPS.
	BarRPS float64 `json:"snapshot_rps_bar,omitempty"`
	OK     *bool   `json:"snapshot_rps_ok,omitempty"`
}

// buildRouter builds the Go examples into a new temporary directory and
// returns it; reason is set instead (and dir empty) when the Go toolchain
// cannot build them, which skips the scenario.
func buildRouter(ctx context.Context) (dir, reason string, err error) {
	dir, err = os.MkdirTemp("", "nodebench-examples-")
	if err != nil {
		return "", "", errors.Wrap(err, "nodebench: examples dir")
	}
	err = testwasm.BuildExamples(ctx, "go", dir)
	if err == nil {
		return dir, "", nil
	}
	_ = os.RemoveAll(dir)
	if errors.Is(err, testwasm.ErrNoToolchain) {
		return "", err.Error(), nil
	}
	// A Go older than the reactors need (-buildmode=c-shared for wasip1,
	// go:wasmexport: Go 1.24) fails here too.
	return "", "the Go toolchain could not build examples/go: " + err.Error(), nil
}

// deployRouter uploads both modules from dir and deploys the service with
// one revision and one route per mode, the ceilings of
// examples/go/manifest.toml.
func deployRouter(ctx context.Context, url, key, dir string) error {
	c, err := client.New(url, key, client.WithRetry(client.RetryPolicy{}))
	if err != nil {
		return err
	}
	var revs, routes []any
	for _, m := range routerModes {
		module, err := os.ReadFile(filepath.Join(dir, m.module))
		if err != nil {
			return errors.Wrap(err, "nodebench: router module")
		}
		digest, err := c.UploadArtifact(ctx, module)
		if err != nil {
			return errors.Wrapf(err, "nodebench: upload %s", m.module)
		}
		revs = append(revs, map[string]any{"name": m.revision, "artifact": digest, "trust_class": "untrusted",
			"abi": "wagi", "instance": m.instance,
			"ceiling": map[string]any{"cpu_fuel": 40_000_000, "memory_bytes": "16MiB", "wall_time": "2s"}})
		routes = append(routes, map[string]any{"name": m.route, "function": m.function,
			"targets": []any{map[string]any{"revision": m.revision, "weight": 100}}})
	}
	manifest := map[string]any{"tenant": routerTenant, "service": routerService, "revisions": revs, "routes": routes}
	if _, err := c.Deploy(ctx, routerTenant, routerService, manifest); err != nil {
		return errors.Wrapf(err, "nodebench: deploy %s/%s", routerTenant, routerService)
	}
	return nil
}

// routerTargets returns the section (before any round) and each mode's
// target, after checking one answer of each.
func routerTargets(ctx context.Context, nodeURL, key string, clients int) (*routerSection, []target, error) {
	s := &routerSection{Clients: clients, BarRPS: routerBarRPS}
	var tgs []target
	for _, m := range routerModes {
		path := "/v1/invoke/" + routerTenant + "/" + routerService + "/" + m.route + routerPath
		tg := target{hc: newTransportClient(clients), method: http.MethodGet, url: nodeURL + path, key: key}
		if err := checkRouter(ctx, tg); err != nil {
			return nil, nil, errors.Wrapf(err, "nodebench: router %s", m.name)
		}
		tgs = append(tgs, tg)
		s.Modes = append(s.Modes, routerMode{Name: m.name, Revision: m.revision, Instance: m.instance, Module: m.module,
			Route: m.route, Function: m.function, Request: "GET " + path})
	}
	return s, tgs, nil
}

// checkRouter sends tg's request once and wants 200, the greeting and a
// Server-Timing exec.
func checkRouter(ctx context.Context, tg target) error {
	resp, body, err := sendOnce(ctx, tg)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK || !bytes.Contains(body, []byte(routerGreeting)) {
		return errors.Newf("nodebench: %s answered %d %s, want 200 and %s", tg.url, resp.StatusCode, bytes.TrimSpace(body), routerGreeting)
	}
	if _, err := serverTiming(resp.Header.Get("Server-Timing"), "exec"); err != nil {
		return err
	}
	return nil
}

func summarizeRouter(t *tally, d time.Duration, cpu cpuUse) routerRound {
	slices.Sort(t.lat)
	slices.Sort(t.timing[2])
	return routerRound{RPS: float64(t.ok) / d.Seconds(), P50Ms: ms(percentile(t.lat, 0.50)), P99Ms: ms(percentile(t.lat, 0.99)),
		ExecP50Ms: ms(percentile(t.timing[2], 0.50)), Refusals: float64(t.refused), Errors: float64(t.errs),
		NodeCPU: cpu.node, GenCPU: cpu.gen, OthersCPU: cpu.others, RPSPerNodeCPU: ratio(float64(t.ok)/d.Seconds(), cpu.node)}
}

func medianRouter(rs []routerRound) routerRound {
	col := func(f func(routerRound) float64) float64 {
		xs := make([]float64, len(rs))
		for i, r := range rs {
			xs[i] = f(r)
		}
		return median(xs)
	}
	return routerRound{
		RPS:       col(func(r routerRound) float64 { return r.RPS }),
		P50Ms:     col(func(r routerRound) float64 { return r.P50Ms }),
		P99Ms:     col(func(r routerRound) float64 { return r.P99Ms }),
		ExecP50Ms: col(func(r routerRound) float64 { return r.ExecP50Ms }),
		Refusals:  col(func(r routerRound) float64 { return r.Refusals }),
		Errors:    col(func(r routerRound) float64 { return r.Errors }),
		NodeCPU:   col(func(r routerRound) float64 { return r.NodeCPU }),
		GenCPU:    col(func(r routerRound) float64 { return r.GenCPU }),
		OthersCPU: col(func(r routerRound) float64 { return r.OthersCPU }),

		RPSPerNodeCPU: col(func(r routerRound) float64 { return r.RPSPerNodeCPU }),
	}
}

// judge takes the medians, the snapshot/fresh ratios and the bar.
func (s *routerSection) judge() {
	m := map[string]routerRound{}
	for i := range s.Modes {
		s.Modes[i].Median = medianRouter(s.Modes[i].Rounds)
		m[s.Modes[i].Name] = s.Modes[i].Median
	}
	fresh, snap := m["fresh"], m["snapshot"]
	s.SnapshotVsFreshRPS = ratio(snap.RPS, fresh.RPS)
	s.SnapshotVsFreshP50 = ratio(snap.P50Ms, fresh.P50Ms)
	s.SnapshotVsFreshP99 = ratio(snap.P99Ms, fresh.P99Ms)
	s.SnapshotVsFreshExecP50 = ratio(snap.ExecP50Ms, fresh.ExecP50Ms)
	s.SnapshotVsFreshPerCPU = ratio(snap.RPSPerNodeCPU, fresh.RPSPerNodeCPU)
	ok := snap.RPS >= s.BarRPS
	s.OK = &ok
}

// summarize adds the router headline to the summary.
func (s *routerSection) summarize(sum map[string]any) {
	if s.Skipped != "" {
		sum["router_skipped"] = s.Skipped
		return
	}
	for _, m := range s.Modes {
		sum["router_"+m.Name+"_rps"] = m.Median.RPS
		sum["router_"+m.Name+"_p50_ms"] = m.Median.P50Ms
		sum["router_"+m.Name+"_p99_ms"] = m.Median.P99Ms
		sum["router_"+m.Name+"_exec_p50_ms"] = m.Median.ExecP50Ms
		sum["router_"+m.Name+"_rps_per_node_cpu"] = m.Median.RPSPerNodeCPU
	}
	sum["router_snapshot_vs_fresh_rps"] = s.SnapshotVsFreshRPS
	sum["router_snapshot_vs_fresh_p50"] = s.SnapshotVsFreshP50
	sum["router_snapshot_vs_fresh_exec_p50"] = s.SnapshotVsFreshExecP50
	sum["router_snapshot_rps_bar"] = s.BarRPS
	sum["router_snapshot_rps_ok"] = *s.OK
}

// print prints the router table.
func (s *routerSection) print() {
	if s.Skipped != "" {
		fmt.Printf("\nrouter: skipped: %s\n", s.Skipped)
		return
	}
	fmt.Printf("\nrouter: %d closed-loop clients, GET <route>%s on the Go example's WAGI router\n", s.Clients, routerPath)
	fmt.Printf("%-10s %-9s %9s %9s %9s %9s %7s %7s %9s %9s %9s %9s\n",
		"mode", "route", "req/s", "p50 ms", "p99 ms", "exec p50", "refus", "errors", "node cpu", "gen cpu", "others", "req/cpu-s")
	snap := routerRound{}
	for _, m := range s.Modes {
		r := m.Median
		if m.Name == "snapshot" {
			snap = r
		}
		fmt.Printf("%-10s %-9s %9.0f %9.3f %9.3f %9.3f %7.0f %7.0f %8.0f%% %8.0f%% %8.0f%% %9.0f\n", m.Name, m.Route, r.RPS, r.P50Ms, r.P99Ms,
			r.ExecP50Ms, r.Refusals, r.Errors, 100*r.NodeCPU, 100*r.GenCPU, 100*r.OthersCPU, r.RPSPerNodeCPU)
	}
	fmt.Printf("snapshot/fresh: req/s %.2f, p50 %.3f, p99 %.3f, exec p50 %.3f, req per node CPU second %.2f\n",
		s.SnapshotVsFreshRPS, s.SnapshotVsFreshP50, s.SnapshotVsFreshP99, s.SnapshotVsFreshExecP50, s.SnapshotVsFreshPerCPU)
	fmt.Printf("bar: snapshot %.0f req/s ≥ %.0f: %v\n", snap.RPS, s.BarRPS, *s.OK)
}

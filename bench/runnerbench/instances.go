package main

// The instance modes: the reactor examples (examples/build.sh) and trivial
// deployed as fresh, snapshot and reuse revisions, beside plain wazero on the
// same modules (fresh: instantiate, _initialize, the export; warm: one
// instance, the export per activation, nothing reset).

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/latent-node/latent-node/internal/testwasm"
	"github.com/latent-node/latent-node/runner"
	"github.com/latent-node/latent-node/runner/wagi"
	"github.com/latent-node/latent-node/vocab"
)

// Engines of the instance-mode series. A reactor case's engLatent is the
// reactor deployed fresh (instantiate, _initialize, the export), its
// engWazero plain wazero doing the same.
const (
	engLatentSnapshot = "latent_runner_snapshot" // instance = "snapshot"
	engLatentReuse    = "latent_runner_reuse"    // instance = "reuse"
	engLatentCommand  = "latent_runner_command"  // the same program built as a command, fresh, _start
	engWazeroWarm     = "wazero_unmetered_warm"  // one instance, the export per activation, no reset
)

// instanceGuest is a guest measured in the instance modes.
type instanceGuest struct {
	name    string // the case in the results
	lang    string // examples/build.sh language; "" for trivial, a testdata fixture
	module  string // the reactor built by build.sh (without .wasm)
	command string // the same program as a command (build.sh), "" for none
	export  string // the route's function
	abi     string // "" (stdio) or "wagi"
	input   []byte
	request *wagi.Request // a WAGI guest's request (PathInfo, RawQuery, Header...)
	// check is what a correct stdout looks like.
	check func(stdout []byte) error
	// what describes the activation in the results.
	what string
}

func exactly(want string) func([]byte) error {
	return func(got []byte) error {
		if string(got) != want {
			return errors.Newf("printed %q, want %q", got, want)
		}
		return nil
	}
}

// routerHello is the Go router's answer to GET /hello?name=Ada with
// Accept-Language: fr-CH, fr;q=0.9, en;q=0.8.
func routerHello(got []byte) error {
	head, body, ok := bytes.Cut(got, []byte("\n\n"))
	if !ok || !bytes.HasPrefix(head, []byte("Status: 200\nContent-Type: application/json\nX-Example: go-router\nContent-Language: fr\n")) ||
		!bytes.Contains(body, []byte(`"greeting":"bonjour, Ada"`)) {
		return errors.Newf("answered %q, want a 200 with bonjour, Ada", got)
	}
	return nil
}

func instanceGuests() []instanceGuest {
	return []instanceGuest{
		{name: "go-router", lang: "go", module: "router-reactor", command: "router", export: "web", abi: "wagi",
			request: &wagi.Request{Method: http.MethodGet, PathInfo: "/hello", RawQuery: "name=Ada", Protocol: "HTTP/1.1",
				Host: "127.0.0.1:8080", Header: http.Header{"Accept": {"application/json"},
					"Accept-Language": {"fr-CH, fr;q=0.9, en;q=0.8"}, "User-Agent": {"runnerbench"}}},
			check: routerHello, what: "WAGI GET /hello?name=Ada (Accept-Language fr) with the node's CGI environment"},
		{name: "rust-wordfreq", lang: "rust", module: "wordfreq-reactor", command: "wordfreq", export: "wordfreq",
			input: []byte("The cat and the hat; THE bat, and a cat."), check: exactly("3 the\n2 and\n2 cat\n1 a\n1 bat\n1 hat\n"),
			what: "stdio: the words of a 40-byte sentence by frequency"},
		{name: "c-upper", lang: "c", module: "upper-reactor", command: "upper", export: "upper",
			input: []byte("hello, Ada 42\n"), check: exactly("HELLO, ADA 42\n"), what: "stdio: a 14-byte line in upper case"},
		{name: "trivial", module: "trivial", export: string(vocab.DefaultFunction), check: exactly(""),
			what: "testdata/wasm/trivial.wasm, a command whose _start returns at once (no _initialize)"},
	}
}

// instanceModes is the results' summary of the instance-mode series.
type instanceModes struct {
	Notes   []string                      `json:"notes"`
	Skipped map[string]string             `json:"skipped,omitempty"` // language: why
	Guests  map[string]*instanceGuestInfo `json:"guests"`
	Targets map[string]instanceTarget     `json:"targets"`
	// FreshVsPrevious compares this run's fresh activations with the
	// results file this run replaced (another run: load may differ).
	FreshVsPrevious map[string]previousFigure `json:"fresh_vs_previous,omitempty"`
	WarmStats       runner.WarmStats          `json:"warm_stats"`
}

type instanceGuestInfo struct {
	Module string `json:"module"`
	Export string `json:"export"`
	ABI    string `json:"abi"`
	What   string `json:"what"`
	// Rows by engine: per-activation p50/p90 and the round mean (medians
	// over rounds), and ratios against plain wazero's fresh and warm
	// activations of the same module in the same run.
	Rows map[string]*modeRow `json:"rows"`
}

type modeRow struct {
	Mode                  string   `json:"mode"`
	P50Ns                 float64  `json:"p50_ns"`
	P90Ns                 float64  `json:"p90_ns"`
	MeanNs                float64  `json:"mean_ns"`
	CPUNs                 float64  `json:"cpu_ns,omitempty"`
	AllocBytes            float64  `json:"alloc_bytes_per_op"`
	P50RatioVsWazeroFresh *float64 `json:"p50_ratio_vs_wazero_fresh"`
	P90RatioVsWazeroFresh *float64 `json:"p90_ratio_vs_wazero_fresh"`
	P50RatioVsWazeroWarm  *float64 `json:"p50_ratio_vs_wazero_warm"`
	P90RatioVsWazeroWarm  *float64 `json:"p90_ratio_vs_wazero_warm"`
}

type instanceTarget struct {
	Series string   `json:"series"`
	MaxNs  float64  `json:"target_max_ns"`
	P50Ns  *float64 `json:"p50_ns"`
	P90Ns  *float64 `json:"p90_ns"`
	MeanNs *float64 `json:"mean_ns"`
	// Met: the p50 is within the bar (MetP90: the p90 too).
	Met    bool   `json:"met"`
	MetP90 bool   `json:"met_p90"`
	Note   string `json:"note,omitempty"`
}

type previousFigure struct {
	PreviousDate string   `json:"previous_date"`
	PreviousNs   float64  `json:"previous_median_ns_per_op"`
	Ns           float64  `json:"median_ns_per_op"`
	Ratio        *float64 `json:"ratio"`
}

// modeOf names the instance mode of an engine's series.
var modeOf = map[string]string{
	engLatent: "fresh", engLatentSnapshot: "snapshot", engLatentReuse: "reuse",
	engLatentCommand: "fresh (command build, _start)",
	engWazero:        "wazero fresh", engWazeroWarm: "wazero warm (floor)",
}

// buildReactors builds the examples of each language in langs into dir and
// returns the languages skipped for a missing toolchain, with why.
func buildReactors(ctx context.Context, langs []string, dir string) (map[string]string, error) {
	skipped := map[string]string{}
	for _, lang := range langs {
		fmt.Fprintf(os.Stderr, "runnerbench: building the %s examples (examples/build.sh)\n", lang)
		err := testwasm.BuildExamples(ctx, lang, dir)
		if errors.Is(err, testwasm.ErrNoToolchain) {
			skipped[lang] = err.Error()
			fmt.Fprintf(os.Stderr, "runnerbench: %s reactors skipped: %v\n", lang, err)
			continue
		}
		if err != nil {
			return nil, err
		}
	}
	return skipped, nil
}

// instanceEnv sets up the instance-mode series.
type instanceEnv struct {
	fixtures map[string][]byte // testdata/wasm guests by name
	lat      *latentEnv
	wz       *wazeroEnv
	cells    cellSource
	warm     []*warmInstance
	summary  *instanceModes
}

func (ie *instanceEnv) close(ctx context.Context) {
	for _, w := range ie.warm {
		w.close(ctx)
	}
}

// environ is the CGI environment of g's request to service, as the node
// computes it for each request.
func (g *instanceGuest) environ(service string) ([]string, error) {
	if g.request == nil {
		return nil, nil
	}
	req := *g.request
	req.MatchedRoute = "/v1/invoke/acme/" + service + "/run"
	req.RequestURI = req.MatchedRoute + req.PathInfo
	if req.RawQuery != "" {
		req.RequestURI += "?" + req.RawQuery
	}
	req.ContentLength = len(g.input)
	env, err := req.Environ()
	return env, errors.Wrap(err, "runnerbench: CGI environment")
}

// setupInstances deploys and checks every instance-mode series of the
// guests whose modules are there (the examples in exampleDir, trivial in
// wasmDir), calibrates them and returns them in order.
func setupInstances(ctx context.Context, ie *instanceEnv, rep *report, langs []string, exampleDir string,
	warm, round time.Duration) ([]*series, error) {
	var order []*series
	for _, g := range instanceGuests() {
		if g.lang != "" && !slices.Contains(langs, g.lang) {
			continue
		}
		if _, skip := ie.summary.Skipped[g.lang]; skip {
			continue
		}
		s, err := setupGuest(ctx, ie, rep, g, exampleDir, warm, round)
		if err != nil {
			return nil, errors.Wrapf(err, "runnerbench: %s", g.name)
		}
		order = append(order, s...)
	}
	return order, nil
}

func setupGuest(ctx context.Context, ie *instanceEnv, rep *report, g instanceGuest, exampleDir string,
	warm, round time.Duration) ([]*series, error) {
	type engineOp struct {
		engine string
		f      op
	}
	var ops []engineOp
	cr, existing := rep.Cases[g.name]
	if !existing {
		cr = caseResult{Input: string(g.input), Fuel: map[string]uint64{}, Engines: map[string]*series{}}
		if g.request != nil {
			cr.Input = g.request.Method + " " + g.request.PathInfo + "?" + g.request.RawQuery
		}
	}
	info := &instanceGuestInfo{Module: g.module + ".wasm", Export: g.export, ABI: g.abi, What: g.what, Rows: map[string]*modeRow{}}
	if g.abi == "" {
		info.ABI = "stdio"
	}
	if g.lang != "" {
		info.Module += " (examples/build.sh " + g.lang + ")"
	} else {
		info.Module = "testdata/wasm/" + info.Module
	}

	read := func(name string) ([]byte, error) {
		b, err := os.ReadFile(filepath.Join(exampleDir, name+".wasm"))
		return b, errors.Wrap(err, "runnerbench: read example")
	}
	// latent activates service (deployed as how) with g's input, checked.
	latent := func(service string) op {
		return func() error {
			env, err := g.environ(service)
			if err != nil {
				return err
			}
			out, err := ie.lat.activateWith(ctx, ie.cells, service, runner.Input{Body: g.input, Environ: env})
			if err != nil {
				return err
			}
			if g.abi == "wagi" && out.Response == nil {
				return errors.Newf("runnerbench: %s: no CGI answer", service)
			}
			return errors.Wrapf(g.check(out.Stdout), "runnerbench: latent %s", service)
		}
	}
	fuelOf := func(service string) (uint64, error) {
		env, err := g.environ(service)
		if err != nil {
			return 0, err
		}
		out, err := ie.lat.activateWith(ctx, ie.cells, service, runner.Input{Body: g.input, Environ: env})
		return out.FuelUsed, err
	}

	wasm := ie.fixtures[g.module]
	if g.lang != "" {
		var err error
		if wasm, err = read(g.module); err != nil {
			return nil, err
		}
	}
	// The latent services: <case>-<mode>; trivial's fresh one is the
	// existing engLatent series of its case.
	modes := []struct{ engine, mode string }{{engLatent, "fresh"}, {engLatentSnapshot, "snapshot"}, {engLatentReuse, "reuse"}}
	for _, m := range modes {
		if existing && m.engine == engLatent {
			continue
		}
		service := g.name + "-" + m.mode
		fn := vocab.FunctionName(g.export)
		if fn == vocab.DefaultFunction {
			fn = ""
		}
		if err := ie.lat.deploy(ctx, service, wasm, deployment{instance: m.mode, abi: g.abi, function: fn}); err != nil {
			return nil, err
		}
		f := latent(service)
		if err := f(); err != nil {
			return nil, err
		}
		fuel, err := fuelOf(service)
		if err != nil {
			return nil, err
		}
		cr.Fuel[m.engine] = fuel
		ops = append(ops, engineOp{m.engine, f})
	}
	if g.command != "" {
		cmd, err := read(g.command)
		if err != nil {
			return nil, err
		}
		service := g.name + "-command"
		if err := ie.lat.deploy(ctx, service, cmd, deployment{abi: g.abi}); err != nil {
			return nil, err
		}
		f := latent(service)
		if err := f(); err != nil {
			return nil, err
		}
		ops = append(ops, engineOp{engLatentCommand, f})
	}

	// Plain wazero on the reactor: fresh (unless the case has it) and warm.
	env, err := g.environ(g.name + "-wazero")
	if err != nil {
		return nil, err
	}
	init := ""
	if g.lang != "" {
		init = string(runner.InitializeExport)
	}
	if !existing {
		if err := ie.wz.compile(ctx, g.name, wasm); err != nil {
			return nil, err
		}
		f := func() error {
			out, err := ie.wz.activateFresh(ctx, g.name, init, g.export, g.input, env)
			if err != nil {
				return err
			}
			return errors.Wrapf(g.check(out), "runnerbench: wazero %s", g.name)
		}
		if err := f(); err != nil {
			return nil, err
		}
		ops = append(ops, engineOp{engWazero, f})
	}
	wi, err := ie.wz.newWarm(ctx, g.name, init, g.export, env)
	if err != nil {
		return nil, err
	}
	ie.warm = append(ie.warm, wi)
	warmOp := func() error {
		out, err := wi.activate(ctx, g.input)
		if err != nil {
			return err
		}
		return errors.Wrapf(g.check(out), "runnerbench: wazero warm %s", g.name)
	}
	for range 3 { // the instance answers call after call
		if err := warmOp(); err != nil {
			return nil, err
		}
	}
	ops = append(ops, engineOp{engWazeroWarm, warmOp})

	var order []*series
	for _, e := range ops {
		s, err := calibrate(e.f, warm, round)
		if err != nil {
			return nil, errors.Wrapf(err, "runnerbench: %s on %s", e.engine, g.name)
		}
		cr.Engines[e.engine] = s
		order = append(order, s)
	}
	rep.Cases[g.name] = cr
	ie.summary.Guests[g.name] = info
	return order, nil
}

// Bars of the instance modes (2 cores), on the p50 per activation through
// the whole runner path (admission, cell, RunWith, release).
var instanceBars = []struct {
	key, guest, engine string
	maxNs              float64
}{
	{"go_router_snapshot_p50", "go-router", engLatentSnapshot, 250e3},
	{"go_router_reuse_p50", "go-router", engLatentReuse, 60e3},
	{"trivial_snapshot_p50", "trivial", engLatentSnapshot, 5e3},
}

// summarizeInstances fills the rows, ratios and bars from the finished
// series, and compares fresh activations with prev (the replaced results
// file, nil when there was none).
func summarizeInstances(rep *report, im *instanceModes, prev *report) {
	for name, info := range im.Guests {
		engines := rep.Cases[name].Engines
		fresh, warm := engines[engWazero], engines[engWazeroWarm]
		for engine, s := range engines {
			mode, ok := modeOf[engine]
			if !ok {
				continue
			}
			row := &modeRow{Mode: mode, P50Ns: s.MedianP50Ns, P90Ns: s.MedianP90Ns, MeanNs: s.MedianNsPerOp,
				CPUNs: s.MedianCPUNsPerOp, AllocBytes: s.AllocBytesOp}
			if fresh != nil {
				row.P50RatioVsWazeroFresh = ratioOf(s.MedianP50Ns, fresh.MedianP50Ns)
				row.P90RatioVsWazeroFresh = ratioOf(s.MedianP90Ns, fresh.MedianP90Ns)
			}
			if warm != nil {
				row.P50RatioVsWazeroWarm = ratioOf(s.MedianP50Ns, warm.MedianP50Ns)
				row.P90RatioVsWazeroWarm = ratioOf(s.MedianP90Ns, warm.MedianP90Ns)
			}
			info.Rows[engine] = row
		}
	}
	for _, b := range instanceBars {
		t := instanceTarget{Series: b.guest + "/" + b.engine, MaxNs: b.maxNs}
		if s := rep.Cases[b.guest].Engines[b.engine]; s != nil {
			t.P50Ns, t.P90Ns, t.MeanNs = &s.MedianP50Ns, &s.MedianP90Ns, &s.MedianNsPerOp
			t.Met, t.MetP90 = s.MedianP50Ns <= b.maxNs, s.MedianP90Ns <= b.maxNs
		} else {
			t.Note = "not measured (toolchain missing or -reactors excludes it)"
		}
		im.Targets[b.key] = t
	}
	if prev == nil {
		return
	}
	im.FreshVsPrevious = map[string]previousFigure{}
	for name, c := range prev.Cases {
		for _, engine := range []string{engLatent, engLatentRunOnly, engWazero} {
			p, s := c.Engines[engine], rep.Cases[name].Engines[engine]
			if p == nil || s == nil || p.MedianNsPerOp == 0 {
				continue
			}
			im.FreshVsPrevious[name+"/"+engine] = previousFigure{PreviousDate: prev.Date, PreviousNs: p.MedianNsPerOp,
				Ns: s.MedianNsPerOp, Ratio: ratioOf(s.MedianNsPerOp, p.MedianNsPerOp)}
		}
	}
}

func ratioOf(a, b float64) *float64 {
	if a == 0 || b == 0 {
		return nil
	}
	r := a / b
	return &r
}

// readPrevious reads the results file a run is about to replace; nil when
// there is none or it does not parse.
func readPrevious(path string) *report {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var prev report
	if json.Unmarshal(b, &prev) != nil {
		return nil
	}
	return &prev
}

// instanceTable is the summary as a Markdown table (for the log and
// bench/README.md).
func instanceTable(rep *report, im *instanceModes) string {
	var b strings.Builder
	b.WriteString("| guest | series | p50 | p90 | mean | p50 ÷ wazero fresh | p50 ÷ wazero warm |\n|---|---|---:|---:|---:|---:|---:|\n")
	order := []string{engLatentCommand, engLatent, engLatentSnapshot, engLatentReuse, engWazero, engWazeroWarm}
	for _, g := range instanceGuests() {
		info := im.Guests[g.name]
		if info == nil {
			continue
		}
		for _, engine := range order {
			row := info.Rows[engine]
			if row == nil {
				continue
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s |\n", g.name, row.Mode, micros(row.P50Ns), micros(row.P90Ns),
				micros(row.MeanNs), ratioText(row.P50RatioVsWazeroFresh), ratioText(row.P50RatioVsWazeroWarm))
		}
	}
	return b.String()
}

func micros(ns float64) string {
	switch {
	case ns >= 1e6:
		return fmt.Sprintf("%.2f ms", ns/1e6)
	case ns >= 100e3:
		return fmt.Sprintf("%.0f µs", ns/1e3)
	default:
		return fmt.Sprintf("%.1f µs", ns/1e3)
	}
}

func ratioText(r *float64) string {
	if r == nil {
		return "–"
	}
	return fmt.Sprintf("%.2f", *r)
}

func instanceNotes(langs []string) []string {
	return []string{
		"Reactors (examples/build.sh " + strings.Join(langs, ",") + "): go-router is router-reactor.wasm's export web, a WAGI GET /hello?name=Ada whose CGI environment is computed per activation as the node does (wagi.Request.Environ) and read by the guest through environ_get; rust-wordfreq and c-upper are stdio reactors. trivial is testdata/wasm/trivial.wasm (no _initialize: its snapshot is the state after instantiation).",
		"Latent series: " + engLatent + " (a reactor case: the reactor deployed with instance = \"fresh\": instantiate, _initialize, the export), " + engLatentSnapshot + ", " + engLatentReuse + ": the whole runner path as the other latent series (resolve+admit, lease a cell, start, RunWith, release); " + engLatentCommand + " is the same program built as a command and deployed fresh with _start: how the guest runs without instance modes.",
		"Plain wazero (un-instrumented module, no fuel): " + engWazero + " on a reactor case instantiates without a start function, calls _initialize and the export, closes; " + engWazeroWarm + " calls the export of one instance initialised once, activation after activation with nothing reset (the environment is fixed at instantiation): the floor of a warm activation.",
		"p50/p90 are per activation (each activation timed on its own), per round; the figures are their medians over rounds. mean is the round's wall time per activation: a reuse series' mean includes recycling (a new instance and its _initialize every runner.DefaultReuseMaxActivations activations), its p90 does not.",
		"Bars (targets): go-router snapshot p50 <= 250 us, reuse p50 <= 60 us, trivial snapshot p50 <= 5 us, through the whole runner path on 2 cores. fresh_vs_previous compares fresh series with the results file this run replaced (another run, another load).",
	}
}

// Command runnerbench is `make bench-runner`, the runner's speed against its
// peers: it measures the same guests, side by side in one run, on the latent
// runner (admission, cell, fuel-instrumented wazero), on unmetered wazero,
// and on wasmtime-go with fuel on (the peer program in bench/peers/wasmtime,
// its own Go module, run as a subprocess once per round so that the engines'
// rounds interleave), and writes medians and ratios to
// bench/results/runner.json.
// See bench/README.md.
//
// It is a main package: `go vet ./...` compiles it, no test runs it.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/latent-node/latent-node/admission"
	"github.com/latent-node/latent-node/runner"
)

type options struct {
	wasmDir    string
	peer       string
	out        string
	rounds     int
	roundMS    int
	warmupMS   int
	fibN       uint64
	computeN   uint64
	parallelMS int
	workers    int
	procs      int
	cpuProfile string
	cell       string
	reactors   string
	examples   string
}

func main() {
	var o options
	flag.StringVar(&o.wasmDir, "wasm", "testdata/wasm", "directory of the guest fixtures")
	flag.StringVar(&o.peer, "peer", "", "wasmtime peer binary (built from bench/peers/wasmtime); empty: no wasmtime figures")
	flag.StringVar(&o.out, "out", "bench/results/runner.json", "where to write the results")
	flag.IntVar(&o.rounds, "rounds", 11, "rounds per measurement (medians are over rounds; at least 5)")
	flag.IntVar(&o.roundMS, "round-ms", 250, "approximate duration of one round of one engine on one guest")
	flag.IntVar(&o.warmupMS, "warmup-ms", 300, "warm-up per engine and guest, which also sizes the rounds")
	flag.Uint64Var(&o.fibN, "fib-n", 30, "N for fib.wasm")
	flag.Uint64Var(&o.computeN, "compute-n", 10_000_000, "N for compute.wasm")
	flag.IntVar(&o.parallelMS, "parallel-ms", 1000, "duration of one round of each throughput measurement")
	flag.IntVar(&o.workers, "workers", 2, "goroutines issuing activations in the throughput measurement")
	flag.IntVar(&o.procs, "procs", 2, "GOMAXPROCS (cores) for the throughput measurement")
	flag.StringVar(&o.cell, "cell", "pool", "cells of the latent runner: pool (cellpool) or default (wazero's allocator)")
	flag.StringVar(&o.reactors, "reactors", "go,rust,c", "languages of the reactor examples measured in the instance modes (built by examples/build.sh; a missing toolchain skips its language); empty: none")
	flag.StringVar(&o.examples, "examples", "", "directory of already built examples (examples/build.sh LANG DIR); empty: build them into a temporary directory")
	flag.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run to this file")
	flag.Parse()
	if err := run(context.Background(), o); err != nil {
		fmt.Fprintf(os.Stderr, "runnerbench: %+v\n", err)
		os.Exit(1)
	}
}

// benchCase is one guest and its input.
type benchCase struct {
	name   string
	input  []byte
	stdout string // expected
}

// fuelBudget is what every activation may use (the manifests' ceiling), and
// what the wasmtime peer sets on each Store.
const fuelBudget = 1 << 40

func cases(o options) []benchCase {
	return []benchCase{
		{name: "trivial"},
		{name: "fib", input: []byte(strconv.FormatUint(o.fibN, 10)), stdout: strconv.FormatUint(fib(o.fibN), 10) + "\n"},
		{name: "compute", input: []byte(strconv.FormatUint(o.computeN, 10)), stdout: strconv.FormatUint(compute(o.computeN), 10) + "\n"},
	}
}

// fib and compute are the guests' algorithms, to check their output.
func fib(n uint64) uint64 {
	a, b := uint64(0), uint64(1)
	for ; n > 0; n-- {
		a, b = b, a+b
	}
	return a
}

func compute(n uint64) uint64 {
	x := uint64(0x9e3779b97f4a7c15)
	for ; n > 0; n-- {
		x = x*6364136223846793005 + 1442695040888963407
		x ^= x >> 29
	}
	return x
}

// Engine names in the results.
const (
	engLatent        = "latent_runner"                   // admit + lease + start + Run + release
	engLatentHeap    = "latent_runner_default_allocator" // the same with wazero's default allocator (trivial only)
	engLatentRunOnly = "latent_runner_run_only"          // lease + Run + release on a reused permit
	engWazero        = "wazero_unmetered"
	engWasmtime      = "wasmtime_fuel"
	engWasmtimeFiles = "wasmtime_fuel_stdio_files" // trivial with stdin/stdout files wired
)

type caseResult struct {
	Input   string             `json:"input"`
	Stdout  string             `json:"stdout"`
	Fuel    map[string]uint64  `json:"fuel_used"`
	Engines map[string]*series `json:"engines"`
}

type target struct {
	Value       *float64 `json:"value"`
	Max         float64  `json:"target_max"`
	Met         bool     `json:"met"`
	Numerator   string   `json:"numerator"`
	Denominator string   `json:"denominator"`
}

type report struct {
	Date    string            `json:"date"`
	Machine map[string]any    `json:"machine"`
	Config  map[string]any    `json:"config"`
	Cell    string            `json:"cell"`
	Engines map[string]string `json:"engines"`

	TinyActivationRatioVsWasmtime *float64 `json:"tiny_activation_ratio_vs_wasmtime"`
	FuelOverheadRatioFib          *float64 `json:"fuel_overhead_ratio_fib"`
	MeteredComputeRatioVsWasmtime *float64 `json:"metered_compute_ratio_vs_wasmtime"`
	ActivationsPerSecond2Cores    float64  `json:"activations_per_second_2_cores"`
	AllocatedBytesPerActivation   float64  `json:"allocated_bytes_per_activation"`

	// FibPairs is fuel_overhead_ratio_fib's measurement: latent and
	// unmetered wazero fib activations timed in pairs.
	FibPairs    *pairs                 `json:"fib_pairs,omitempty"`
	Targets     map[string]target      `json:"targets"`
	OtherRatios map[string]*float64    `json:"other_ratios"`
	Throughput  map[string]*throughput `json:"throughput"`
	Cases       map[string]caseResult  `json:"cases"`
	// InstanceModes summarises the instance-mode series (their figures
	// are in Cases too).
	InstanceModes *instanceModes `json:"instance_modes,omitempty"`
	PeerError     string         `json:"peer_error,omitempty"`
	Notes         []string       `json:"notes"`
}

func run(ctx context.Context, o options) error {
	if o.rounds < 5 {
		return errors.Newf("runnerbench: -rounds %d: at least 5", o.rounds)
	}
	if o.cpuProfile != "" {
		f, err := os.Create(o.cpuProfile)
		if err != nil {
			return errors.Wrap(err, "runnerbench: cpu profile")
		}
		defer func() { _ = f.Close() }()
		if err := pprof.StartCPUProfile(f); err != nil {
			return errors.Wrap(err, "runnerbench: cpu profile")
		}
		defer pprof.StopCPUProfile()
	}
	cs := cases(o)
	guests := map[string][]byte{}
	paths := map[string]string{}
	for _, c := range cs {
		p, err := filepath.Abs(filepath.Join(o.wasmDir, c.name+".wasm"))
		if err != nil {
			return errors.Wrap(err, "runnerbench: guest path")
		}
		if guests[c.name], err = os.ReadFile(p); err != nil {
			return errors.Wrap(err, "runnerbench: read guest")
		}
		paths[c.name] = p
	}
	prev := readPrevious(o.out)
	im := &instanceModes{Skipped: map[string]string{}, Guests: map[string]*instanceGuestInfo{}, Targets: map[string]instanceTarget{}}
	var langs []string
	for _, l := range strings.Split(o.reactors, ",") {
		if l = strings.TrimSpace(l); l != "" {
			langs = append(langs, l)
		}
	}
	exampleDir := o.examples
	if exampleDir == "" && len(langs) > 0 {
		dir, err := os.MkdirTemp("", "runnerbench-examples-")
		if err != nil {
			return errors.Wrap(err, "runnerbench: temp dir")
		}
		defer func() { _ = os.RemoveAll(dir) }()
		if im.Skipped, err = buildReactors(ctx, langs, dir); err != nil {
			return err
		}
		exampleDir = dir
	}
	lat, err := newLatentEnv(ctx, guests)
	if err != nil {
		return err
	}
	defer lat.close(ctx)
	wz, err := newWazeroEnv(ctx, guests)
	if err != nil {
		return err
	}
	defer wz.close(ctx)
	var cells cellSource = poolCells{lat.pool}
	switch o.cell {
	case "pool":
	case "default":
		cells = heapCells{}
	default:
		return errors.Newf("runnerbench: -cell %q: pool or default", o.cell)
	}

	rep := &report{
		Date:    time.Now().UTC().Format(time.RFC3339),
		Machine: machine(),
		Config: map[string]any{"rounds": o.rounds, "round_ms": o.roundMS, "warmup_ms": o.warmupMS,
			"fib_n": o.fibN, "compute_n": o.computeN, "fuel_budget": uint64(fuelBudget),
			"fuel_slice": runner.DefaultFuelSlice, "parallel_ms": o.parallelMS, "workers": o.workers, "procs": o.procs,
			"cell_memory_bytes": cellMemoryBytes},
		Cell: cells.name(),
		Engines: map[string]string{
			engLatent: "latent runner: resolve+admit, lease a cell (" + cells.name() + "), start execution, " +
				"Run (fuel-instrumented module, wazero compiler, WASI, classify), release cell and permit",
			engLatentHeap:    "as " + engLatent + " but the cell keeps wazero's default memory allocator",
			engLatentRunOnly: "latent runner without admission: lease a cell, Run on a reused execution permit, release the cell",
			engWazero: "wazero " + depVersion("github.com/tetratelabs/wazero") +
				" compiler engine, un-instrumented module, WASI, instantiate + _start + close",
			engWasmtime: "wasmtime-go with consume_fuel: new Store + WASI context (default stdio) + SetFuel + " +
				"Linker.Instantiate + _start + Store.Close; fib and compute get stdin/stdout files",
			engWasmtimeFiles: "as " + engWasmtime + " with stdin/stdout wired to files (the Go binding has no in-memory pipes)",
		},
		Targets:     map[string]target{},
		OtherRatios: map[string]*float64{},
		Throughput:  map[string]*throughput{},
		Cases:       map[string]caseResult{},
	}

	// Check every in-process engine's output once and size its rounds.
	warm, round := time.Duration(o.warmupMS)*time.Millisecond, time.Duration(o.roundMS)*time.Millisecond
	var order []*series
	for _, c := range cs {
		cr := caseResult{Input: string(c.input), Stdout: c.stdout, Fuel: map[string]uint64{}, Engines: map[string]*series{}}
		out, err := lat.activate(ctx, cells, c.name, c.input)
		if err != nil {
			return err
		}
		if string(out.Stdout) != c.stdout {
			return errors.Newf("runnerbench: latent %s printed %q, want %q", c.name, out.Stdout, c.stdout)
		}
		cr.Fuel[engLatent] = out.FuelUsed
		got, err := wz.activate(ctx, c.name, c.input)
		if err != nil {
			return err
		}
		if string(got) != c.stdout {
			return errors.Newf("runnerbench: wazero %s printed %q, want %q", c.name, got, c.stdout)
		}

		name, input := c.name, c.input
		runOnly, release := runOnlyOp(ctx, lat, cells, name, input)
		defer release()
		type engineOp struct {
			engine string
			f      op
		}
		ops := []engineOp{
			{engLatent, func() error { _, err := lat.activate(ctx, cells, name, input); return err }},
			{engLatentRunOnly, runOnly},
			{engWazero, func() error { _, err := wz.activate(ctx, name, input); return err }},
		}
		if len(input) == 0 && cells.name() != (heapCells{}).name() {
			ops = append(ops, engineOp{engLatentHeap, func() error {
				_, err := lat.activate(ctx, heapCells{}, name, input)
				return err
			}})
		}
		for _, e := range ops {
			s, err := calibrate(e.f, warm, round)
			if err != nil {
				return errors.Wrapf(err, "runnerbench: %s on %s", e.engine, c.name)
			}
			cr.Engines[e.engine] = s
			order = append(order, s)
		}
		rep.Cases[c.name] = cr
		if c.name == "fib" {
			l, w := cr.Engines[engLatent], cr.Engines[engWazero]
			rep.FibPairs = newPairs("fib/"+engLatent, "fib/"+engWazero, ops[0].f, ops[2].f,
				float64(round.Nanoseconds())/float64(l.Iters), float64(round.Nanoseconds())/float64(w.Iters), round)
		}
	}

	// The instance modes: the reactors and trivial as fresh, snapshot and
	// reuse revisions, and plain wazero fresh and warm on the same modules.
	ie := &instanceEnv{fixtures: guests, lat: lat, wz: wz, cells: cells, summary: im}
	defer ie.close(ctx)
	more, err := setupInstances(ctx, ie, rep, langs, exampleDir, warm, round)
	if err != nil {
		return err
	}
	order = append(order, more...)

	// Throughput of trivial activations on o.procs cores.
	trivial := cs[0]
	tpLatent := &throughput{Workers: o.workers, GOMAXPROCS: o.procs}
	tpWazero := &throughput{Workers: o.workers, GOMAXPROCS: o.procs}
	rep.Throughput[engLatent], rep.Throughput[engWazero] = tpLatent, tpWazero
	parDur := time.Duration(o.parallelMS) * time.Millisecond

	// Rounds: every in-process series, the throughputs, then one peer
	// process that measures every wasmtime case once.
	peer := map[string]*series{}
	var peerErr error
	for r := 0; r < o.rounds; r++ {
		if err := lat.publishLoad(); err != nil {
			return err
		}
		for _, s := range order {
			if err := s.round(); err != nil {
				return err
			}
		}
		if rep.FibPairs != nil {
			if err := rep.FibPairs.round(); err != nil {
				return err
			}
		}
		if err := tpLatent.round(parDur, func() error {
			_, err := lat.activate(ctx, cells, trivial.name, nil)
			return err
		}); err != nil {
			return err
		}
		if err := tpWazero.round(parDur, func() error {
			_, err := wz.activate(ctx, trivial.name, nil)
			return err
		}); err != nil {
			return err
		}
		if o.peer != "" && peerErr == nil {
			peerErr = peerRound(o, paths, cs, rep, peer)
		}
		fmt.Fprintf(os.Stderr, "runnerbench: round %d/%d done\n", r+1, o.rounds)
	}
	for _, s := range order {
		s.finish()
	}
	if rep.FibPairs != nil {
		rep.FibPairs.finish()
	}
	tpLatent.finish()
	tpWazero.finish()
	if tp := rep.Throughput[engWasmtime]; tp != nil {
		tp.finish()
	}
	for key, s := range peer {
		c, engine, _ := strings.Cut(key, "/")
		s.finish()
		rep.Cases[c].Engines[engine] = s
	}
	if o.peer == "" {
		rep.PeerError = "no -peer given: no wasmtime figures"
	} else if peerErr != nil {
		rep.PeerError = fmt.Sprintf("%v", peerErr)
	}
	rep.Machine["loadavg_end"] = loadavg()
	computeRatios(rep, o)
	im.WarmStats = lat.r.WarmStats()
	summarizeInstances(rep, im, prev)
	im.Notes = instanceNotes(langs)
	rep.InstanceModes = im
	fmt.Fprint(os.Stderr, "runnerbench: instance modes (medians over rounds)\n"+instanceTable(rep, im))
	return write(o.out, rep)
}

// runOnlyOp runs name on one execution permit, renewed every minute (its
// deadline is the 10-minute wall-time ceiling); release returns the last one.
func runOnlyOp(ctx context.Context, lat *latentEnv, cells cellSource, name string, input []byte) (f op, release func()) {
	var (
		x     *admission.ExecutionPermit
		since time.Time
	)
	f = func() error {
		if x == nil || time.Since(since) > time.Minute {
			if x != nil {
				if err := x.Release(); err != nil {
					return errors.Wrap(err, "runnerbench: release")
				}
				x = nil
			}
			p, err := lat.permit(name)
			if err != nil {
				return err
			}
			if x, err = p.StartExecution(); err != nil {
				return errors.Wrap(err, "runnerbench: start execution")
			}
			since = time.Now()
		}
		_, err := lat.runOnly(ctx, cells, x, name, input)
		return err
	}
	release = func() {
		if x != nil {
			_ = x.Release()
		}
	}
	return f, release
}

// peerRound runs the peer once: one round of every wasmtime case (after the
// peer's own warm-up), and one round of trivial throughput. acc collects the
// rounds by "case/engine".
func peerRound(o options, paths map[string]string, cs []benchCase, rep *report, acc map[string]*series) error {
	spec := peerSpec{Fuel: fuelBudget, WarmupMS: max(o.warmupMS/2, 50), RoundMS: o.roundMS, Rounds: 1,
		Parallel: &peerParallel{Guest: paths[cs[0].name], Workers: o.workers, DurationMS: o.parallelMS}}
	want := map[string]string{}
	for _, c := range cs {
		if len(c.input) == 0 {
			spec.Cases = append(spec.Cases,
				peerCase{Name: c.name + "/" + engWasmtime, Guest: paths[c.name], Stdio: "none"},
				peerCase{Name: c.name + "/" + engWasmtimeFiles, Guest: paths[c.name], Stdio: "files"})
		} else {
			spec.Cases = append(spec.Cases,
				peerCase{Name: c.name + "/" + engWasmtime, Guest: paths[c.name], Input: string(c.input), Stdio: "files"})
		}
		want[c.name+"/"+engWasmtime] = c.stdout
		want[c.name+"/"+engWasmtimeFiles] = c.stdout
	}
	pr, err := runPeer(o.peer, spec, strconv.Itoa(o.procs))
	if err != nil {
		return err
	}
	rep.Engines["wasmtime_version"] = pr.Version
	for _, c := range pr.Cases {
		if c.Stdout != want[c.Name] {
			return errors.Newf("runnerbench: wasmtime %s printed %q, want %q", c.Name, c.Stdout, want[c.Name])
		}
		s := acc[c.Name]
		if s == nil {
			s = &series{}
			acc[c.Name] = s
		}
		s.Iters = c.ItersPerRound
		s.RoundsNsPerOp = append(s.RoundsNsPerOp, c.RoundsNsPerOp...)
		s.RoundsCPUNsPerOp = append(s.RoundsCPUNsPerOp, c.RoundsCPUNsOp...)
		if name, engine, _ := strings.Cut(c.Name, "/"); engine == engWasmtime {
			rep.Cases[name].Fuel[engWasmtime] = c.FuelConsumed
		}
	}
	if pr.Parallel != nil {
		tp := rep.Throughput[engWasmtime]
		if tp == nil {
			tp = &throughput{Workers: pr.Parallel.Workers, GOMAXPROCS: o.procs}
			rep.Throughput[engWasmtime] = tp
		}
		tp.RoundsPerSecond = append(tp.RoundsPerSecond, pr.Parallel.ActivationsPer)
	}
	return nil
}

func computeRatios(rep *report, o options) {
	med := func(c, engine string) float64 {
		if s := rep.Cases[c].Engines[engine]; s != nil {
			return s.MedianNsPerOp
		}
		return 0
	}
	medCPU := func(c, engine string) float64 {
		if s := rep.Cases[c].Engines[engine]; s != nil {
			return s.MedianCPUNsPerOp
		}
		return 0
	}
	div := func(a, b float64) *float64 {
		if a == 0 || b == 0 {
			return nil
		}
		r := a / b
		return &r
	}
	minOf := func(c, engine string) float64 {
		if s := rep.Cases[c].Engines[engine]; s != nil {
			return s.MinNsPerOp
		}
		return 0
	}
	ratio := func(c1, e1, c2, e2 string) *float64 { return div(med(c1, e1), med(c2, e2)) }
	minRatio := func(c1, e1, c2, e2 string) *float64 { return div(minOf(c1, e1), minOf(c2, e2)) }
	cpuRatio := func(c1, e1, c2, e2 string) *float64 { return div(medCPU(c1, e1), medCPU(c2, e2)) }
	rep.TinyActivationRatioVsWasmtime = ratio("trivial", engLatent, "trivial", engWasmtime)
	rep.FuelOverheadRatioFib = ratio("fib", engLatent, "fib", engWazero)
	if p := rep.FibPairs; p != nil && p.Median > 0 {
		rep.OtherRatios["fuel_overhead_ratio_fib_round_medians"] = rep.FuelOverheadRatioFib
		rep.FuelOverheadRatioFib = &p.Median
	}
	rep.MeteredComputeRatioVsWasmtime = ratio("compute", engLatent, "compute", engWasmtime)
	rep.ActivationsPerSecond2Cores = rep.Throughput[engLatent].MedianPerSecond
	rep.AllocatedBytesPerActivation = rep.Cases["trivial"].Engines[engLatent].AllocBytesOp

	tgt := func(v *float64, max float64, num, den string) target {
		return target{Value: v, Max: max, Met: v != nil && *v <= max, Numerator: num, Denominator: den}
	}
	rep.Targets["tiny_activation_ratio_vs_wasmtime"] = tgt(rep.TinyActivationRatioVsWasmtime, 1.0,
		"trivial/"+engLatent, "trivial/"+engWasmtime)
	rep.Targets["fuel_overhead_ratio_fib"] = tgt(rep.FuelOverheadRatioFib, 1.3, "fib/"+engLatent+" (median of pairs)", "fib/"+engWazero)
	rep.Targets["metered_compute_ratio_vs_wasmtime"] = tgt(rep.MeteredComputeRatioVsWasmtime, 2.0,
		"compute/"+engLatent, "compute/"+engWasmtime)

	other := rep.OtherRatios
	other["tiny_activation_ratio_vs_wasmtime_without_admission"] = ratio("trivial", engLatentRunOnly, "trivial", engWasmtime)
	other["tiny_activation_ratio_vs_wasmtime_stdio_files"] = ratio("trivial", engLatent, "trivial", engWasmtimeFiles)
	other["tiny_activation_ratio_vs_wasmtime_default_allocator"] = ratio("trivial", engLatentHeap, "trivial", engWasmtime)
	other["tiny_activation_ratio_vs_wazero_unmetered"] = ratio("trivial", engLatent, "trivial", engWazero)
	other["tiny_wazero_unmetered_vs_wasmtime"] = ratio("trivial", engWazero, "trivial", engWasmtime)
	other["fuel_overhead_ratio_fib_without_admission"] = ratio("fib", engLatentRunOnly, "fib", engWazero)
	other["fuel_overhead_ratio_compute"] = ratio("compute", engLatent, "compute", engWazero)
	other["metered_fib_ratio_vs_wasmtime"] = ratio("fib", engLatent, "fib", engWasmtime)
	other["unmetered_wazero_fib_vs_wasmtime"] = ratio("fib", engWazero, "fib", engWasmtime)
	other["unmetered_wazero_compute_vs_wasmtime"] = ratio("compute", engWazero, "compute", engWasmtime)
	other["cpu_time_tiny_activation_ratio_vs_wasmtime"] = cpuRatio("trivial", engLatent, "trivial", engWasmtime)
	other["cpu_time_fuel_overhead_ratio_fib"] = cpuRatio("fib", engLatent, "fib", engWazero)
	other["cpu_time_metered_compute_ratio_vs_wasmtime"] = cpuRatio("compute", engLatent, "compute", engWasmtime)
	other["min_round_tiny_activation_ratio_vs_wasmtime"] = minRatio("trivial", engLatent, "trivial", engWasmtime)
	other["min_round_fuel_overhead_ratio_fib"] = minRatio("fib", engLatent, "fib", engWazero)
	other["min_round_metered_compute_ratio_vs_wasmtime"] = minRatio("compute", engLatent, "compute", engWasmtime)
	if w := rep.Throughput[engWasmtime]; w != nil && w.MedianPerSecond > 0 {
		r := rep.ActivationsPerSecond2Cores / w.MedianPerSecond
		other["throughput_2_cores_latent_vs_wasmtime_higher_is_better"] = &r
	}

	rep.Notes = []string{
		"Times are medians over rounds of wall-clock ns per activation (lower is better); each in-process round starts after a GC.",
		"fuel_overhead_ratio_fib is the median of fib_pairs.ratios: a latent and an unmetered wazero fib activation timed back to back, in alternating order, every round; fuel_overhead_ratio_fib_round_medians is the same ratio from the two series' round medians, which a burst of load in one round moves by ±10 % here.",
		"min_round_* ratios use each series' fastest round (background load only adds time): a noise floor check for the medians.",
		"cpu_time_* ratios use the process's CPU time (user+system, all threads: GC workers in Go, wasmtime's own threads) instead of wall time: less sensitive to other processes on a shared machine; compare both.",
		"Rounds interleave: each round runs every in-process series and throughput, then one wasmtime peer process (its own warm-up and calibration), so background load hits every engine alike.",
		"cell=" + rep.Cell + ": the latent runner's cells come from " + rep.Cell + "; " + engLatentHeap + " is the same activation on wazero's default allocator.",
		"alloc_bytes_per_op counts this process's Go heap only (not mmap'd cell memory, not wasmtime's native allocations).",
		"fuel_used units differ: the runner charges per instrumented block, wasmtime per operator.",
		fmt.Sprintf("fib N=%d and compute N=%d on every engine; every engine's stdout is checked against a Go reference.", o.fibN, o.computeN),
		"The latent fib and compute figures include admission (microseconds against milliseconds of guest time).",
	}
}

func machine() map[string]any {
	m := map[string]any{"goos": runtime.GOOS, "goarch": runtime.GOARCH, "num_cpu": runtime.NumCPU(),
		"gomaxprocs": runtime.GOMAXPROCS(0), "go_version": runtime.Version()}
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		defer func() { _ = f.Close() }()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				m["cpu_model"] = strings.TrimSpace(v)
				break
			}
		}
	}
	m["loadavg_start"] = loadavg()
	return m
}

// loadavg is /proc/loadavg's 1, 5 and 15 minute figures ("" elsewhere).
func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	return strings.Join(f[:min(3, len(f))], " ")
}

func depVersion(path string) string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == path {
				return d.Version
			}
		}
	}
	return "(unknown version)"
}

func write(path string, rep *report) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(rep); err != nil {
		return errors.Wrap(err, "runnerbench: encode results")
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return errors.Wrap(err, "runnerbench: results dir")
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, buf.Bytes(), 0o644); err != nil {
		return errors.Wrap(err, "runnerbench: write results")
	}
	if err := os.Rename(tmp, path); err != nil {
		return errors.Wrap(err, "runnerbench: write results")
	}
	os.Stdout.Write(buf.Bytes())
	if rep.PeerError != "" {
		return errors.Newf("runnerbench: wasmtime peer failed (results written without it): %s", rep.PeerError)
	}
	return nil
}

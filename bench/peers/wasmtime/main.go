// Command wasmtime-peer is the wasmtime side of `make bench-runner`: it runs
// WASI preview1 commands in wasmtime-go with fuel consumption on and prints
// timings as JSON. The harness (bench/runnerbench) sends a Spec on stdin and
// reads a Report from stdout.
//
// One activation here is what a wasmtime embedder does per request: a new
// Store, a new WASI context (stdin from a file holding the input, stdout to a
// file: the Go binding exposes no in-memory pipes), SetFuel, instantiate the
// precompiled module through a Linker that defines WASI, call _start, close
// the Store. The module is compiled once, before any timing.
//
// It lives in its own Go module so that the main module never needs cgo nor
// the wasmtime static library.
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/bytecodealliance/wasmtime-go/v39"
)

// Spec is what the harness asks for.
type Spec struct {
	// Fuel is set on every Store before instantiation.
	Fuel uint64 `json:"fuel"`
	// WarmupMS is spent per case before timing; it also calibrates how many
	// activations one round holds (RoundMS of work).
	WarmupMS int    `json:"warmup_ms"`
	RoundMS  int    `json:"round_ms"`
	Rounds   int    `json:"rounds"`
	Cases    []Case `json:"cases"`
	// Parallel, when set, measures activations/s of a guest from Workers
	// goroutines for DurationMS.
	Parallel *Parallel `json:"parallel,omitempty"`
}

// Case is one guest and input.
type Case struct {
	Name  string `json:"name"`
	Guest string `json:"guest"`
	Input string `json:"input"`
	// Stdio "files" wires stdin/stdout to temporary files; "none" leaves
	// WASI's defaults (empty stdin, discarded stdout): the cheapest setup.
	Stdio string `json:"stdio"`
}

// Parallel is a throughput measurement.
type Parallel struct {
	Guest      string `json:"guest"`
	Workers    int    `json:"workers"`
	DurationMS int    `json:"duration_ms"`
}

// Report is what the peer prints.
type Report struct {
	Engine     string       `json:"engine"`
	Version    string       `json:"version"`
	GOMAXPROCS int          `json:"gomaxprocs"`
	Cases      []CaseResult `json:"cases"`
	Parallel   *ParResult   `json:"parallel,omitempty"`
}

// CaseResult holds one case's rounds.
type CaseResult struct {
	Name          string    `json:"name"`
	ItersPerRound int       `json:"iters_per_round"`
	RoundsNsPerOp []float64 `json:"rounds_ns_per_op"`
	MedianNsPerOp float64   `json:"median_ns_per_op"`
	// RoundsCPUNsPerOp is the process's CPU time (user + system, all
	// threads) per activation.
	RoundsCPUNsPerOp []float64 `json:"rounds_cpu_ns_per_op"`
	FuelConsumed     uint64    `json:"fuel_consumed"`
	Stdout           string    `json:"stdout"`
	CompileSeconds   float64   `json:"compile_seconds"`
}

// ParResult is a throughput figure.
type ParResult struct {
	Workers        int     `json:"workers"`
	Activations    int64   `json:"activations"`
	Seconds        float64 `json:"seconds"`
	ActivationsPer float64 `json:"activations_per_second"`
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "wasmtime-peer:", err)
		os.Exit(1)
	}
}

func run() error {
	var spec Spec
	if err := json.NewDecoder(os.Stdin).Decode(&spec); err != nil {
		return wrap(err, "decode spec")
	}
	if spec.Rounds <= 0 || spec.RoundMS <= 0 || spec.Fuel == 0 {
		return errors.New("spec needs rounds, round_ms and fuel")
	}
	cfg := wasmtime.NewConfig()
	cfg.SetConsumeFuel(true)
	engine := wasmtime.NewEngineWithConfig(cfg)
	linker := wasmtime.NewLinker(engine)
	if err := linker.DefineWasi(); err != nil {
		return wrap(err, "define WASI")
	}
	dir, err := os.MkdirTemp("", "wasmtime-peer-")
	if err != nil {
		return wrap(err, "temp dir")
	}
	defer func() { _ = os.RemoveAll(dir) }()

	rep := Report{Engine: "wasmtime-go", Version: version(), GOMAXPROCS: runtime.GOMAXPROCS(0)}
	for i, c := range spec.Cases {
		res, err := measure(engine, linker, spec, c, filepath.Join(dir, fmt.Sprint(i)))
		if err != nil {
			return wrap(err, c.Name)
		}
		rep.Cases = append(rep.Cases, res)
	}
	if p := spec.Parallel; p != nil {
		res, err := parallel(engine, linker, spec.Fuel, *p)
		if err != nil {
			return wrap(err, "parallel")
		}
		rep.Parallel = &res
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}

// activation is one guest run; it reports the fuel the guest consumed.
type activation struct {
	linker        *wasmtime.Linker
	engine        *wasmtime.Engine
	module        *wasmtime.Module
	fuel          uint64
	stdin, stdout string // empty: WASI defaults
}

func (a *activation) run() (uint64, error) {
	store := wasmtime.NewStore(a.engine)
	defer store.Close()
	wc := wasmtime.NewWasiConfig()
	wc.SetArgv([]string{"_start"})
	wc.SetEnv([]string{"LATENT_ACTIVATION_ID", "LATENT_REVISION"}, []string{"bench", "v1"})
	if a.stdin != "" {
		if err := wc.SetStdinFile(a.stdin); err != nil {
			return 0, wrap(err, "stdin")
		}
		if err := wc.SetStdoutFile(a.stdout); err != nil {
			return 0, wrap(err, "stdout")
		}
	}
	store.SetWasi(wc)
	if err := store.SetFuel(a.fuel); err != nil {
		return 0, wrap(err, "set fuel")
	}
	inst, err := a.linker.Instantiate(store, a.module)
	if err != nil {
		return 0, wrap(err, "instantiate")
	}
	start := inst.GetFunc(store, "_start")
	if start == nil {
		return 0, errors.New("no _start export")
	}
	if _, err := start.Call(store); err != nil {
		return 0, wrap(err, "_start")
	}
	left, err := store.GetFuel()
	if err != nil {
		return 0, wrap(err, "get fuel")
	}
	return a.fuel - left, nil
}

func newActivation(engine *wasmtime.Engine, linker *wasmtime.Linker, fuel uint64, guest string) (*activation, float64, error) {
	wasm, err := os.ReadFile(guest)
	if err != nil {
		return nil, 0, wrap(err, "read guest")
	}
	t0 := time.Now()
	mod, err := wasmtime.NewModule(engine, wasm)
	if err != nil {
		return nil, 0, wrap(err, "compile")
	}
	return &activation{linker: linker, engine: engine, module: mod, fuel: fuel}, time.Since(t0).Seconds(), nil
}

func measure(engine *wasmtime.Engine, linker *wasmtime.Linker, spec Spec, c Case, prefix string) (CaseResult, error) {
	a, compile, err := newActivation(engine, linker, spec.Fuel, c.Guest)
	if err != nil {
		return CaseResult{}, err
	}
	switch c.Stdio {
	case "files":
		a.stdin, a.stdout = prefix+".stdin", prefix+".stdout"
		if err := os.WriteFile(a.stdin, []byte(c.Input), 0o600); err != nil {
			return CaseResult{}, wrap(err, "write stdin")
		}
	case "none", "":
		if c.Input != "" {
			return CaseResult{}, errors.New(`input needs stdio "files"`)
		}
	default:
		return CaseResult{}, errors.New("unknown stdio " + c.Stdio)
	}
	res := CaseResult{Name: c.Name, CompileSeconds: compile}
	if res.FuelConsumed, err = a.run(); err != nil {
		return res, err
	}
	if a.stdout != "" {
		out, err := os.ReadFile(a.stdout)
		if err != nil {
			return res, wrap(err, "read stdout")
		}
		res.Stdout = string(out)
	}
	// Warm up and calibrate.
	n, t0 := 0, time.Now()
	for time.Since(t0) < time.Duration(spec.WarmupMS)*time.Millisecond || n < 3 {
		if _, err := a.run(); err != nil {
			return res, err
		}
		n++
	}
	perOp := time.Since(t0) / time.Duration(n)
	res.ItersPerRound = max(1, int(time.Duration(spec.RoundMS)*time.Millisecond/max(perOp, 1)))
	for r := 0; r < spec.Rounds; r++ {
		cpu0, t0 := cpuTime(), time.Now()
		for i := 0; i < res.ItersPerRound; i++ {
			if _, err := a.run(); err != nil {
				return res, err
			}
		}
		n := float64(res.ItersPerRound)
		res.RoundsNsPerOp = append(res.RoundsNsPerOp, float64(time.Since(t0).Nanoseconds())/n)
		res.RoundsCPUNsPerOp = append(res.RoundsCPUNsPerOp, float64((cpuTime()-cpu0).Nanoseconds())/n)
	}
	res.MedianNsPerOp = median(res.RoundsNsPerOp)
	return res, nil
}

func parallel(engine *wasmtime.Engine, linker *wasmtime.Linker, fuel uint64, p Parallel) (ParResult, error) {
	a, _, err := newActivation(engine, linker, fuel, p.Guest)
	if err != nil {
		return ParResult{}, err
	}
	var (
		count    atomic.Int64
		stop     atomic.Bool
		wg       sync.WaitGroup
		firstErr error
		errOnce  sync.Once
	)
	t0 := time.Now()
	for w := 0; w < p.Workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				if _, err := a.run(); err != nil {
					errOnce.Do(func() { firstErr = err })
					return
				}
				count.Add(1)
			}
		}()
	}
	time.Sleep(time.Duration(p.DurationMS) * time.Millisecond)
	stop.Store(true)
	wg.Wait()
	secs := time.Since(t0).Seconds()
	if firstErr != nil {
		return ParResult{}, firstErr
	}
	return ParResult{Workers: p.Workers, Activations: count.Load(), Seconds: secs,
		ActivationsPer: float64(count.Load()) / secs}, nil
}

// cpuTime is the CPU time this process has used so far, all threads.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func version() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "github.com/bytecodealliance/wasmtime-go/v39" {
				return d.Path + "@" + d.Version
			}
		}
	}
	return "unknown"
}

// wrap prefixes err with what failed. (The repository's source rules grep
// every .go file, this module's too, for the stdlib's formatted-error
// constructor, so the peer wraps by hand.)
func wrap(err error, what string) error {
	return &wrapped{what: what, err: err}
}

type wrapped struct {
	what string
	err  error
}

func (w *wrapped) Error() string { return w.what + ": " + w.err.Error() }
func (w *wrapped) Unwrap() error { return w.err }

package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"strings"

	"github.com/cockroachdb/errors"
)

// The peer's protocol (bench/peers/wasmtime): a spec on stdin, a report on
// stdout. These mirror the peer's types.

type peerSpec struct {
	Fuel     uint64        `json:"fuel"`
	WarmupMS int           `json:"warmup_ms"`
	RoundMS  int           `json:"round_ms"`
	Rounds   int           `json:"rounds"`
	Cases    []peerCase    `json:"cases"`
	Parallel *peerParallel `json:"parallel,omitempty"`
}

type peerCase struct {
	Name  string `json:"name"`
	Guest string `json:"guest"`
	Input string `json:"input"`
	Stdio string `json:"stdio"`
}

type peerParallel struct {
	Guest      string `json:"guest"`
	Workers    int    `json:"workers"`
	DurationMS int    `json:"duration_ms"`
}

type peerReport struct {
	Engine     string           `json:"engine"`
	Version    string           `json:"version"`
	GOMAXPROCS int              `json:"gomaxprocs"`
	Cases      []peerCaseResult `json:"cases"`
	Parallel   *struct {
		Workers        int     `json:"workers"`
		Activations    int64   `json:"activations"`
		Seconds        float64 `json:"seconds"`
		ActivationsPer float64 `json:"activations_per_second"`
	} `json:"parallel"`
}

// runPeer runs the peer binary once with spec and decodes its report.
// gomaxprocs, when positive, is passed as GOMAXPROCS.
func runPeer(bin string, spec peerSpec, gomaxprocs string) (peerReport, error) {
	in, err := json.Marshal(spec)
	if err != nil {
		return peerReport{}, errors.Wrap(err, "runnerbench: encode peer spec")
	}
	cmd := exec.Command(bin)
	cmd.Stdin = bytes.NewReader(in)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.Env = os.Environ()
	if gomaxprocs != "" {
		cmd.Env = append(cmd.Env, "GOMAXPROCS="+gomaxprocs)
	}
	if err := cmd.Run(); err != nil {
		return peerReport{}, errors.Wrapf(err, "runnerbench: peer %s: %s", bin, strings.TrimSpace(stderr.String()))
	}
	var rep peerReport
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		return peerReport{}, errors.Wrap(err, "runnerbench: decode peer report")
	}
	return rep, nil
}

type peerCaseResult struct {
	Name           string    `json:"name"`
	ItersPerRound  int       `json:"iters_per_round"`
	RoundsNsPerOp  []float64 `json:"rounds_ns_per_op"`
	MedianNsPerOp  float64   `json:"median_ns_per_op"`
	RoundsCPUNsOp  []float64 `json:"rounds_cpu_ns_per_op"`
	FuelConsumed   uint64    `json:"fuel_consumed"`
	Stdout         string    `json:"stdout"`
	CompileSeconds float64   `json:"compile_seconds"`
}

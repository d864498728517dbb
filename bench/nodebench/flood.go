package main

// The flood scenarios: closed-loop clients on the node and on the baseline
// servers, their figures per round and their medians.

import (
	"slices"
	"time"
)

// The servers of a flood scenario.
const (
	floodNode       = "node"
	floodBareWazero = "bare_wazero"
	floodNoWasm     = "nowasm"
)

// floodRound is one server's figures in one round of a flood scenario.
type floodRound struct {
	RPS       float64 `json:"rps"` // 2xx answers per second
	P50Ms     float64 `json:"p50_ms"`
	P99Ms     float64 `json:"p99_ms"`
	Refusals  float64 `json:"refusals"`
	Errors    float64 `json:"errors"`
	ServerCPU float64 `json:"server_cpu_utilization"`
	GenCPU    float64 `json:"generator_cpu_utilization"`
	OthersCPU float64 `json:"others_on_server_cpu"` // other processes on the server's pinned CPU (-1: unknown)
}

type floodServer struct {
	Name   string       `json:"name"`
	Rounds []floodRound `json:"rounds"`
	Median floodRound   `json:"median"`
}

// floodSection is K closed-loop clients posting the same body to the
// node's guest and to the baseline servers, one server at a time.
type floodSection struct {
	Guest     string        `json:"guest"`
	Clients   int           `json:"clients"`
	BodyBytes int           `json:"body_bytes"`
	Servers   []floodServer `json:"servers"`
	// TurnRatios are node/bare_wazero rates of each turn (rounds ×
	// -flood-repeat), the two measured seconds apart; the bar is judged on
	// their median, which a machine whose speed drifts over minutes moves
	// less than the ratio of the medians.
	TurnRatios               []float64 `json:"node_vs_bare_wazero_rps_turns"`
	NodeVsBareWazeroRPSTurns float64   `json:"node_vs_bare_wazero_rps_turn_median"`
	// Ratios of the medians.
	NodeVsBareWazeroRPS float64 `json:"node_vs_bare_wazero_rps"`
	NodeVsNoWasmRPS     float64 `json:"node_vs_nowasm_rps"`
	BareWazeroVsNoWasm  float64 `json:"bare_wazero_vs_nowasm_rps"`
	NodeVsBareWazeroP99 float64 `json:"node_vs_bare_wazero_p99"`
	NodeVsBareWazeroBar float64 `json:"node_vs_bare_wazero_bar"`
	NodeVsBareWazeroOK  bool    `json:"node_vs_bare_wazero_ok"`
}

func summarizeFlood(t *tally, d time.Duration, cpu cpuUse) floodRound {
	slices.Sort(t.lat)
	return floodRound{RPS: float64(t.ok) / d.Seconds(), P50Ms: ms(percentile(t.lat, 0.50)), P99Ms: ms(percentile(t.lat, 0.99)),
		Refusals: float64(t.refused), Errors: float64(t.errs), ServerCPU: cpu.node, GenCPU: cpu.gen, OthersCPU: cpu.others}
}

func medianFlood(rs []floodRound) floodRound {
	col := func(f func(floodRound) float64) float64 {
		xs := make([]float64, len(rs))
		for i, r := range rs {
			xs[i] = f(r)
		}
		return median(xs)
	}
	return floodRound{
		RPS:       col(func(r floodRound) float64 { return r.RPS }),
		P50Ms:     col(func(r floodRound) float64 { return r.P50Ms }),
		P99Ms:     col(func(r floodRound) float64 { return r.P99Ms }),
		Refusals:  col(func(r floodRound) float64 { return r.Refusals }),
		Errors:    col(func(r floodRound) float64 { return r.Errors }),
		ServerCPU: col(func(r floodRound) float64 { return r.ServerCPU }),
		GenCPU:    col(func(r floodRound) float64 { return r.GenCPU }),
		OthersCPU: col(func(r floodRound) float64 { return r.OthersCPU }),
	}
}

// judge computes the ratios of the medians and the turns' median.
func (s *floodSection) judge() {
	m := map[string]floodRound{}
	for _, sv := range s.Servers {
		m[sv.Name] = sv.Median
	}
	s.NodeVsBareWazeroRPS = ratio(m[floodNode].RPS, m[floodBareWazero].RPS)
	s.NodeVsNoWasmRPS = ratio(m[floodNode].RPS, m[floodNoWasm].RPS)
	s.BareWazeroVsNoWasm = ratio(m[floodBareWazero].RPS, m[floodNoWasm].RPS)
	s.NodeVsBareWazeroP99 = ratio(m[floodNode].P99Ms, m[floodBareWazero].P99Ms)
	s.NodeVsBareWazeroRPSTurns = median(slices.Clone(s.TurnRatios))
	s.NodeVsBareWazeroBar = 0.9
	s.NodeVsBareWazeroOK = s.NodeVsBareWazeroRPSTurns >= s.NodeVsBareWazeroBar
}

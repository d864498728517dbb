package main

// The Jain scenario: equal tenants flooding the node, and Jain's fairness
// index of their rates.

import "time"

// jainRound is the flooding tenants' figures in one round.
type jainRound struct {
	TenantRPS  []float64 `json:"tenant_rps"`
	Jain       float64   `json:"jain_index"`
	GoodputRPS float64   `json:"goodput_rps"`
	Refusals   float64   `json:"refusals"`
	Errors     float64   `json:"errors"`
	NodeCPU    float64   `json:"node_cpu_utilization"`
	GenCPU     float64   `json:"generator_cpu_utilization"`
	OthersCPU  float64   `json:"others_on_node_cpu"`
}

// jainSection is N equal tenants flooding the compute guest with the same
// number of closed-loop clients each.
type jainSection struct {
	Tenants          []string    `json:"tenants"`
	ClientsPerTenant int         `json:"clients_per_tenant"`
	Rounds           []jainRound `json:"rounds"`
	// Median: each tenant's median rps, the median of the rounds' indices
	// (not the index of the median rps) and so on.
	Median jainRound `json:"median"`
}

// jainIndex is Jain's fairness index (Σx)² / (n·Σx²): 1 when every x is
// equal, 1/n when one takes everything.
func jainIndex(xs []float64) float64 {
	var s, s2 float64
	for _, x := range xs {
		s += x
		s2 += x * x
	}
	if s2 == 0 {
		return 0
	}
	return s * s / (float64(len(xs)) * s2)
}

func summarizeJain(t []*tally, d time.Duration, cpu cpuUse) jainRound {
	r := jainRound{NodeCPU: cpu.node, GenCPU: cpu.gen, OthersCPU: cpu.others}
	for _, tl := range t {
		x := float64(tl.ok) / d.Seconds()
		r.TenantRPS = append(r.TenantRPS, x)
		r.GoodputRPS += x
		r.Refusals += float64(tl.refused)
		r.Errors += float64(tl.errs)
	}
	r.Jain = jainIndex(r.TenantRPS)
	return r
}

func medianJain(rs []jainRound) jainRound {
	col := func(f func(jainRound) float64) float64 {
		xs := make([]float64, len(rs))
		for i, r := range rs {
			xs[i] = f(r)
		}
		return median(xs)
	}
	m := jainRound{
		Jain:       col(func(r jainRound) float64 { return r.Jain }),
		GoodputRPS: col(func(r jainRound) float64 { return r.GoodputRPS }),
		Refusals:   col(func(r jainRound) float64 { return r.Refusals }),
		Errors:     col(func(r jainRound) float64 { return r.Errors }),
		NodeCPU:    col(func(r jainRound) float64 { return r.NodeCPU }),
		GenCPU:     col(func(r jainRound) float64 { return r.GenCPU }),
		OthersCPU:  col(func(r jainRound) float64 { return r.OthersCPU }),
	}
	if len(rs) > 0 {
		for i := range rs[0].TenantRPS {
			m.TenantRPS = append(m.TenantRPS, col(func(r jainRound) float64 { return r.TenantRPS[i] }))
		}
	}
	return m
}

package main

// The report of the open-loop, Jain and flood scenarios: their headlines in
// the summary and their tables.

import (
	"fmt"
	"strconv"
	"strings"
)

// extendSummary adds the open-loop, Jain and flood headlines to s.
func extendSummary(s map[string]any, open *openSection, jain *jainSection, floods []floodSection) {
	if open != nil && len(open.Scenarios) >= 2 {
		solo, noisy := open.Scenarios[0].Median, open.Scenarios[len(open.Scenarios)-1].Median
		s["open_loop_capacity_rps"] = noisy.CapacityRPS
		s["open_loop_offered_rps"] = noisy.OfferedRPS
		s["open_loop_goodput_fraction"] = noisy.GoodputFraction
		s["open_loop_goodput_ok"] = open.GoodputOK
		s["open_loop_quiet_p99_ms"] = noisy.QuietP99Ms
		s["open_loop_solo_p99_ms"] = solo.QuietP99Ms
		s["open_loop_p99_limit_ms"] = open.P99LimitMs
		s["open_loop_p99_margin_ms"] = open.P99MarginMs
		s["open_loop_p99_ok"] = open.P99OK
		s["open_loop_generator_late"] = noisy.GeneratorLate
	}
	if jain != nil {
		s["jain_index"] = jain.Median.Jain
		s["jain_tenant_rps"] = jain.Median.TenantRPS
	}
	for _, f := range floods {
		p := "flood_" + f.Guest + "_"
		s[p+"node_vs_bare_wazero_rps"] = f.NodeVsBareWazeroRPS
		s[p+"node_vs_bare_wazero_rps_turn_median"] = f.NodeVsBareWazeroRPSTurns
		s[p+"node_vs_bare_wazero_ok"] = f.NodeVsBareWazeroOK
		s[p+"node_vs_nowasm_rps"] = f.NodeVsNoWasmRPS
		s[p+"node_vs_bare_wazero_p99"] = f.NodeVsBareWazeroP99
	}
}

// printExtra prints the open-loop, Jain and flood tables.
func printExtra(open *openSection, jain *jainSection, floods []floodSection) {
	if open != nil {
		fmt.Printf("\nopen-loop quiet at %.0f%% of capacity (%s; %d connections)\n", 100*open.LoadFraction, open.CapacitySource, open.Connections)
		fmt.Printf("%-20s %9s %9s %7s %7s %8s %7s %7s %9s %9s %9s %7s %9s\n",
			"scenario", "capacity", "offered", "sent", "2xx", "goodput", "refus", "errors", "p50 ms", "p99 ms", "n req/s", "late", "lag p99")
		for _, r := range open.Scenarios {
			m := r.Median
			fmt.Printf("%-20s %9.0f %9.1f %7.0f %7.0f %8.4f %7.0f %7.0f %9.3f %9.3f %9.0f %7.0f %9.3f\n", r.Name, m.CapacityRPS, m.OfferedRPS,
				m.Sent, m.Answered2xx, m.GoodputFraction, m.QuietRefusals, m.QuietErrors, m.QuietP50Ms, m.QuietP99Ms, m.NoisyRPS, m.GeneratorLate,
				m.GeneratorLagP99)
		}
		fmt.Printf("bar: goodput %.4f ≥ %.2f: %v; p99 %.3f ms ≤ open-solo p99 + 2 × %.3f ms = %.3f ms: %v (margin %.3f ms)\n",
			open.Scenarios[len(open.Scenarios)-1].Median.GoodputFraction, open.GoodputBar, open.GoodputOK,
			open.Scenarios[len(open.Scenarios)-1].Median.QuietP99Ms, open.ServiceTimeMs, open.P99LimitMs, open.P99OK, open.P99MarginMs)
	}
	if jain != nil {
		fmt.Printf("\n%d equal tenants × %d closed-loop clients on compute\n", len(jain.Tenants), jain.ClientsPerTenant)
		fmt.Printf("%-10s %9s\n", "tenant", "req/s")
		for i, t := range jain.Tenants {
			if i < len(jain.Median.TenantRPS) {
				fmt.Printf("%-10s %9.0f\n", t, jain.Median.TenantRPS[i])
			}
		}
		fmt.Printf("Jain's index %.4f, goodput %.0f/s, refusals %.0f, errors %.0f\n", jain.Median.Jain, jain.Median.GoodputRPS, jain.Median.Refusals, jain.Median.Errors)
	}
	for _, f := range floods {
		fmt.Printf("\nflood: %d closed-loop clients, guest %s, %d-byte body\n", f.Clients, f.Guest, f.BodyBytes)
		fmt.Printf("%-12s %9s %9s %9s %7s %7s %9s %9s %9s\n", "server", "req/s", "p50 ms", "p99 ms", "refus", "errors", "srv cpu", "gen cpu", "others")
		for _, sv := range f.Servers {
			m := sv.Median
			fmt.Printf("%-12s %9.0f %9.3f %9.3f %7.0f %7.0f %8.0f%% %8.0f%% %8.0f%%\n", sv.Name, m.RPS, m.P50Ms, m.P99Ms, m.Refusals, m.Errors,
				100*m.ServerCPU, 100*m.GenCPU, 100*m.OthersCPU)
		}
		fmt.Printf("node/bare_wazero per turn %s: median %.3f (bar ≥ %.1f: %v); of the medians %.3f\n",
			fmtRatios(f.TurnRatios), f.NodeVsBareWazeroRPSTurns, f.NodeVsBareWazeroBar, f.NodeVsBareWazeroOK, f.NodeVsBareWazeroRPS)
		fmt.Printf("node/nowasm %.3f, bare_wazero/nowasm %.3f, p99 node/bare_wazero %.2f\n",
			f.NodeVsNoWasmRPS, f.BareWazeroVsNoWasm, f.NodeVsBareWazeroP99)
	}
}

// fmtRatios prints ratios with three decimals, comma-separated.
func fmtRatios(rs []float64) string {
	parts := make([]string, len(rs))
	for i, r := range rs {
		parts[i] = strconv.FormatFloat(r, 'f', 3, 64)
	}
	return strings.Join(parts, ", ")
}

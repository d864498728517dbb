package main

import (
	"strings"
	"testing"
	"time"

	"github.com/latent-node/latent-node/node/history"
)

// TestRenderTop: the screen shows the latest point in human units, the
// tenants, the refusal reasons and a sparkline over the points; control
// characters in names are escaped.
func TestRenderTop(t *testing.T) {
	ps := []history.Point{
		{Node: history.Rates{Answers: 2}},
		{Node: history.Rates{Answers: 4200, Refusals: 3.5, P50: 0.35, P99: 12.3},
			Outcomes: map[string]float64{"success": 4190, "trap": 10}, Reasons: map[string]float64{"capacity-exhausted": 3.5, "unused": 0},
			Tenants: []history.TenantRates{{Name: "demo\x1b[2J", Rates: history.Rates{Answers: 4000, Fuel: 1.5e6}}, {Name: history.Others}},
			Gauges:  history.Gauges{MemoryAdmitted: 1 << 30, MemoryLimit: 2 << 30, PressureCPU: 0.25, DataSlots: 3, DataBytes: 3 << 20}},
	}
	out := renderTop("http://127.0.0.1:8080", time.Date(2026, 12, 8, 1, 2, 3, 0, time.UTC), ps)
	for _, want := range []string{"01:02:03", "answers   4.2k/s", "refusals 3.5/s", "p50 350 µs", "p99 12.3 ms",
		"1 GiB of 2 GiB admitted", "data 3 (3 MiB)", "cpu 25 %", "outcomes  success 4.2k/s, trap 10/s",
		"refusals  capacity-exhausted 3.5/s\n", "▁█", "1.5M/s", "(others)", `demo\x1b[2J`} {
		if !strings.Contains(out, want) {
			t.Errorf("screen lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "\x1b") || strings.Contains(out, "unused") {
		t.Fatalf("escape or a zero rate on screen:\n%q", out)
	}
	if empty := renderTop("u", time.Now(), nil); !strings.Contains(empty, "no history yet") {
		t.Fatalf("empty history: %q", empty)
	}
}

// TestTop_once: top --once against a node prints the screen and exits 0;
// a key without the admin role is refused with the node's reason.
func TestTop_once(t *testing.T) {
	url, key := startDemoNode(t)
	runCLI("", "top", "--once", "--node", url, "--key", key).want(t, 0, []string{`^latent-node top  http://127\.0\.0\.1:\d+  \d\d:\d\d:\d\d\n`}, nil)
	runCLI("", "top", "--once", "--node", url, "--key", "lk_nobody").want(t, 1, nil, []string{"unauthenticated"})
	runCLI("", "top", "--every", "0", "--node", url, "--key", key).want(t, 2, nil, []string{"--every must be positive"})
}

package main

// The top command: the status page's headline figures in a terminal,
// refreshed until Ctrl-C.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/latent-node/latent-node/node/history"
	"github.com/latent-node/latent-node/node/status"
)

// top prints the node's headline figures from its history (GET
// /ui/history, an admin key) every --every, clearing the screen between
// them when stdout is a terminal, until Ctrl-C or SIGTERM (exit 0);
// --once prints them once.
func top(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("top", stderr, "top [--node URL] [--key KEY] [--every 5s] [--once]")
	nodeURL, key, caFile := clientFlags(fs)
	every := fs.Duration("every", 5*time.Second, "how often to refresh")
	once := fs.Bool("once", false, "print once and exit")
	if code, ok := parse(fs, args); !ok {
		return code
	}
	if fs.NArg() != 0 || *every <= 0 {
		fmt.Fprintln(stderr, "latent-node top: takes no arguments, and --every must be positive")
		return 2
	}
	c, ok := newClient("top", *nodeURL, *key, *caFile, stderr)
	if !ok {
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	clear := !*once && isTerminal(stdout)
	for {
		raw, err := c.History(ctx, 0)
		if ctx.Err() != nil {
			return 0
		}
		if err != nil {
			printError(stderr, err)
			return 1
		}
		var h struct {
			IntervalMs int64           `json:"interval_ms"`
			Points     []history.Point `json:"points"`
		}
		if err := json.Unmarshal(raw, &h); err != nil {
			fmt.Fprintf(stderr, "latent-node top: the node's history: %v\n", err)
			return 1
		}
		if clear {
			fmt.Fprint(stdout, "\x1b[H\x1b[2J")
		}
		fmt.Fprint(stdout, renderTop(*nodeURL, time.Now(), h.Points))
		if *once {
			return 0
		}
		select {
		case <-ctx.Done():
			return 0
		case <-time.After(*every):
		}
	}
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// renderTop is the screen of the latest point, with a sparkline of the
// answers over the points kept.
func renderTop(node string, now time.Time, ps []history.Point) string {
	var b strings.Builder
	fmt.Fprintf(&b, "latent-node top  %s  %s\n", terminalSafe(node), now.Format("15:04:05"))
	if len(ps) == 0 {
		b.WriteString("no history yet: the node keeps a point every 5 s\n")
		return b.String()
	}
	p := ps[len(ps)-1]
	fmt.Fprintf(&b, "answers   %-10s refusals %-10s p50 %-9s p99 %-9s queue p99 %s\n", rate(p.Node.Answers), rate(p.Node.Refusals),
		millis(p.Node.P50), millis(p.Node.P99), millis(p.QueueP99))
	fmt.Fprintf(&b, "memory    %s of %s admitted   running %d  queued %d  warm idle %d\n", status.Bytes(p.MemoryAdmitted),
		status.Bytes(p.MemoryLimit), p.Live, p.Queued, p.WarmIdle)
	fmt.Fprintf(&b, "ingress   data %d (%s), control %d   pressure cpu %.0f %%, memory %.0f %%\n", p.DataSlots,
		status.Bytes(p.DataBytes), p.ControlSlots, 100*p.PressureCPU, 100*p.PressureMemory)
	fmt.Fprintf(&b, "outcomes  %s\n", rates(p.Outcomes))
	fmt.Fprintf(&b, "refusals  %s\n", rates(p.Reasons))
	fmt.Fprintf(&b, "answers over the last %d points  %s\n", len(ps), spark(ps))
	fmt.Fprintf(&b, "\n%-24s %10s %10s %10s %10s %10s\n", "TENANT", "REQ/S", "REFUSED/S", "P50", "P99", "FUEL/S")
	for _, t := range p.Tenants {
		fmt.Fprintf(&b, "%-24s %10s %10s %10s %10s %10s\n", terminalSafe(t.Name), rate(t.Answers), rate(t.Refusals),
			millis(t.P50), millis(t.P99), rate(t.Fuel))
	}
	return b.String()
}

// rate is a per-second figure in human units: "0/s", "4.2/s", "12/s",
// "4.2k/s", "1.5M/s".
func rate(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%.1fM/s", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%.1fk/s", v/1e3)
	case v >= 10 || v == 0:
		return fmt.Sprintf("%.0f/s", v)
	}
	return fmt.Sprintf("%.1f/s", v)
}

// millis is a duration in milliseconds in human units: "350 µs",
// "12.3 ms", "1.2 s".
func millis(ms float64) string {
	switch {
	case ms == 0:
		return "0 ms"
	case ms < 1:
		return fmt.Sprintf("%.0f µs", ms*1000)
	case ms < 1000:
		return fmt.Sprintf("%.1f ms", ms)
	}
	return fmt.Sprintf("%.1f s", ms/1000)
}

// rates lists m's non-zero rates by name.
func rates(m map[string]float64) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if m[k] > 0 {
			parts = append(parts, terminalSafe(k)+" "+rate(m[k]))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// spark is a sparkline of the node's answers per point.
func spark(ps []history.Point) string {
	const bars = "▁▂▃▄▅▆▇█"
	peak := 0.0
	for _, p := range ps {
		peak = max(peak, p.Node.Answers+p.Node.Refusals)
	}
	var b strings.Builder
	for _, p := range ps[max(0, len(ps)-60):] {
		i := 0
		if peak > 0 {
			i = min(7, int((p.Node.Answers+p.Node.Refusals)/peak*7.999))
		}
		b.WriteString(string([]rune(bars)[i]))
	}
	return b.String()
}

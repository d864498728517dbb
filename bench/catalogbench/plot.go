package main

// The SVG plot of the results: deploy and invoke latency and the node's
// RSS against the services in the catalog.

import (
	"fmt"
	"math"
	"os"
	"strings"

	"github.com/cockroachdb/errors"
)

// writeSVG draws two panels against the services in the catalog: deploy
// p50 and p99 and invoke p50 (ms), and the node's RSS (MiB) with the
// bar's line (the empty node's RSS + 2 KiB per service).
func writeSVG(path string, res results) error {
	if len(res.Points) == 0 {
		return errors.New("catalogbench: nothing to plot")
	}
	type series struct {
		name, color, dash string
		y                 func(checkpoint) float64
	}
	panels := []struct {
		title, unit string
		series      []series
	}{
		{"latency at the client", "ms", []series{
			{"deploy p50", "#1f77b4", "", func(p checkpoint) float64 { return p.DeployP50Ms }},
			{"deploy p99", "#1f77b4", "4 4", func(p checkpoint) float64 { return p.DeployP99Ms }},
			{"invoke p50", "#2ca02c", "", func(p checkpoint) float64 { return p.InvokeP50Ms }},
		}},
		{"resident memory", "MiB", []series{
			{"RSS", "#d62728", "", func(p checkpoint) float64 { return float64(p.RSSBytes) / (1 << 20) }},
			{"bar: empty + 2 KiB/service", "#d62728", "4 4", func(p checkpoint) float64 {
				return float64(res.EmptyRSS+2048*int64(p.Services)) / (1 << 20)
			}},
		}},
	}
	const w, ph, left, right, top, bottom = 720.0, 260.0, 60.0, 200.0, 30.0, 40.0
	maxX := float64(res.Points[len(res.Points)-1].Services)
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" font-family="sans-serif" font-size="12">`+"\n", w, ph*float64(len(panels)))
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	for i, panel := range panels {
		y0 := ph * float64(i)
		maxY := 0.0
		for _, s := range panel.series {
			for _, p := range res.Points {
				maxY = max(maxY, s.y(p))
			}
		}
		maxY = niceCeil(maxY * 1.1)
		xOf := func(x float64) float64 { return left + (w-left-right)*x/maxX }
		yOf := func(v float64) float64 { return y0 + top + (ph-top-bottom)*(1-v/maxY) }
		fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" font-size="14">%s (%s) against services in the catalog</text>`+"\n", left, y0+18, panel.title, panel.unit)
		for k := 0; k <= 4; k++ {
			v := maxY * float64(k) / 4
			fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/><text x="%.1f" y="%.1f" text-anchor="end">%.3g</text>`+"\n",
				left, yOf(v), w-right, yOf(v), left-6, yOf(v)+4, v)
		}
		for k := 0; k <= 4; k++ {
			x := maxX * float64(k) / 4
			fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">%.0fk</text>`+"\n", xOf(x), y0+ph-bottom+16, x/1000)
		}
		for j, s := range panel.series {
			var pts []string
			for _, p := range res.Points {
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", xOf(float64(p.Services)), yOf(s.y(p))))
			}
			fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="2" stroke-dasharray="%s" points="%s"/>`+"\n",
				s.color, s.dash, strings.Join(pts, " "))
			ly := y0 + top + 10 + 18*float64(j)
			fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="2" stroke-dasharray="%s"/><text x="%.1f" y="%.1f">%s</text>`+"\n",
				w-right+10, ly, w-right+35, ly, s.color, s.dash, w-right+40, ly+4, s.name)
		}
	}
	b.WriteString("</svg>\n")
	return errors.Wrap(os.WriteFile(path, []byte(b.String()), 0o644), "catalogbench: write plot")
}

// niceCeil rounds v up to 1, 2 or 5 times a power of ten.
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

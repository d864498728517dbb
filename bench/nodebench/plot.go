package main

// The SVG plot of the quiet tenant's latency against the noisy clients, from
// a run or from an earlier results file.

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"strings"

	"github.com/cockroachdb/errors"
)

// writeSVG plots the quiet tenant's p50 and p99 latency against the noisy
// clients next to it (solo at 0), with the physical limit: solo latency plus
// the rest of a noisy activation already running when the quiet request
// arrives (half an activation at the median, a whole one at p99).
func writeSVG(path string, res results) error {
	type point struct {
		noisy    int
		p50, p99 float64
	}
	var pts []point
	var solo *point
	for _, s := range res.Scenarios {
		if s.Hammer > 0 {
			continue
		}
		p := point{noisy: s.Noisy, p50: s.Median.QuietP50Ms, p99: s.Median.QuietP99Ms}
		pts = append(pts, p)
		if s.Noisy == 0 {
			solo = &pts[len(pts)-1]
		}
	}
	if solo == nil || len(pts) < 2 {
		return errors.New("nodebench: plot: no solo scenario to plot against")
	}
	exec := res.Calibration.ActivationExec
	limit50, limit99 := solo.p50+exec/2, solo.p99+exec

	const w, h, left, right, top, bottom = 640.0, 400.0, 60.0, 150.0, 30.0, 50.0
	maxY := limit99
	for _, p := range pts {
		maxY = max(maxY, p.p99)
	}
	maxY = math.Ceil(maxY*1.1*2) / 2
	xOf := func(n int) float64 { // log2(1+n) spreads 0, 1, 4, 16, 64
		last := math.Log2(1 + float64(pts[len(pts)-1].noisy))
		return left + (w-left-right)*math.Log2(1+float64(n))/max(last, 1)
	}
	yOf := func(ms float64) float64 { return top + (h-top-bottom)*(1-ms/maxY) }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" font-family="sans-serif" font-size="12">`+"\n", w, h)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%.0f" y="18" font-size="14">quiet tenant latency next to a noisy tenant (node pinned to one CPU)</text>`+"\n", left)
	for i := 0; i <= 5; i++ { // y grid
		v := maxY * float64(i) / 5
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/><text x="%.1f" y="%.1f" text-anchor="end">%.1f</text>`+"\n",
			left, yOf(v), w-right, yOf(v), left-6, yOf(v)+4, v)
	}
	for _, p := range pts { // x ticks
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">%d</text>`+"\n", xOf(p.noisy), h-bottom+18, p.noisy)
	}
	fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">noisy closed-loop clients</text>`+"\n", (left+w-right)/2, h-10)
	fmt.Fprintf(&b, `<text transform="translate(16 %.1f) rotate(-90)" text-anchor="middle">ms</text>`+"\n", (top+h-bottom)/2)
	series := []struct {
		name, color, dash string
		y                 func(point) float64
	}{
		{"quiet p50", "#1f77b4", "", func(p point) float64 { return p.p50 }},
		{"quiet p99", "#d62728", "", func(p point) float64 { return p.p99 }},
		{"limit p50", "#1f77b4", "4 4", func(point) float64 { return limit50 }},
		{"limit p99", "#d62728", "4 4", func(point) float64 { return limit99 }},
	}
	for i, s := range series {
		var path []string
		for _, p := range pts {
			path = append(path, fmt.Sprintf("%.1f,%.1f", xOf(p.noisy), yOf(s.y(p))))
		}
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="2" stroke-dasharray="%s" points="%s"/>`+"\n",
			s.color, s.dash, strings.Join(path, " "))
		if s.dash == "" {
			for _, p := range pts {
				fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3" fill="%s"/>`+"\n", xOf(p.noisy), yOf(s.y(p)), s.color)
			}
		}
		ly := top + 20 + float64(i)*18
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="2" stroke-dasharray="%s"/><text x="%.1f" y="%.1f">%s</text>`+"\n",
			w-right+10, ly, w-right+34, ly, s.color, s.dash, w-right+40, ly+4, s.name)
	}
	b.WriteString("</svg>\n")
	return errors.Wrap(os.WriteFile(path, []byte(b.String()), 0o644), "nodebench: write plot")
}

// plotFromJSON renders the plot of an earlier results file.
func plotFromJSON(jsonPath, svgPath string) error {
	data, err := os.ReadFile(jsonPath)
	if err != nil {
		return errors.Wrap(err, "nodebench: read results")
	}
	var res results
	if err := json.Unmarshal(data, &res); err != nil {
		return errors.Wrap(err, "nodebench: decode results")
	}
	return writeSVG(svgPath, res)
}

package main

// The open-loop scenarios: the quiet tenant sending at a fixed rate, alone
// and next to noisy clients, and their figures.

import (
	"slices"
	"time"
)

// openRound is one open-loop scenario's figures in one round: the quiet_*
// figures are the open-loop quiet tenant's.
type openRound struct {
	roundResult
	CapacityRPS     float64 `json:"capacity_rps"`         // the round's saturated goodput
	OfferedRPS      float64 `json:"offered_rps"`          // the arrival rate
	Sent            float64 `json:"sent"`                 // requests scheduled in the window
	Answered2xx     float64 `json:"answered_2xx"`         // of them, answered 2xx
	GoodputFraction float64 `json:"goodput_fraction"`     // answered_2xx / sent
	GeneratorLate   float64 `json:"generator_late"`       // sends that waited for a free connection
	GeneratorLagP99 float64 `json:"generator_lag_p99_ms"` // send time less scheduled time
}

type openResult struct {
	Name   string      `json:"name"`
	Noisy  int         `json:"noisy_clients"`
	Rounds []openRound `json:"rounds"`
	Median openRound   `json:"median"`
}

// openSection is the open-loop quiet tenant: alone (open-solo) and next to
// closed-loop noisy clients, at LoadFraction of the round's capacity.
type openSection struct {
	LoadFraction   float64      `json:"load_fraction"`
	Connections    int          `json:"connections"`
	CapacitySource string       `json:"capacity_source"`
	Scenarios      []openResult `json:"scenarios"`
	// The bar: goodput ≥ 0.99 and p99 ≤ open-solo p99 + 2 × the
	// activation's execution time.
	P99LimitMs     float64 `json:"p99_limit_ms"`
	P99MarginMs    float64 `json:"p99_margin_ms"` // limit less the noisy scenario's p99
	P99OK          bool    `json:"p99_ok"`
	GoodputOK      bool    `json:"goodput_ok"`
	GoodputBar     float64 `json:"goodput_bar"`
	ServiceTimeMs  float64 `json:"service_time_ms"`
	ReferenceNoisy int     `json:"reference_noisy_clients"`
}

// summarizeOpen turns an open-loop scenario's tallies (the open-loop quiet
// group first, then noisy, then an empty hammer group) into its figures.
func summarizeOpen(t []*tally, d time.Duration, capacity, rate float64) openRound {
	r := openRound{roundResult: summarize(t, d), CapacityRPS: capacity, OfferedRPS: rate}
	q := t[0]
	r.Sent, r.Answered2xx, r.GeneratorLate = float64(q.sent), float64(q.ok), float64(q.late)
	r.GoodputFraction = ratio(float64(q.ok), float64(q.sent))
	slices.Sort(q.lag)
	r.GeneratorLagP99 = ms(percentile(q.lag, 0.99))
	return r
}

func medianOpen(rs []openRound) openRound {
	base := make([]roundResult, len(rs))
	for i, r := range rs {
		base[i] = r.roundResult
	}
	col := func(f func(openRound) float64) float64 {
		xs := make([]float64, len(rs))
		for i, r := range rs {
			xs[i] = f(r)
		}
		return median(xs)
	}
	return openRound{
		roundResult:     medianOf(base),
		CapacityRPS:     col(func(r openRound) float64 { return r.CapacityRPS }),
		OfferedRPS:      col(func(r openRound) float64 { return r.OfferedRPS }),
		Sent:            col(func(r openRound) float64 { return r.Sent }),
		Answered2xx:     col(func(r openRound) float64 { return r.Answered2xx }),
		GoodputFraction: col(func(r openRound) float64 { return r.GoodputFraction }),
		GeneratorLate:   col(func(r openRound) float64 { return r.GeneratorLate }),
		GeneratorLagP99: col(func(r openRound) float64 { return r.GeneratorLagP99 }),
	}
}

// judge fills the bar figures from the medians: the first scenario is
// open-solo, the last the one next to noisy clients.
func (s *openSection) judge(serviceMs float64) {
	if len(s.Scenarios) < 2 {
		return
	}
	solo, noisy := s.Scenarios[0].Median, s.Scenarios[len(s.Scenarios)-1]
	s.ServiceTimeMs, s.GoodputBar, s.ReferenceNoisy = serviceMs, 0.99, noisy.Noisy
	s.P99LimitMs = solo.QuietP99Ms + 2*serviceMs
	s.P99MarginMs = s.P99LimitMs - noisy.Median.QuietP99Ms
	s.P99OK = s.P99MarginMs >= 0
	s.GoodputOK = noisy.Median.GoodputFraction >= s.GoodputBar
}

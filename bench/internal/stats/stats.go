// Package stats is the benchmarks' arithmetic on samples: the median of
// rounds, nearest-rank percentiles of latencies, durations in
// milliseconds.
package stats

import (
	"slices"
	"time"
)

// Percentile returns the p-quantile (0..1) of sorted durations by the
// nearest-rank method; 0 for none.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(p*float64(len(sorted)) + 0.999999)
	i = min(max(i, 1), len(sorted))
	return sorted[i-1]
}

// Ms is d in milliseconds.
func Ms(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e6 }

// Median of xs (not modified); 0 for none.
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

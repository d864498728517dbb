//go:build race

package scheduler

// raceEnabled scales the longest simulations down under the race detector
// (which slows this code about tenfold); the assertions stay.
const raceEnabled = true

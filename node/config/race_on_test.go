//go:build race

package config

// raceEnabled: the race detector slows map-heavy decoding ~30×; large
// inputs are scaled down under it.
const raceEnabled = true

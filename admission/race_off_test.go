//go:build !race

package admission

// raceEnabled: see race_on_test.go.
const raceEnabled = false

//go:build race

package admission

// raceEnabled: this test binary is built with the race detector, so the
// packages its dependencies compile to are in the build cache in their
// -race form (TestPermit_cannotBeForged builds with the same flag).
const raceEnabled = true

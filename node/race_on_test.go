//go:build race

package node

// raceEnabled: the race detector is on (it changes what is allocated).
const raceEnabled = true

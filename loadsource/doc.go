// Package loadsource will own host pressure samples (issue 3): a sampler
// actor (gopsutil; relative to cgroup v2 memory.max and cpu.max in a
// container) and the shared State whose reads fail closed on missing,
// malformed, future-dated, stale or out-of-order samples. No sample ever comes
// from request metadata.
package loadsource

// Package testutil holds the fakes and drivers that tests of several
// packages share: a manual clock, a concurrent hammer, a patterned body
// reader (Pattern) and, on Linux, the
// protection of a mapping (Protection, from /proc/self/maps) and a
// process's resident memory and its peak (ProcStatus, ResetPeakRSS). It imports no
// package of this module, so any package's own tests may use it. Fakes that
// need a package's types live in subpackages named after it: catalogtest (a
// module inspector) and admissiontest (a valid admission policy); nodeconf
// renders a node's TOML configuration for tests and benchmarks that start
// the real binary; tartest builds and reads tar streams (crafted ones too)
// for the backup and restore tests; browsertest drives the status page in
// headless Chromium.
package testutil

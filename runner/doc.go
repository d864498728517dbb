// Package runner will execute one admitted activation in a wazero sandbox
// (issue 4): fuel instrumentation by module rewriting, deploy-time inspection
// and compilation (it implements catalog.ModuleInspector), the WASI stdio
// guest ABI, and exact outcome classification (success, declared-error, trap,
// fuel-exhausted, memory-exhausted, output-exceeded, deadline-exceeded,
// cancelled, platform-failure).
package runner

// Package scheduler will own what happens between an admission permit and a
// running cell (issue 5): per cell class and queue class, a two-level fair
// queue (tenants, then principals, FIFO within a principal) that is
// cost-aware by fuel, lanes that serve a waiting lower queue class after a
// bounded run of higher-class dispatches, pending-slot fair share, and
// adaptive concurrency. Its core is a synchronous state machine taking now; a
// thin driver owns the goroutines. It reaches cells and the runner through
// interfaces it defines (Executor, CellSource).
package scheduler

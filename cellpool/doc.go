// Package cellpool will own the execution cells (issue 4): per cell class a
// fixed pool of cells, affine leases released once with a disposition (reuse
// or quarantine), and pooled linear memory (mmap-reserved, mprotect-grown,
// madvise-reset) capped at an activation's granted bytes.
package cellpool

// Package wasiio implements the WASI preview 1 functions that move bytes
// through iovecs (fd_read, fd_write, fd_pread, fd_pwrite) over a guest's
// stdio, charging the guest for every iovec before it is looked at, and
// poll_oneoff, charging every subscription the same way.
//
// wazero's own versions loop over the iovecs a guest names, as many as its
// memory holds, and skip a zero-length one without calling the runner: one
// call could so spin for seconds past the guest's deadline for one unit of
// fuel, since the deadline is checked when fuel runs out. Here the runner's
// Charge is told the iovec count first (it may stop the guest there), and
// the bytes are its own to charge as they are read or written. The
// results and errors are wazero's for the same calls: stdin is read until
// an iovec is not filled, stdout and stderr take every iovec, a
// positioned read or write of a stream is EBADF at its first non-empty
// iovec, any other descriptor is EBADF.
//
// # Internal organization
//
//   - wasiio.go: Stdio (what the runner provides), Define (the five
//     functions on a host module builder), transfer, the iovec
//     functions' one loop, and pollOneoff.
//   - list.go: List, the args and environ of args_get, environ_get and
//     their _sizes_get.
//   - writers.go: Stdout (kept up to its cap) and StderrTail (the last
//     4 KiB), the writers of the runner's activations.
package wasiio

// Package front holds the parts of the node's network front that need
// nothing else of the node: the connection limiter that bounds a
// listener's connections in total and per address, the front yield through
// which running guests give their processors to the goroutines reading the
// network, and the API listener's TLS material, swapped on reload. The
// node composes them (node.New) and runs the yield among its actors. Of
// the module this package imports only node/config (the [node.tls] files),
// and nothing imports it but node and cmd (the import rule checks both).
//
// # Internal organization
//
//   - conns.go: ConnLimits, ConnLimiter (Wrap, ConnState, Stats) and
//     RateLog, the rate-limited logger of the server's own errors.
//   - yield.go: Yield, the front yield (a pipe the guests write to and a
//     sentinel goroutine that reads it, see Yield's comment), and
//     YieldInterval.
//   - tls.go: ServerTLS, the listener's certificate and client CAs
//     ([node.tls]); Load prepares a reload, Store applies it.
package front

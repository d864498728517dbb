// Package front holds the parts of the node's network front that need
// nothing of the node but its configuration, its wire vocabulary and the
// request's activation record: the connection limiter that bounds a
// listener's connections in total and per address, the front yield
// through which running guests give their processors to the goroutines
// reading the network, the API listener's TLS material (swapped on
// reload), the ingress pools that bound the requests the node holds, the
// refusal pacer and the aggregated refusal log, the browser checks (a client certificate sent for
// another site, the status page's Host names), the path check that
// answers a path the mux would redirect, the answer writers (the status
// and refusal the access log reads, the write deadline), and the access
// log's rate limits, field sanitising, route kinds and activation ids.
// The node composes them (node.New), wires them into its handler chain
// and runs the yield among its actors. Of the module this package imports
// only node/config, node/api (problem bodies), node/activation (the
// request's record), refusal and vocab (the import rule checks it), and
// only node and cmd import it.
//
// # Locks
//
// Each mutex here is a leaf: the connection limiter's, each ingress
// pool's, the refusal pacer's, the refusal log's, each log bucket's and
// the log limiter's (which only serializes adding tenants), the front
// yield's and the rate-limited logger's. None is held while another is taken, across a
// channel operation, a log line or I/O.
//
// # Internal organization
//
//   - conns.go: ConnLimits, ConnLimiter (Wrap, ConnState, Stats) and
//     RateLog, the rate-limited logger of the server's own errors;
//     conns_unix.go, conns_other.go: DefaultMaxConns from RLIMIT_NOFILE,
//     or a fixed bound where there is none (Windows).
//   - yield.go: Yield, the front yield (a pipe the guests write to and a
//     sentinel goroutine that reads it, see Yield's comment), and
//     YieldInterval; yield_unix.go, yield_other.go: its Run, through the
//     runtime's poller, or with blocking reads where pipes cannot be
//     polled (Windows).
//   - tls.go: ServerTLS, the listener's certificate and client CAs
//     ([node.tls]); Load prepares a reload, Store applies it.
//   - ingress.go: the ingress pools (IngressPool: Reserve before the body
//     is read, Bind once the principal is verified, Release once the
//     answer is written), ModeledBytes, the pool names, IngressUsage and
//     PoolsUsage (the admission views' form).
//   - pacer.go: RefusalPacer, which holds each principal's refusals to a
//     rate, and its defaults.
//   - refusallog.go: RefusalLog, refusals aggregated into one log line per
//     interval (an actor of the node's).
//   - browser.go: CrossSite and its refusal, the status page's names
//     (UIHosts, HostAllowed, UIHostOnly).
//   - paths.go: CleanPaths, 404 instead of the mux's redirects;
//     InvokePath and RouteInvocations, the invocation routes matched as
//     the mux would, without its allocations, ahead of it.
//   - accesslog.go: LogLimiter, the access log's token buckets (per
//     configured tenant, the peers', a shared one behind shards by client
//     address), the bounds and forms of logged fields (LogSafe,
//     LogName, LineBytes, ClientAddr), RouteKind (the bounded route label)
//     and ActivationID (an invocation's id, chosen before its handler).
//   - writers.go: AccessWriter (an answer's status, and its refusal in the
//     request's record) and DeadlineWriter (node.write_timeout).
//   - stream.go: BodySource (a request body a wasi-http guest reads as it
//     arrives, full duplex) and ResponseSink (an answer sent as the guest
//     writes it, the activation headers as trailers).
package front

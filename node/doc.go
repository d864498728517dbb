// Package node composes a latent-node out of its layers (catalog, runner,
// cell pool, load source, admission, scheduler, authentication) and owns
// what sits between them and the network: the HTTP front, the ingress
// governor, the wiring of authentication to routes, the activation manager,
// the front yield, refusal pacing and logging, metrics, and the demo
// deployment. New composes a node from a validated configuration and
// starts nothing.
//
// # The path of an invocation
//
// A connection is accepted through WrapListener, which bounds connections
// in total and per remote address (shedding idle ones first, then one
// stuck writing to a client that does not read). Handler cleans the path,
// sets the answer's write deadline (node.write_timeout) and recovers a
// handler's panic (answered 500, or the connection cut if the answer had
// started; logged at most once a second). The ingress governor (governed)
// then takes a slot of its pool and the request's modeled bytes before the
// body is read or the key is checked; authed authenticates the API key
// (node/auth), or a client certificate unless a browser sent it for
// another site, and checks the route's role; on a tenant-scoped route
// authorize applies the one authorization rule (own tenant, the current
// subject and kind allowlists); the ticket is bound to the verified tenant
// and principal, and it is held until the answer is written.
//
// The activation manager (the activations type: handle and invoke) parses
// the Latent-* headers (node/api), reads the body within the payload
// bound, refuses a target of another tenant before resolving it, resolves
// the route against one catalog pin, admits with the same pin, pins the compiled module, and calls scheduler.Do: the guest
// runs on the request's own goroutine once the fair queue dispatches it.
// The outcome becomes the HTTP answer, with the Latent-* result headers and
// Server-Timing. Refusals are counted in the metrics and the aggregated
// refusal log; an invocation's refusal is also held by the refusal pacer
// before it is written, so a client that retries at once waits on its own
// connection.
//
// Every refusal is a problem+json body with an exact status; docs/api.md
// lists them, and docs/architecture.md shows how the layers fit together.
//
// # What it guarantees
//
//   - The node holds a bounded amount of request state: connections, ingress
//     slots and modeled bytes per node, tenant and principal (two pools, data
//     and control, so deploys never wait behind invocations), in-flight
//     uploads and deploys per tenant. /healthz, /readyz and /metrics are
//     outside the ingress pools.
//   - A principal's identity, tenant and roles come from its key alone;
//     another tenant's route is refused before the catalog is consulted, so
//     the status does not reveal whether it exists.
//   - Maps keyed by tenant or principal (ingress, pacer, write bounds,
//     metric labels) are bounded by the configuration, never by requests.
//   - Guests give their processor to the network front at the end of each
//     activation and at fuel checks, at most every front.YieldInterval, so
//     requests are read while guests run (RATIONALE.md says why and at what
//     cost).
//
// # Actors
//
// New starts no goroutine. The caller runs, for the node's lifetime, every
// actor of Actors (cmd/latent-node in its oklog/run group, tests with Go)
// and the http.Server from Server on a listener from WrapListener. Close
// releases the runtime and the pool once they have stopped.
//
// # Locks
//
// Every mutex of the package, and of node/front, is a leaf: the refusal
// log's, each per-tenant write bound's, and node/front's (see its doc).
// None is
// held while another is taken, across a channel operation, a log line or
// I/O, or while calling into another package.
//
// # Internal organization
//
//   - node.go: Options, Node, New (composition), artifact collection, and
//     the adapters the scheduler calls (cellSource, cell, executor).
//   - actors.go: Actor, Actors (every loop the node needs, in one list)
//     and Go, which runs them for tests and embedders.
//   - http.go: Handler, the routes (it wires the handlers of each route
//     group below), recovered, authed and authorize. The route groups
//     are types that hold only what their routes need, not the Node:
//     activations (invoke.go), deployments (control.go, list.go,
//     writes.go), clusterAPI (cluster.go), probes (health.go), and the
//     status views of node/status.
//   - control.go: deployments, the deployment control API (artifact
//     upload, deploy, get, delete), the answers to catalog errors and the
//     hook that keeps metrics and snapshots in step with changes applied
//     from the cluster (the catalog itself tells the runner which
//     snapshots lost their last revision: Config.OnSnapshotsUnused).
//   - list.go: the paginated list of a tenant's deployments.
//   - health.go: probes, /healthz (its own bound) and /readyz.
//   - wire.go: the JSON form of catalog values in answers (the API's
//     style).
//   - invoke.go: the activation manager, activations (it fills the
//     request's activation.Record, and writes the answer), and the mapping
//     of outcomes to answers.
//   - wagi.go: the invoke route's methods and path suffix, the CGI request
//     of a WAGI revision and its answer.
//   - outbound.go: a wasi-http guest's outgoing requests: their log line,
//     metric and trace span.
//   - stream.go: which wasi-http bodies stream (front.BodySource,
//     front.ResponseSink) and the answers to a streamed body's failure.
//   - cluster.go: a node in a cluster: clusterAPI, which publishes deploys
//     and deletes through etcd and serves the peer endpoints (artifacts,
//     replicate, applied) and the cluster's admin routes.
//   - ingress.go: the ingress governor (governed: the front's ingress
//     pools on every API route).
//   - reload.go: Reload, prepared in full before it applies, and the
//     handler of POST /v1/admin/reload.
//   - pacer.go: holding a refusal as the front's refusal pacer says.
//   - writes.go: per-tenant bounds on uploads and deploys in flight, and
//     the check of a release's revisions against admission.
//   - accesslog.go: accessLog, the front's middleware that makes each
//     request's activation.Record (and an invocation's id), and once the
//     answer is out writes one log line from it (rate-limited per tenant
//     by the front's LogLimiter) and counts its refusal and duration.
//   - metrics.go: the Prometheus metrics.
//   - demo.go: the embedded demo guest of `serve --demo`.
//
// Sub-packages: node/api (headers and problem bodies), node/auth (API keys
// and principals), node/config (the configuration file,
// docs/configuration.md), node/front (what the network front needs and no
// other part of the node: the connection limiter, the front yield, the
// listener's TLS material, the ingress pools, the refusal pacer, the
// browser checks, the path check, the answer writers, the access log's
// rate limits and field sanitising), node/activation (the record of one request and
// its activation, and the headers rendered from it), node/tracing (the
// OpenTelemetry spans of an invocation and their export), node/status (the
// status page and the admission views).
//
// # Usage
//
//	n, err := node.New(ctx, cfg, node.Options{Logger: logger})
//	if err != nil { ... }
//	defer n.Close(context.Background())
//	wait := node.Go(ctx, n.Actors()) // or each actor in your run group
//	srv := n.Server()
//	err = srv.Serve(n.WrapListener(ln))
package node

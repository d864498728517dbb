// Package tracing is the node's OpenTelemetry tracing: one span per
// invocation, "activation" (kind server, a child of the caller's
// traceparent), with three children: "admission", "queue" and
// "execution", sampled by the node (tracing.sample_ratio, keyed by the
// trace id with a per-process seed) and exported over OTLP/HTTP in
// batches. The node makes the Tracer (New, nil with [tracing] off) and
// closes it; its HTTP front starts an invocation's span (Start) and ends
// it with the answer (End), and the activation manager records admission
// and the scheduler's result on it (SpanOf). Every method of a nil
// *Tracer or *Span returns at once.
//
// It is a package of its own because it needs nothing of the node but the
// tracing configuration, the problem body an invocation is answered with,
// and the admission and scheduler results it records; the node's tests
// that need a running node (spans of real invocations, refusals, sampling
// of remote parents) stay in node.
//
// Of the module it imports only node/config, node/api, admission,
// scheduler, runner, refusal and vocab (the import rule checks it).
//
// # Internal organization
//
//   - tracing.go: Tracer (New, Flush, Close, Start, SpanOf), Span
//     (Admitting, Admitted, Scheduled, End), the sampler (keyedRatio) and
//     the span limits.
package tracing

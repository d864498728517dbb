// Package activation is the record of one request the node serves, and
// for an invocation, of its activation: its id, the tenant and target,
// the revision it resolved to, where its time went, what the guest did or
// the refusal that answered it. The front creates the record before any
// handler runs and attaches it to the request (With); authentication and
// the activation manager fill it (From); once the answer is written, the
// access log and the refusal counters read it. Nothing reads a request's
// facts back from the wire (headers or problem bodies).
//
// The package imports only vocab and refusal of the module.
//
// # Internal organization
//
//   - record.go: Record, Timing, With and From, NewID.
//   - headers.go: the activation headers and Server-Timing rendered from a
//     record, and the Latent-Stderr-Tail form.
package activation

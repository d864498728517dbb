// Package activation is the record of one request the node serves, and
// for an invocation, of its activation: its id, the tenant and target,
// the revision it resolved to, where its time went, what the guest did or
// the refusal that answered it. The front creates the record before any
// handler runs, inside the answer writer it hands on (a Holder); the
// router, authentication and the activation manager fill it (Of finds it
// through the writers wrapping the holder); once the answer is written,
// the access log, the refusal counters and the trace span read it. Nothing
// reads a request's facts back from the wire (headers or problem bodies).
// The answer headers the node sets go through the record too (SetHeader,
// WriteHeaders), which holds their values in one array.
//
// The package imports only vocab and refusal of the module.
//
// # Internal organization
//
//   - record.go: Record, Timing, Holder and Of, NewID.
//   - headers.go: the activation headers and Server-Timing rendered from a
//     record, and the Latent-Stderr-Tail form.
package activation

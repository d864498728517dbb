// Package api holds the wire vocabulary of the node's HTTP API (docs/api.md)
// on net/http: strict parsing of an invocation's Latent-* request headers
// (ParseInvokeHeaders), problem+json refusals (Problem, FieldProblem), the
// mapping of a structured refusal to its exact HTTP status (StatusOf), and
// writing a refusal with Retry-After and WWW-Authenticate (WriteProblem). It
// holds no handlers and no state: the handlers, which hand requests to the
// activation manager, live in package node (node/http.go).
package api

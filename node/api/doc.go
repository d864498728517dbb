// Package api holds the wire vocabulary of the node's HTTP API (docs/api.md)
// on net/http: strict parsing of an invocation's Latent-* request headers
// (ParseInvokeHeaders), problem+json refusals (Problem, FieldProblem), the
// problem of a refusal.Refusal (Refusal: status, type and title from the
// refusal package's one mapping), writing a refusal with Retry-After
// and WWW-Authenticate (WriteProblem), and a JSON answer (WriteJSON). It
// holds no handlers and no state: the handlers, which hand requests to the
// activation manager, live in package node (node/http.go).
package api

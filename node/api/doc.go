// Package api is the node's HTTP API (DESIGN §3.3) on net/http: request
// header parsing, problem+json refusals with exact status codes and
// Retry-After, and the handlers that hand requests to the activation manager.
package api

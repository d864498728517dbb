// Package wagi is the WAGI ABI of a guest: the CGI environment a request
// reaches the guest as (Request.Environ: the method, path below the route,
// query, the headers a guest may see, the node's own variables) and the
// parser of the CGI header block a guest's stdout starts with
// (ParseResponse), with the bounds of both. The runner parses a WAGI
// revision's output with it; the node builds the request from the HTTP
// request and writes the answer. docs/guest-abi.md, "WAGI ABI", is the
// guest's side of the contract. Of the module it imports runner/httpabi
// only, whose Response is the parsed answer.
//
// # Internal organization
//
//   - wagi.go: the bounds, Request and its environment, Response and its
//     parser.
package wagi

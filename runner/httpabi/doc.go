// Package httpabi is what the HTTP guest ABIs (WAGI, runner/wagi, and
// wasi-http, runner/wasihttp) have in common: the answer a guest gives
// (Response), which the runner reports in its outcome and the node
// writes, and the response headers a guest may not set. It imports
// nothing of the module.
//
// # Internal organization
//
//   - httpabi.go: Response and the response header rule.
package httpabi

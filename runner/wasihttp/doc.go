// Package wasihttp is the node's WASI 0.2 host for components of the
// wasi:http/proxy world: wasi:http (types, outgoing-handler), wasi:io
// (error, poll, streams), wasi:clocks, wasi:random, wasi:cli and an empty
// wasi:filesystem. Define registers them once per wazero runtime as host
// modules named after each interface at major.minor ("wasi:http/types@0.2"),
// so a component built against any 0.2.x release links to them; Modules
// and Provides say what exists. Each function is registered under the
// names its canonical options may give it (a realloc, a string encoding),
// as the runner's component merger names the imports.
//
// The host's state lives in an Activation, one per request, which the
// host functions find in the call's context (WithActivation, From):
// the Request the node built, a bounded handle table, the response being
// built and the bytes it holds. Handle calls the guest's handler and
// Response returns what it set through its response-outparam;
// ErrNoResponse, ErrGuestError and ErrOutputExceeded name the ways that
// can fail. Every value a guest passes
// is lifted through runner/internal/canon and validated; a lie panics
// with a canon.ErrTrap error, which the runner's call guard turns into
// that activation's trap. Env is the runner's side: fuel charges, the
// log, randomness, clocks and the environment.
//
// Outbound HTTP is denied (HTTP-request-denied), sockets are not
// provided, stdin is empty, the filesystem has no preopens.
//
// It imports runner/httpabi, runner/internal/canon,
// runner/internal/component and runner/internal/coremerge.
//
// # Internal organization
//
//   - activation.go: Env, Request, Response, Limits, the errors and
//     Activation, and Answer, the response as the caller gets it.
//   - deploy.go: Flatten, the deploy of a component (planned, its imports
//     checked, merged into one core module), and Host, the host
//     functions' types its merged imports must match.
//   - define.go: the registry of host functions and Define.
//   - types.go: the resource types and the WIT types the interfaces share.
//   - http.go: wasi:http/types: fields, requests, responses, bodies.
//   - outgoing.go: wasi:http/outgoing-handler, the responses it brings,
//     and Call, the record of each outgoing request.
//   - io.go: wasi:io.
//   - stream.go: streamed bodies: a request body read from the node's
//     Source as the guest reads it, a response sent to its Sink once it
//     outgrows StreamAfter; the views of written lists (defView).
//   - cli.go: wasi:clocks, wasi:random, wasi:cli and wasi:filesystem.
package wasihttp

// Package component reads a WebAssembly component (the component model's
// binary format, as WASI 0.2 toolchains emit it) and plans it as one core
// module: Plan decodes the component under Limits, evaluates its sections
// in order as instantiating it would (nested components, core and
// component instances, aliases, canonical definitions, imports and
// exports) and returns a Result whose Merge is the coremerge.Plan of its
// core module instances, with every canon lower of an imported WASI
// function turned into a named host import (HostModule, HostName) and
// every lift of an export recorded.
//
// The component is a tenant's upload: every count, index, length and
// nesting level is bounded by Limits (DefaultLimits are the node's), and
// every refusal is an *Error with a Reason (malformed, limit,
// unsupported, unsupported-import), the limit's Key and a Detail for the
// person who deployed it. Constructs the node does not run (async, guest
// resources, start functions, component values) are refused by name
// rather than misread. Types are read and bounded but not interpreted:
// the runner checks the merged module's imports against the host's core
// signatures, and canon validates every value at run time.
//
// It imports runner/internal/coremerge only.
//
// # Internal organization
//
//   - component.go: the API (IsComponent, Limits, Plan, Result, Lower,
//     Lift, Error, HostModule, HostName, ReallocExport).
//   - reader.go: the bounded byte reader.
//   - eval.go: the evaluator: scopes, index spaces, the section loop.
//   - sections.go: instances, aliases, canonical definitions, imports,
//     exports, and the finishing of the plan.
//   - types.go: the type forms, read under the type limits.
package component

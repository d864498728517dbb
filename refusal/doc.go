// Package refusal is the vocabulary every refusal of the node is made of:
// platform codes, stable reasons, scopes and dimensions as small integer
// enums whose String is the exact wire name, the Refusal value that holds
// one of each, the outcome kinds of an executed activation, and the one
// mapping of a refusal to its HTTP status, problem type and title
// (Refusal.HTTP).
//
// It sits at the bottom of the module's import graph: it imports nothing of
// the module, and every package may import it. Admission's rejections, the
// scheduler's errors, the runner's outcome kinds and the node's own refusals
// are all built from it, so a wire name is written once, here; no other
// package spells a code, reason, scope or outcome as a string.
//
// The enums' zero values (CodeNone, ReasonNone, ScopeNone, DimNone) are
// "none": their String is "", and a sentinel leaving a field at none
// matches every value of it (Refusal.Matches). Codes, Reasons, Scopes,
// Dimensions and Outcomes enumerate the values for tests and docs; a test
// checks every refusal the module emits against docs/api.md's refusal
// tables, in both directions.
//
// # Internal organization
//
//   - vocab.go: Code, Reason, Scope and Dimension, their wire names and
//     their enumeration.
//   - outcome.go: Outcome, the outcome kinds (Latent-Outcome), and the
//     refusal of each failed one.
//   - refusal.go: the Refusal value, Internal, sentinel matching, and HTTP:
//     the status, problem type and title of a refusal.
package refusal

// Package coremerge merges core module instances into one core module:
// given a Plan (the modules in instantiation order, what each import is
// bound to, the merged module's exports), Merge renumbers every index
// space (types, functions, tables, memories, globals, element and data
// segments), replaces each import bound to another module's export by
// that item, keeps host imports as the merged module's only imports,
// and chains the modules' start functions, in order, into one
// synthesized start. The result is an ordinary core module, so the
// node's fuel rewriter, compile cache and cell pool apply to it as to
// any other.
//
// The plan comes from a tenant's component: Merge validates what it
// reads (section bounds, indices, import kinds and types, a single
// memory, cycles in import bindings) and refuses with ErrInvalid or,
// for a construct it does not handle, ErrUnsupported; it never panics.
// Instructions are rewritten by walking every body: index immediates are
// mapped, everything else is copied.
//
// It imports nothing of the module.
//
// # Internal organization
//
//   - plan.go: Plan, Ref, Export.
//   - merge.go: Merge, binding imports and numbering the index spaces.
//   - decode.go: the section-level decoder of one module, the byte reader
//     and writer, the errors.
//   - encode.go: the merged module's sections, constant expressions and
//     segments.
//   - body.go: the instruction walk of a function body.
package coremerge

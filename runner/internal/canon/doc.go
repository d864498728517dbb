// Package canon is the component model's canonical ABI as the wasi-http
// host needs it: value types (Type and its constructors), their layout in
// linear memory and their flattening into core values (Size, Align, Flat,
// Signature), and the four directions a call's values cross the boundary:
// LiftArgs and LowerResults for a host function a guest calls,
// LowerArgs and LiftResults for a guest function the host calls, built on
// Load and Store.
//
// Every value lifted from a guest is a claim: Load checks each pointer,
// length and alignment against the memory, each string's encoding (UTF-8,
// UTF-16, latin1+UTF-16), each char, each discriminant, and charges what
// it allocates to the Options' Budget. A lie is an error wrapping ErrTrap,
// which the runner reports as that activation's trap; nothing a guest
// writes makes canon panic or allocate past the budget. Handles are
// indices into a Table, bounded in live entries, typed by resource, with
// borrows counted so that a lent handle cannot be dropped.
//
// Go values: bool; int64 for signed and uint64 for unsigned integers;
// float32 and float64; rune; string; []byte for list<u8> and []any for
// other lists, records and tuples; Case for variants, options and
// results; uint32 for enums, flags and handles.
//
// It imports nothing of the module but wazero's api (for core types).
//
// # Internal organization
//
//   - types.go: Kind, Type and its constructors, layout and flattening,
//     Signature, ErrTrap.
//   - abi.go: Options, Memory, Load and the string and list loaders.
//   - store.go: Store, flat lifting and lowering, and the four call
//     directions.
//   - table.go: Table, the handle table.
package canon

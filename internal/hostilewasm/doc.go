// Package hostilewasm encodes WebAssembly modules in the binary format and
// generates the modules a hostile tenant deploys: wrong WASI import
// signatures, modules whose instantiation fails, compile bombs (deep nesting,
// huge bodies, many locals, large modules), large data segments, stack bombs,
// huge table.grow and memory.fill operands; and wasi:http components whose
// handler lies to the canonical ABI (component.go: LyingComponent).
//
// The encoder covers only what the generators need: function types, function
// imports, functions with locals, one funcref table, one memory, exports, a
// start function and active data segments at constant offsets. Every
// generated module is valid WebAssembly unless its documentation says
// otherwise; the package's tests check that with wazero's validator.
package hostilewasm

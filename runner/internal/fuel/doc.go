// Package fuel rewrites a WebAssembly module so that it meters its own
// execution: it spends fuel from a global as it runs, calls the host when
// the fuel runs out, asks the host before growing memory, and bounds its call
// depth. wazero has no metering of its own (see
// shared/research/wazero-metering.md); this rewrite is how the runner bounds
// CPU, enforces deadlines without WithCloseOnContextDone, gives the Go GC a
// safe point in long guest loops, and reports memory and depth limits as
// typed errors.
//
// Non-goals: this package runs nothing. The host side (budgets, slices,
// deadlines, the page limit, classification of outcomes) belongs to the
// runner; the tests hold a small stand-in.
//
// # Contract with the host
//
// The instrumented module imports three functions from module
// ImportModule ("latent_fuel") and exports one global:
//
//   - FuelExport ("__latent_fuel"), a mutable i64: the fuel the guest may
//     still spend. It starts at 0. Outside a charge it is never negative.
//   - TickName, func () -> (): called right after a charge made the global
//     negative. The host must add the next slice of the activation's budget
//     to the global (global += slice, repeatedly while it is negative: one
//     bulk charge can exceed a slice), check its context (deadline,
//     cancellation), and trap — panic with a typed error — when the budget
//     is spent or the context is done. It must never set the global to a
//     value unrelated to what it handed out, or the accounting is lost.
//     Fuel used = handed out - max(global, 0).
//   - GrowName, func (delta i32) -> (i32): replaces every memory.grow. The
//     host grows memory 0 by delta pages if the activation may have them,
//     returns the old size in pages or -1 (0xffffffff), and records a
//     refusal so the outcome can say memory-exhausted. It may charge fuel
//     for the pages by subtracting from the global (then tick itself if the
//     global went negative).
//   - DepthName, func () -> (): called when a call would exceed
//     Config.MaxCallDepth; the host traps with a typed error.
//
// Host functions that do work proportional to their input (WASI writes,
// reads) charge it the same way: subtract from the global and tick when it
// goes negative. Because the first charge of any activation makes the
// global negative, the host needs no set-up: the first tick hands out the
// first slice. The global (and the call-depth global) must start at their
// initial values in every instance, which a fresh instantiation guarantees.
//
// # Regions and costs
//
// Each operator costs what wasmtime's operator_cost charges: 0 for nop,
// drop, block, loop, end, else, unreachable and return, 1 for every other
// operator (call and call_indirect included; the callee pays for its own
// body). A function entry also costs its declared locals / 8 (zeroing them
// is work).
//
// A region is a straight-line run of code that is entered only at its top.
// Regions start at function entry, at each loop body (a branch target), at
// the start of each if and else arm, after the end of an if or a loop, and
// after the end of a block that a reachable branch targets (a merge point). br,
// br_table, return and unreachable end a region; the code after them up to
// the next end or else is unreachable and charged nothing. A br_if that
// branches back to a loop ends its region too (the code after it runs only
// once the loop is done). Any other br_if does not: its fall-through
// continues the region, so a taken forward br_if has already paid for the
// rest of its region, and a while loop (br_if out at the top, br back at
// the bottom) costs one check per iteration. The end of a block that no
// branch targets is reached only by falling through, so it continues the
// current region. The end of a loop is too, but the region before it may
// run once per iteration (a do-while's closing br_if), so the code after a
// loop starts a region of its own.
//
// At the top of each region the rewrite inserts
//
//	global.get F; i64.const C; i64.sub; global.set F
//	global.get F; i64.const 0; i64.lt_s; if; call $tick; end
//
// where C is the region's static cost, so a region is paid for before any of
// it runs and an exhausted budget stops the guest before the work.
// Regions of cost 0 get nothing. The function entry's charge shares its
// branch with the call-depth check (see below).
//
// Hoisting. Exactly one arm of an if/else runs once the if's region has
// run. So the dearer arm's first region is charged with the if's region, and
// the other arm starts with a refund of the difference (global.get F;
// i64.const D; i64.add; global.set F — adding cannot make the global
// negative, so there is no check). Nested if/else hoist outward. On every
// path the total is unchanged; what changes is that the hoisted part is
// paid before the if (and by a br_if that leaves the region early). This
// halves the checks of small recursive functions: metered fib(25) runs at
// about 1.2× the uninstrumented time instead of 1.4×.
//
// Dynamic costs. memory.fill, memory.copy, memory.init, table.fill,
// table.copy and table.init also cost len >> BulkShift (len/64, len read as
// unsigned), and table.grow costs its delta, charged just before the
// operation runs (with a tick check), through an added i32 scratch local.
// memory.grow becomes call $grow; the host charges for pages.
//
// Exactness. For a given module, input and sequence of host answers the fuel
// used is a pure function: the sum of the costs of the regions entered (with
// the hoisting above) plus the dynamic charges. It does not depend on the
// slice size, the engine or timing (the tests check all three). When the
// guest completes without a trap and no forward br_if leaves a region early,
// it equals the number of cost-1 operators executed plus the dynamic
// charges. When the budget runs out, the guest has used exactly the budget,
// and the region that did not fit has not started. A run that uses F in
// total is always stopped by a budget below F; because hoisted charges are
// paid before their refunds, a budget of exactly F can stop it too, up to the
// pending refunds (the differences between the arms of the if/else it is
// in) before its end.
//
// # Call depth
//
// wazero's compiler grows the native stack far past any memory limit, so
// the rewrite bounds nesting. A second added global (mutable i64, not
// exported; the last global of the module) counts the calls that may still
// be made; it starts at MaxCallDepth - 1. The caller keeps it: before a call
// or call_indirect (to a guest or host function) it is decremented, and
// after the call, before the next control instruction, incremented again; a
// run of calls with no control instruction between them shares one
// decrement and one increment. Every function entry checks it together with
// the fuel, in one branch:
//
//	fuel -= cost
//	if fuel|depth < 0 {
//		if fuel < 0 { tick() }
//		if depth < 0 { depth_exceeded(); unreachable }
//		fuel += cost
//		return self(params...)
//	}
//
// So at most MaxCallDepth counted frames of guest functions are ever on the
// stack, counting frames re-entered through host callbacks, and the exits of
// a function (return, branches to its label, its end) need no
// instrumentation.
//
// Re-entry. After tick at a function's entry, the function does not go on:
// it refunds its entry charge and calls itself with its parameters, which
// charges the entry again (now covered) and runs the body. Fuel is
// unchanged, but the slow path ends in a return instead of joining the fast
// path, and wazero's compiler then keeps the parameters and the fuel global
// in registers on the fast path instead of reloading every value that is
// live across the join: the metered fib fixture (fib(27), median of 101
// paired runs) took 1.31× the uninstrumented time with the join and 1.20×
// with the re-entry. The re-entered frame is not counted,
// so the stack holds at most two frames per counted one. The entry check is
// written as an if whose empty then arm is the fast path, so the compiler
// makes it the fall-through; a tight loop whose function entry only checks
// the depth went from 1.4× to 1.1× with that and the unreachable after
// depth_exceeded (nothing is live across a slow path that does not return). A trap or exit abandons the instance, so a decrement left
// unmatched does not matter. Counting at every entry and uncounting at every
// exit costs each call a second read-modify-write and branch: fib(25) ran
// 1.43× slower than uninstrumented that way, 1.2× this way.
//
// # Renumbering and what else changes
//
// The three imports are appended after the module's own function imports,
// so every defined function's index grows by 3. The rewrite fixes every use:
// call, ref.func, exports, the start function, element segments in all
// eight encodings (function indices and ref.func in element expressions),
// and ref.func in global initializers. Types for the imports are reused if
// the module has them, else appended, so existing type indices stay. The two
// globals are appended after the module's globals, so no global index moves.
// The export of the fuel global is appended.
//
// Custom sections are dropped, except the "name" section, whose module,
// function and local names are kept and renumbered (wazero shows them in
// trap stack traces); its other subsections are dropped. DWARF and other
// custom sections would describe code offsets that no longer hold.
//
// # Validation and refusals
//
// A module is instrumented only if it passes two checks. The package's own
// decoder reads every section and instruction, range-checks every index (an
// out-of-range index in the original must never alias one the rewrite adds)
// and bounds every count and length by the bytes that follow; then wazero's
// interpreter, configured with api.CoreFeaturesV2 and without DWARF,
// compiles the original. The order matters: wazero's decoder allocates
// whatever counts and lengths claim (up to 2^32 items: a 33-byte module made
// it allocate 32 GiB) and validates every declared local (2^28 of them took
// minutes), so it only sees modules the package's decoder accepted whole.
//
// Refused with ErrReserved: imports from "latent_fuel", an export named
// "__latent_fuel". Refused with ErrUnsupported: more than one memory,
// memory64 and table64, shared memory and atomics (threads), tail calls,
// exception handling, typed function references and GC, any opcode or
// encoding the decoder does not know, and modules beyond the JavaScript
// API's implementation limits (50000 locals per function, 1000 parameters,
// 1000000 functions and types, 100000 imports, exports and data segments,
// 65520 br_table labels, ...). Everything else that wazero accepts is
// instrumented. ErrInvalid marks the rest, with the offset of the problem.
//
// # Internal organization
//
//   - fuel.go: the API (Instrument, Config, Result, Info), the reserved names
//     and the sentinel errors.
//   - reader.go: LEB128 and vector primitives (reader, writer).
//   - module.go: section-level decoding, checks and the element-segment
//     encoder; sections the rewrite does not change are kept as bytes.
//   - decode.go, opcodes.go: the instruction decoder with index checks,
//     feature detection and the cost table.
//   - instrument.go: region analysis (analyze), code emission (function) and
//     module assembly (instrument).
//   - names.go: the name section.
//
// # Usage
//
//	res, err := fuel.Instrument(wasm, fuel.Config{MaxCallDepth: 10_000})
//	if err != nil { ... } // errors.Is(err, fuel.ErrUnsupported), ...
//	// res.Info: imports, exports, memory limits, features of the original.
//	// Cache the compiled res.Module under sha256(wasm) + res.Version.
//	// Instantiate a host module "latent_fuel" exporting tick, grow and
//	// depth_exceeded, then the guest; read the "__latent_fuel" global to
//	// account for the fuel left.
package fuel

// Package fuel rewrites a WebAssembly module so that it meters its own
// execution: it spends fuel from a global as it runs, calls the host when
// the fuel runs out, asks the host before growing memory, and bounds its call
// stack in bytes. wazero has no metering of its own; this rewrite is how the
// runner bounds CPU, enforces deadlines without WithCloseOnContextDone, gives
// the Go GC a safe point in long guest loops, bounds the Go heap wazero's
// compiler uses for the guest's call stack, and reports memory and stack
// limits as typed errors. Before any of that, the decoder enforces the
// deploy limits (Limits), which bound what compiling a module can cost.
//
// Non-goals: this package runs nothing. The host side (budgets, slices,
// deadlines, the page limit, classification of outcomes) belongs to the
// runner; the tests hold a small stand-in.
//
// # Contract with the host
//
// The instrumented module imports three functions from module
// ImportModule ("latent_fuel") and exports three globals, the module's own
// mutable globals and, if the original has a start function, that
// function:
//
//   - FuelExport ("__latent_fuel"), a mutable i64: the fuel the guest may
//     still spend. It starts at 0. It is negative when the guest has spent
//     more than it was handed since its last check (see Check points):
//     never when a host function is called, but possibly when the guest
//     traps.
//   - TickName, func () -> (): called at a check point that found the
//     global negative. The host must add the next slice of the
//     activation's budget to the global (global += slice, repeatedly while
//     it is negative: the charges since the last check and a bulk charge
//     can exceed a slice), check its context (deadline, cancellation), and
//     trap — panic with a typed error — when the budget is spent or the
//     context is done. It must never set the global to a value unrelated to
//     what it handed out, or the accounting is lost. Fuel used is handed
//     out minus the global, which exceeds what was handed out while the
//     global is negative. When the guest stops with the global negative (a trap after
//     unchecked code), the host settles as tick would: it hands out slices
//     while the global is negative, and if the budget cannot cover the
//     debt the activation ran out of fuel before it stopped.
//   - GrowName, func (delta i32) -> (i32): replaces every memory.grow. The
//     host grows memory 0 by delta pages if the activation may have them,
//     returns the old size in pages or -1 (0xffffffff), and records a
//     refusal so the outcome can say memory-exhausted. It may charge fuel
//     for the pages by subtracting from the global (then tick itself if the
//     global went negative).
//   - DepthName, func () -> (): called when a function is entered with the
//     stack global negative (the call stack budget is spent); the host traps
//     with a typed error.
//   - StackExport ("__latent_stack"), a mutable i64: bytes of call stack the
//     guest may still take (see Call stack). StackLowExport
//     ("__latent_stack_low"), a mutable i64: the lowest value the stack
//     global has had at a function entry. Both start at
//     Config.MaxStackBytes; the host may set both (to the same value) after
//     instantiation and before the first call, and may lower both later
//     (stack -= d; low = min(low, stack)) to give stack budget to something
//     else, such as memory. Neither may ever be set below 0. The budget used
//     at the peak is initial - low.
//   - StartExport ("__latent_start"): the original's start function. The
//     instrumented module has no start section, so instantiating it runs no
//     guest code; the host sets the stack globals, then calls this export,
//     then the entry point.
//   - GlobalExport(i) ("__latent_global_<i>", i in decimal): every mutable
//     global of the module other than the three above, imported or
//     defined, under its index in the instrumented module's global index
//     space (the same index as in the original; Info.MutableGlobals lists
//     them, ascending). A global the module exports itself is exported
//     under this name too. They let a host that keeps an instance's state
//     (a snapshot after initialisation) read the globals after
//     initialisation and restore them before each activation; immutable
//     globals never change and are not exported. Info.MutatesTables and
//     Info.PassiveSegments tell such a host whether the code can change
//     what these exports and the memory do not cover: a table or an
//     element segment (table.set, table.grow, table.fill, table.copy,
//     table.init, elem.drop), or a data segment (memory.init, data.drop,
//     or a passive or declarative segment at all). The three latent
//     globals are not among them: the host sets those itself.
//
// Host functions that do work proportional to their input (WASI writes,
// reads) charge it the same way: subtract from the global and tick when it
// goes negative. A host function finds the global non-negative when it is
// called: every call to an imported function is a check point. Because the first charge of any activation makes the
// global negative, the host needs no set-up: the first tick hands out the
// first slice. The globals must start at their initial values in every
// instance, which a fresh instantiation guarantees.
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
// At the top of each region the rewrite inserts its charge
//
//	global.get F; i64.const C; i64.sub; global.set F
//
// where C is the region's static cost, so a region is paid for before any
// of it runs, and, if the region is a check point, the check
//
//	global.get F; i64.const 0; i64.lt_s; if; call $tick; end
//
// Regions of cost 0 get no charge. The function entry's charge shares its
// branch with the stack check (see below).
//
// Check points. As in wasmtime, which subtracts the cost of every basic
// block but checks only at function entries and loop headers, only the
// regions after which unbounded or visible work can follow check the fuel;
// the others (most of them: the merge points after Go's br_table dispatch
// blocks, the code after ifs and blocks) only subtract. The check points:
//
//   - every function entry, whatever its cost (the caller may have left
//     the fuel negative);
//   - every region that branches to a loop (br, br_if or br_table with a
//     loop label): every iteration of every loop passes a check; except a
//     forward jump through a dispatch loop (below);
//   - every region that calls an imported function, calls through a table
//     (it may hold an imported function) or grows memory (call $grow): the
//     host never runs with the fuel negative, so nothing the guest does
//     after its budget is gone is visible outside, and the host's own
//     charges find what they expect;
//   - the dynamic charges of bulk operations and table.grow;
//   - in a function with a region that is not a check point, every region
//     that can leave it (return, a branch to the function's label, the
//     end): a function never returns fuel it has not checked.
//
// A check that would find nothing new is left out: a refund region or one
// of cost 0 entered only right after a check (an if's arm, a loop header).
// That is judged on the final charges, once loop headers were moved and if
// arms hoisted: both charge the region before, which may then end
// unchecked although it was empty when the later region opened.
//
// The bound. Between a check that passed and the next check the guest runs
// only regions of one function body that are not check points, each at
// most once (a second run needs a back edge, whose region checks; a call
// enters a callee whose entry checks; a return leaves through a check).
// So when a check finds the budget spent, the guest owes at most the
// charges of one body's unchecked regions plus the charge that check
// follows: Info.MaxDebt, dynamic charges aside (a bulk charge is checked
// at once, as before).
//
// Dispatch loops. Go's compiler gives every function that jumps the same
// shape: a loop whose body opens k blocks and then, with nothing before
// them, reads a local and branches on it with a br_table; the code after
// the end of the d-th innermost block is code block d, and every jump,
// forward or back, is "i32.const N; local.set $pc; br $loop". Such a br
// is a back edge of the wasm loop but, when N selects a code block after
// the one the br is in, a forward jump of the program: code blocks follow
// one another in the body, so a run that only falls through and jumps
// forward passes each region of the loop at most once, and any repetition
// needs a jump to the same or an earlier block, which stays a check point.
// The forward jumps are therefore not check points. The loop's header
// (the dispatch) runs once per jump, so this holds only when its charge is
// moved onto the jumps (see Loop headers); otherwise the forward jumps
// check after all. The bound below and MaxDebt are unchanged in form; for
// the Go router reactor this removes 40 % of the checks an activation
// executes.
//
// Hoisting. Exactly one arm of an if/else runs once the if's region has
// run. So the dearer arm's first region is charged with the if's region, and
// the other arm starts with a refund of the difference (global.get F;
// i64.const D; i64.add; global.set F — adding cannot make the global
// negative, so there is no check). Nested if/else hoist outward. On every
// path the total is unchanged; what changes is that the hoisted part is
// paid before the if (and by a br_if that leaves the region early). This
// halves the checks of small recursive functions (RATIONALE.md says what it
// saves).
//
// Loop headers. A loop that no br_if or br_table targets is entered only by
// falling into it and by br instructions, each the last instruction of its
// region. Then the loop's first region is charged with the region that falls
// into the loop and with each region that branches to it, instead of at its
// top, where it needs no check (unless it branches to the loop itself: then
// it stays). Every iteration still passes a check, in the region that
// branches back. No refund is involved: every path pays what it ran. Go's
// compiler dispatches every jump inside a function through such a loop (br
// to it; br_table on the target at its top), so this saves a check per jump.
//
// Dynamic costs. memory.fill, memory.copy, memory.init, table.fill,
// table.copy and table.init also cost min(len, size) >> BulkShift (len read
// as unsigned; size is the memory's current size in bytes, or the current
// size of the table the operation writes), charged just before the
// operation runs (with a tick check), through an added i32 scratch local.
// Only the part that can be in bounds is charged: a huge length traps out of
// bounds (the operation's own trap) rather than exhausting a small budget.
// table.grow costs its delta only when it succeeds, charged right after it
// (with a tick check) through two scratch locals; a refused grow (-1) did no
// work and costs its static 1. memory.grow becomes call $grow; the host
// charges for pages.
//
// Exactness. For a given module, input and sequence of host answers the fuel
// used is a pure function: the sum of the costs of the regions entered (with
// the hoisting above) plus the dynamic charges. It does not depend on the
// slice size, the engine or timing (the tests check all three). When the
// guest completes without a trap and no forward br_if leaves a region early,
// it equals the number of cost-1 operators executed plus the dynamic
// charges. Where checks are placed changes none of this.
//
// Exhaustion is weaker than charging every region with a check would make
// it. The budget runs out at the first check that finds the charges so far
// above the budget: a function of module, input, host answers and budget
// alone (not of the slice size, which only decides how often tick runs).
// By then the guest may have run code past the end of its budget, up to
// Info.MaxDebt of it: the regions after its last passed check, which
// compute and write to its own memory and globals but call no host
// function, grow no memory and start no loop iteration. The region at the
// failing check has been paid for but has not started. The fuel used is
// then above the budget by the debt (0 < debt ≤ MaxDebt); the runner bills
// the budget. A run that uses F in total is always stopped by a budget
// below F (the exit of the function that ran unchecked code, or the host's
// settlement after a trap, finds the debt at the latest); because hoisted
// charges are paid before their refunds, a budget of exactly F can stop it
// too, up to the pending refunds (the differences between the arms of the
// if/else it is in) before its end.
//
// # Call stack
//
// wazero's compiler runs the guest on a call stack that is a Go []byte:
// when a function's entry finds too little room, it allocates a new slice
// of twice the length plus the frame and copies the old one (up to about
// 50 MB and more, far past any memory grant). So the rewrite bounds the
// stack in bytes. The stack global holds the bytes the guest may still
// take. The caller keeps it: before a call or call_indirect (to a guest or
// host function) it subtracts its own frame cost, and after the call,
// before the next control instruction, adds it back; a run of calls with
// no control instruction between them shares one bracket. Every function
// entry checks the stack together with the fuel and the low-water mark, in
// one branch:
//
//	fuel -= cost
//	if fuel|(stack-low) < 0 {
//		if stack < 0 { depth_exceeded(); unreachable }
//		if stack < low { low = stack }
//		if fuel < 0 {
//			tick()
//			fuel += cost
//			low = min(low, max(stack-frame, 0))
//			return self(params...)
//		}
//	}
//
// (The fuel test is made even when the entry costs nothing: the caller may
// have left the fuel negative.) The host keeps both globals ≥ 0 and low ≤
// stack outside a call bracket,
// so stack-low ≥ 0 implies stack ≥ 0. The branch is taken only when the
// fuel ran out or the stack reached a new low; the path that only moves
// the mark makes no call and joins the fast path. The exits of a function
// (return, branches to its label, its end) need no instrumentation.
//
// Frame cost. FrameCost(scalars, vectors) = FrameGrowth × (FrameFixed +
// 8·scalars + 16·vectors), with FrameFixed = 256 (the callee-saved
// registers, return address, frame pointer and stack-check slots of a
// compiled frame on amd64) and FrameGrowth = 4. The instrumenter counts for
// each function, as scalars or vectors by type: its parameters, declared
// locals, scratch locals and results; every value its body defines (one per
// result of each instruction other than local.get and local.tee; the
// engine gives each value it spills a stack slot of its own, so this is
// per definition, not per live value); a block parameter per local.set or
// local.tee and enclosing block, but at most one per block and local the
// body writes; the parameters and results of each block type; and, as
// vectors, the parameters and results of its largest call (arguments that
// do not fit in registers). FrameGrowth covers the doubling: over a descent
// the slices allocated sum to at most about 4 × the bytes in use. The tests
// check, for frames with many live values, v128 values, parameters, locals
// and values spilled across a sequence of calls, that the Go heap allocated
// for the stack stays below the bytes charged (7-72% of them at depths of
// 1,000 and more), and that a recursion keeping values live across its
// calls with a 4 MiB budget traps having allocated under 4 MiB.
// Info.MaxFrameBytes is the largest frame cost of the module: the innermost
// frame is never charged (it calls nothing), so the stack the guest can use
// is bounded by the budget plus MaxFrameBytes.
//
// Re-entry. After tick at a function's entry, the function does not go on:
// it refunds its entry charge and calls itself with its parameters, which
// charges the entry again (now covered) and runs the body. Fuel is
// unchanged, but the slow path ends in a return instead of joining the fast
// path, so wazero's compiler keeps the parameters and the fuel global in
// registers on the fast path instead of reloading every value that is live
// across the join. The re-entered frame is not charged to the stack
// global: charging it would make later entries, and so traps, depend on
// where ticks happened, which depends on the slice size. It lowers the
// low-water mark (to at least 0), so the host's view of the peak includes
// it; between ticks (one per slice of the budget) each entry adds at most
// one such frame. The entry check is written as an if whose empty then arm
// is the fast path, so the compiler makes it the fall-through, and
// depth_exceeded is followed by unreachable, so nothing is live across a
// slow path that does not return. RATIONALE.md gives the measurements. A
// trap or exit abandons the instance, so a bracket left open does not
// matter.
//
// # Renumbering and what else changes
//
// The three imports are appended after the module's own function imports,
// so every defined function's index grows by 3. The rewrite fixes every use:
// call, ref.func, exports, the start function, element segments in all
// eight encodings (function indices and ref.func in element expressions),
// and ref.func in global initializers. Types for the imports are reused if
// the module has them, else appended, so existing type indices stay. The
// three globals (fuel, stack, low-water mark) are appended after the
// module's globals, so no global index moves. Their exports, the start
// function's and the mutable globals' (GlobalExport) are appended, in that
// order; the start section is dropped. The exports add bytes but no code. A defined table
// whose maximum is absent or above Limits.TableElements gets that maximum
// (table.grow beyond a table's maximum returns -1, for any maximum).
// Info.TableBytes (8 bytes per element of every table's largest size) and
// Info.TableMinElements (the elements allocated at instantiation) let the
// host charge the tables, which live on the Go heap outside the memory.
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
// out-of-range index in the original must never alias one the rewrite adds),
// bounds every count and length by the bytes that follow and enforces the
// deploy limits; then wazero's interpreter, configured with
// api.CoreFeaturesV2 and without DWARF, compiles the original. The order
// matters: wazero's decoder allocates whatever counts and lengths claim (up
// to 2^32 items: a 33-byte module made it allocate 32 GiB) and validates
// every declared local (2^28 of them took minutes), so it only sees modules
// the package's decoder accepted whole.
//
// Refused with ErrLimit (wrapping a *LimitError with the key
// "deploy_limits.<key>", the limit and the value found): a module over one
// of the Limits. Each is checked before anything is allocated for the
// counted items: the module's size first; counts of types, imports,
// functions, tables, globals and exports as their vectors start; the
// running sum of the types' parameters and results (wazero keeps every
// distinct signature in a store-wide map that never shrinks); a table's
// minimum;
// each body's size and locals and the running sums of body bytes, locals and
// data bytes as they are read; and the nesting of blocks, loops and ifs
// (the deepest control stack of one body) and the loop local work while
// the bodies are analyzed, before wazero sees the module.
//
// The defaults (DefaultLimits) keep compiling a module with wazero's
// compiler to about 3 s and 650 MB at worst on the adversarial modules of
// the stress tests (build tag stress: deepest nesting at the largest body,
// largest bodies of cheap instructions, most locals, most functions, values
// live across calls, the whole code size). The dearest per byte is the
// deepest nesting of loops around code that uses many locals: the compiler
// may give every loop a block parameter per local used inside, at a cost
// that grows with their square (1024 nested loops using 10,000 locals took
// 175 s and 1.4 GB to compile). LoopLocalWork bounds that sum of squares
// for the whole module; nesting depth and locals alone cannot without
// refusing ordinary code (Go's output nests blocks 500 deep).
//
// Refused with ErrReserved: imports from "latent_fuel", an export named
// "__latent_fuel", "__latent_stack", "__latent_stack_low" or
// "__latent_start", or an export whose name begins with "__latent_global_".
// Refused with ErrUnsupported: more than one memory, memory64 and table64,
// shared memory and atomics (threads), tail calls,
// exception handling, typed function references and GC, any opcode or
// encoding the decoder does not know, and modules beyond the JavaScript
// API's implementation limits (50000 locals per function, 1000 parameters,
// 1000000 functions and types, 100000 imports, exports and data segments,
// 65520 br_table labels, ...). Everything else that wazero accepts is
// instrumented. ErrInvalid marks the rest, with the offset of the problem.
//
// # Internal organization
//
//   - fuel.go: the API (Instrument, Config, Limits, Result, Info,
//     FrameCost), the reserved names and the sentinel errors.
//   - reader.go: the reader, which keeps its first error (LEB128, bytes,
//     names, vector lengths, value and reference types, limits, section
//     headers), and the writer.
//   - module.go: module and decoder (section-level decoding, checks) and the element-segment
//     encoder; sections the rewrite does not change are kept as bytes.
//   - decode.go, opcodes.go: the instruction decoder with index checks,
//     feature detection and the cost table.
//   - instrument.go: region analysis and frame estimate (analyze), code
//     emission (function) and module assembly (instrument).
//   - names.go: the name section.
//
// # Usage
//
//	res, err := fuel.Instrument(wasm, fuel.Config{Limits: limits})
//	if err != nil { ... } // errors.Is(err, fuel.ErrLimit), ...
//	// res.Info: imports (with types), exports, memory limits, features,
//	// data and element sizes, the largest frame cost, table sizes.
//	// Cache the compiled res.Module under sha256(wasm) + res.Version.
//	// Instantiate a host module "latent_fuel" exporting tick, grow and
//	// depth_exceeded, then the guest; set "__latent_stack" and
//	// "__latent_stack_low" to the stack budget; call "__latent_start" if
//	// exported, then the entry; read "__latent_fuel" to account for the
//	// fuel left (settling a negative value against the budget) and
//	// "__latent_stack_low" for the stack peak.
//	// To snapshot an instance, read fuel.GlobalExport(i) for each i in
//	// res.Info.MutableGlobals after initialisation and set them back
//	// before each activation.
package fuel

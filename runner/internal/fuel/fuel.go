package fuel

// The package's API (Instrument, Config, Limits, Result, Info, FrameCost),
// the reserved names and the sentinel errors.

import (
	"context"
	"math"
	"strconv"
	"strings"

	"github.com/cockroachdb/errors"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
)

// Names the instrumented module uses to talk to its host. Modules that use
// them themselves are refused with ErrReserved.
const (
	// ImportModule is the module name of every import the instrumenter adds.
	ImportModule = "latent_fuel"
	// FuelExport is the exported mutable i64 global holding the fuel the guest
	// may still spend before it calls TickName.
	FuelExport = "__latent_fuel"
	// StackExport is the exported mutable i64 global holding the bytes of
	// call stack the guest may still take (see FrameCost). It starts at
	// Config.MaxStackBytes; the host may set it before the first call.
	StackExport = "__latent_stack"
	// StackLowExport is the exported mutable i64 global holding the lowest
	// value StackExport has had at a function entry (the low-water mark of
	// the stack budget). It starts at Config.MaxStackBytes; the host sets it
	// together with StackExport.
	StackLowExport = "__latent_stack_low"
	// StartExport names the export of the original module's start function.
	// The instrumented module has no start section: the host calls this
	// export after instantiating (and after setting the stack globals).
	StartExport = "__latent_start"
	// GlobalExportPrefix begins the name under which every mutable global
	// of the instrumented module other than the three above is exported:
	// GlobalExport(i), the prefix followed by the global's index in decimal
	// (see Info.MutableGlobals). A host that snapshots an instance reads
	// and restores the guest's globals through them. Exports of the
	// original module whose names begin with it are refused (ErrReserved).
	GlobalExportPrefix = "__latent_global_"
	// TickName is the slow path, func () -> (): called when the fuel global
	// went negative. The host adds the next slice of the budget to the
	// global, checks its context, and traps when the budget is spent.
	TickName = "tick"
	// GrowName replaces memory.grow, func (delta i32) -> (old pages i32): the
	// host grows memory 0 by delta pages within what it grants and returns
	// the old size in pages, or -1 (and records the refusal).
	GrowName = "grow"
	// DepthName is func () -> (), called when a function is entered with the
	// stack global negative: the call stack budget is spent. The host traps.
	DepthName = "depth_exceeded"
)

// reservedExports are the export names the instrumenter adds, besides
// those beginning with GlobalExportPrefix.
var reservedExports = map[string]bool{
	FuelExport: true, StackExport: true, StackLowExport: true, StartExport: true,
}

// reservedExport reports whether an export of the original module named
// name is refused: it is or could be one the instrumenter adds.
func reservedExport(name string) bool {
	return reservedExports[name] || strings.HasPrefix(name, GlobalExportPrefix)
}

// GlobalExport is the name of the export of global i of the instrumented
// module: GlobalExportPrefix followed by i in decimal, e.g.
// "__latent_global_3".
func GlobalExport(i uint32) string {
	return GlobalExportPrefix + strconv.FormatUint(uint64(i), 10)
}

// DefaultMaxStackBytes is the initial value of the stack globals when
// Config.MaxStackBytes is zero.
const DefaultMaxStackBytes = 1 << 20

// Version identifies the instrumentation scheme: the rewrite, the cost table
// and the bulk-operation charge. It changes whenever the output or the fuel
// counts for the same input could change. Result.Version adds the Config.
const Version = "latent-fuel/8 cost=wasmtime-operator-cost bulk=min(len,size)/64 table.grow=after stack=bytes/frame-v1 start=export globals=export checks=entry,back-edge(not dispatch-forward),host,exit"

// BulkShift is the dynamic charge of bulk memory and table operations:
// memory.fill, memory.copy, memory.init, table.fill, table.copy and
// table.init cost min(len, size)>>BulkShift units on top of their static 1,
// where size is the memory's current size in bytes or the table's current
// number of elements: only the part that can be in bounds is charged.
const BulkShift = 6

// Errors. Every error Instrument returns for a module is marked with one of
// them (errors.Is); only an out-of-range Config is not.
var (
	// ErrInvalid marks a module that is not valid WebAssembly.
	ErrInvalid = errors.New("fuel: invalid module")
	// ErrUnsupported marks a valid module that uses something the
	// instrumenter refuses: multi-memory, memory64, shared memory (threads),
	// tail calls, exception handling, or a construct it does not know.
	ErrUnsupported = errors.New("fuel: unsupported module")
	// ErrReserved marks a module that imports from ImportModule or exports
	// one of the names the instrumenter adds (FuelExport, StackExport,
	// StackLowExport, StartExport) or a name beginning with
	// GlobalExportPrefix.
	ErrReserved = errors.New("fuel: reserved name")
	// ErrLimit marks a module over one of the deploy limits (Limits). The
	// error wraps a *LimitError naming the limit.
	ErrLimit = errors.New("fuel: module exceeds a deploy limit")
)

// Config tunes the rewrite. The zero value is valid.
type Config struct {
	// MaxStackBytes is the initial value of the stack globals (StackExport,
	// StackLowExport): the call stack budget in bytes of FrameCost when the
	// host does not set them. Zero means DefaultMaxStackBytes; at most
	// math.MaxInt64/2.
	MaxStackBytes uint64
	// Limits are the deploy limits; zero fields take DefaultLimits' values.
	Limits Limits

	// countChecks (tests only) adds two exported i64 globals, checksExport
	// and chargesExport, that count the fuel checks (including function
	// entries and dynamic charges) and the region charges the guest
	// executes.
	countChecks bool
}

// The counters' exports (Config.countChecks).
const (
	checksExport  = "__latent_checks"
	chargesExport = "__latent_charges"
)

// Limits bound what a module may declare (the deploy limits). Every limit is
// checked by the instrumenter's own decoder, before any allocation sized by
// the module's counts and before wazero sees the module. Zero fields mean
// the DefaultLimits value.
type Limits struct {
	ModuleBytes       uint64 // the whole binary
	Functions         uint64 // defined functions
	FunctionLocals    uint64 // declared locals of one function, parameters excluded
	TotalLocals       uint64 // declared locals, summed over all functions
	FunctionBodyBytes uint64 // one code-section body
	CodeBytes         uint64 // all code-section bodies
	NestingDepth      uint64 // block, loop and if nesting inside one body
	DataBytes         uint64 // data segment payloads, summed
	Imports           uint64 // imports of every kind
	Exports           uint64
	Tables            uint64 // imported and defined
	TableElements     uint64 // a table's minimum; a defined table's maximum is clamped to it
	Globals           uint64 // imported and defined
	// Types bounds the entries of the type section and TypeParams the sum,
	// over those entries, of their parameters and results. wazero keeps
	// every distinct function signature it has compiled in a map of its
	// store that never shrinks, so the signatures one module can add are
	// bounded; a single type has at most 1000 parameters and 1000 results
	// in any case (unsupported beyond).
	Types      uint64
	TypeParams uint64
	// LoopLocalWork bounds the sum, over every loop, if and branch-targeted
	// block of the module, of the square of the local.get, local.set and
	// local.tee inside it (at most its function's locals). wazero's
	// compiler may give each such merge point a block parameter per local
	// used inside, at a cost that grows with their square: about 1.3-2 ns
	// per unit (1024 nested loops using 1,000 locals, 10^9 units, took
	// 1.3 s to compile, 2 s under load). Its configuration key is
	// "deploy_limits.loop_local_work"; zero takes the default, as for
	// every field.
	LoopLocalWork uint64
}

// DefaultLimits returns the default deploy limits.
func DefaultLimits() Limits {
	return Limits{
		ModuleBytes:       16 << 20,
		Functions:         50_000,
		FunctionLocals:    10_000,
		TotalLocals:       1_000_000,
		FunctionBodyBytes: 512 << 10,
		CodeBytes:         16 << 20,
		NestingDepth:      1_024,
		DataBytes:         16 << 20,
		Imports:           1_000,
		Exports:           10_000,
		Tables:            8,
		TableElements:     200_000,
		Globals:           10_000,
		Types:             10_000,
		TypeParams:        100_000,
		LoopLocalWork:     1_000_000_000,
	}
}

// withDefaults returns l with zero fields replaced by the defaults.
func (l Limits) withDefaults() Limits {
	d := DefaultLimits()
	for _, f := range []struct{ v, d *uint64 }{
		{&l.ModuleBytes, &d.ModuleBytes}, {&l.Functions, &d.Functions},
		{&l.FunctionLocals, &d.FunctionLocals}, {&l.TotalLocals, &d.TotalLocals},
		{&l.FunctionBodyBytes, &d.FunctionBodyBytes}, {&l.CodeBytes, &d.CodeBytes},
		{&l.NestingDepth, &d.NestingDepth}, {&l.DataBytes, &d.DataBytes},
		{&l.Imports, &d.Imports}, {&l.Exports, &d.Exports}, {&l.Tables, &d.Tables},
		{&l.TableElements, &d.TableElements}, {&l.Globals, &d.Globals},
		{&l.Types, &d.Types}, {&l.TypeParams, &d.TypeParams},
		{&l.LoopLocalWork, &d.LoopLocalWork},
	} {
		if *f.v == 0 {
			*f.v = *f.d
		}
	}
	return l
}

func (l Limits) String() string {
	return "module_bytes=" + strconv.FormatUint(l.ModuleBytes, 10) +
		" functions=" + strconv.FormatUint(l.Functions, 10) +
		" function_locals=" + strconv.FormatUint(l.FunctionLocals, 10) +
		" total_locals=" + strconv.FormatUint(l.TotalLocals, 10) +
		" function_body_bytes=" + strconv.FormatUint(l.FunctionBodyBytes, 10) +
		" code_bytes=" + strconv.FormatUint(l.CodeBytes, 10) +
		" nesting_depth=" + strconv.FormatUint(l.NestingDepth, 10) +
		" data_bytes=" + strconv.FormatUint(l.DataBytes, 10) +
		" imports=" + strconv.FormatUint(l.Imports, 10) +
		" exports=" + strconv.FormatUint(l.Exports, 10) +
		" tables=" + strconv.FormatUint(l.Tables, 10) +
		" table_elements=" + strconv.FormatUint(l.TableElements, 10) +
		" globals=" + strconv.FormatUint(l.Globals, 10) +
		" types=" + strconv.FormatUint(l.Types, 10) +
		" type_params=" + strconv.FormatUint(l.TypeParams, 10) +
		" loop_local_work=" + strconv.FormatUint(l.LoopLocalWork, 10)
}

// LimitError is the structured form of a deploy-limit refusal (errors.As).
// Key is "deploy_limits.<key>", the configuration key of the limit.
type LimitError struct {
	Key    string
	Limit  uint64
	Actual uint64
	// What describes the offending construct, e.g. "function 3 declares
	// 50000 locals".
	What string
}

func (e *LimitError) Error() string {
	return e.What + "; " + e.Key + " is " + strconv.FormatUint(e.Limit, 10)
}

// limitError returns a *LimitError marked ErrLimit.
func limitError(key string, limit, actual uint64, what string) error {
	return errors.Mark(&LimitError{Key: "deploy_limits." + key, Limit: limit, Actual: actual, What: what}, ErrLimit)
}

// Frame cost constants (see FrameCost and the package documentation).
const (
	// FrameFixed is the part of a compiled frame that does not depend on
	// the function: saved callee-saved registers (13 × 16 bytes on amd64),
	// return address, frame pointer and stack-check slots, rounded up.
	FrameFixed = 256
	// FrameGrowth covers how the engine grows its call stack: a Go []byte
	// that, when full, is replaced by one of twice the length plus the
	// frame needed. The bytes it allocates over a descent are at most about
	// 4 × the bytes in use (the last stack is under 2 × the use, and the
	// ones before it sum to less than the last).
	FrameGrowth = 4
)

// FrameCost is the call stack charge, in bytes, of one frame of a function
// whose compiled frame holds at most scalars 8-byte and vectors 16-byte
// values: FrameGrowth × (FrameFixed + 8·scalars + 16·vectors), saturating.
// The instrumenter counts, for each defined function, its parameters,
// locals and results, every value its body defines (each may get its own
// spill slot: the engine does not share slots between values), a block
// parameter for each local.set and local.tee per enclosing block, the
// parameters and results of every block type, and the parameters and results
// of its largest call (as vectors).
func FrameCost(scalars, vectors uint64) uint64 {
	const max = math.MaxInt64 / 4
	if scalars > max/64 || vectors > max/64 {
		return max
	}
	return min(max, FrameGrowth*(FrameFixed+8*scalars+16*vectors))
}

// ExternKind is the kind of an import or export.
type ExternKind byte

// Extern kinds, with their binary-format codes.
const (
	ExternFunc   ExternKind = 0
	ExternTable  ExternKind = 1
	ExternMemory ExternKind = 2
	ExternGlobal ExternKind = 3
)

func (k ExternKind) String() string {
	switch k {
	case ExternFunc:
		return "func"
	case ExternTable:
		return "table"
	case ExternMemory:
		return "memory"
	case ExternGlobal:
		return "global"
	}
	return "extern(" + strconv.Itoa(int(k)) + ")"
}

// Import is one import of the original module.
type Import struct {
	Module, Name string
	Kind         ExternKind
	// Params and Results are the value type codes (as api.ValueType) of a
	// function import's type; nil for other kinds.
	Params, Results []byte
}

// Export is one export of the original module.
type Export struct {
	Name string
	Kind ExternKind
}

// Features, in the order and with the names of the catalog's vocabulary.
const (
	FeatureBulkMemory     Features = 1 << iota // "bulk-memory"
	FeatureSIMD                                // "simd"
	FeatureMultiValue                          // "multi-value"
	FeatureSignExtension                       // "sign-extension"
	FeatureNontrappingF2I                      // "nontrapping-f2i"
	FeatureReferenceTypes                      // "reference-types"
	FeatureThreads                             // "threads" (refused, so never reported)
)

// Features is a set of post-MVP features.
type Features uint32

var featureNames = []string{
	"bulk-memory", "simd", "multi-value", "sign-extension",
	"nontrapping-f2i", "reference-types", "threads",
}

// Names returns the names of the features in s, in bit order.
func (s Features) Names() []string {
	var names []string
	for i, n := range featureNames {
		if s&(1<<i) != 0 {
			names = append(names, n)
		}
	}
	return names
}

// Info is what instrumentation learns about the original module.
type Info struct {
	// Imports and Exports are in module order.
	Imports []Import
	Exports []Export
	// Signatures are the module's distinct function types, each as its
	// value type codes (params, '_', results): wazero keeps every
	// signature it compiles for the runtime's lifetime.
	Signatures []string
	// HasMemory reports whether the module defines or imports a memory; the
	// limits below are in 64 KiB pages. MemoryMaxPages is meaningful only
	// when HasMemoryMax. SharedMemory is always false: shared memory is
	// refused.
	HasMemory      bool
	MemoryMinPages uint32
	MemoryMaxPages uint32
	HasMemoryMax   bool
	SharedMemory   bool
	// Features are the post-MVP features the module uses, read from its
	// types, segments and instructions.
	Features Features
	// DataBytes is the sum of the data segments' payload sizes; ElemCount
	// the sum of the element segments' entries (work of instantiation).
	DataBytes uint64
	ElemCount uint64
	// MaxDebt bounds how far below zero a check can find the fuel global,
	// dynamic charges aside: the largest sum, over one function body, of
	// the charges of its regions that no check follows, plus the largest
	// static charge a check follows. It is the most fuel the guest can
	// spend beyond its budget before it is stopped (see exactness in the
	// package documentation).
	MaxDebt uint64
	// MaxFrameBytes is the largest FrameCost of a defined function: the
	// call stack budget bounds every frame but the innermost one, so the
	// charged stack use is at most the budget plus MaxFrameBytes.
	MaxFrameBytes uint64
	// TableBytes is 8 bytes (wazero's size of a table element) times the
	// sum, over the imported and defined tables, of each table's largest
	// size: its maximum clamped to Limits.TableElements, or TableElements
	// when it has none. It bounds the Go heap the tables can take (wazero
	// allocates every element at instantiation and on table.grow), outside
	// the memory's pages. TableMinElements is the sum of the tables'
	// minimums: the elements allocated at instantiation.
	TableBytes       uint64
	TableMinElements uint64
	// MutableGlobals are the indices, ascending, of the mutable globals
	// the instrumented module exports as GlobalExport(i): every mutable
	// global, imported or defined, but the three the rewrite adds. Global
	// indices are the same in the original and the instrumented module
	// (the rewrite appends its globals after the module's). A global the
	// module exports itself is exported under that name too.
	MutableGlobals []uint32
	// MutatesTables reports whether the code contains table.set,
	// table.grow, table.fill, table.copy, table.init or elem.drop: whether
	// an activation can change a table or an element segment. Dead code
	// counts.
	MutatesTables bool
	// PassiveSegments reports whether the module has a passive or
	// declarative data or element segment, or its code contains
	// memory.init or data.drop. Dead code counts.
	PassiveSegments bool
}

// Result is an instrumented module.
type Result struct {
	// Module is the instrumented binary.
	Module []byte
	// Info describes the original module.
	Info Info
	// Version identifies the scheme and the Config, for cache keys: the same
	// input bytes and Version always give the same Module.
	Version string
}

// Instrument validates wasm and returns it rewritten for fuel metering and a
// call stack bound (see the package documentation). It is safe for
// concurrent use and deterministic: the same wasm and Config give the same
// bytes. It takes about 15 ms per MB of code, plus wazero's validation of
// the original (about 100 ms per MB).
//
// Errors are marked ErrInvalid (not valid WebAssembly: the instrumenter's
// own checks or wazero's interpreter with api.CoreFeaturesV2 reject it),
// ErrUnsupported, ErrReserved or ErrLimit (over cfg.Limits; the error wraps
// a *LimitError); messages name offsets and sections, never host paths.
func Instrument(wasm []byte, cfg Config) (*Result, error) {
	stack := cfg.MaxStackBytes
	if stack == 0 {
		stack = DefaultMaxStackBytes
	}
	if stack > math.MaxInt64/2 {
		return nil, errors.Newf("fuel: MaxStackBytes %d exceeds %d", stack, uint64(math.MaxInt64/2))
	}
	lim := cfg.Limits.withDefaults()
	// The decoder and the rewrite check the module as they go; refusals
	// (ErrUnsupported, ErrLimit) come from them, with precise offsets. The
	// output is used only if wazero also accepts the original.
	m, err := decodeModule(wasm, &lim)
	if err != nil {
		return nil, err
	}
	m.countChecks = cfg.countChecks
	out, err := m.instrument(int64(stack))
	if err != nil {
		return nil, err
	}
	if err := validate(wasm); err != nil {
		return nil, err
	}
	version := Version + " stack=" + strconv.FormatUint(stack, 10) + " limits=" + lim.String()
	if cfg.countChecks {
		version += " count"
	}
	return &Result{Module: out, Info: m.info(), Version: version}, nil
}

// validate compiles wasm with wazero's interpreter, which fully validates it
// (about 60 µs for a small module, 300 ms for a 3 MB Go program).
//
// REQUIRES: decodeModule and instrument accepted wasm. wazero's decoder
// allocates whatever counts and lengths the binary claims (up to 2^32
// items) before it finds them missing, and validates every declared local;
// the instrumenter's decoder bounds all of them first.
func validate(wasm []byte) error {
	ctx := context.Background()
	r := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter().
		WithCoreFeatures(api.CoreFeaturesV2).WithDebugInfoEnabled(false))
	defer func() { _ = r.Close(ctx) }()
	cm, err := r.CompileModule(ctx, wasm)
	if err != nil {
		return errors.Mark(errors.Wrap(err, "fuel: invalid module"), ErrInvalid)
	}
	return cm.Close(ctx)
}

// tableElemBytes is the Go heap wazero takes per table element.
const tableElemBytes = 8

// tableMax is the largest size table t can have: its maximum clamped to
// Limits.TableElements, TableElements when it has none. A defined table's
// maximum is already clamped in the output (addTable).
func (m *module) tableMax(t tableEntry) uint64 {
	if !t.lim.hasMax || uint64(t.lim.max) > m.lim.TableElements {
		return m.lim.TableElements
	}
	return uint64(t.lim.max)
}

func (m *module) info() Info {
	info := Info{
		Features: m.features, DataBytes: m.dataBytes, ElemCount: m.elemCount, MaxFrameBytes: m.maxFrame,
		MaxDebt: m.maxUnchecked + m.maxChecked, MutableGlobals: m.mutableGlobals(), MutatesTables: m.mutatesTables,
		PassiveSegments: m.passiveSegments,
	}
	for _, imp := range m.imports {
		i := Import{Module: imp.module, Name: imp.name, Kind: imp.kind}
		if imp.kind == ExternFunc {
			t := m.types[imp.typeIdx]
			i.Params = append([]byte{}, t.params...)
			i.Results = append([]byte{}, t.results...)
		}
		info.Imports = append(info.Imports, i)
	}
	for _, e := range m.exports {
		info.Exports = append(info.Exports, Export{Name: e.name, Kind: e.kind})
	}
	if m.memory != nil {
		info.HasMemory = true
		info.MemoryMinPages = m.memory.min
		info.MemoryMaxPages = m.memory.max
		info.HasMemoryMax = m.memory.hasMax
		info.SharedMemory = m.memory.shared
	}
	for _, t := range m.tables {
		info.TableMinElements += uint64(t.lim.min)
		info.TableBytes += tableElemBytes * m.tableMax(t)
	}
	seen := make(map[string]bool, len(m.types))
	for _, t := range m.types {
		k := signatureKey(t)
		if !seen[k] {
			seen[k] = true
			info.Signatures = append(info.Signatures, k)
		}
	}
	return info
}

// signatureKey names a function type: its parameter and result value
// type codes around a separator that is no value type.
func signatureKey(t funcType) string {
	return string(t.params) + "_" + string(t.results)
}

package fuel

import (
	"context"
	"math"
	"strconv"

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
	// TickName is the slow path, func () -> (): called when the fuel global
	// went negative. The host adds the next slice of the budget to the
	// global, checks its context, and traps when the budget is spent.
	TickName = "tick"
	// GrowName replaces memory.grow, func (delta i32) -> (old pages i32): the
	// host grows memory 0 by delta pages within what it grants and returns
	// the old size in pages, or -1 (and records the refusal).
	GrowName = "grow"
	// DepthName is func () -> (), called when a call would nest deeper than
	// Config.MaxCallDepth frames of defined functions. The host traps.
	DepthName = "depth_exceeded"
)

// DefaultMaxCallDepth is the call-depth bound used when Config.MaxCallDepth
// is zero.
const DefaultMaxCallDepth = 10_000

// Version identifies the instrumentation scheme: the rewrite, the cost table
// and the bulk-operation charge. It changes whenever the output or the fuel
// counts for the same input could change. Result.Version adds the Config.
const Version = "latent-fuel/2 cost=wasmtime-operator-cost bulk=len/64"

// BulkShift is the dynamic charge of bulk memory and table operations:
// memory.fill, memory.copy, memory.init, table.fill, table.copy and
// table.init cost len>>BulkShift units on top of their static 1.
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
	// FuelExport.
	ErrReserved = errors.New("fuel: reserved name")
)

// Config tunes the rewrite. The zero value is valid.
type Config struct {
	// MaxCallDepth bounds the nesting of calls to defined functions
	// (imported functions do not count). Zero means DefaultMaxCallDepth; at
	// most math.MaxInt32.
	MaxCallDepth uint32
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
// call-depth bound (see the package documentation). It is safe for
// concurrent use and deterministic: the same wasm and Config give the same
// bytes. It takes about 15 ms per MB of code, plus wazero's validation of
// the original (about 100 ms per MB).
//
// Errors are marked ErrInvalid (not valid WebAssembly: the instrumenter's
// own checks or wazero's interpreter with api.CoreFeaturesV2 reject it),
// ErrUnsupported or ErrReserved; messages name offsets and sections, never
// host paths.
func Instrument(wasm []byte, cfg Config) (*Result, error) {
	depth := cfg.MaxCallDepth
	if depth == 0 {
		depth = DefaultMaxCallDepth
	}
	if depth > math.MaxInt32 {
		return nil, errors.Newf("fuel: MaxCallDepth %d exceeds %d", depth, math.MaxInt32)
	}
	// The decoder and the rewrite check the module as they go; refusals
	// (ErrUnsupported) come from them, with precise offsets. The output is
	// used only if wazero also accepts the original.
	m, err := decodeModule(wasm)
	if err != nil {
		return nil, err
	}
	out, err := m.instrument(depth)
	if err != nil {
		return nil, err
	}
	if err := validate(wasm); err != nil {
		return nil, err
	}
	return &Result{
		Module:  out,
		Info:    m.info(),
		Version: Version + " depth=" + strconv.FormatUint(uint64(depth), 10),
	}, nil
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

func (m *module) info() Info {
	info := Info{Features: m.features}
	for _, imp := range m.imports {
		info.Imports = append(info.Imports, Import{Module: imp.module, Name: imp.name, Kind: imp.kind})
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
	return info
}

// The enumerations of the vocabulary (cell classes, threading models,
// random sources, instance modes, guest ABIs, features) and the records
// built from them: Requirements, Placement, Budget, Capsule.

package vocab

import (
	"encoding/json"
	"math/bits"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cockroachdb/errors"
)

// CellClass is a size class of execution cells, ordered from tiny to xlarge.
// The zero value is not a class.
type CellClass uint8

// The cell classes in their fixed order (ties in cell selection go to the
// smaller class).
const (
	CellTiny CellClass = iota + 1
	CellSmall
	CellStandard
	CellLarge
	CellXLarge
)

// CellClasses lists every cell class in order.
var CellClasses = [...]CellClass{CellTiny, CellSmall, CellStandard, CellLarge, CellXLarge}

var cellClassNames = [...]string{"", "tiny", "small", "standard", "large", "xlarge"}

// String returns the configuration name of the class.
func (c CellClass) String() string {
	if c.Valid() {
		return cellClassNames[c]
	}
	return "cell-class(" + strconv.Itoa(int(c)) + ")"
}

// Valid reports whether c is one of the five classes.
func (c CellClass) Valid() bool { return c >= CellTiny && c <= CellXLarge }

// ParseCellClass parses a configuration name.
func ParseCellClass(s string) (CellClass, error) {
	for i := 1; i < len(cellClassNames); i++ {
		if cellClassNames[i] == s {
			return CellClass(i), nil
		}
	}
	return 0, errors.New("unknown cell class (want tiny, small, standard, large or xlarge)")
}

// Threading is the threading model a revision needs and a cell offers.
type Threading uint8

// Threading models. Single is the default.
const (
	ThreadingSingle Threading = iota + 1
	ThreadingShared
)

// String returns the manifest name.
func (t Threading) String() string {
	switch t {
	case ThreadingSingle:
		return "single"
	case ThreadingShared:
		return "shared"
	}
	return "threading(" + strconv.Itoa(int(t)) + ")"
}

// ParseThreading parses a manifest name.
func ParseThreading(s string) (Threading, error) {
	switch s {
	case "single":
		return ThreadingSingle, nil
	case "shared":
		return ThreadingShared, nil
	}
	return 0, errors.New(`unknown threading model (want "single" or "shared")`)
}

// Randomness is where a revision's guests get the bytes of WASI random_get.
// The zero value is RandomSecure.
type Randomness uint8

// Random sources. Secure is the default.
const (
	// RandomSecure: a generator seeded from the host's cryptographic source
	// for every activation; no two activations see the same bytes.
	RandomSecure Randomness = iota
	// RandomDeterministic: a generator with a seed fixed by the revision's
	// id, so the same revision and input replay exactly. Not for secrets.
	RandomDeterministic
)

// String returns the manifest name.
func (r Randomness) String() string {
	switch r {
	case RandomSecure:
		return "secure"
	case RandomDeterministic:
		return "deterministic"
	}
	return "random(" + strconv.Itoa(int(r)) + ")"
}

// ParseRandomness parses a manifest name.
func ParseRandomness(s string) (Randomness, error) {
	switch s {
	case "secure":
		return RandomSecure, nil
	case "deterministic":
		return RandomDeterministic, nil
	}
	return 0, errors.New(`unknown random source (want "secure" or "deterministic")`)
}

// InstanceMode is how a revision's activations get their module instance.
// The zero value is InstanceFresh.
type InstanceMode uint8

// Instance modes. Fresh is the default.
const (
	// InstanceFresh: every activation instantiates the module and runs its
	// initialisation (the start function, or a reactor's _initialize).
	InstanceFresh InstanceMode = iota
	// InstanceSnapshot: the node initialises the module once and keeps the
	// result (linear memory as an image, mutable globals); every activation
	// starts from that snapshot and calls the route's function. Nothing an
	// activation writes is visible to the next.
	InstanceSnapshot
	// InstanceReuse: a warm instance of the revision is called activation
	// after activation; state persists between activations of the same
	// revision (never across revisions or tenants) until it is recycled.
	InstanceReuse
)

// String returns the manifest name.
func (m InstanceMode) String() string {
	switch m {
	case InstanceFresh:
		return "fresh"
	case InstanceSnapshot:
		return "snapshot"
	case InstanceReuse:
		return "reuse"
	}
	return "instance(" + strconv.Itoa(int(m)) + ")"
}

// ParseInstanceMode parses a manifest name.
func ParseInstanceMode(s string) (InstanceMode, error) {
	switch s {
	case "fresh":
		return InstanceFresh, nil
	case "snapshot":
		return InstanceSnapshot, nil
	case "reuse":
		return InstanceReuse, nil
	}
	return 0, errors.New(`unknown instance mode (want "fresh", "snapshot" or "reuse")`)
}

// ABI is how a revision's guests talk to their caller. The zero value is
// ABIStdio.
type ABI uint8

// Guest ABIs. Stdio is the default.
const (
	// ABIStdio: the body on stdin, the output on stdout, answered as
	// application/octet-stream; POST only.
	ABIStdio ABI = iota
	// ABIWAGI: the WAGI form of CGI. Any method and a path suffix reach
	// the guest, the request is described in the environment, and stdout
	// begins with a CGI header block that sets the HTTP status and headers.
	ABIWAGI
	// ABIWASIHTTP: a WASI 0.2 component of the wasi:http proxy world. Any
	// method and a path suffix reach the guest's
	// wasi:http/incoming-handler as an incoming-request; the response it
	// sets is the answer.
	ABIWASIHTTP
)

// HTTP reports whether the ABI's guests answer HTTP themselves (WAGI and
// wasi-http): they take any method and a path below their route.
func (a ABI) HTTP() bool { return a == ABIWAGI || a == ABIWASIHTTP }

// String returns the manifest name.
func (a ABI) String() string {
	switch a {
	case ABIStdio:
		return "stdio"
	case ABIWAGI:
		return "wagi"
	case ABIWASIHTTP:
		return "wasi-http"
	}
	return "abi(" + strconv.Itoa(int(a)) + ")"
}

// ParseABI parses a manifest name.
func ParseABI(s string) (ABI, error) {
	switch s {
	case "stdio":
		return ABIStdio, nil
	case "wagi":
		return ABIWAGI, nil
	case "wasi-http":
		return ABIWASIHTTP, nil
	}
	return 0, errors.New(`unknown guest ABI (want "stdio", "wagi" or "wasi-http")`)
}

// Feature is one WebAssembly feature beyond the MVP.
type Feature uint8

// The features a revision may require and a cell may offer.
const (
	FeatureBulkMemory Feature = iota
	FeatureSIMD
	FeatureMultiValue
	FeatureSignExtension
	FeatureNontrappingF2I
	FeatureReferenceTypes
	FeatureThreads
	numFeatures
)

var featureNames = [numFeatures]string{
	"bulk-memory", "simd", "multi-value", "sign-extension", "nontrapping-f2i", "reference-types", "threads",
}

// String returns the manifest name.
func (f Feature) String() string {
	if f < numFeatures {
		return featureNames[f]
	}
	return "feature(" + strconv.Itoa(int(f)) + ")"
}

// ParseFeature parses a manifest name.
func ParseFeature(s string) (Feature, error) {
	for i, n := range featureNames {
		if n == s {
			return Feature(i), nil
		}
	}
	return 0, errors.Newf("unknown feature (want one of %s)", strings.Join(featureNames[:], ", "))
}

// FeatureSet is a set of features; the zero value is empty.
type FeatureSet uint32

// FeatureSetOf returns the set holding fs.
func FeatureSetOf(fs ...Feature) FeatureSet {
	var s FeatureSet
	for _, f := range fs {
		s |= 1 << f
	}
	return s
}

// Has reports whether f is in s.
func (s FeatureSet) Has(f Feature) bool { return s&(1<<f) != 0 }

// Union returns s ∪ o.
func (s FeatureSet) Union(o FeatureSet) FeatureSet { return s | o }

// SubsetOf reports whether every feature of s is in o.
func (s FeatureSet) SubsetOf(o FeatureSet) bool { return s&^o == 0 }

// Valid reports whether every feature of s is a known one.
func (s FeatureSet) Valid() bool { return s>>numFeatures == 0 }

// Len returns the number of features in s.
func (s FeatureSet) Len() int { return bits.OnesCount32(uint32(s)) }

// Names returns the manifest names of the features in s, in fixed order.
func (s FeatureSet) Names() []string {
	out := make([]string, 0, s.Len())
	for f := Feature(0); f < numFeatures; f++ {
		if s.Has(f) {
			out = append(out, f.String())
		}
	}
	return out
}

// String renders the set as a comma-separated list.
func (s FeatureSet) String() string { return strings.Join(s.Names(), ",") }

// Requirements are what a revision needs from a cell.
type Requirements struct {
	Threading Threading
	Features  FeatureSet
}

// Placement restricts where a revision may run. An empty list allows any value.
// The lists are sorted, free of duplicates and private: a Placement is
// immutable once built. An unrestricted placement (the common case) is one
// nil pointer: every revision policy the catalog keeps carries one.
type Placement struct {
	lists *placementLists // nil: any architecture, region and zone
}

type placementLists struct {
	architectures, regions, zones []string
}

// NewPlacement builds a placement from lists of allowed values. The lists are
// copied, sorted and deduplicated.
func NewPlacement(architectures, regions, zones []string) Placement {
	if len(architectures) == 0 && len(regions) == 0 && len(zones) == 0 {
		return Placement{}
	}
	return Placement{lists: &placementLists{architectures: sortedSet(architectures), regions: sortedSet(regions), zones: sortedSet(zones)}}
}

func sortedSet(in []string) []string {
	if len(in) == 0 {
		return nil
	}
	out := slices.Clone(in)
	slices.Sort(out)
	return slices.Compact(out)
}

func (p Placement) sets() (architectures, regions, zones []string) {
	if p.lists == nil {
		return nil, nil, nil
	}
	return p.lists.architectures, p.lists.regions, p.lists.zones
}

// Allows reports whether a node with this identity satisfies the placement.
func (p Placement) Allows(architecture, region, zone string) bool {
	as, rs, zs := p.sets()
	return allowed(as, architecture) && allowed(rs, region) && allowed(zs, zone)
}

func allowed(set []string, v string) bool {
	if len(set) == 0 {
		return true
	}
	_, ok := slices.BinarySearch(set, v)
	return ok
}

// Architectures returns a copy of the allowed architectures (empty: any).
func (p Placement) Architectures() []string { as, _, _ := p.sets(); return slices.Clone(as) }

// Regions returns a copy of the allowed regions (empty: any).
func (p Placement) Regions() []string { _, rs, _ := p.sets(); return slices.Clone(rs) }

// Zones returns a copy of the allowed zones (empty: any).
func (p Placement) Zones() []string { _, _, zs := p.sets(); return slices.Clone(zs) }

// Equal reports whether two placements allow the same values.
func (p Placement) Equal(o Placement) bool {
	pa, pr, pz := p.sets()
	oa, or, oz := o.sets()
	return slices.Equal(pa, oa) && slices.Equal(pr, or) && slices.Equal(pz, oz)
}

// Budget is an amount of every resource dimension an activation can be granted.
// Phase 1 meters CPU fuel, memory and relative wall time; the later-phase
// dimensions exist so that requests naming them are refused explicitly rather
// than ignored, and must be zero.
type Budget struct {
	CPUFuel     uint64        // fuel units (≈ one per executed instruction)
	MemoryBytes uint64        // linear memory
	WallTime    time.Duration // relative to admission; 0 in a request means "no restriction at this layer"

	// Later-phase dimensions: must be zero in Phase 1.
	NetworkEgressBytes uint64
	StorageBytes       uint64
	Accelerators       uint64
}

// ErrUnsupportedBudgetDimension marks a budget that names a later-phase dimension.
var ErrUnsupportedBudgetDimension = errors.New("catalog: unsupported budget dimension")

// CheckPhase1 returns an error naming the first later-phase dimension that is
// not zero.
func (b Budget) CheckPhase1() error {
	switch {
	case b.NetworkEgressBytes != 0:
		return errors.Wrap(ErrUnsupportedBudgetDimension, "network-egress-bytes")
	case b.StorageBytes != 0:
		return errors.Wrap(ErrUnsupportedBudgetDimension, "storage-bytes")
	case b.Accelerators != 0:
		return errors.Wrap(ErrUnsupportedBudgetDimension, "accelerators")
	}
	return nil
}

// Capsule is the memory a module needs and can use, read from the binary:
// a grant covers linear memory, the call stack and the module's fixed
// memory (ModuleInfo.FixedMemoryBytes).
type Capsule struct {
	// MinMemoryBytes is the initial linear memory plus the fixed memory:
	// no grant below it can instantiate the module.
	MinMemoryBytes uint64
	// MaxMemoryBytes is the declared maximum linear memory (or 4 GiB, the
	// wasm32 limit, when none is declared) plus the fixed memory plus
	// CallStackBytes: a grant above it could not be used.
	MaxMemoryBytes uint64
}

// CallStackBytes is the call stack a grant leaves a module above its
// declared maximum linear memory (the grant covers the stack too).
const CallStackBytes = 1 << 20

// WasmPageBytes is the size of one WebAssembly page (64 KiB), the unit in
// which a module declares and grows its linear memory. Packages that count
// linear memory in pages use it rather than a literal.
const WasmPageBytes = 65536

// MaxWasm32MemoryBytes is the largest linear memory of a wasm32 module:
// 65536 pages, 4 GiB.
const MaxWasm32MemoryBytes = 65536 * WasmPageBytes

// MarshalJSON renders the set as a list of feature names.
func (s FeatureSet) MarshalJSON() ([]byte, error) { return json.Marshal(s.Names()) }

// UnmarshalJSON accepts a list of feature names.
func (s *FeatureSet) UnmarshalJSON(data []byte) error {
	var names []string
	if err := json.Unmarshal(data, &names); err != nil {
		return errors.New("want a list of feature names")
	}
	var out FeatureSet
	for _, n := range names {
		f, err := ParseFeature(n)
		if err != nil {
			return err
		}
		out |= FeatureSetOf(f)
	}
	*s = out
	return nil
}

// MarshalJSON renders the model by name.
func (t Threading) MarshalJSON() ([]byte, error) { return json.Marshal(t.String()) }

// UnmarshalJSON accepts a model name.
func (t *Threading) UnmarshalJSON(data []byte) error {
	var s string
	if err := json.Unmarshal(data, &s); err != nil {
		return errors.New(`want "single" or "shared"`)
	}
	v, err := ParseThreading(s)
	if err != nil {
		return err
	}
	*t = v
	return nil
}

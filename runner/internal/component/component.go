package component

// The API: IsComponent, Limits, Plan, Result, Error, HostModule.

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/latent-node/latent-node/runner/internal/coremerge"
)

// preamble is the component binary's magic and version/layer.
var preamble = [8]byte{0x00, 0x61, 0x73, 0x6d, 0x0d, 0x00, 0x01, 0x00}

// IsComponent reports whether b starts with the component preamble.
func IsComponent(b []byte) bool {
	return len(b) >= 8 && [8]byte(b[:8]) == preamble
}

// Limits bound a component's structure, all scopes together.
type Limits struct {
	MaxBytes       int // the whole component
	MaxDepth       int // nesting of components and of type definitions
	MaxTypes       int // type definitions (component and core)
	MaxTypeNodes   int // nodes inside type definitions: their complexity
	MaxCoreModules int
	MaxInstances   int // core and component instances, instantiations of nested components included
	MaxImports     int
	MaxExports     int
	MaxAliases     int
	MaxCanons      int
}

// DefaultLimits are the limits the runner applies.
func DefaultLimits() Limits {
	return Limits{MaxBytes: 64 << 20, MaxDepth: 16, MaxTypes: 10_000, MaxTypeNodes: 100_000, MaxCoreModules: 16,
		MaxInstances: 1_000, MaxImports: 1_000, MaxExports: 1_000, MaxAliases: 10_000, MaxCanons: 10_000}
}

// Result is a planned component.
type Result struct {
	// Merge is the plan of its core modules, ready for coremerge.Merge.
	Merge coremerge.Plan
	// Imports are the component's imported instances, as written.
	Imports []string
	// Lowers are the host imports of the merged module.
	Lowers []Lower
	// Lifts are the component's exported functions.
	Lifts []Lift
}

// Lower is one host import of the merged module: a canon lower of a
// function, or a canon resource.drop, of an imported instance.
type Lower struct {
	Module, Name string // the merged module's import (see HostName)
	Instance     string // the imported instance, as written
	Func         string // the function, or "[resource-drop]<resource>"
	Realloc      int    // -1, or k: the merged module exports it as ReallocExport(k)
	Encoding     string // "utf8", "utf16" or "latin1+utf16"
}

// Lift is one exported function of the component.
type Lift struct {
	Interface  string // the exported instance, as written; "" for a function exported by itself
	Func       string
	Export     string // the merged module's export of the lifted core function
	PostReturn string // "" or the merged module's export of its post-return function
	Realloc    int
	Encoding   string
}

// Reasons of an Error.
const (
	ReasonMalformed         = "malformed"
	ReasonLimit             = "limit"
	ReasonUnsupported       = "unsupported"
	ReasonUnsupportedImport = "unsupported-import"
)

// Error is a refusal of a component: Reason is one of the Reason
// constants, Key the limit's configuration name for ReasonLimit, Detail
// what is wrong, in words for whoever deploys it.
type Error struct {
	Reason, Key, Detail string
}

func (e *Error) Error() string {
	if e.Key != "" {
		return "component: " + e.Reason + " (" + e.Key + "): " + e.Detail
	}
	return "component: " + e.Reason + ": " + e.Detail
}

func newError(reason, key, format string, args ...any) *Error {
	return &Error{Reason: reason, Key: key, Detail: fmt.Sprintf(format, args...)}
}

// ReallocExport is the merged module's export of realloc function k.
func ReallocExport(k int) string { return "latent:realloc/" + strconv.Itoa(k) }

// MaxReallocs is how many distinct realloc functions a component's
// lowerings may name.
const MaxReallocs = 4

// HostModule is the host module that implements instance (as written,
// "wasi:http/types@0.2.10"): its name with the version cut to major.minor
// ("wasi:http/types@0.2"). Only 0.2.x releases are accepted: another
// version, a prerelease or a missing version is ReasonUnsupportedImport.
func HostModule(instance string) (string, error) {
	name, version, ok := strings.Cut(instance, "@")
	if !ok || !strings.Contains(name, ":") || !strings.Contains(name, "/") {
		return "", newError(ReasonUnsupportedImport, "", "%s: the node provides versioned WASI interfaces only (such as wasi:http/types@0.2.0)", instance)
	}
	parts := strings.Split(version, ".")
	if len(parts) != 3 || parts[0] != "0" || parts[1] != "2" || !digits(parts[2]) {
		return "", newError(ReasonUnsupportedImport, "", "%s: the node provides WASI 0.2.x interfaces only", instance)
	}
	return name + "@0.2", nil
}

func digits(s string) bool {
	if s == "" || len(s) > 1 && s[0] == '0' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// HostName is the merged module's import name of func lowered with
// realloc k (-1: none) and encoding ("utf8" is the default and adds
// nothing).
func HostName(fn string, realloc int, encoding string) string {
	if realloc >= 0 {
		fn += "!r" + strconv.Itoa(realloc)
	}
	if encoding != "" && encoding != "utf8" {
		fn += "!" + encoding
	}
	return fn
}

// Plan decodes and evaluates component b under lim.
func Plan(b []byte, lim Limits) (*Result, error) {
	if len(b) > lim.MaxBytes {
		return nil, newError(ReasonLimit, "max_bytes", "the component has %d bytes, over the limit of %d", len(b), lim.MaxBytes)
	}
	if !IsComponent(b) {
		return nil, newError(ReasonMalformed, "", "not a component (no component preamble)")
	}
	e := newEvaluator(lim)
	root := &scope{}
	if err := e.eval(b[8:], root, 0); err != nil {
		return nil, err
	}
	if err := e.finish(root); err != nil {
		return nil, err
	}
	return &e.res, nil
}

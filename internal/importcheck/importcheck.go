// Package importcheck enforces the module's layering and the house rules that
// a linter does not: imports inside the module point only upstream, nothing
// but cmd, stress and bench imports node or cmd, errors come from
// github.com/cockroachdb/errors, the client imports the standard library only,
// and the clock-free packages never read the wall clock. TestRepository runs
// it over the module (make check and make test).
package importcheck

import (
	"slices"
	"strings"
)

// Allowed maps each layered top-level package to the top-level packages of
// this module it may import. Packages not listed (node, cmd, stress, bench,
// internal) may import anything upstream of them. refusal, the refusal
// vocabulary, is at the bottom: it imports nothing of the module, and every
// package but client may import it.
var Allowed = map[string][]string{
	"refusal":    {},
	"vocab":      {"internal"},
	"catalog":    {"refusal", "vocab", "internal"},
	"loadsource": {"refusal", "vocab", "internal"},
	"admission":  {"refusal", "vocab", "catalog", "loadsource", "internal"},
	"cellpool":   {"refusal", "vocab", "catalog", "internal"},
	"runner":     {"refusal", "vocab", "catalog", "admission", "cellpool", "internal"},
	"scheduler":  {"refusal", "vocab", "catalog", "admission", "internal"},
	"cluster":    {"refusal", "vocab", "catalog", "internal"},
}

// Narrow maps packages below the top level to the only packages of this
// module they may import (full paths relative to the module), on top of
// their top-level package's rule: the node's front knows nothing of the
// rest of the node but its configuration, its wire vocabulary and the
// activation record, tracing
// only the results it records, an activation's record only the
// vocabularies, the status views only what they read and the front's
// pools, and the history only the vocabularies.
var Narrow = map[string][]string{
	"node/front":      {"node/config", "node/api", "node/activation", "refusal", "vocab"},
	"node/activation": {"vocab", "refusal"},
	"node/tracing":    {"node/config", "node/activation", "admission", "scheduler", "runner", "refusal", "vocab"},
	"node/status": {"node/api", "node/auth", "node/front", "node/history", "admission", "catalog", "cellpool", "loadsource", "runner",
		"scheduler", "refusal", "vocab"},
	"node/history": {"vocab"},
}

// mayImportNode lists the top-level packages that may import node or cmd.
var mayImportNode = []string{"cmd", "stress", "bench", "node"}

// StdlibOnly lists the top-level packages whose code and tests import the
// standard library only: nothing from this module and no third-party module,
// so any Go program can use them. They build errors with the standard library
// (errors, fmt.Errorf); Forbidden does not apply to them.
var StdlibOnly = []string{"client"}

// Standard reports whether an import path names a package of the standard
// library: its first element has no dot, as every module path outside the
// standard library has.
func Standard(path string) bool {
	first, _, _ := strings.Cut(path, "/")
	return !strings.Contains(first, ".")
}

// Forbidden maps import paths to the reason they are refused.
var Forbidden = map[string]string{
	"errors":                "use github.com/cockroachdb/errors",
	"github.com/pkg/errors": "use github.com/cockroachdb/errors",
}

// Package is what the check needs from `go list -json`.
type Package struct {
	ImportPath   string
	Imports      []string
	TestImports  []string
	XTestImports []string
}

func top(rel string) string {
	top, _, _ := strings.Cut(rel, "/")
	return top
}

// Check returns one line per violation, sorted.
func Check(module string, pkgs []Package) []string {
	var bad []string
	for _, p := range pkgs {
		rel := strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, module), "/")
		me := top(rel)
		internalTestdata := strings.HasPrefix(rel, "internal/") && strings.Contains(rel, "/testdata/")
		if slices.Contains(StdlibOnly, me) {
			bad = append(bad, checkStdlibOnly(module, me, rel, p)...)
			continue
		}
		for _, imp := range p.Imports {
			if why, ok := Forbidden[imp]; ok {
				bad = append(bad, rel+" imports "+imp+": "+why)
			}
			if !strings.HasPrefix(imp, module+"/") || internalTestdata {
				continue
			}
			other := strings.TrimPrefix(imp, module+"/")
			if allowed, narrow := Narrow[rel]; narrow && !slices.Contains(allowed, other) {
				bad = append(bad, rel+" imports "+other+": "+rel+" may import only "+strings.Join(allowed, ", ")+" of this module")
			}
			o := top(other)
			switch {
			case o == me:
			case o == "node" || o == "cmd":
				if !slices.Contains(mayImportNode, me) {
					bad = append(bad, rel+" imports "+other+": only cmd, stress and bench may import node or cmd")
				}
			default:
				if allowed, layered := Allowed[me]; layered && !slices.Contains(allowed, o) {
					only := strings.Join(allowed, ", ")
					if only == "" {
						only = "nothing"
					}
					bad = append(bad, rel+" imports "+other+": "+me+" may import only "+only+" of this module")
				}
			}
		}
		for _, imp := range append(slices.Clone(p.TestImports), p.XTestImports...) {
			if why, ok := Forbidden[imp]; ok {
				bad = append(bad, rel+" (tests) imports "+imp+": "+why)
			}
		}
	}
	slices.Sort(bad)
	return slices.Compact(bad)
}

// checkStdlibOnly returns the imports of StdlibOnly package me (at rel) that
// are neither standard nor me itself or one of its subpackages.
func checkStdlibOnly(module, me, rel string, p Package) []string {
	ok := func(imp string) bool {
		own := module + "/" + me
		return Standard(imp) || imp == own || strings.HasPrefix(imp, own+"/")
	}
	var bad []string
	for _, imp := range p.Imports {
		if !ok(imp) {
			bad = append(bad, rel+" imports "+imp+": "+me+" imports the standard library only")
		}
	}
	for _, imp := range append(slices.Clone(p.TestImports), p.XTestImports...) {
		if !ok(imp) {
			bad = append(bad, rel+" (tests) imports "+imp+": "+me+" imports the standard library only")
		}
	}
	return bad
}

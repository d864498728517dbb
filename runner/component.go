// Deploy time of a WebAssembly component (the wasi-http ABI): flattened
// into one core module (wasihttp.Flatten), then instrumented and compiled
// like any module; its imports checked against the wasi-http host.

package runner

import (
	"cmp"
	"slices"
	"strings"

	"github.com/cockroachdb/errors"

	"github.com/latent-node/latent-node/catalog"
	"github.com/latent-node/latent-node/runner/internal/component"
	"github.com/latent-node/latent-node/runner/internal/fuel"
	"github.com/latent-node/latent-node/runner/wasihttp"
)

// ComponentLimits are the deploy limits of a component's own structure
// (wasihttp.ComponentLimits).
func ComponentLimits() component.Limits { return wasihttp.ComponentLimits() }

// componentInfo checks the merged, instrumented module of a component: its
// imports are functions of the wasi-http host with exactly their types (or
// the fuel module's), it exports its memory and the handler with type
// (i32 i32) -> ().
func (r *Runner) componentInfo(in fuel.Info) (catalog.ModuleInfo, error) {
	for _, imp := range in.Imports {
		if err := r.checkHTTPImport(imp); err != nil {
			return catalog.ModuleInfo{}, err
		}
	}
	hasMemory, hasHandler := false, false
	for _, e := range in.Exports {
		switch {
		case e.Kind == fuel.ExternMemory && e.Name == "memory":
			hasMemory = true
		case e.Kind == fuel.ExternFunc && e.Name == wasihttp.HandlerExport:
			hasHandler = true
		}
	}
	if !hasMemory || !hasHandler {
		return catalog.ModuleInfo{}, errors.New("runner: component: it has no memory or no wasi:http/incoming-handler handle function")
	}
	info, err := baseInfo(in)
	info.Component = true
	return info, err
}

// checkHTTPImport accepts imp of a merged component only if it is a
// function a wasi-http host module exports, with exactly that function's
// type.
func (r *Runner) checkHTTPImport(imp fuel.Import) error {
	def, err := r.http.Func(imp.Module, imp.Name)
	if err != nil || imp.Kind != fuel.ExternFunc {
		return errors.Wrap(cmp.Or(err, errors.Newf("component: import %s#%s is not a function", imp.Module, imp.Name)), "runner")
	}
	if !slices.Equal(imp.Params, def.ParamTypes()) || !slices.Equal(imp.Results, def.ResultTypes()) {
		fn, _, _ := strings.Cut(imp.Name, "!")
		return errors.Newf("runner: component: import %s#%s has core type %s; the node's has %s", imp.Module, fn,
			funcType(imp.Params, imp.Results), funcType(def.ParamTypes(), def.ResultTypes()))
	}
	return nil
}

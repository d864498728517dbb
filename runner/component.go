// Deploy time of a WebAssembly component (the wasi-http ABI): decoded and
// planned (runner/internal/component), merged into one core module
// (runner/internal/coremerge), then instrumented and compiled like any
// module; its imports checked against the wasi-http host.

package runner

import (
	"context"
	"slices"
	"strings"

	"github.com/cockroachdb/errors"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/latent-node/latent-node/catalog"
	"github.com/latent-node/latent-node/runner/internal/component"
	"github.com/latent-node/latent-node/runner/internal/coremerge"
	"github.com/latent-node/latent-node/runner/internal/fuel"
	"github.com/latent-node/latent-node/runner/wasihttp"
)

// ComponentLimits are the deploy limits of a component's own structure
// (its core modules are then held to Limits once merged): documented in
// docs/guest-abi.md, "wasi-http ABI".
func ComponentLimits() component.Limits { return component.DefaultLimits() }

// defineHTTP instantiates the wasi-http host modules and returns the type
// of every function they export, by module and name.
func defineHTTP(ctx context.Context, rt wazero.Runtime) (map[string]map[string]api.FunctionDefinition, error) {
	if err := wasihttp.Define(ctx, rt); err != nil {
		return nil, errors.Wrap(err, "runner: define the wasi-http host")
	}
	defs := make(map[string]map[string]api.FunctionDefinition)
	for _, name := range wasihttp.Modules() {
		m := rt.Module(name)
		if m == nil {
			return nil, errors.AssertionFailedf("runner: wasi-http host module %q not instantiated", name)
		}
		defs[name] = m.ExportedFunctionDefinitions()
	}
	return defs, nil
}

// mergeComponent decodes and plans component b, refuses the interfaces the
// host does not provide, and merges its core modules into one.
func mergeComponent(b []byte) ([]byte, error) {
	plan, err := component.Plan(b, ComponentLimits())
	if err != nil {
		return nil, errors.Wrap(err, "runner: component")
	}
	for _, inst := range plan.Imports {
		if !wasihttp.Provides(inst) {
			return nil, errors.Newf("runner: component: unsupported-import %s: the node does not provide this interface (the wasi-http ABI provides wasi:http, wasi:io, wasi:clocks, wasi:random, wasi:cli and an empty wasi:filesystem, at 0.2.x)", inst)
		}
	}
	if !slices.ContainsFunc(plan.Lifts, func(l component.Lift) bool { return l.Export == ComponentHandlerExport }) {
		return nil, errors.New("runner: component: it does not export wasi:http/incoming-handler@0.2.x (a wasi-http guest is a component of the wasi:http/proxy world)")
	}
	merged, err := coremerge.Merge(plan.Merge)
	if err != nil {
		return nil, errors.Wrap(err, "runner: component: merging its core modules")
	}
	return merged, nil
}

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
		case e.Kind == fuel.ExternFunc && e.Name == ComponentHandlerExport:
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
// type. The merger names every import after the interface and function the
// component lowers, so a refusal names what the component asked for.
func (r *Runner) checkHTTPImport(imp fuel.Import) error {
	mod, ok := r.http[imp.Module]
	if !ok {
		return errors.Newf("runner: component: unsupported-import %s: the node does not provide this interface", imp.Module)
	}
	name, _, _ := strings.Cut(imp.Name, "!")
	def, ok := mod[imp.Name]
	if !ok || imp.Kind != fuel.ExternFunc {
		return errors.Newf("runner: component: unsupported-import %s#%s: the node's %s has no such function (or not with these canonical options)", imp.Module, name, imp.Module)
	}
	if !slices.Equal(imp.Params, def.ParamTypes()) || !slices.Equal(imp.Results, def.ResultTypes()) {
		return errors.Newf("runner: component: import %s#%s has core type %s; the node's has %s", imp.Module, name,
			funcType(imp.Params, imp.Results), funcType(def.ParamTypes(), def.ResultTypes()))
	}
	return nil
}

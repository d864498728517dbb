// The deploy of a component: decoded and planned, its imports checked
// against what the host provides, merged into one core module; the host's
// function types, which the merged module's imports must match.

package wasihttp

import (
	"context"
	"slices"
	"strings"

	"github.com/cockroachdb/errors"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/latent-node/latent-node/runner/internal/component"
	"github.com/latent-node/latent-node/runner/internal/coremerge"
)

// HandlerExport is the merged module's export of a component's
// wasi:http/incoming-handler handle function, core type (i32 i32) -> ().
const HandlerExport = "latent:export/wasi:http/incoming-handler@0.2#handle"

// HandlerPostReturn is the merged module's export of the handler's
// post-return function, core type () -> (), when the component declares
// one: the host calls it after every handle (componentize-js's bindings
// reset their call state in it, and refuse the next call without it).
const HandlerPostReturn = "latent:post-return/wasi:http/incoming-handler@0.2#handle"

// ComponentLimits are the deploy limits of a component's own structure
// (its core modules are then held to the runner's limits once merged):
// documented in docs/guest-abi.md, "wasi-http ABI".
func ComponentLimits() component.Limits { return component.DefaultLimits() }

// Flatten decodes and plans component b, refuses the interfaces the host
// does not provide and a component without the incoming-handler, and
// merges its core modules into one.
func Flatten(b []byte) ([]byte, error) {
	plan, err := component.Plan(b, ComponentLimits())
	if err != nil {
		return nil, errors.Wrap(err, "component")
	}
	for _, inst := range plan.Imports {
		if !Provides(inst) {
			return nil, errors.Newf("component: unsupported-import %s: the node does not provide this interface (the wasi-http ABI provides wasi:http, wasi:io, wasi:clocks, wasi:random, wasi:cli and an empty wasi:filesystem, at 0.2.x)", inst)
		}
	}
	if !slices.ContainsFunc(plan.Lifts, func(l component.Lift) bool { return l.Export == HandlerExport }) {
		return nil, errors.New("component: it does not export wasi:http/incoming-handler@0.2.x (a wasi-http guest is a component of the wasi:http/proxy world)")
	}
	merged, err := coremerge.Merge(plan.Merge)
	if err != nil {
		return nil, errors.Wrap(err, "component: merging its core modules")
	}
	return merged, nil
}

// Host is the type of every function the host modules export, by module
// and name.
type Host map[string]map[string]api.FunctionDefinition

// DefineHost instantiates the host modules in rt (Define) and returns
// their functions' types.
func DefineHost(ctx context.Context, rt wazero.Runtime) (Host, error) {
	if err := Define(ctx, rt); err != nil {
		return nil, errors.Wrap(err, "define the wasi-http host")
	}
	h := make(Host)
	for _, name := range Modules() {
		m := rt.Module(name)
		if m == nil {
			return nil, errors.AssertionFailedf("wasi-http host module %q not instantiated", name)
		}
		h[name] = m.ExportedFunctionDefinitions()
	}
	return h, nil
}

// Func is the host function a merged component imports as module.name, or
// a refusal naming what the component asked for: the merger names every
// import after the interface and function the component lowers, with its
// canonical options after a "!".
func (h Host) Func(module, name string) (api.FunctionDefinition, error) {
	mod, ok := h[module]
	if !ok {
		return nil, errors.Newf("component: unsupported-import %s: the node does not provide this interface", module)
	}
	def, ok := mod[name]
	if !ok {
		fn, _, _ := strings.Cut(name, "!")
		return nil, errors.Newf("component: unsupported-import %s#%s: the node's %s has no such function (or not with these canonical options)", module, fn, module)
	}
	return def, nil
}

package wasihttp

// The host modules: every function declared once with its WIT types, and
// registered under each name its canonical options may give it.

import (
	"context"
	"runtime"
	"slices"
	"strings"

	"github.com/cockroachdb/errors"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/latent-node/latent-node/runner/internal/canon"
	"github.com/latent-node/latent-node/runner/internal/component"
)

// fn is one host function: its interface (a host module name), WIT name,
// types and implementation (which gets the lifted arguments and returns
// the results).
type fn struct {
	module          string
	name            string
	params, results []*canon.Type
	impl            func(a *Activation, args []any) []any
	// view: the list<u8> arguments are views of the guest's memory
	// (canon.Options.ViewBytes), which impl must copy what it keeps of.
	view bool
}

// registry is every host function, by module.
var registry = map[string][]fn{}

func def(module, name string, params, results []*canon.Type, impl func(a *Activation, args []any) []any) {
	registry[module] = append(registry[module], fn{module: module, name: name, params: params, results: results, impl: impl})
}

// defView is def of a function whose byte lists are views (fn.view).
func defView(module, name string, params, results []*canon.Type, impl func(a *Activation, args []any) []any) {
	registry[module] = append(registry[module], fn{module: module, name: name, params: params, results: results, impl: impl, view: true})
}

// drop declares the [resource-drop] of resource res of module.
func drop(module, name string, res uint32, onDrop func(a *Activation, rep any)) {
	def(module, "[resource-drop]"+name, ts(canon.OwnOf(res)), nil, func(a *Activation, args []any) []any {
		rep := take[any](a, args[0], res)
		if onDrop != nil {
			onDrop(a, rep)
		}
		return nil
	})
}

func ts(t ...*canon.Type) []*canon.Type { return t }

// needs reports whether t contains a string (strings) or anything lowering
// must allocate for (alloc: strings and lists).
func needs(t *canon.Type) (strings, alloc bool) {
	switch t.Kind {
	case canon.String:
		return true, true
	case canon.List:
		s, _ := needs(t.Elem)
		return s, true
	}
	for _, c := range append(append(slices.Clone(t.Fields), t.Cases...), t.Elem) {
		if c == nil {
			continue
		}
		s, al := needs(c)
		strings, alloc = strings || s, alloc || al
	}
	return strings, alloc
}

func needsAll(ts []*canon.Type) (strs, alloc bool) {
	for _, t := range ts {
		s, a := needs(t)
		strs, alloc = strs || s, alloc || a
	}
	return strs, alloc
}

// Modules lists the host modules Define instantiates.
func Modules() []string {
	out := make([]string, 0, len(registry))
	for m := range registry {
		out = append(out, m)
	}
	slices.Sort(out)
	return out
}

// Provides reports whether the host implements instance, as a component
// names it ("wasi:http/types@0.2.10").
func Provides(instance string) bool {
	m, err := component.HostModule(instance)
	if err != nil {
		return false
	}
	_, ok := registry[m]
	return ok
}

var encodings = []struct {
	suffix string
	enc    canon.Encoding
}{{"utf8", canon.UTF8}, {"utf16", canon.UTF16}, {"latin1+utf16", canon.Latin1UTF16}}

// Define instantiates the host modules in rt.
func Define(ctx context.Context, rt wazero.Runtime) error {
	for _, module := range Modules() {
		b := rt.NewHostModuleBuilder(module)
		for i := range registry[module] {
			f := &registry[module][i]
			pStr, _ := needsAll(f.params)
			rStr, alloc := needsAll(f.results)
			params, results := canon.Signature(f.params, f.results, true)
			for _, e := range encodings {
				if e.enc != canon.UTF8 && !pStr && !rStr {
					continue
				}
				for k := -1; k < component.MaxReallocs; k++ {
					if k < 0 && alloc {
						continue // lowering it needs a realloc
					}
					b.NewFunctionBuilder().WithGoModuleFunction(f.goFunc(k, e.enc), params, results).
						Export(component.HostName(f.name, k, e.suffix))
				}
			}
		}
		if _, err := b.Instantiate(ctx); err != nil {
			return errors.Wrapf(err, "wasihttp: host module %s", module)
		}
	}
	return nil
}

// goFunc is f's host function for realloc k and encoding enc: the
// arguments lifted, one unit of fuel charged, the implementation called,
// the results lowered. A lifting or lowering error is the guest's trap.
func (f *fn) goFunc(k int, enc canon.Encoding) api.GoModuleFunction {
	return api.GoModuleFunc(func(ctx context.Context, mod api.Module, stack []uint64) {
		defer func() {
			// A Go runtime error here comes from handling the guest's
			// values (a case the checks missed): the activation traps,
			// the node goes on. Typed stops and traps pass through.
			if p := recover(); p != nil {
				if re, ok := p.(runtime.Error); ok {
					panic(errors.Wrapf(canon.ErrTrap, "wasihttp: %s: %v", f.fnName(), re))
				}
				panic(p)
			}
		}()
		a := From(ctx)
		a.env.Charge(1)
		o := a.options(ctx, mod, k, enc)
		o.ViewBytes = f.view
		args, err := canon.LiftArgs(o, f.params, stack)
		check(err)
		res := f.impl(a, args)
		check(canon.LowerResults(o, f.params, f.results, stack, res))
	})
}

// fnName is f's qualified name, for messages.
func (f *fn) fnName() string { return f.module + "#" + strings.TrimPrefix(f.name, "[method]") }

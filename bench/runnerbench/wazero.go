package main

// The plain wazero baseline: the same guests un-instrumented, fresh or as
// warm instances.

import (
	"bytes"
	"context"
	"io"
	"strings"

	"github.com/cockroachdb/errors"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
)

// wazeroEnv runs the same guests un-instrumented in plain wazero, configured
// as the Runner configures its runtime (compiler engine, core features 2.0,
// WASI) minus fuel: the unmetered baseline.
type wazeroEnv struct {
	rt   wazero.Runtime
	mods map[string]wazero.CompiledModule
}

func newWazeroEnv(ctx context.Context, guests map[string][]byte) (*wazeroEnv, error) {
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigCompiler().WithCoreFeatures(api.CoreFeaturesV2))
	if _, err := wasi_snapshot_preview1.Instantiate(ctx, rt); err != nil {
		_ = rt.Close(ctx)
		return nil, errors.Wrap(err, "runnerbench: wazero WASI")
	}
	w := &wazeroEnv{rt: rt, mods: map[string]wazero.CompiledModule{}}
	for name, wasm := range guests {
		m, err := rt.CompileModule(ctx, wasm)
		if err != nil {
			_ = rt.Close(ctx)
			return nil, errors.Wrapf(err, "runnerbench: wazero compile %s", name)
		}
		w.mods[name] = m
	}
	return w, nil
}

func (w *wazeroEnv) close(ctx context.Context) { _ = w.rt.Close(ctx) }

// activate instantiates name with stdin input and captured stdout, calls
// _start and closes the instance: the Runner's Run without fuel, permit or
// classification.
func (w *wazeroEnv) activate(ctx context.Context, name string, input []byte) ([]byte, error) {
	var stdout bytes.Buffer
	cfg := wazero.NewModuleConfig().WithName("").WithStartFunctions().
		WithStdin(bytes.NewReader(input)).WithStdout(&stdout).WithStderr(io.Discard).
		WithEnv("LATENT_ACTIVATION_ID", "bench").WithEnv("LATENT_REVISION", "v1").WithArgs("_start").
		WithSysWalltime().WithSysNanotime()
	mod, err := w.rt.InstantiateModule(ctx, w.mods[name], cfg)
	if err != nil {
		return nil, errors.Wrapf(err, "runnerbench: wazero instantiate %s", name)
	}
	_, err = mod.ExportedFunction("_start").Call(ctx)
	err = errors.CombineErrors(err, mod.Close(ctx))
	if err != nil {
		return nil, errors.Wrapf(err, "runnerbench: wazero run %s", name)
	}
	return stdout.Bytes(), nil
}

// compile adds module name.
func (w *wazeroEnv) compile(ctx context.Context, name string, wasm []byte) error {
	m, err := w.rt.CompileModule(ctx, wasm)
	if err != nil {
		return errors.Wrapf(err, "runnerbench: wazero compile %s", name)
	}
	w.mods[name] = m
	return nil
}

// reactorConfig is a reactor instance's configuration: no start function,
// stdin, stdout, the activation's variables and env ("NAME=value").
func reactorConfig(stdin io.Reader, stdout io.Writer, env []string) wazero.ModuleConfig {
	cfg := wazero.NewModuleConfig().WithName("").WithStartFunctions().
		WithStdin(stdin).WithStdout(stdout).WithStderr(io.Discard).
		WithEnv("LATENT_ACTIVATION_ID", "bench").WithEnv("LATENT_REVISION", "v1").
		WithSysWalltime().WithSysNanotime()
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		cfg = cfg.WithEnv(k, v)
	}
	return cfg
}

// call calls mod's export, if not empty.
func call(ctx context.Context, mod api.Module, export string) error {
	if export == "" {
		return nil
	}
	fn := mod.ExportedFunction(export)
	if fn == nil {
		return errors.Newf("runnerbench: no export %q", export)
	}
	_, err := fn.Call(ctx)
	return err
}

// activateFresh is a fresh reactor activation: instantiate name without a
// start function, call init (if not empty) and export, close.
func (w *wazeroEnv) activateFresh(ctx context.Context, name, init, export string, input []byte, env []string) ([]byte, error) {
	var stdout bytes.Buffer
	mod, err := w.rt.InstantiateModule(ctx, w.mods[name], reactorConfig(bytes.NewReader(input), &stdout, env))
	if err != nil {
		return nil, errors.Wrapf(err, "runnerbench: wazero instantiate %s", name)
	}
	err = call(ctx, mod, init)
	if err == nil {
		err = call(ctx, mod, export)
	}
	err = errors.CombineErrors(err, mod.Close(ctx))
	if err != nil {
		return nil, errors.Wrapf(err, "runnerbench: wazero run %s", name)
	}
	return stdout.Bytes(), nil
}

// warmInstance is one instance of a module, initialised once, whose export
// is called activation after activation with no reset between them: the
// floor of any warm activation.
type warmInstance struct {
	mod    api.Module
	export string
	fn     api.Function // looked up once: each lookup allocates a call engine and its stack
	stdin  bytes.Reader
	stdout bytes.Buffer
}

// newWarm instantiates name with env, calls init (if not empty) once, and
// returns the instance.
func (w *wazeroEnv) newWarm(ctx context.Context, name, init, export string, env []string) (*warmInstance, error) {
	wi := &warmInstance{export: export}
	mod, err := w.rt.InstantiateModule(ctx, w.mods[name], reactorConfig(&wi.stdin, &wi.stdout, env))
	if err != nil {
		return nil, errors.Wrapf(err, "runnerbench: wazero instantiate %s", name)
	}
	wi.mod = mod
	if err := call(ctx, mod, init); err != nil {
		_ = mod.Close(ctx)
		return nil, errors.Wrapf(err, "runnerbench: wazero initialise %s", name)
	}
	if wi.fn = mod.ExportedFunction(export); wi.fn == nil {
		_ = mod.Close(ctx)
		return nil, errors.Newf("runnerbench: %s has no export %q", name, export)
	}
	return wi, nil
}

// activate calls the export with stdin input and returns its stdout (valid
// until the next call).
func (wi *warmInstance) activate(ctx context.Context, input []byte) ([]byte, error) {
	wi.stdin.Reset(input)
	wi.stdout.Reset()
	if _, err := wi.fn.Call(ctx); err != nil {
		return nil, errors.Wrapf(err, "runnerbench: wazero warm call %s", wi.export)
	}
	return wi.stdout.Bytes(), nil
}

func (wi *warmInstance) close(ctx context.Context) { _ = wi.mod.Close(ctx) }

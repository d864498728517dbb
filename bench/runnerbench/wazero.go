package main

import (
	"bytes"
	"context"
	"io"

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

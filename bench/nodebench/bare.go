package main

// The baseline servers of the flood scenarios: the -serve-bare mode (plain
// wazero, or net/http without wasm) and starting it as a pinned process.

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/latent-node/latent-node/bench/internal/nodeproc"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
	"github.com/tetratelabs/wazero/sys"
)

// The baseline servers of the flood scenarios (-serve-bare).
const (
	bareWazero = "wazero" // net/http + wazero, a fresh instance per request
	bareNoWasm = "nowasm" // net/http, the handler copies the body back
)

// floodGuests are the guests the baseline wazero server runs, each at
// POST /<name>.
var floodGuests = []string{"echo", "compute"}

// maxBareBody bounds a request body of the baseline servers, as the node's
// max_payload_bytes does.
const maxBareBody = 64 << 10

// serveBare is the hidden mode -serve-bare: it serves the baseline mode on
// listen, prints the bound address as the first line of stdout, and serves
// until interrupted.
func serveBare(mode, listen string) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	var h http.Handler
	switch mode {
	case bareWazero:
		w, err := newWasmHandler(ctx)
		if err != nil {
			return err
		}
		defer w.close()
		h = w
	case bareNoWasm:
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, err := io.ReadAll(io.LimitReader(r.Body, maxBareBody))
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			_, _ = w.Write(body)
		})
	default:
		return errors.Newf("nodebench: -serve-bare %q: want %s or %s", mode, bareWazero, bareNoWasm)
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return errors.Wrap(err, "nodebench: listen")
	}
	fmt.Println(ln.Addr().String())
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	var wg sync.WaitGroup
	wg.Go(func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	})
	err = srv.Serve(ln)
	stop()
	wg.Wait()
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return errors.Wrap(err, "nodebench: serve")
}

// wasmHandler runs a guest per request in plain wazero: the compiler
// engine with core features 2.0 like the node's runner, WASI instantiated
// once, each module compiled once; per request a fresh instance with the
// body on stdin and stdout captured. No fuel, no admission, no scheduler.
type wasmHandler struct {
	rt   wazero.Runtime
	mods map[string]wazero.CompiledModule
}

func newWasmHandler(ctx context.Context) (*wasmHandler, error) {
	root, err := nodeproc.ModuleRoot()
	if err != nil {
		return nil, err
	}
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigCompiler().WithCoreFeatures(api.CoreFeaturesV2))
	if _, err := wasi_snapshot_preview1.Instantiate(ctx, rt); err != nil {
		_ = rt.Close(ctx)
		return nil, errors.Wrap(err, "nodebench: wazero WASI")
	}
	w := &wasmHandler{rt: rt, mods: map[string]wazero.CompiledModule{}}
	for _, name := range floodGuests {
		wasm, err := os.ReadFile(filepath.Join(root, "testdata", "wasm", name+".wasm"))
		if err != nil {
			_ = rt.Close(ctx)
			return nil, errors.Wrapf(err, "nodebench: guest %s", name)
		}
		m, err := rt.CompileModule(ctx, wasm)
		if err != nil {
			_ = rt.Close(ctx)
			return nil, errors.Wrapf(err, "nodebench: compile %s", name)
		}
		w.mods[name] = m
	}
	return w, nil
}

func (w *wasmHandler) close() { _ = w.rt.Close(context.Background()) }

func (w *wasmHandler) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	m, ok := w.mods[strings.TrimPrefix(r.URL.Path, "/")]
	if !ok {
		http.NotFound(rw, r)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBareBody))
	if err != nil {
		http.Error(rw, err.Error(), http.StatusBadRequest)
		return
	}
	var stdout bytes.Buffer
	cfg := wazero.NewModuleConfig().WithName("").WithStartFunctions().
		WithStdin(bytes.NewReader(body)).WithStdout(&stdout).WithStderr(io.Discard)
	mod, err := w.rt.InstantiateModule(r.Context(), m, cfg)
	if err != nil {
		http.Error(rw, err.Error(), http.StatusInternalServerError)
		return
	}
	_, err = mod.ExportedFunction("_start").Call(r.Context())
	_ = mod.Close(r.Context())
	if exit := (*sys.ExitError)(nil); errors.As(err, &exit) && exit.ExitCode() == 0 {
		err = nil
	}
	if err != nil {
		http.Error(rw, err.Error(), http.StatusInternalServerError)
		return
	}
	_, _ = rw.Write(stdout.Bytes())
}

// bareProc is a running baseline server (this program in -serve-bare mode).
type bareProc struct {
	cmd    *exec.Cmd
	url    string
	pid    int
	errBuf bytes.Buffer // its stderr
	done   chan struct{}
	err    error // cmd.Wait's, valid once done is closed
}

// startBare starts this program as the baseline server mode, pinned to cpus
// when cpus is not empty, and reads the address it listens on.
func startBare(mode, cpus string) (*bareProc, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, errors.Wrap(err, "nodebench: own executable")
	}
	name, args := self, []string{"-serve-bare", mode, "-listen", "127.0.0.1:0"}
	if cpus != "" {
		name, args = "taskset", append([]string{"-c", cpus, self}, args...)
	}
	b := &bareProc{done: make(chan struct{})}
	b.cmd = exec.Command(name, args...)
	b.cmd.Stderr = &b.errBuf
	out, err := b.cmd.StdoutPipe()
	if err != nil {
		return nil, errors.Wrap(err, "nodebench: stdout pipe")
	}
	if err := b.cmd.Start(); err != nil {
		return nil, errors.Wrapf(err, "nodebench: start the %s server", mode)
	}
	b.pid = b.cmd.Process.Pid
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		if sc.Scan() {
			addr <- strings.TrimSpace(sc.Text())
		}
		_, _ = io.Copy(io.Discard, out)
		b.err = b.cmd.Wait()
		close(b.done)
	}()
	select {
	case a := <-addr:
		b.url = "http://" + a
		return b, nil
	case <-b.done:
		return nil, errors.Newf("nodebench: the %s server exited: %v\n%s", mode, b.err, b.errBuf.String())
	case <-time.After(30 * time.Second):
		b.stop()
		return nil, errors.Newf("nodebench: the %s server printed no address within 30s", mode)
	}
}

// stop interrupts the server, kills it after 5 s, and reaps it.
func (b *bareProc) stop() {
	_ = b.cmd.Process.Signal(os.Interrupt)
	select {
	case <-b.done:
	case <-time.After(5 * time.Second):
		_ = b.cmd.Process.Kill()
		<-b.done
	}
}

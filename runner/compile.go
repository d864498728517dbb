// The compile worker (compiler): bounded, low-priority compile threads,
// and how a compile failure is reported (ErrStorageFull, a corrupt cache
// entry, ErrCompileFailed).

package runner

import (
	"context"
	"io/fs"
	"os"
	"runtime"
	"strings"
	"syscall"

	"github.com/cockroachdb/errors"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/experimental"

	"github.com/latent-node/latent-node/catalog"
	"github.com/latent-node/latent-node/runner/internal/wazcache"
)

// compiler is the bounded compile worker: at most cap(slots) inspections
// and compiles run at a time, each on a thread of its own at a lower
// priority (onWorker), compiling into rt with its compilation cache
// (on disk under cacheDir, when set).
type compiler struct {
	rt             wazero.Runtime
	cacheDir       string        // Config.CacheDir
	onCacheDiscard func(error)   // Config.OnCacheDiscard
	slots          chan struct{} // one token per running compile
}

// compileNice is the nice value of a compile worker's thread on Linux
// (prio_linux.go): below the node's other threads, so compiles take the
// CPU running guests leave. Elsewhere the priority is left as it is.
const compileNice = 10

func newCompiler(rt wazero.Runtime, cfg Config) *compiler {
	return &compiler{rt: rt, cacheDir: cfg.CacheDir, onCacheDiscard: cfg.OnCacheDiscard,
		slots: make(chan struct{}, cfg.CompileConcurrency)}
}

// compile compiles an instrumented module. The instrumenter validated the
// module, so a failure is
// the host's: a full disk (ErrStorageFull), a corrupt entry of the on-disk
// compilation cache (discarded, reported to Config.OnCacheDiscard, and
// compiled again once), or anything else (ErrCompileFailed). No returned
// error contains a host path; the cause is kept as a secondary error for
// logs.
//
// REQUIRES: the caller runs on a worker (onWorker).
func (c *compiler) compile(ctx context.Context, wasm []byte) (wazero.CompiledModule, error) {
	compiled, err := c.compileHere(ctx, wasm)
	if err == nil {
		return compiled, nil
	}
	if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		return nil, errors.Wrap(ctx.Err(), "runner: waiting to compile")
	}
	if full := storageFull(err); full != nil {
		return nil, full
	}
	if c.cacheDir == "" || !cacheReadFault(err) {
		return nil, errors.Mark(errors.Mark(errors.WithSecondaryError(errors.New("runner: compile failed (host fault)"), err), ErrCompileFailed), catalog.ErrHostFault)
	}
	discard := errors.WithSecondaryError(errors.New("runner: discarded a corrupt compilation cache entry"), err)
	if !wazcache.DiscardCorrupt(c.cacheDir) {
		discard = errors.WithSecondaryError(errors.New("runner: cleared the compilation cache (a corrupt entry could not be identified)"), err)
	}
	if c.onCacheDiscard != nil {
		c.onCacheDiscard(discard)
	}
	if compiled, err = c.compileHere(ctx, wasm); err == nil {
		return compiled, nil
	}
	if full := storageFull(err); full != nil {
		return nil, full
	}
	return nil, errors.Mark(errors.Mark(errors.WithSecondaryError(errors.New("runner: compile failed after discarding the compilation cache (host fault)"), err), ErrCompileFailed), catalog.ErrHostFault)
}

// onWorker waits for one of Config.CompileConcurrency slots (or for ctx)
// and runs fn on a goroutine of its own, which it waits for. That goroutine
// locks its OS thread and lowers the thread's scheduling priority, so
// inspections and compiles yield the CPU to running guests; it returns
// without unlocking, so the Go runtime discards the thread with its lowered
// priority instead of reusing it. A panic in fn is returned as an error
// marked catalog.ErrHostFault: the module was not at fault.
// Everything Inspect does that costs memory in proportion to the module
// (decoding, validation, instrumentation, compilation) runs inside fn, so
// at most CompileConcurrency modules are in flight at once.
func (c *compiler) onWorker(ctx context.Context, fn func() error) error {
	select {
	case c.slots <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-c.slots }()
	done := make(chan error, 1)
	go func() {
		var err error
		defer func() {
			if p := recover(); p != nil {
				err = errors.Mark(errors.Newf("runner: inspection panicked (host fault): %v", p), catalog.ErrHostFault)
			}
			done <- err
		}()
		runtime.LockOSThread()
		lowerThreadPriority()
		err = fn()
	}()
	return <-done
}

// compileHere compiles wasm with a single wazero worker on the calling
// goroutine.
//
// REQUIRES: the caller runs on a worker (onWorker).
func (c *compiler) compileHere(ctx context.Context, wasm []byte) (wazero.CompiledModule, error) {
	if compileHook != nil {
		compileHook()
	}
	wctx := experimental.WithCompilationWorkers(ctx, 1)
	compiled, err := c.rt.CompileModule(wctx, wasm)
	if err != nil && cacheWriteFault(err) {
		dropUnwrittenCompile(wctx, c.rt, wasm)
	}
	return compiled, err
}

// dropUnwrittenCompile undoes what a compile whose cache write failed left
// behind. wazero adds compiled code to its in-memory cache before writing
// the cache file, and returns the write's error without removing it, so
// the engine holds a reference no CompiledModule owns. Compiling again finds
// the code in memory and returns a CompiledModule (a second reference);
// closing it twice drops both.
func dropUnwrittenCompile(ctx context.Context, rt wazero.Runtime, wasm []byte) {
	c, err := rt.CompileModule(ctx, wasm)
	if err != nil {
		return
	}
	_ = c.Close(ctx)
	_ = c.Close(ctx)
}

// storageFull returns err as ErrStorageFull and catalog.ErrStorageFull
// (wrapping its errno)
// when a write failed for want of disk space or quota, else nil.
func storageFull(err error) error {
	for _, errno := range []syscall.Errno{syscall.ENOSPC, syscall.EDQUOT} {
		if errors.Is(err, errno) {
			// The errno itself (no path) stays in the chain, for errors.Is and
			// errors.As; the full cause is kept for logs only.
			full := errors.Wrap(errno, "runner: insufficient storage for the compilation cache")
			return errors.Mark(errors.Mark(errors.WithSecondaryError(full, err), ErrStorageFull), catalog.ErrStorageFull)
		}
	}
	return nil
}

// wazero's file cache (v1.12.0) reads an entry with os.Open (a failure is
// an *fs.PathError with Op "open"; a corrupt entry fails to decode with a
// "compilationcache: " error) and writes one with os.CreateTemp, a write, a
// sync, a close and os.Rename (an *fs.PathError with another Op, or an
// *os.LinkError).

// cacheReadFault reports whether err came from reading wazero's on-disk
// compilation cache.
func cacheReadFault(err error) bool {
	var pathErr *fs.PathError
	return strings.HasPrefix(err.Error(), "compilationcache: ") || errors.As(err, &pathErr) && pathErr.Op == "open"
}

// cacheWriteFault reports whether err came from writing an entry of
// wazero's on-disk compilation cache.
func cacheWriteFault(err error) bool {
	var pathErr *fs.PathError
	var linkErr *os.LinkError
	return errors.As(err, &pathErr) && pathErr.Op != "open" || errors.As(err, &linkErr)
}

// compileHook, when set by a test, runs on the compile worker's thread
// before it compiles.
var compileHook func()

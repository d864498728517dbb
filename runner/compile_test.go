package runner

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/errors"
	"github.com/tetratelabs/wazero"

	"github.com/latent-node/latent-node/catalog"
	"github.com/latent-node/latent-node/internal/testwasm"
	"github.com/latent-node/latent-node/runner/internal/fuel"
	"github.com/latent-node/latent-node/runner/internal/wazcache"
	"github.com/latent-node/latent-node/vocab"
)

// cacheEntries returns the files of wazero's cache directories under dir.
func cacheEntries(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "wazero-*", "*"))
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// TestInspect_corruptCacheEntry: a cache entry damaged on disk is found,
// discarded and reported, and Inspect compiles again and succeeds.
func TestInspect_corruptCacheEntry(t *testing.T) {
	ctx := context.Background()
	wasm := testwasm.Bytes(t, "fib")
	res, err := fuel.Instrument(wasm, fuel.Config{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name       string
		corrupt    func(b []byte) []byte
		identified bool
	}{
		// Bytes of the code itself: its checksum no longer matches.
		{"code", func(b []byte) []byte {
			for i := len(b) / 2; i < len(b)/2+16; i++ {
				b[i] ^= 0xff
			}
			return b
		}, true},
		// A source map announced after the (intact) code but missing: wazero
		// refuses the entry, the layout check cannot tell, so the whole
		// cache is cleared.
		{"tail", func(b []byte) []byte {
			at := len(b) - 4 - 1 // the source-map flag, before the empty catch table
			b[at] = 1
			return b[:at+1]
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			r1, err := New(ctx, Config{CacheDir: dir})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := r1.Inspect(ctx, digestOf(wasm), wasm); err != nil {
				t.Fatal(err)
			}
			_ = r1.Close(ctx)
			entries := cacheEntries(t, dir)
			if len(entries) != 1 {
				t.Fatalf("cache entries: %q", entries)
			}
			b, err := os.ReadFile(entries[0])
			if err != nil {
				t.Fatal(err)
			}
			if !wazcache.EntryIntact(entries[0]) {
				t.Fatal("a fresh entry fails the layout check")
			}
			if err := os.WriteFile(entries[0], tc.corrupt(b), 0o600); err != nil {
				t.Fatal(err)
			}
			if wazcache.EntryIntact(entries[0]) == tc.identified {
				t.Fatalf("layout check of the damaged entry: %v", !tc.identified)
			}

			var discarded []error
			r2, err := New(ctx, Config{CacheDir: dir, OnCacheDiscard: func(err error) { discarded = append(discarded, err) }})
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = r2.Close(ctx) }()
			// Negative control: wazero itself refuses the damaged entry.
			if c, err := r2.compileOnWorker(ctx, res.Module); err == nil || !cacheReadFault(err) {
				if c != nil {
					_ = c.Close(ctx)
				}
				t.Fatalf("wazero loaded a damaged entry: %v", err)
			}
			if _, err := r2.Inspect(ctx, digestOf(wasm), wasm); err != nil {
				t.Fatalf("inspect with a damaged cache entry: %v", err)
			}
			if len(discarded) != 1 || strings.Contains(discarded[0].Error(), dir) {
				t.Fatalf("discard reports: %v", discarded)
			}
			t.Logf("reported: %v", discarded[0])
			if entries := cacheEntries(t, dir); len(entries) != 1 || !wazcache.EntryIntact(entries[0]) {
				t.Fatalf("cache not rewritten: %q", entries)
			}
		})
	}
}

// TestInspect_cacheUnusable: a cache directory that cannot be used (here a
// file where wazero's directory was, so every entry fails to open, and
// discarding entries does not help) is a host fault (ErrCompileFailed)
// whose message names no path; once the directory is back, Inspect
// succeeds.
func TestInspect_cacheUnusable(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	r, err := New(ctx, Config{CacheDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = r.Close(ctx) }()
	subdirs, _ := filepath.Glob(filepath.Join(dir, "wazero-*"))
	if len(subdirs) != 1 {
		t.Fatalf("wazero cache directories: %q", subdirs)
	}
	// A file where wazero's directory was.
	if err := os.Remove(subdirs[0]); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(subdirs[0], nil, 0o600); err != nil {
		t.Fatal(err)
	}
	wasm := testwasm.Bytes(t, "fib")
	_, err = r.Inspect(ctx, digestOf(wasm), wasm)
	if !errors.Is(err, ErrCompileFailed) || strings.Contains(err.Error(), dir) {
		t.Fatalf("want ErrCompileFailed without the path, have %v", err)
	}
	if r.Prepared(digestOf(wasm)) || r.CompiledBytes() != 0 {
		t.Fatal("a failed Inspect kept something")
	}
	t.Logf("error: %v", err)
	if err := os.Remove(subdirs[0]); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(subdirs[0], 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Inspect(ctx, digestOf(wasm), wasm); err != nil {
		t.Fatalf("after the disk came back: %v", err)
	}
}

// TestStorageFull: ENOSPC and EDQUOT anywhere in a compile's error become
// ErrStorageFull, still matching the errno, without the path.
func TestStorageFull(t *testing.T) {
	const path = "/very/secret/cache/dir/abcdef.123.tmp"
	for _, errno := range []syscall.Errno{syscall.ENOSPC, syscall.EDQUOT} {
		cause := errors.Wrap(&fs.PathError{Op: "write", Path: path, Err: errno}, "wazero")
		err := storageFull(cause)
		var got syscall.Errno
		if !errors.Is(err, ErrStorageFull) || !errors.Is(err, catalog.ErrStorageFull) || !errors.Is(err, errno) || !errors.As(err, &got) || got != errno ||
			strings.Contains(err.Error(), path) {
			t.Fatalf("%v: %v", errno, err)
		}
		if !cacheWriteFault(cause) || cacheReadFault(cause) {
			t.Fatalf("%v: a failed write is not a write fault", errno)
		}
	}
	if storageFull(&fs.PathError{Op: "write", Path: path, Err: syscall.EIO}) != nil {
		t.Fatal("EIO is not storage full")
	}
}

// TestCompile_boundedLowPriority: compiles run at most CompileConcurrency
// at a time, each on a thread of lowered priority.
func TestCompile_boundedLowPriority(t *testing.T) {
	ctx := context.Background()
	r, err := New(ctx, Config{CompileConcurrency: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = r.Close(ctx) }()
	var running, most atomic.Int32
	var mu sync.Mutex
	nice := map[int]bool{}
	release := make(chan struct{})
	entered := make(chan struct{}, 8)
	compileHook = func() {
		n := running.Add(1)
		defer running.Add(-1)
		for {
			m := most.Load()
			if n <= m || most.CompareAndSwap(m, n) {
				break
			}
		}
		mu.Lock()
		nice[threadNice()] = true
		mu.Unlock()
		entered <- struct{}{}
		<-release
	}
	defer func() { compileHook = nil }()
	var wg sync.WaitGroup
	failed := make(chan struct{}, 5)
	for i := range 5 {
		wg.Go(func() {
			// Distinct digests: each needs its own compile.
			wasm := testwasm.Bytes(t, "trivial")
			if _, err := r.Inspect(ctx, vocab.Digest("sha256:"+strings.Repeat("0", 63)+string(rune('a'+i))), wasm); err != nil {
				t.Error(err)
				failed <- struct{}{}
			}
		})
	}
	for range 2 {
		select {
		case <-entered:
		case <-failed:
			t.Fatal("an Inspect failed")
		}
	}
	close(release)
	wg.Wait()
	if most.Load() != 2 {
		t.Fatalf("%d compiles at once, want 2", most.Load())
	}
	if runtime.GOOS == "linux" && (len(nice) != 1 || !nice[compileNice]) {
		t.Fatalf("compile threads' nice values: %v, want %d", nice, compileNice)
	}
}

// TestInspect_deployLimits: Config.Limits reaches the instrumenter; a
// module over one is refused naming the key, and compiles nothing.
func TestInspect_deployLimits(t *testing.T) {
	ctx := context.Background()
	r, err := New(ctx, Config{Limits: Limits{DataBytes: 64 << 10}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = r.Close(ctx) }()
	wasm := testwasm.Bytes(t, "hostile/data_big")
	_, err = r.Inspect(ctx, digestOf(wasm), wasm)
	var lim *LimitError
	if !errors.Is(err, ErrLimit) || !errors.As(err, &lim) || lim.Key != "deploy_limits.data_bytes" ||
		lim.Limit != 64<<10 || lim.Actual <= lim.Limit || !strings.Contains(err.Error(), "deploy_limits.data_bytes") {
		t.Fatalf("want a data_bytes refusal, have %v", err)
	}
	if r.Prepared(digestOf(wasm)) || r.CompiledBytes() != 0 {
		t.Fatal("a refused module was compiled")
	}
	// Negative control: the default limits accept it.
	if _, err := sharedRunner(t).Inspect(ctx, digestOf(wasm), wasm); err != nil {
		t.Fatal(err)
	}
}

// TestInspect_compilePanic: a compile that panics is a host fault and
// keeps nothing: the estimate is given back, and the next Inspect of the
// same digest compiles instead of waiting forever for the failed one.
func TestInspect_compilePanic(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r, err := New(ctx, Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = r.Close(ctx) }()
	wasm := testwasm.Bytes(t, "trivial")
	d := digestOf(wasm)
	base := r.CompiledBytes()
	var calls atomic.Int32
	compileHook = func() {
		if calls.Add(1) == 1 {
			panic("test: compile panicked")
		}
	}
	defer func() { compileHook = nil }()
	_, err = r.Inspect(ctx, d, wasm)
	if err == nil || !errors.Is(err, catalog.ErrHostFault) {
		t.Fatalf("want a host fault, have %v", err)
	}
	if r.Prepared(d) || r.CompiledBytes() != base {
		t.Fatalf("a panicked compile kept something: prepared %v, %d bytes (baseline %d)", r.Prepared(d), r.CompiledBytes(), base)
	}
	if _, err := r.Inspect(ctx, d, wasm); err != nil {
		t.Fatalf("Inspect after a panicked compile: %v", err)
	}
	if calls.Load() != 2 || !r.Prepared(d) || r.CompiledBytes() != base+CompiledBytesEstimate(lenInstrumented(t, wasm)) {
		t.Fatalf("%d compiles, prepared %v, %d bytes", calls.Load(), r.Prepared(d), r.CompiledBytes())
	}
	r.ReleaseModule(d)
	if r.CompiledBytes() != base {
		t.Fatalf("%d bytes after the release, baseline %d", r.CompiledBytes(), base)
	}
}

// TestInspect_liveDigest: Inspect of a digest whose module is compiled and
// referenced returns the first inspection's information and takes a
// reference, without a worker (every compile slot is taken here) or a
// compile; once the module is released, Inspect needs a worker again.
func TestInspect_liveDigest(t *testing.T) {
	ctx := context.Background()
	r, err := New(ctx, Config{CompileConcurrency: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = r.Close(ctx) }()
	wasm := testwasm.Bytes(t, "trivial")
	d := digestOf(wasm)
	first, err := r.Inspect(ctx, d, wasm)
	if err != nil {
		t.Fatal(err)
	}
	want := first
	want.Exports = slices.Clone(first.Exports)
	first.Exports[0] = "changed by the caller"

	compileHook = func() { t.Error("a live digest was compiled again") }
	defer func() { compileHook = nil }()
	r.compiler.slots <- struct{}{} // no worker available
	defer func() { <-r.compiler.slots }()
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	second, err := r.Inspect(cancelled, d, wasm)
	if err != nil {
		t.Fatalf("Inspect of a live digest: %v", err)
	}
	if !reflect.DeepEqual(second, want) {
		t.Fatalf("second Inspect: %+v, want %+v", second, want)
	}
	r.ReleaseModule(d)
	if !r.Prepared(d) {
		t.Fatal("the second Inspect took no reference")
	}
	r.ReleaseModule(d)
	if r.Prepared(d) || r.CompiledBytes() != 0 {
		t.Fatalf("released twice: prepared %v, %d bytes", r.Prepared(d), r.CompiledBytes())
	}
	// Negative control: with the module released, Inspect waits for a worker.
	if _, err := r.Inspect(cancelled, d, wasm); !errors.Is(err, context.Canceled) {
		t.Fatalf("Inspect of a released digest without a worker: %v", err)
	}
}

// compileOnWorker compiles wasm on a worker, without the rest of Inspect
// (the tests' way to see what wazero itself makes of a cache entry).
func (r *Runner) compileOnWorker(ctx context.Context, wasm []byte) (compiled wazero.CompiledModule, err error) {
	werr := r.compiler.onWorker(ctx, func() error {
		compiled, err = r.compiler.compileHere(ctx, wasm)
		return nil
	})
	if werr != nil {
		return nil, werr
	}
	return compiled, err
}

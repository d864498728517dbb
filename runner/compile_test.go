package runner

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/cockroachdb/errors"

	"github.com/latent-node/latent-node/catalog"
	"github.com/latent-node/latent-node/internal/testwasm"
	"github.com/latent-node/latent-node/runner/internal/fuel"
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
			if !cacheEntryIntact(entries[0]) {
				t.Fatal("a fresh entry fails the layout check")
			}
			if err := os.WriteFile(entries[0], tc.corrupt(b), 0o600); err != nil {
				t.Fatal(err)
			}
			if cacheEntryIntact(entries[0]) == tc.identified {
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
			if entries := cacheEntries(t, dir); len(entries) != 1 || !cacheEntryIntact(entries[0]) {
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
			if _, err := r.Inspect(ctx, catalog.Digest("sha256:"+strings.Repeat("0", 63)+string(rune('a'+i))), wasm); err != nil {
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

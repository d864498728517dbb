package runner

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/latent-node/latent-node/internal/testwasm"
	"github.com/latent-node/latent-node/runner/internal/fuel"
	"github.com/latent-node/latent-node/runner/internal/wazcache"
)

// cacheEntrySet lists the entry names of every wazero subdirectory of dir.
func cacheEntrySet(t *testing.T, dir string) map[string]bool {
	t.Helper()
	subs, _ := filepath.Glob(filepath.Join(dir, "wazero-*"))
	got := map[string]bool{}
	for _, sub := range subs {
		files, err := os.ReadDir(sub)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			got[filepath.Base(sub)+"/"+f.Name()] = true
		}
	}
	return got
}

func TestRunner_CollectCompileCache(t *testing.T) {
	ctx := context.Background()
	subdir, cpu, err := wazcache.Layout(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	fib, trivial := testwasm.Bytes(t, "fib"), testwasm.Bytes(t, "trivial")
	tests := []struct {
		name        string
		release     []string // modules released before collecting
		dryRun      bool
		stale       bool // a subdirectory of another wazero version
		wantKept    int
		wantRemoved int
		wantLeft    int // entries on disk afterwards
	}{
		{name: "all held", wantKept: 2, wantLeft: 2},
		{name: "one released", release: []string{"fib"}, wantKept: 1, wantRemoved: 1, wantLeft: 1},
		{name: "all released", release: []string{"fib", "trivial"}, wantRemoved: 2, wantLeft: 0},
		{name: "dry run", release: []string{"fib"}, dryRun: true, wantKept: 1, wantRemoved: 1, wantLeft: 2},
		{name: "other version", stale: true, wantKept: 2, wantRemoved: 1, wantLeft: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			r, err := New(ctx, Config{CacheDir: dir})
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = r.Close(ctx) }()
			mods := map[string][]byte{"fib": fib, "trivial": trivial}
			for _, wasm := range mods {
				if _, err := r.Inspect(ctx, digestOf(wasm), wasm); err != nil {
					t.Fatal(err)
				}
			}
			before := cacheEntrySet(t, dir)
			if len(before) != 2 {
				t.Fatalf("after two compiles the cache holds %v", before)
			}
			if tt.stale {
				old := filepath.Join(dir, "wazero-v0.0.1-amd64-linux")
				if err := os.MkdirAll(old, 0o750); err != nil {
					t.Fatal(err)
				}
				name := filepath.Join(old, wazcache.EntryName(wazcache.ModuleID(fib), cpu))
				if err := os.WriteFile(name, []byte("old"), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			for _, n := range tt.release {
				r.ReleaseModule(digestOf(mods[n]))
			}
			st, err := r.CollectCompileCache(ctx, tt.dryRun)
			if err != nil {
				t.Fatal(err)
			}
			if st.Kept != tt.wantKept || st.Removed != tt.wantRemoved {
				t.Fatalf("stats %+v, want kept %d removed %d", st, tt.wantKept, tt.wantRemoved)
			}
			if tt.wantRemoved > 0 && st.RemovedBytes == 0 {
				t.Fatalf("removed %d entries of 0 bytes", st.Removed)
			}
			after := cacheEntrySet(t, dir)
			if len(after) != tt.wantLeft {
				t.Fatalf("left %v, want %d entries", after, tt.wantLeft)
			}
			// The entries kept are exactly those of the modules still held.
			for n, wasm := range mods {
				res, err := fuel.Instrument(wasm, fuel.Config{Limits: r.cfg.Limits})
				if err != nil {
					t.Fatal(err)
				}
				name := subdir + "/" + wazcache.EntryName(wazcache.ModuleID(res.Module), cpu)
				if !before[name] {
					t.Fatalf("module %s compiled to an entry not named %s: %v", n, name, before)
				}
				released := false
				for _, rn := range tt.release {
					released = released || rn == n
				}
				if !tt.dryRun && after[name] == released {
					t.Fatalf("module %s (released %v): entry present %v", n, released, after[name])
				}
			}
		})
	}
}

func TestRunner_CollectCompileCacheInMemory(t *testing.T) {
	ctx := context.Background()
	r, err := New(ctx, Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = r.Close(ctx) }()
	if st, err := r.CollectCompileCache(ctx, false); err != nil || st != (CacheGCStats{}) {
		t.Fatalf("without a cache directory: %+v, %v", st, err)
	}
}

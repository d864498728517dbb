// Collect: removing the entries of modules no longer held, their names
// learned once from a probe compile.

package wazcache

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/cockroachdb/errors"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
)

// ErrLayoutUnknown: wazero's naming of its cache entries could not be
// worked out, so Collect removed nothing.
var ErrLayoutUnknown = errors.New("wazcache: unknown compilation cache layout")

// wazero v1.12.0 names a cache entry by
//
//	sha256(module id || "WAZEVO" || CPU features as a little-endian uint64)
//
// in hex, where the module id is sha256(wasm || 0x00) for a module compiled
// without function listeners and without close-on-context-done (as the
// runner compiles), and the CPU features are a small bit set the runner
// cannot read. cacheLayout learns them once per process: it compiles an
// empty module into a temporary cache and finds which small value names the
// entry wazero wrote, and the name of the versioned subdirectory.

// cacheCPUSearch bounds the CPU feature values tried (wazero uses 3 bits).
const cacheCPUSearch = 1 << 16

// cacheLayoutLearned is what the first successful probe learned.
var cacheLayoutLearned struct {
	sync.Mutex
	known  bool
	subdir string
	cpu    uint64
}

// ModuleID is wazero's module id of wasm as the runner compiles it.
func ModuleID(wasm []byte) [32]byte {
	h := sha256.New()
	h.Write(wasm)
	h.Write([]byte{0}) // close-on-context-done is never on
	var id [32]byte
	h.Sum(id[:0])
	return id
}

// EntryName is the name of the cache entry of module id for CPU features cpu.
func EntryName(id [32]byte, cpu uint64) string {
	h := sha256.New()
	h.Write(id[:])
	h.Write([]byte(Magic))
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], cpu)
	h.Write(b[:])
	return hex.EncodeToString(h.Sum(nil))
}

// Layout returns the name of wazero's cache subdirectory and the CPU
// feature value in its entry names, learned once per process.
// The probe compiles into a temporary directory under dir (the cache
// directory, which the runner can write to).
func Layout(ctx context.Context, dir string) (string, uint64, error) {
	l := &cacheLayoutLearned
	l.Lock()
	defer l.Unlock()
	if !l.known {
		subdir, cpu, err := learnCacheLayout(ctx, dir)
		if err != nil {
			return "", 0, err
		}
		l.known, l.subdir, l.cpu = true, subdir, cpu
	}
	return l.subdir, l.cpu, nil
}

func learnCacheLayout(ctx context.Context, parent string) (string, uint64, error) {
	if err := os.MkdirAll(parent, 0o750); err != nil {
		return "", 0, errors.Wrap(err, "wazcache: learn the compilation cache layout")
	}
	dir, err := os.MkdirTemp(parent, ".layout-probe-")
	if err != nil {
		return "", 0, errors.Wrap(err, "wazcache: learn the compilation cache layout")
	}
	defer func() { _ = os.RemoveAll(dir) }()
	cache, err := wazero.NewCompilationCacheWithDir(dir)
	if err != nil {
		return "", 0, errors.Wrap(err, "wazcache: learn the compilation cache layout")
	}
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigCompiler().
		WithCoreFeatures(api.CoreFeaturesV2).WithCompilationCache(cache))
	empty := []byte("\x00asm\x01\x00\x00\x00")
	_, err = rt.CompileModule(ctx, empty)
	err = errors.CombineErrors(err, rt.Close(ctx))
	err = errors.CombineErrors(err, cache.Close(ctx))
	if err != nil {
		return "", 0, errors.Wrap(err, "wazcache: learn the compilation cache layout")
	}
	subs, _ := filepath.Glob(filepath.Join(dir, "wazero-*"))
	if len(subs) != 1 {
		return "", 0, errors.Wrapf(ErrLayoutUnknown, "%d cache subdirectories", len(subs))
	}
	files, err := os.ReadDir(subs[0])
	if err != nil || len(files) != 1 {
		return "", 0, errors.Wrap(ErrLayoutUnknown, "no single cache entry for the probe module")
	}
	id := ModuleID(empty)
	for cpu := uint64(0); cpu < cacheCPUSearch; cpu++ {
		if EntryName(id, cpu) == files[0].Name() {
			return filepath.Base(subs[0]), cpu, nil
		}
	}
	return "", 0, errors.Wrap(ErrLayoutUnknown, "the probe module's entry has an unexpected name")
}

// Stats says what one Collect call found and did.
type Stats struct {
	// Kept counts the entries of the modules kept, KeptBytes their size.
	Kept      int
	KeptBytes uint64
	// Removed counts the entries removed (or, in a dry run, that would be),
	// RemovedBytes their size. It includes every entry of another wazero
	// version's subdirectory: this binary never reads them.
	Removed      int
	RemovedBytes uint64
}

// Collect removes the entries of the compilation cache in dir that belong
// to none of the modules keep (ModuleID of each), and every entry of other
// wazero versions; temporary files and anything not named like an entry
// are left alone. With dryRun it removes nothing and reports what it would
// remove. If the entries' naming cannot be learned it removes nothing and
// returns ErrLayoutUnknown. It reads one directory and hashes one id per
// kept module: no compilation besides a one-off probe of an empty module
// per process.
func Collect(ctx context.Context, dir string, keepIDs [][32]byte, dryRun bool) (Stats, error) {
	var st Stats
	subdir, cpu, err := Layout(ctx, dir)
	if err != nil {
		return st, err
	}
	keep := map[string]bool{}
	for _, id := range keepIDs {
		keep[EntryName(id, cpu)] = true
	}
	subs, _ := filepath.Glob(filepath.Join(dir, "wazero-*"))
	slices.Sort(subs)
	for _, sub := range subs {
		current := filepath.Base(sub) == subdir
		entries, err := os.ReadDir(sub)
		if err != nil {
			return st, errors.Wrap(err, "wazcache: read the compilation cache")
		}
		for _, e := range entries {
			if err := ctx.Err(); err != nil {
				return st, errors.Wrap(err, "wazcache: collect the compilation cache")
			}
			name := e.Name()
			if !e.Type().IsRegular() || len(name) != 64 || strings.Trim(name, "0123456789abcdef") != "" {
				continue // a temporary file of a write under way, or not wazero's
			}
			info, err := e.Info()
			if err != nil {
				continue // removed meanwhile
			}
			size := uint64(info.Size())
			if current && keep[name] {
				st.Kept++
				st.KeptBytes += size
				continue
			}
			if !dryRun {
				if err := os.Remove(filepath.Join(sub, name)); err != nil && !os.IsNotExist(err) {
					return st, errors.Wrap(err, "wazcache: remove a compilation cache entry")
				}
			}
			st.Removed++
			st.RemovedBytes += size
		}
		if !current && !dryRun {
			_ = os.Remove(sub) // empty now, unless something else lives there
		}
	}
	return st, nil
}

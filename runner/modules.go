// The compiled-module table (moduleTable): compiled modules by digest,
// their references and the compiled-bytes bound; Acquire, ReleaseModule,
// Prepared and CompiledBytes.

package runner

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/errors"
	"github.com/tetratelabs/wazero"

	"github.com/latent-node/latent-node/catalog"
	"github.com/latent-node/latent-node/runner/internal/fuel"
	"github.com/latent-node/latent-node/runner/internal/wazcache"
	"github.com/latent-node/latent-node/vocab"
)

// Compiled code is kept per digest while someone references it: the catalog
// (one reference per successful Inspect, given back with ReleaseModule) and
// every activation (Acquire, and Run for its own duration). When the count
// drops to zero the CompiledModule is closed and its code freed; a later
// Inspect of the digest compiles again, from the compilation cache.

// CompiledBytesFactor and CompiledBytesOverhead estimate what wazero keeps
// for a compiled module of n instrumented bytes: CompiledBytesFactor·n +
// CompiledBytesOverhead. Measured with wazero v1.12.0 on amd64: the
// executable code is about 4.1 × the instrumented module (3.5 × for small
// modules), and the decoded module wazero keeps on the Go heap about 1.6 ×
// (3.8 × for small ones); a 4.9 MB instrumented Go program keeps 19.8 MB of
// code and 7.6 MB of heap (5.6 ×).
const (
	CompiledBytesFactor   = 6
	CompiledBytesOverhead = 64 << 10
)

// CompiledBytesEstimate is the size Config.MaxCompiledBytes counts for a
// compiled module of n instrumented bytes.
func CompiledBytesEstimate(n int) uint64 {
	return CompiledBytesFactor*uint64(n) + CompiledBytesOverhead
}

// module is one digest's compiled module and what Run needs to know about it.
type module struct {
	digest vocab.Digest
	bytes  uint64        // CompiledBytesEstimate of the instrumented module
	ready  chan struct{} // closed once the compile finished (ok or not)
	// refs counts the references; the fields below are set before refs
	// first becomes 1 and are not written afterwards. A module whose refs
	// reached zero is dead and never referenced again.
	refs              atomic.Int64
	compiled          wazero.CompiledModule
	info              catalog.ModuleInfo // what Inspect returned for it
	minMemoryBytes    uint64
	tableBytes        uint64 // fuel.Info.TableBytes: the tables' Go heap, charged to the grant
	instantiationFuel uint64
	cacheID           [32]byte // wazero's module id of the instrumented module (wazcache.ModuleID)
	// globals are the exports of the module's mutable globals
	// (fuel.GlobalExport), which a snapshot keeps; mutatesTables is set when
	// its code can change a table or drop a segment, which a snapshot
	// cannot put back (its instances are recreated after each activation).
	globals       []string
	mutatesTables bool
	// hasStart: the instrumented module exports the original's start
	// function (fuel.StartExport). Asking an instance for an export it
	// lacks costs wazero two allocations for an error.
	hasStart bool
}

// ref takes a reference unless the module is not compiled yet or dead.
func (m *module) ref() bool {
	for {
		n := m.refs.Load()
		if n <= 0 {
			return false
		}
		if m.refs.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// moduleTable is the compiled modules by digest, their references and
// their estimated size, bounded by maxBytes. It compiles on compiler, and
// calls unused, with no lock held, when the last reference of a digest's
// module went, before closing the module.
type moduleTable struct {
	compiler *compiler
	maxBytes uint64 // Config.MaxCompiledBytes
	unused   func(vocab.Digest)

	mu            sync.RWMutex
	modules       map[vocab.Digest]*module
	compiledBytes uint64 // estimated size of every entry in modules
}

func newModuleTable(c *compiler, maxBytes uint64, unused func(vocab.Digest)) *moduleTable {
	return &moduleTable{compiler: c, maxBytes: maxBytes, unused: unused, modules: map[vocab.Digest]*module{}}
}

// acquire returns the live module of digest with a reference taken, or nil.
func (t *moduleTable) acquire(digest vocab.Digest) *module {
	t.mu.RLock()
	m := t.modules[digest]
	t.mu.RUnlock()
	if m == nil || !m.ref() {
		return nil
	}
	return m
}

// unref drops a reference; the last one closes the compiled module. A
// module without references is left alone (a caller released more often
// than it referenced: nothing is freed twice).
func (t *moduleTable) unref(m *module) {
	for {
		n := m.refs.Load()
		if n <= 0 {
			return
		}
		if m.refs.CompareAndSwap(n, n-1) {
			if n > 1 {
				return
			}
			break
		}
	}
	t.mu.Lock()
	if t.modules[m.digest] == m {
		delete(t.modules, m.digest)
	}
	t.compiledBytes -= m.bytes
	t.mu.Unlock()
	// No activation holds m any longer, so its warm instances are idle
	// (or already taken out by the idle sweep, which closes them itself).
	t.unused(m.digest)
	_ = m.compiled.Close(context.Background()) // wazero's Close never fails
}

// Acquire takes an activation's reference to digest's compiled module, so
// that it stays compiled until the hold is released. ok is false when the
// runner holds no compiled module for digest: the revision is not
// available here.
func (r *Runner) Acquire(digest vocab.Digest) (hold *ModuleHold, ok bool) {
	m := r.modules.acquire(digest)
	if m == nil {
		return nil, false
	}
	return &ModuleHold{t: r.modules, m: m}, true
}

// ModuleHold is an activation's reference to a compiled module (Acquire).
type ModuleHold struct {
	t        *moduleTable
	m        *module
	released atomic.Bool
}

// Release gives the reference back; calls after the first do nothing.
func (h *ModuleHold) Release() {
	if h.released.CompareAndSwap(false, true) {
		h.t.unref(h.m)
	}
}

// ReleaseModule gives back one reference that a successful Inspect of
// digest handed out (it implements catalog.ModuleReleaser). The compiled
// module is closed once nothing references it. Releasing a digest nobody
// references does nothing.
func (r *Runner) ReleaseModule(digest vocab.Digest) {
	r.modules.release(digest)
}

// Prepared reports whether digest's module is compiled and referenced.
func (r *Runner) Prepared(digest vocab.Digest) bool {
	return r.modules.prepared(digest)
}

// CompiledBytes is the estimated size of the compiled modules the runner
// keeps (CompiledBytesEstimate each), including compiles under way.
func (r *Runner) CompiledBytes() uint64 {
	return r.modules.bytes()
}

// release drops a reference to digest's module, if there is one.
func (t *moduleTable) release(digest vocab.Digest) {
	t.mu.RLock()
	m := t.modules[digest]
	t.mu.RUnlock()
	if m != nil {
		t.unref(m)
	}
}

func (t *moduleTable) prepared(digest vocab.Digest) bool {
	t.mu.RLock()
	defer t.mu.RUnlock()
	m := t.modules[digest]
	return m != nil && m.refs.Load() > 0
}

func (t *moduleTable) bytes() uint64 {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.compiledBytes
}

// cacheIDs returns the cache ids of every module held, compiles under way
// included.
func (t *moduleTable) cacheIDs() [][32]byte {
	t.mu.RLock()
	defer t.mu.RUnlock()
	ids := make([][32]byte, 0, len(t.modules))
	for _, m := range t.modules {
		ids = append(ids, m.cacheID)
	}
	return ids
}

// prepare makes digest's instrumented module compiled and takes one
// reference to it: the live module if there is one, else a new compile
// (one at a time per digest; concurrent callers wait for it). A compile
// that would take the compiled modules past Config.MaxCompiledBytes is
// refused with ErrCompiledCacheFull and keeps nothing. A compile that
// fails or panics keeps nothing either: its entry and estimate are given
// back and waiters are woken.
func (t *moduleTable) prepare(ctx context.Context, digest vocab.Digest, res *fuel.Result, info catalog.ModuleInfo) error {
	for {
		t.mu.Lock()
		if m := t.modules[digest]; m != nil {
			select {
			case <-m.ready:
				if m.ref() {
					t.mu.Unlock()
					return nil
				}
				// Dead, not yet removed: replaced below.
			default:
				t.mu.Unlock()
				select {
				case <-m.ready:
					continue
				case <-ctx.Done():
					return errors.Wrap(ctx.Err(), "runner: waiting for a compile of the same module")
				}
			}
		}
		est := CompiledBytesEstimate(len(res.Module))
		if t.compiledBytes+est > t.maxBytes {
			used := t.compiledBytes
			t.mu.Unlock()
			return errors.Mark(errors.Mark(errors.Newf("runner: compiling this module (about %d MiB) would exceed the compiled code bound (%d of %d MiB in use)",
				est>>20, used>>20, t.maxBytes>>20), ErrCompiledCacheFull), catalog.ErrHostFault)
		}
		m := &module{digest: digest, bytes: est, ready: make(chan struct{}), info: info,
			minMemoryBytes: info.MinMemoryBytes, tableBytes: res.Info.TableBytes, instantiationFuel: instantiationFuel(res.Info), cacheID: wazcache.ModuleID(res.Module)}
		m.info.Exports = slices.Clone(info.Exports) // the caller may keep and change its own
		for _, g := range res.Info.MutableGlobals {
			m.globals = append(m.globals, fuel.GlobalExport(g))
		}
		m.mutatesTables = res.Info.MutatesTables || res.Info.PassiveSegments
		t.modules[digest] = m
		t.compiledBytes += est
		t.mu.Unlock()
		return t.compileInto(ctx, m, res.Module)
	}
}

// compileInto compiles wasm for m, which prepare registered. On success m
// holds the caller's reference; on an error or a panic (which propagates,
// for onWorker to recover) m is removed, its estimate given back, and
// nobody waits for it any longer.
func (t *moduleTable) compileInto(ctx context.Context, m *module, wasm []byte) (err error) {
	done := false
	defer func() {
		if done {
			return
		}
		t.mu.Lock()
		if t.modules[m.digest] == m {
			delete(t.modules, m.digest)
		}
		t.compiledBytes -= m.bytes
		t.mu.Unlock()
		close(m.ready)
	}()
	compiled, err := t.compiler.compile(ctx, wasm)
	if err != nil {
		return err
	}
	_, hasStart := compiled.ExportedFunctions()[fuel.StartExport]
	t.mu.Lock()
	m.compiled, m.hasStart = compiled, hasStart
	m.refs.Store(1)
	close(m.ready)
	t.mu.Unlock()
	done = true
	return nil
}

// Package catalogtest holds a catalog.ModuleInspector for tests that deploy
// modules without compiling them.
package catalogtest

import (
	"context"

	"github.com/latent-node/latent-node/catalog"
	"github.com/latent-node/latent-node/vocab"
)

// PlainModuleInfo is what Inspector answers for a module it has no entry
// for: single-threaded, no features, memory from one Wasm page to the wasm32
// maximum, exporting _start.
func PlainModuleInfo() catalog.ModuleInfo {
	return catalog.ModuleInfo{MinMemoryBytes: 1 << 16, MaxMemoryBytes: vocab.MaxWasm32MemoryBytes,
		Threading: vocab.ThreadingSingle, Exports: []vocab.FunctionName{"_start"}}
}

// Inspector is a catalog.ModuleInspector that does not parse Wasm: it looks
// the module's bytes up in ByModule and answers PlainModuleInfo for any
// module not there. The zero Inspector answers PlainModuleInfo for all.
type Inspector struct {
	ByModule map[string]catalog.ModuleInfo
}

var _ catalog.ModuleInspector = Inspector{}

// Inspect implements catalog.ModuleInspector.
func (in Inspector) Inspect(_ context.Context, _ vocab.Digest, module []byte) (catalog.ModuleInfo, error) {
	if info, ok := in.ByModule[string(module)]; ok {
		return info, nil
	}
	return PlainModuleInfo(), nil
}

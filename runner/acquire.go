// AcquireModule: another reference to a compiled module for the catalog,
// with its facts and without its bytes (catalog.ModuleAcquirer).

package runner

import (
	"slices"

	"github.com/latent-node/latent-node/catalog"
	"github.com/latent-node/latent-node/vocab"
)

// AcquireModule implements catalog.ModuleAcquirer: another reference to a
// module the runner holds compiled, with its facts, without its bytes. The
// catalog calls it before reading and inspecting an artifact, so the
// thousandth service of a shared module costs a reference, not a read and
// a hash of the module. False when the runner holds no such module (never
// inspected, or every reference released).
func (r *Runner) AcquireModule(digest vocab.Digest) (catalog.ModuleInfo, bool) {
	m := r.modules.acquire(digest)
	if m == nil {
		return catalog.ModuleInfo{}, false
	}
	info := m.info
	info.Exports = slices.Clone(m.info.Exports)
	return info, true
}

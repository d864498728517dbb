// CollectCompileCache: removing the disk cache entries of modules the
// runner no longer holds (runner/internal/wazcache.Collect).

package runner

import (
	"context"

	"github.com/latent-node/latent-node/runner/internal/wazcache"
)

// ErrCacheLayoutUnknown: the runner could not work out how wazero names the
// entries of its compilation cache, so CollectCompileCache removed nothing.
var ErrCacheLayoutUnknown = wazcache.ErrLayoutUnknown

// CacheGCStats says what one CollectCompileCache call found and did: the
// entries kept (of modules the runner holds) and removed, and their bytes.
type CacheGCStats = wazcache.Stats

// CollectCompileCache removes the entries of the on-disk compilation cache
// (Config.CacheDir) that belong to no module the runner holds now: a module
// is held from its Inspect (or a compile under way) until its last
// reference is given back, so with a catalog open on this runner the held
// modules are exactly those of the published releases (and of deploys in
// flight). Entries of other wazero versions are removed too. With dryRun it
// removes nothing and reports what it would remove. Without a CacheDir it
// does nothing. If the entries' naming cannot be learned it removes nothing
// and returns ErrCacheLayoutUnknown.
func (r *Runner) CollectCompileCache(ctx context.Context, dryRun bool) (CacheGCStats, error) {
	if r.cfg.CacheDir == "" {
		return CacheGCStats{}, nil
	}
	return wazcache.Collect(ctx, r.cfg.CacheDir, r.modules.cacheIDs(), dryRun)
}

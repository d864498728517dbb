package front

// The refusal log: refusals aggregated into one log line per interval.

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/latent-node/latent-node/refusal"
)

// RefusalLog aggregates refusals between log lines: a flood of refusals
// becomes one structured line per interval, not one per request. Keys are
// the refusals themselves, from the fixed sets of codes, reasons, scopes
// and dimensions, so the map stays small. The zero value is ready.
type RefusalLog struct {
	mu     sync.Mutex
	counts map[refusal.Refusal]uint64
}

// Add counts one refusal.
func (r *RefusalLog) Add(ref refusal.Refusal) {
	ref.Retryable = false // not part of the line's key
	r.mu.Lock()
	if r.counts == nil {
		r.counts = map[refusal.Refusal]uint64{}
	}
	r.counts[ref]++
	r.mu.Unlock()
}

// logKey is a refusal as the aggregated line names it:
// code/reason scope[/dimension].
func logKey(r refusal.Refusal) string {
	key := r.Code.String() + "/" + r.Reason.String() + " " + r.Scope.String()
	if r.Dimension != refusal.DimNone {
		key += "/" + r.Dimension.String()
	}
	return key
}

// Flush logs to log the refusals counted since the last flush, if any.
func (r *RefusalLog) Flush(log *slog.Logger) {
	r.mu.Lock()
	counts := r.counts
	r.counts = nil
	r.mu.Unlock()
	if len(counts) == 0 {
		return
	}
	keyed := make(map[string]uint64, len(counts))
	for ref, c := range counts {
		keyed[logKey(ref)] += c
	}
	args := make([]any, 0, 2*len(keyed))
	for _, k := range slices.Sorted(maps.Keys(keyed)) {
		args = append(args, k, keyed[k])
	}
	log.Info("rejections", args...)
}

// Run is the actor that writes the aggregated refusal line to log every
// interval until ctx ends (then once more). Run it for the node's lifetime.
func (r *RefusalLog) Run(ctx context.Context, log *slog.Logger, every time.Duration) error {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			r.Flush(log)
		case <-ctx.Done():
			r.Flush(log)
			return nil
		}
	}
}

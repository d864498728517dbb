package node

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

// rejectionLog aggregates refusals between log lines: a flood of refusals
// becomes one structured line per interval, not one per request. Keys are
// the refusals themselves, from the fixed sets of codes, reasons, scopes
// and dimensions, so the map stays small.
type rejectionLog struct {
	mu     sync.Mutex
	counts map[refusal.Refusal]uint64
}

func (r *rejectionLog) add(ref refusal.Refusal) {
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

// flush logs to log the refusals counted since the last flush, if any.
func (r *rejectionLog) flush(log *slog.Logger) {
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

// run is the actor that writes the aggregated refusal line to log every
// interval until ctx ends (then once more). Run it for the node's lifetime.
func (r *rejectionLog) run(ctx context.Context, log *slog.Logger, every time.Duration) error {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			r.flush(log)
		case <-ctx.Done():
			r.flush(log)
			return nil
		}
	}
}

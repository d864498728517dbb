package node

import (
	"context"
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

// flushRejections logs the refusals counted since the last flush, if any.
func (n *Node) flushRejections() {
	n.rejections.mu.Lock()
	counts := n.rejections.counts
	n.rejections.counts = nil
	n.rejections.mu.Unlock()
	if len(counts) == 0 {
		return
	}
	keyed := make(map[string]uint64, len(counts))
	for r, c := range counts {
		keyed[logKey(r)] += c
	}
	args := make([]any, 0, 2*len(keyed))
	for _, k := range slices.Sorted(maps.Keys(keyed)) {
		args = append(args, k, keyed[k])
	}
	n.log.Info("rejections", args...)
}

// logRejections is the actor that writes the aggregated refusal line every
// interval until ctx ends (then once more). Run it for the node's lifetime.
func (n *Node) logRejections(ctx context.Context, every time.Duration) error {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			n.flushRejections()
		case <-ctx.Done():
			n.flushRejections()
			return nil
		}
	}
}

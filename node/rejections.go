package node

import (
	"context"
	"maps"
	"slices"
	"sync"
	"time"
)

// rejectionLog aggregates refusals between log lines: a flood of refusals
// becomes one structured line per interval, not one per request. Keys come
// from the fixed sets of codes, reasons, scopes and dimensions, so the map
// stays small.
type rejectionLog struct {
	mu     sync.Mutex
	counts map[string]uint64
}

func (r *rejectionLog) add(code, reason, scope, dimension string) {
	key := code + "/" + reason + " " + scope
	if dimension != "" {
		key += "/" + dimension
	}
	r.mu.Lock()
	if r.counts == nil {
		r.counts = map[string]uint64{}
	}
	r.counts[key]++
	r.mu.Unlock()
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
	args := make([]any, 0, 2*len(counts))
	for _, k := range slices.Sorted(maps.Keys(counts)) {
		args = append(args, k, counts[k])
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

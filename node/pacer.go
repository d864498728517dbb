// Refusal pacing in the node: holdRefusal holds a principal's refusal as
// the front's refusal pacer (front.RefusalPacer) says.

package node

import (
	"context"
	"time"

	"github.com/latent-node/latent-node/node/auth"
)

// holdRefusal holds a refusal of p as the pacer says (or until the caller
// goes away).
func (n *Node) holdRefusal(ctx context.Context, p *auth.Principal) {
	d := n.pacer.Hold(string(p.Tenant)+"/"+p.Subject, n.clock.Now())
	if d <= 0 {
		return
	}
	n.metrics.refusalsHeld.Inc()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

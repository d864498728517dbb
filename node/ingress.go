// The ingress governor: the node's use of the front's ingress pools
// (front.IngressPool) on every API route, and the pools' use in the
// admission views.

package node

import (
	"net/http"

	"github.com/latent-node/latent-node/node/activation"
	"github.com/latent-node/latent-node/node/api"
	"github.com/latent-node/latent-node/node/auth"
	"github.com/latent-node/latent-node/node/front"
)

// governed serves h in pool: a slot and modeled bytes before the body is
// read or the credential checked (routeCap: the route's body bound), the
// tenant and principal counts once the credential is verified (and, on a
// tenant-scoped route, authorized: see authorize), all held until h
// returned.
func (n *Node) governed(pool *front.IngressPool, routeCap func() uint64, role auth.Roles, tenantScoped bool, h authedHandler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		t, prob := pool.Reserve(front.ModeledBytes(r.ContentLength, routeCap()))
		if prob != nil {
			api.WriteProblem(w, *prob, writeRetryAfter)
			return
		}
		defer t.Release()
		activation.Of(w).Ingress = t
		p := n.authenticate(w, r, role)
		if p == nil || (tenantScoped && !n.authorize(w, r, p)) {
			return
		}
		if prob := t.Bind(p.Tenant, p.Subject); prob != nil {
			api.WriteProblem(w, *prob, writeRetryAfter)
			return
		}
		h(w, r, p)
	}
}

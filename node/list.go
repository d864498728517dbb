package node

// The listing of a tenant's services, GET /v1/deployments/{tenant}, by
// pages.

import (
	"net/http"
	"strconv"

	"github.com/latent-node/latent-node/node/api"
	"github.com/latent-node/latent-node/node/auth"
	"github.com/latent-node/latent-node/refusal"
	"github.com/latent-node/latent-node/vocab"
)

// Pages of GET /v1/deployments/{tenant}: at most maxListLimit services an
// answer (about 300 KB of JSON for services of three revisions), the
// default.
const maxListLimit = 1000

// serviceList is the answer to GET /v1/deployments/{tenant}: the pinned
// catalog generation the page was read from, a page of the tenant's
// deployed services ordered by name, each named by `name`, and, when more
// follow, next: the `after` of the next page.
type serviceList struct {
	Tenant     vocab.TenantID    `json:"tenant"`
	Generation vocab.Generation  `json:"generation"`
	Services   []listedService   `json:"services"`
	Next       vocab.ServiceName `json:"next,omitempty"`
}

// handleListDeployments answers a page of the caller's own tenant's
// deployments from one catalog pin: `limit` services (1 to maxListLimit,
// default maxListLimit) named after `after` (from the first when absent).
// Each page is read from the pin of its request, so a listing over several
// pages is best-effort across generations: a service that exists
// throughout appears exactly once, one deployed or deleted meanwhile may or
// may not. Finding the page is O(log N), N the node's services. Another
// tenant's path is refused like every deployment request: 403
// principal-not-authorized.
func (d *deployments) handleListDeployments(w http.ResponseWriter, r *http.Request, p *auth.Principal) {
	t, _, ok := ownTenant(w, r, p)
	if !ok {
		return
	}
	q := r.URL.Query()
	limit := maxListLimit
	if v := q.Get("limit"); v != "" {
		l, err := strconv.Atoi(v)
		if err != nil || l < 1 || l > maxListLimit {
			api.WriteProblem(w, badRequest(refusal.ReasonInvalidQuery, refusal.DimLimit,
				"limit is a number of services from 1 to "+strconv.Itoa(maxListLimit)), 0)
			return
		}
		limit = l
	}
	after := q.Get("after")
	if after != "" && vocab.ValidateName(after) != nil {
		api.WriteProblem(w, badRequest(refusal.ReasonInvalidQuery, refusal.DimAfter, "after is a service name: the next of the previous page"), 0)
		return
	}
	pin := d.cat.Pin()
	page, more := pin.ServicesPage(t, vocab.ServiceName(after), limit)
	services := make([]listedService, 0, len(page)) // an empty list, not null
	for _, dep := range page {
		services = append(services, listedService{Name: dep.Service, Release: dep.Release, Generation: dep.Generation,
			Revisions: dep.Revisions})
	}
	l := serviceList{Tenant: t, Generation: pin.Generation(), Services: services}
	if more {
		l.Next = page[len(page)-1].Service
	}
	api.WriteJSON(w, http.StatusOK, l)
}

package node

import (
	"net/http"

	"github.com/latent-node/latent-node/catalog"
	"github.com/latent-node/latent-node/node/auth"
)

// serviceList is the answer to GET /v1/deployments/{tenant}: the pinned
// catalog generation the list was read from and the tenant's deployed
// services, ordered by name, each named by `name`.
type serviceList struct {
	Tenant     catalog.TenantID   `json:"tenant"`
	Generation catalog.Generation `json:"generation"`
	Services   []listedService    `json:"services"`
}

// handleListDeployments answers the caller's own tenant's deployments from
// one catalog pin. The list is bounded by the catalog's per-tenant service
// quota (and by its node-wide service bound). Another tenant's path is
// refused like every deployment request: 403 principal-not-authorized.
func (n *Node) handleListDeployments(w http.ResponseWriter, r *http.Request, p *auth.Principal) {
	t, _, ok := ownTenant(w, r, p)
	if !ok {
		return
	}
	pin := n.cat.Pin()
	services := []listedService{} // an empty list, not null
	for _, d := range pin.Services(t) {
		services = append(services, listedService{Name: d.Service, Release: d.Release, Generation: d.Generation,
			Revisions: d.Revisions})
	}
	writeJSON(w, http.StatusOK, serviceList{Tenant: t, Generation: pin.Generation(), Services: services})
}

package node

import (
	"net/http"
	"sync"

	"github.com/latent-node/latent-node/admission"
	"github.com/latent-node/latent-node/catalog"
	"github.com/latent-node/latent-node/node/api"
	"github.com/latent-node/latent-node/node/auth"
	"github.com/latent-node/latent-node/node/config"
)

// The ingress governor bounds the requests the node holds before anything
// else looks at them. A request takes a node-local slot of its pool, and
// its modeled bytes, before its body is read or its credential checked;
// once the credential is verified it also counts against its tenant and
// principal; it keeps all of them until its answer is written. Two pools:
// data (invocations) and control (uploads, deploys, the admission views),
// so deploys and admin calls never wait behind invocations; /healthz,
// /readyz and /metrics are outside both.
//
// Modeled bytes: a declared Content-Length reserves itself, a body of
// unknown length (chunked) reserves the route's cap, each plus
// IngressOverheadBytes. This bounds what requests can make the node retain,
// not every allocation.

// IngressOverheadBytes is added to every request's modeled bytes (headers,
// buffers, the answer).
const IngressOverheadBytes = 4 << 10

// Pool names, as they appear in refusals, snapshots and metrics.
const (
	PoolData    = "data"
	PoolControl = "control"
)

// ingressPool is one pool's counters. Its tenant and principal keys are
// verified principals of the configuration, so the maps are bounded by it.
type ingressPool struct {
	name string
	lim  config.IngressPool

	mu         sync.Mutex
	slots      int
	bytes      uint64
	tenants    map[catalog.TenantID]int
	principals map[string]int
}

func newIngressPool(name string, lim config.IngressPool) *ingressPool {
	return &ingressPool{name: name, lim: lim, tenants: map[catalog.TenantID]int{}, principals: map[string]int{}}
}

// ingressTicket is one request's reservation in a pool.
type ingressTicket struct {
	pool      *ingressPool
	bytes     uint64
	tenant    catalog.TenantID
	principal string // "" until bound
}

// modeledBytes is what a request with the declared length (-1: unknown)
// reserves on a route whose bodies are at most routeCap bytes.
func modeledBytes(declared int64, routeCap uint64) uint64 {
	body := routeCap
	if declared >= 0 {
		body = min(uint64(declared), routeCap) // a longer body is refused by its reader
	}
	return body + IngressOverheadBytes
}

// reserve takes a node-local slot and the modeled bytes, before the body
// is read and before authentication.
func (p *ingressPool) reserve(bytes uint64) (*ingressTicket, *api.Problem) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.slots >= p.lim.Slots:
		return nil, ingressRefusal(admission.ScopeNode, p.name+"-slots")
	case p.bytes+bytes > p.lim.Bytes:
		return nil, ingressRefusal(admission.ScopeNode, p.name+"-bytes")
	}
	p.slots++
	p.bytes += bytes
	return &ingressTicket{pool: p, bytes: bytes}, nil
}

// bind counts the request against its verified tenant and principal.
func (t *ingressTicket) bind(tenant catalog.TenantID, principal string) *api.Problem {
	p := t.pool
	key := string(tenant) + "/" + principal
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.tenants[tenant] >= p.lim.PerTenant:
		return ingressRefusal(admission.ScopeTenant, p.name+"-slots")
	case p.principals[key] >= p.lim.PerPrincipal:
		return ingressRefusal(admission.ScopePrincipal, p.name+"-slots")
	}
	p.tenants[tenant]++
	p.principals[key]++
	t.tenant, t.principal = tenant, key
	return nil
}

// release gives back everything the ticket holds.
func (t *ingressTicket) release() {
	p := t.pool
	p.mu.Lock()
	defer p.mu.Unlock()
	p.slots--
	p.bytes -= t.bytes
	if t.principal != "" {
		if p.tenants[t.tenant]--; p.tenants[t.tenant] <= 0 {
			delete(p.tenants, t.tenant)
		}
		if p.principals[t.principal]--; p.principals[t.principal] <= 0 {
			delete(p.principals, t.principal)
		}
	}
}

func ingressRefusal(scope, dimension string) *api.Problem {
	p := api.Refusal(http.StatusTooManyRequests, admission.CodeResourceExhausted, "capacity-exhausted", scope, dimension, true)
	return &p
}

// IngressUsage is one pool's limits and use, as /v1/admin/admission shows it.
type IngressUsage struct {
	Slots        int    `json:"slots"`
	MaxSlots     int    `json:"max_slots"`
	Bytes        uint64 `json:"bytes"`
	MaxBytes     uint64 `json:"max_bytes"`
	PerTenant    int    `json:"max_per_tenant"`
	PerPrincipal int    `json:"max_per_principal"`
	// Tenants are the requests each tenant holds (node snapshot only).
	Tenants map[catalog.TenantID]int `json:"tenants,omitempty"`
}

// usage returns the pool's counters; with tenant set, only that tenant's
// requests are counted, and no other tenant is named.
func (p *ingressPool) usage(tenant catalog.TenantID, all bool) IngressUsage {
	p.mu.Lock()
	defer p.mu.Unlock()
	u := IngressUsage{MaxSlots: p.lim.Slots, MaxBytes: p.lim.Bytes, PerTenant: p.lim.PerTenant, PerPrincipal: p.lim.PerPrincipal}
	if all {
		u.Slots, u.Bytes = p.slots, p.bytes
		u.Tenants = make(map[catalog.TenantID]int, len(p.tenants))
		for t, n := range p.tenants {
			u.Tenants[t] = n
		}
		return u
	}
	u.Slots = p.tenants[tenant]
	return u
}

// governed serves h in pool: a slot and modeled bytes before the body is
// read or the credential checked (routeCap: the route's body bound), the
// tenant and principal counts once the credential is verified, all held
// until h returned.
func (n *Node) governed(pool *ingressPool, routeCap func() uint64, role auth.Roles, h authedHandler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		t, prob := pool.reserve(modeledBytes(r.ContentLength, routeCap()))
		if prob != nil {
			n.metrics.rejected(prob.Code, prob.Reason, prob.Scope, prob.Dimension)
			api.WriteProblem(w, *prob, writeRetryAfter)
			return
		}
		defer t.release()
		n.authed(role, func(w http.ResponseWriter, r *http.Request, p *auth.Principal) {
			if prob := t.bind(p.Tenant, p.Subject); prob != nil {
				n.metrics.rejected(prob.Code, prob.Reason, prob.Scope, prob.Dimension)
				api.WriteProblem(w, *prob, writeRetryAfter)
				return
			}
			h(w, r, p)
		})(w, r)
	}
}

// ingressUsage returns both pools' use: all of it (node snapshot), or
// tenant's share only.
func (n *Node) ingressUsage(tenant catalog.TenantID, all bool) map[string]IngressUsage {
	return map[string]IngressUsage{PoolData: n.dataPool.usage(tenant, all), PoolControl: n.controlPool.usage(tenant, all)}
}

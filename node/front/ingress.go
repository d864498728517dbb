// The ingress pools: the slots and modeled bytes a request holds in its
// pool, and its tenant's and principal's shares, from before its body is
// read until its answer is written.

package front

import (
	"sync"

	"github.com/latent-node/latent-node/node/api"
	"github.com/latent-node/latent-node/node/config"
	"github.com/latent-node/latent-node/refusal"
	"github.com/latent-node/latent-node/vocab"
)

// The ingress governor bounds the requests the node holds before anything
// else looks at them. A request takes a node-local slot of its pool, and
// its modeled bytes, before its body is read or its credential checked;
// once the credential is verified its slot and bytes also count against
// its tenant and principal (each has a slot bound and a byte budget); it
// keeps all of them until its answer is written, so the budgets cover the
// request's whole life: body read, queued, executing, answer written. Two
// pools: data (invocations) and control (uploads, deploys, the admission
// views), so deploys and admin calls never wait behind invocations;
// /healthz, /readyz and /metrics are outside both.
//
// Modeled bytes: a declared Content-Length reserves itself, a body of
// unknown length (chunked) reserves the route's cap, each plus
// IngressOverheadBytes. This bounds what requests can make the node retain,
// not every allocation.

// IngressOverheadBytes is added to every request's modeled bytes (headers,
// buffers, the answer).
const IngressOverheadBytes = config.IngressOverheadBytes

// Pool names, as they appear in refusals, snapshots and metrics.
const (
	PoolData    = "data"
	PoolControl = "control"
)

// ingressUse is what one tenant or principal holds in a pool.
type ingressUse struct {
	slots int
	bytes uint64
}

// IngressPool is one pool's counters. Its tenant and principal keys are
// verified principals of the configuration, so the maps are bounded by it;
// an entry is deleted when its last request ends.
type IngressPool struct {
	name string
	lim  config.IngressPool
	// slotsDim and bytesDim are the dimensions of the pool's refusals.
	slotsDim, bytesDim refusal.Dimension

	mu         sync.Mutex
	slots      int
	bytes      uint64
	tenants    map[vocab.TenantID]ingressUse
	principals map[string]ingressUse // "tenant/subject"
}

// NewIngressPool makes pool name (PoolData or PoolControl) with its limits.
func NewIngressPool(name string, lim config.IngressPool) *IngressPool {
	dims := poolDimensions[name]
	return &IngressPool{name: name, lim: lim, slotsDim: dims[0], bytesDim: dims[1], tenants: map[vocab.TenantID]ingressUse{},
		principals: map[string]ingressUse{}}
}

// poolDimensions are each pool's slot and byte dimensions.
var poolDimensions = map[string][2]refusal.Dimension{
	PoolData:    {refusal.DimDataSlots, refusal.DimDataBytes},
	PoolControl: {refusal.DimControlSlots, refusal.DimControlBytes},
}

// IngressTicket is one request's reservation in a pool.
type IngressTicket struct {
	pool      *IngressPool
	bytes     uint64
	tenant    vocab.TenantID
	principal string // "" until bound
}

// ModeledBytes is what a request with the declared length (-1: unknown)
// reserves on a route whose bodies are at most routeCap bytes.
func ModeledBytes(declared int64, routeCap uint64) uint64 {
	body := routeCap
	if declared >= 0 {
		body = min(uint64(declared), routeCap) // a longer body is refused by its reader
	}
	return body + IngressOverheadBytes
}

// Reserve takes a node-local slot and the modeled bytes, before the body
// is read and before authentication.
func (p *IngressPool) Reserve(bytes uint64) (*IngressTicket, *api.Problem) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.slots >= p.lim.Slots:
		return nil, ingressRefusal(refusal.ScopeNode, p.slotsDim)
	case bytes > p.lim.Bytes || p.bytes > p.lim.Bytes-bytes:
		return nil, ingressRefusal(refusal.ScopeNode, p.bytesDim)
	}
	p.slots++
	p.bytes += bytes
	return &IngressTicket{pool: p, bytes: bytes}, nil
}

// over reports whether adding b to used exceeds limit.
func over(used, b, limit uint64) bool { return b > limit || used > limit-b }

// Bind counts the request's slot and bytes against its verified tenant and
// principal: slots first, then bytes, the tenant before the principal.
func (t *IngressTicket) Bind(tenant vocab.TenantID, principal string) *api.Problem {
	p := t.pool
	key := string(tenant) + "/" + principal
	p.mu.Lock()
	defer p.mu.Unlock()
	tu, pu := p.tenants[tenant], p.principals[key]
	switch {
	case tu.slots >= p.lim.PerTenant:
		return ingressRefusal(refusal.ScopeTenant, p.slotsDim)
	case pu.slots >= p.lim.PerPrincipal:
		return ingressRefusal(refusal.ScopePrincipal, p.slotsDim)
	case over(tu.bytes, t.bytes, p.lim.BytesPerTenant):
		return ingressRefusal(refusal.ScopeTenant, p.bytesDim)
	case over(pu.bytes, t.bytes, p.lim.BytesPerPrincipal):
		return ingressRefusal(refusal.ScopePrincipal, p.bytesDim)
	}
	tu.slots++
	tu.bytes += t.bytes
	pu.slots++
	pu.bytes += t.bytes
	p.tenants[tenant], p.principals[key] = tu, pu
	t.tenant, t.principal = tenant, key
	return nil
}

// Release gives back everything the ticket holds.
func (t *IngressTicket) Release() {
	p := t.pool
	p.mu.Lock()
	defer p.mu.Unlock()
	p.slots--
	p.bytes -= t.bytes
	if t.principal == "" {
		return
	}
	if u := p.tenants[t.tenant]; u.slots <= 1 {
		delete(p.tenants, t.tenant)
	} else {
		p.tenants[t.tenant] = ingressUse{slots: u.slots - 1, bytes: u.bytes - t.bytes}
	}
	if u := p.principals[t.principal]; u.slots <= 1 {
		delete(p.principals, t.principal)
	} else {
		p.principals[t.principal] = ingressUse{slots: u.slots - 1, bytes: u.bytes - t.bytes}
	}
}

// Grow adds n bytes to the ticket, for what the request holds beyond its
// body: an invocation's answer once its guest ran, a WAGI revision's CGI
// environment. The pool's byte limit applies, and once the ticket is bound
// its tenant's and principal's, as they did at Reserve and Bind; the
// refusal says which one the bytes do not fit (ok false: nothing added).
// Release gives the bytes back with the rest.
func (t *IngressTicket) Grow(n uint64) (ref refusal.Refusal, ok bool) {
	p := t.pool
	p.mu.Lock()
	defer p.mu.Unlock()
	var tu, pu ingressUse
	if t.principal != "" {
		tu, pu = p.tenants[t.tenant], p.principals[t.principal]
	}
	switch {
	case over(p.bytes, n, p.lim.Bytes):
		return ingressLimit(refusal.ScopeNode, p.bytesDim), false
	case t.principal == "":
	case over(tu.bytes, n, p.lim.BytesPerTenant):
		return ingressLimit(refusal.ScopeTenant, p.bytesDim), false
	case over(pu.bytes, n, p.lim.BytesPerPrincipal):
		return ingressLimit(refusal.ScopePrincipal, p.bytesDim), false
	default:
		tu.bytes += n
		pu.bytes += n
		p.tenants[t.tenant], p.principals[t.principal] = tu, pu
	}
	p.bytes += n
	t.bytes += n
	return refusal.Refusal{}, true
}

// ingressLimit is the retryable capacity-exhausted refusal of a full pool.
func ingressLimit(scope refusal.Scope, dimension refusal.Dimension) refusal.Refusal {
	return refusal.Refusal{Code: refusal.CodeResourceExhausted, Reason: refusal.ReasonCapacityExhausted,
		Scope: scope, Dimension: dimension, Retryable: true}
}

// ingressRefusal is ingressLimit's problem.
func ingressRefusal(scope refusal.Scope, dimension refusal.Dimension) *api.Problem {
	p := api.Refusal(ingressLimit(scope, dimension))
	return &p
}

// IngressUsage is one pool's limits and use, as the admission views show
// it. In the node snapshot (/v1/admin/admission) Slots and Bytes are the
// pool's and Tenants and TenantBytes name every tenant holding requests; in
// a tenant's view (/v1/admission) Slots and Bytes are that tenant's own and
// no other tenant is named or counted.
type IngressUsage struct {
	Slots             int    `json:"slots"`
	MaxSlots          int    `json:"max_slots"`
	Bytes             uint64 `json:"bytes"`
	MaxBytes          uint64 `json:"max_bytes"`
	PerTenant         int    `json:"max_per_tenant"`
	PerPrincipal      int    `json:"max_per_principal"`
	BytesPerTenant    uint64 `json:"max_bytes_per_tenant"`
	BytesPerPrincipal uint64 `json:"max_bytes_per_principal"`
	// Tenants are the requests each tenant holds (node snapshot only).
	Tenants map[vocab.TenantID]int `json:"tenants,omitempty"`
	// TenantBytes are their modeled bytes (node snapshot only).
	TenantBytes map[vocab.TenantID]uint64 `json:"tenant_bytes,omitempty"`
}

// Usage returns the pool's counters; with all unset, only tenant's requests
// are counted, and no other tenant is named.
func (p *IngressPool) Usage(tenant vocab.TenantID, all bool) IngressUsage {
	p.mu.Lock()
	defer p.mu.Unlock()
	u := IngressUsage{MaxSlots: p.lim.Slots, MaxBytes: p.lim.Bytes, PerTenant: p.lim.PerTenant, PerPrincipal: p.lim.PerPrincipal,
		BytesPerTenant: p.lim.BytesPerTenant, BytesPerPrincipal: p.lim.BytesPerPrincipal}
	if all {
		u.Slots, u.Bytes = p.slots, p.bytes
		u.Tenants = make(map[vocab.TenantID]int, len(p.tenants))
		u.TenantBytes = make(map[vocab.TenantID]uint64, len(p.tenants))
		for t, tu := range p.tenants {
			u.Tenants[t], u.TenantBytes[t] = tu.slots, tu.bytes
		}
		return u
	}
	own := p.tenants[tenant]
	u.Slots, u.Bytes = own.slots, own.bytes
	return u
}

// PoolsUsage returns the use of both pools, data and control, by pool
// name: all of it (the node's view), or tenant's share only.
func PoolsUsage(data, control *IngressPool, tenant vocab.TenantID, all bool) map[string]IngressUsage {
	return map[string]IngressUsage{PoolData: data.Usage(tenant, all), PoolControl: control.Usage(tenant, all)}
}

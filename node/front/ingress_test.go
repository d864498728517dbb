package front

import (
	"cmp"
	"maps"
	"math/rand/v2"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/errors"

	"github.com/latent-node/latent-node/node/api"
	"github.com/latent-node/latent-node/node/config"
	"github.com/latent-node/latent-node/refusal"
	"github.com/latent-node/latent-node/vocab"
)

func TestModeledBytes(t *testing.T) {
	tests := []struct {
		name     string
		declared int64
		cap      uint64
		want     uint64
	}{
		{"empty", 0, 100, IngressOverheadBytes},
		{"declared", 40, 100, 40 + IngressOverheadBytes},
		{"declared at the cap", 100, 100, 100 + IngressOverheadBytes},
		{"declared over the cap (its reader refuses it)", 101, 100, 100 + IngressOverheadBytes},
		{"unknown length (chunked) reserves the cap", -1, 100, 100 + IngressOverheadBytes},
		{"no body route", -1, 0, IngressOverheadBytes},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if have := ModeledBytes(tt.declared, tt.cap); have != tt.want {
				t.Fatalf("have %d, want %d", have, tt.want)
			}
		})
	}
}

// admit is what governed does: reserve, then bind, releasing the slot when
// the bind is refused.
func admit(p *IngressPool, bytes uint64, tenant, principal string) (*IngressTicket, *api.Problem) {
	tk, prob := p.Reserve(bytes)
	if prob != nil {
		return nil, prob
	}
	if prob := tk.Bind(vocab.TenantID(tenant), principal); prob != nil {
		tk.Release()
		return nil, prob
	}
	return tk, nil
}

// checkIngressRefusal fails unless prob is the retryable 429 of scope and
// dimension (want "" for admitted).
func checkIngressRefusal(t *testing.T, prob *api.Problem, scope, dimension string) {
	t.Helper()
	switch {
	case dimension == "" && prob != nil:
		t.Fatalf("refused: %+v", prob)
	case dimension == "":
	case prob == nil:
		t.Fatalf("admitted; want %s %s", scope, dimension)
	case prob.Status != http.StatusTooManyRequests || prob.Code != refusal.CodeResourceExhausted.String() ||
		prob.Reason != refusal.ReasonCapacityExhausted.String() || !prob.Retryable || prob.Scope != scope || prob.Dimension != dimension:
		t.Fatalf("have %+v, want 429 capacity-exhausted %s %s retryable", prob, scope, dimension)
	}
}

// emptyPool fails unless p holds nothing and keeps no entry.
func emptyPool(t *testing.T, p *IngressPool) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.slots != 0 || p.bytes != 0 || len(p.tenants) != 0 || len(p.principals) != 0 {
		t.Fatalf("after release: %d slots, %d bytes, %v, %v", p.slots, p.bytes, p.tenants, p.principals)
	}
}

// TestIngressPool_boundaries: every bound of a pool at its boundary, with
// the bytes a request models from its declared length or, for a chunked
// body, its route's cap. O is the per-request overhead; the base limits are
// 8 slots, 64·O bytes, 4 requests and 16·O bytes per tenant, 3 requests
// and 8·O bytes per principal.
func TestIngressPool_boundaries(t *testing.T) {
	const O = IngressOverheadBytes
	const big = 1 << 30 // a route cap that does not bind
	type hold struct {
		tenant, principal string
		bytes             uint64
	}
	holds := func(n int, tenant string, principals []string, bytes uint64) []hold {
		var hs []hold
		for i := range n {
			hs = append(hs, hold{tenant, principals[i%len(principals)], bytes})
		}
		return hs
	}
	tests := []struct {
		name              string
		pool              string
		lim               func(*config.IngressPool)
		held              []hold
		declared          int64 // -1: chunked
		cap               uint64
		tenant, principal string
		scope, dimension  string // "" when admitted
	}{
		{name: "declared exactly at the principal budget", declared: 7 * O, cap: big, tenant: "acme", principal: "alice"},
		{name: "declared one byte over the principal budget", declared: 7*O + 1, cap: big, tenant: "acme", principal: "alice",
			scope: "principal", dimension: "data-bytes"},
		{name: "principal holding part of its budget, the rest exactly", held: []hold{{"acme", "alice", 3 * O}},
			declared: 4 * O, cap: big, tenant: "acme", principal: "alice"},
		{name: "principal holding part of its budget, one byte more", held: []hold{{"acme", "alice", 3 * O}},
			declared: 4*O + 1, cap: big, tenant: "acme", principal: "alice", scope: "principal", dimension: "data-bytes"},
		{name: "declared exactly at the tenant budget", held: []hold{{"acme", "bob", 8 * O}},
			declared: 7 * O, cap: big, tenant: "acme", principal: "alice"},
		{name: "declared one byte over the tenant budget", held: []hold{{"acme", "bob", 8 * O}},
			declared: 7*O + 1, cap: big, tenant: "acme", principal: "alice", scope: "tenant", dimension: "data-bytes"},
		{name: "tenant budget checked before the principal's", lim: func(l *config.IngressPool) { l.BytesPerTenant = 8 * O },
			held: []hold{{"acme", "bob", 4 * O}}, declared: 5 * O, cap: big, tenant: "acme", principal: "alice",
			scope: "tenant", dimension: "data-bytes"},
		{name: "chunked reserves the cap: cap and overhead fit", declared: -1, cap: 7 * O, tenant: "acme", principal: "alice"},
		{name: "chunked reserves the cap: one byte over", declared: -1, cap: 7*O + 1, tenant: "acme", principal: "alice",
			scope: "principal", dimension: "data-bytes"},
		{name: "chunked against the tenant budget", held: []hold{{"acme", "bob", 8 * O}, {"acme", "carol", 1}}, declared: -1, cap: 7 * O,
			tenant: "acme", principal: "alice", scope: "tenant", dimension: "data-bytes"},
		{name: "declared exactly the cap", declared: 7 * O, cap: 7 * O, tenant: "acme", principal: "alice"},
		{name: "declared over the cap models the cap", declared: 100 * O, cap: 7 * O, tenant: "acme", principal: "alice"},
		{name: "a full tenant leaves another tenant its budget", held: []hold{{"acme", "alice", 8 * O}, {"acme", "bob", 8 * O}},
			declared: 7 * O, cap: big, tenant: "beta", principal: "carol"},
		{name: "a full principal leaves another principal of its tenant", held: []hold{{"acme", "alice", 8 * O}},
			declared: 7 * O, cap: big, tenant: "acme", principal: "bob"},
		{name: "same subject in another tenant is another principal", held: []hold{{"acme", "alice", 8 * O}},
			declared: 7 * O, cap: big, tenant: "beta", principal: "alice"},
		{name: "principal slots at the bound", held: holds(2, "acme", []string{"alice"}, O),
			declared: 0, tenant: "acme", principal: "alice"},
		{name: "principal slots over the bound", held: holds(3, "acme", []string{"alice"}, O),
			declared: 0, tenant: "acme", principal: "alice", scope: "principal", dimension: "data-slots"},
		{name: "tenant slots at the bound", held: holds(3, "acme", []string{"alice", "bob", "carol"}, O),
			declared: 0, tenant: "acme", principal: "dave"},
		{name: "tenant slots over the bound", held: holds(4, "acme", []string{"alice", "bob", "carol", "dave"}, O),
			declared: 0, tenant: "acme", principal: "erin", scope: "tenant", dimension: "data-slots"},
		{name: "slots checked before bytes", held: holds(4, "acme", []string{"alice", "bob", "carol", "dave"}, O),
			declared: 20 * O, cap: big, tenant: "acme", principal: "erin", scope: "tenant", dimension: "data-slots"},
		{name: "node slots at the bound", held: append(holds(4, "a", []string{"x", "y"}, O), holds(3, "b", []string{"x", "y"}, O)...),
			declared: 0, tenant: "c", principal: "x"},
		{name: "node slots over the bound", held: append(holds(4, "a", []string{"x", "y"}, O), holds(4, "b", []string{"x", "y"}, O)...),
			declared: 0, tenant: "c", principal: "x", scope: "node", dimension: "data-slots"},
		{name: "node bytes exactly at the bound", lim: func(l *config.IngressPool) { l.Bytes = 20 * O },
			held: []hold{{"a", "x", 8 * O}, {"b", "x", 8 * O}}, declared: 3 * O, cap: big, tenant: "c", principal: "x"},
		{name: "node bytes one over the bound", lim: func(l *config.IngressPool) { l.Bytes = 20 * O },
			held: []hold{{"a", "x", 8 * O}, {"b", "x", 8 * O}}, declared: 3*O + 1, cap: big, tenant: "c", principal: "x",
			scope: "node", dimension: "data-bytes"},
		{name: "control pool names its dimension", pool: PoolControl, declared: 7*O + 1, cap: big, tenant: "acme", principal: "alice",
			scope: "principal", dimension: "control-bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lim := config.IngressPool{Slots: 8, Bytes: 64 * O, PerTenant: 4, PerPrincipal: 3, BytesPerTenant: 16 * O, BytesPerPrincipal: 8 * O}
			if tt.lim != nil {
				tt.lim(&lim)
			}
			name := cmp.Or(tt.pool, PoolData)
			p := NewIngressPool(name, lim)
			var tickets []*IngressTicket
			for _, h := range tt.held {
				tk, prob := admit(p, h.bytes, h.tenant, h.principal)
				if prob != nil {
					t.Fatalf("holding %+v: %+v", h, prob)
				}
				tickets = append(tickets, tk)
			}
			tk, prob := admit(p, ModeledBytes(tt.declared, tt.cap), tt.tenant, tt.principal)
			checkIngressRefusal(t, prob, tt.scope, tt.dimension)
			if tk != nil {
				tickets = append(tickets, tk)
			}
			for _, tk := range tickets {
				tk.Release()
			}
			emptyPool(t, p)
		})
	}
}

// TestIngressPool_usage: the node snapshot counts every tenant, a tenant's
// view counts its own requests and bytes only.
func TestIngressPool_usage(t *testing.T) {
	lim := config.IngressPool{Slots: 8, Bytes: 1000, PerTenant: 4, PerPrincipal: 3, BytesPerTenant: 500, BytesPerPrincipal: 300}
	p := NewIngressPool(PoolData, lim)
	var tickets []*IngressTicket
	for _, h := range []struct {
		tenant, principal string
		bytes             uint64
	}{{"acme", "alice", 100}, {"acme", "bob", 50}, {"beta", "carol", 7}} {
		tk, prob := admit(p, h.bytes, h.tenant, h.principal)
		if prob != nil {
			t.Fatal(prob)
		}
		tickets = append(tickets, tk)
	}
	unbound, prob := p.Reserve(1000 - 157) // not yet authenticated: the node's only
	if prob != nil {
		t.Fatal(prob)
	}
	tickets = append(tickets, unbound)
	limits := IngressUsage{MaxSlots: 8, MaxBytes: 1000, PerTenant: 4, PerPrincipal: 3, BytesPerTenant: 500, BytesPerPrincipal: 300}
	tests := []struct {
		name   string
		tenant string
		all    bool
		want   IngressUsage
	}{
		{"node", "", true, func() IngressUsage {
			u := limits
			u.Slots, u.Bytes = 4, 1000
			u.Tenants = map[vocab.TenantID]int{"acme": 2, "beta": 1}
			u.TenantBytes = map[vocab.TenantID]uint64{"acme": 150, "beta": 7}
			return u
		}()},
		{"acme", "acme", false, func() IngressUsage { u := limits; u.Slots, u.Bytes = 2, 150; return u }()},
		{"beta", "beta", false, func() IngressUsage { u := limits; u.Slots, u.Bytes = 1, 7; return u }()},
		{"idle tenant", "gamma", false, limits},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if have := p.Usage(vocab.TenantID(tt.tenant), tt.all); !reflect.DeepEqual(have, tt.want) {
				t.Fatalf("have %+v, want %+v", have, tt.want)
			}
		})
	}
	for _, tk := range tickets {
		tk.Release()
	}
	emptyPool(t, p)
}

// ingressModel is the oracle of TestIngressPool_model: the live tickets,
// from which every count is summed afresh.
type ingressModel struct {
	lim  config.IngressPool
	live []modelTicket
}

type modelTicket struct {
	tk                *IngressTicket
	bytes             uint64
	tenant, principal string // "" until bound
}

func (m *ingressModel) sum(match func(modelTicket) bool) (n int, b uint64) {
	for _, t := range m.live {
		if match(t) {
			n++
			b += t.bytes
		}
	}
	return n, b
}

// reserve and bind return the dimension the oracle expects refused, or "".
func (m *ingressModel) reserve(b uint64) (scope, dim string) {
	n, used := m.sum(func(modelTicket) bool { return true })
	switch {
	case n >= m.lim.Slots:
		return "node", "data-slots"
	case used+b > m.lim.Bytes:
		return "node", "data-bytes"
	}
	return "", ""
}

func (m *ingressModel) bind(i int, tenant, principal string) (scope, dim string) {
	tn, tb := m.sum(func(t modelTicket) bool { return t.tenant == tenant })
	pn, pb := m.sum(func(t modelTicket) bool { return t.tenant == tenant && t.principal == principal })
	b := m.live[i].bytes
	switch {
	case tn >= m.lim.PerTenant:
		return "tenant", "data-slots"
	case pn >= m.lim.PerPrincipal:
		return "principal", "data-slots"
	case tb+b > m.lim.BytesPerTenant:
		return "tenant", "data-bytes"
	case pb+b > m.lim.BytesPerPrincipal:
		return "principal", "data-bytes"
	}
	return "", ""
}

// grow is the oracle of Grow(b) on ticket i: the pool's bytes, then, once
// bound, its tenant's and principal's.
func (m *ingressModel) grow(i int, b uint64) (scope, dim string) {
	_, used := m.sum(func(modelTicket) bool { return true })
	t := m.live[i]
	_, tb := m.sum(func(o modelTicket) bool { return t.tenant != "" && o.tenant == t.tenant })
	_, pb := m.sum(func(o modelTicket) bool { return t.tenant != "" && o.tenant == t.tenant && o.principal == t.principal })
	switch {
	case used+b > m.lim.Bytes:
		return "node", "data-bytes"
	case t.tenant == "":
	case tb+b > m.lim.BytesPerTenant:
		return "tenant", "data-bytes"
	case pb+b > m.lim.BytesPerPrincipal:
		return "principal", "data-bytes"
	}
	return "", ""
}

// check compares the pool's counters with the oracle's sums.
func (m *ingressModel) check(p *IngressPool) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	n, b := m.sum(func(modelTicket) bool { return true })
	if p.slots != n || p.bytes != b || p.slots < 0 {
		return errors.Newf("pool holds %d slots, %d bytes; the model %d, %d", p.slots, p.bytes, n, b)
	}
	tenants, principals := map[vocab.TenantID]ingressUse{}, map[string]ingressUse{}
	for _, t := range m.live {
		if t.tenant == "" {
			continue
		}
		u := tenants[vocab.TenantID(t.tenant)]
		tenants[vocab.TenantID(t.tenant)] = ingressUse{u.slots + 1, u.bytes + t.bytes}
		u = principals[t.tenant+"/"+t.principal]
		principals[t.tenant+"/"+t.principal] = ingressUse{u.slots + 1, u.bytes + t.bytes}
	}
	if !maps.Equal(p.tenants, tenants) || !maps.Equal(p.principals, principals) {
		return errors.Newf("pool holds %v, %v; the model %v, %v", p.tenants, p.principals, tenants, principals)
	}
	return nil
}

// TestIngressPool_model runs random reserve, bind, grow and release sequences
// against ingressModel: every answer and, after every step, every counter
// must equal the oracle's (so none goes negative or leaks), and the pool is
// empty once everything is released.
func TestIngressPool_model(t *testing.T) {
	lim := config.IngressPool{Slots: 6, Bytes: 24, PerTenant: 3, PerPrincipal: 2, BytesPerTenant: 14, BytesPerPrincipal: 10}
	tenants, principals := []string{"a", "b", "c"}, []string{"x", "y"}
	const seeds, steps = 20, 2000
	answers := map[string]int{}
	for seed := range uint64(seeds) {
		t.Run("seed "+strconv.FormatUint(seed, 10), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 0x1a7e))
			p := NewIngressPool(PoolData, lim)
			m := &ingressModel{lim: lim}
			for step := range steps {
				switch op := rng.IntN(4); {
				case op == 0 || len(m.live) == 0:
					b := rng.Uint64N(8)
					scope, dim := m.reserve(b)
					tk, prob := p.Reserve(b)
					if (prob == nil) != (dim == "") || prob != nil && (prob.Scope != scope || prob.Dimension != dim) {
						t.Fatalf("step %d: reserve(%d): have %+v, want %q %q", step, b, prob, scope, dim)
					}
					if tk != nil {
						m.live = append(m.live, modelTicket{tk: tk, bytes: b})
					}
					answers["reserve "+cmp.Or(dim, "admitted")]++
				case op == 1:
					i := rng.IntN(len(m.live))
					if m.live[i].tenant != "" {
						continue // bound already: governed binds once
					}
					tenant, principal := tenants[rng.IntN(len(tenants))], principals[rng.IntN(len(principals))]
					scope, dim := m.bind(i, tenant, principal)
					prob := m.live[i].tk.Bind(vocab.TenantID(tenant), principal)
					if (prob == nil) != (dim == "") || prob != nil && (prob.Scope != scope || prob.Dimension != dim) {
						t.Fatalf("step %d: bind(%s, %s): have %+v, want %q %q", step, tenant, principal, prob, scope, dim)
					}
					if prob == nil {
						m.live[i].tenant, m.live[i].principal = tenant, principal
					} else { // governed releases a refused request
						m.live[i].tk.Release()
						m.live = slices.Delete(m.live, i, i+1)
					}
					answers["bind "+cmp.Or(strings.TrimSpace(scope+" "+dim), "admitted")]++
				case op == 2:
					i, b := rng.IntN(len(m.live)), rng.Uint64N(6)
					scope, dim := m.grow(i, b)
					ref, ok := m.live[i].tk.Grow(b)
					if ok != (dim == "") || !ok && (ref.Scope.String() != scope || ref.Dimension.String() != dim ||
						ref.Reason != refusal.ReasonCapacityExhausted || !ref.Retryable) {
						t.Fatalf("step %d: grow(%d): have %+v %v, want %q %q", step, b, ref, ok, scope, dim)
					}
					if ok {
						m.live[i].bytes += b
					}
					answers["grow "+cmp.Or(strings.TrimSpace(scope+" "+dim), "admitted")]++
				default:
					i := rng.IntN(len(m.live))
					m.live[i].tk.Release()
					m.live = slices.Delete(m.live, i, i+1)
				}
				if err := m.check(p); err != nil {
					t.Fatalf("step %d: %v", step, err)
				}
			}
			for _, lt := range m.live {
				lt.tk.Release()
			}
			emptyPool(t, p)
		})
	}
	// The sequences reach every answer (else the test proves little).
	for _, want := range []string{"reserve admitted", "reserve data-slots", "reserve data-bytes", "bind admitted",
		"bind tenant data-slots", "bind principal data-slots", "bind tenant data-bytes", "bind principal data-bytes",
		"grow admitted", "grow node data-bytes", "grow tenant data-bytes", "grow principal data-bytes"} {
		if answers[want] == 0 {
			t.Errorf("no %q answer in %d steps", want, seeds*steps)
		}
	}
	t.Logf("answers: %v", answers)
}

package admission

// The ledger (LocalQuotaProvider): its Options, the per-scope counters and
// live reservations, Reload, and the snapshots (QuotaSnapshot, TenantView).

import (
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/latent-node/latent-node/catalog"
	"github.com/latent-node/latent-node/vocab"
)

// Options wire a provider to its clock and observations.
type Options struct {
	Clock vocab.Clock // required
	Load  LoadSource  // required
	// QueueDelay is optional (the scheduler); absent means zero observed delay.
	QueueDelay QueueDelaySource
}

// counters are the concurrent reservations of one scope.
type counters struct {
	live, queued, fuel, memory uint64
}

type tenantState struct {
	index     int
	policy    TenantPolicy
	subjects  map[string]struct{}
	kinds     uint8 // bit per PrincipalKind
	trust     map[vocab.TrustClass]struct{}
	cellMask  uint8 // bit per vocab.CellClass
	limits    TenantLimits
	snapshotN string
}

type trustState struct {
	index    int
	name     vocab.TrustClass
	cellMask uint8
	limits   Limits
}

type cellState struct {
	configured  bool
	memory      uint64
	parallelism uint64
	threading   uint8 // bit per vocab.Threading
	features    vocab.FeatureSet
}

const (
	stateQueued uint8 = iota + 1
	stateExecuting
)

// liveKey identifies a live activation: activation ids are per tenant, so
// the same id admitted by two tenants is two reservations, and no tenant can
// learn whether an id is live in another.
type liveKey struct {
	tenant int // tenantState.index
	id     string
}

// reservation is the ledger's record of one live activation.
type reservation struct {
	seq    uint64
	state  uint8
	tenant int
	trust  int
	queue  int
	cell   vocab.CellClass
	fuel   uint64
	memory uint64
}

// LocalQuotaProvider is the node's one admission ledger: immutable policy and
// one mutex over the node, tenant, trust-class, queue-class and cell-class
// counters of concurrent reservations (live activations, queued
// reservations, reserved fuel, reserved memory). Create exactly one per node
// and derive every Controller from it with WithPolicySource; independent
// providers would mean independent limits. It starts no goroutines.
//
// Live bookkeeping is bounded by the node's MaxLiveActivations (the live
// map), identifier sizes and the configured tenant and class sets. Nothing
// grows with rejected requests.
type LocalQuotaProvider struct {
	// view is what the policy makes of the ledger: tenants, trust classes,
	// cells and queue classes with their limits. Reload swaps it; every
	// operation reads it once.
	view atomic.Pointer[view]
	opts Options

	leaked atomic.Uint64

	// Lock order: mu is a leaf; nothing is called with it held except the
	// clock, the load source and the queue-delay source, which must not block.
	mu struct {
		sync.Mutex
		seq     uint64
		node    counters
		tenants []counters // by tenantState.index
		trust   []counters // by trustState.index
		queues  []uint64   // queued, by queue class index
		cells   [len(vocab.CellClasses) + 1]uint64
		live    map[liveKey]reservation
		// The indices of tenants and trust classes by name: stable across
		// reloads, so reservations made under an earlier view release into
		// the same counters. Bounded by the names ever configured.
		tenantIdx map[vocab.TenantID]int
		trustIdx  map[vocab.TrustClass]int
	}
}

// view is the immutable state a policy gives the ledger.
type view struct {
	policy       Policy
	tenants      map[vocab.TenantID]*tenantState
	tenantByIdx  []*tenantState // nil where a reload removed the tenant
	trust        map[vocab.TrustClass]*trustState
	trustByIdx   []*trustState // nil where a reload removed the class
	cells        [len(vocab.CellClasses) + 1]cellState
	prioToQueue  []int // priority → queue class index
	queueClasses []QueueClassPolicy
}

// NewLocalQuotaProvider validates policy and builds the ledger. The policy
// is copied; later changes to the caller's value have no effect.
func NewLocalQuotaProvider(policy Policy, opts Options) (*LocalQuotaProvider, error) {
	if err := policy.Validate(); err != nil {
		return nil, err
	}
	if opts.Clock == nil || opts.Load == nil {
		return nil, errors.AssertionFailedf("admission: Options.Clock and Options.Load are required")
	}
	p := &LocalQuotaProvider{opts: opts}
	p.mu.live = make(map[liveKey]reservation)
	p.mu.tenantIdx = map[vocab.TenantID]int{}
	p.mu.trustIdx = map[vocab.TrustClass]int{}
	p.mu.queues = make([]uint64, len(policy.QueueClasses))
	p.mu.Lock()
	p.view.Store(p.buildViewLocked(policy))
	p.mu.Unlock()
	return p, nil
}

// ErrReloadNeedsRestart: a new policy changes what the ledger cannot change
// while it holds reservations (queue classes, cell classes).
var ErrReloadNeedsRestart = errors.New("admission: the change needs a restart")

// Reload makes policy the ledger's from the next admission on: tenants,
// trust classes, their limits and allowlists, the node's limits and
// ceilings, overload, deadline and metadata settings. Reservations already
// made keep counting (against the new limits) and release as they would
// have; a tenant the policy no longer has gets no new admissions while its
// live work finishes, and its counters stay. Queue and cell classes cannot
// change this way (ErrReloadNeedsRestart, nothing changes).
func (p *LocalQuotaProvider) Reload(policy Policy) error {
	if err := policy.Validate(); err != nil {
		return err
	}
	cur := p.view.Load()
	if !slices.EqualFunc(cur.policy.QueueClasses, policy.QueueClasses, func(a, b QueueClassPolicy) bool {
		return a.Name == b.Name && a.MinPriority == b.MinPriority && a.MaxPriority == b.MaxPriority && a.MaxQueued == b.MaxQueued
	}) {
		return errors.Wrap(ErrReloadNeedsRestart, "admission: queue classes changed")
	}
	if !maps.EqualFunc(cur.policy.CellClasses, policy.CellClasses, cellPolicyEqual) {
		return errors.Wrap(ErrReloadNeedsRestart, "admission: cell classes changed")
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.view.Store(p.buildViewLocked(policy))
	return nil
}

func cellPolicyEqual(a, b CellClassPolicy) bool {
	return a.MemoryBytes == b.MemoryBytes && a.Parallelism == b.Parallelism && a.Features == b.Features &&
		slices.Equal(a.Threading, b.Threading)
}

// buildViewLocked makes the view of a validated policy, giving new tenant
// and trust-class names the next indices (and counters).
//
// REQUIRES: p.mu held.
func (p *LocalQuotaProvider) buildViewLocked(policy Policy) *view {
	v := &view{policy: policy, tenants: map[vocab.TenantID]*tenantState{}, trust: map[vocab.TrustClass]*trustState{}}
	for c, cc := range policy.CellClasses {
		cs := cellState{configured: true, memory: cc.MemoryBytes, parallelism: uint64(cc.Parallelism), features: cc.Features}
		for _, th := range cc.Threading {
			cs.threading |= 1 << th
		}
		v.cells[c] = cs
	}
	for _, name := range slices.Sorted(maps.Keys(policy.TrustClasses)) {
		i, ok := p.mu.trustIdx[name]
		if !ok {
			i = len(p.mu.trust)
			p.mu.trustIdx[name] = i
			p.mu.trust = append(p.mu.trust, counters{})
		}
		tc := policy.TrustClasses[name]
		v.trust[name] = &trustState{index: i, name: name, cellMask: cellMask(tc.CellClasses), limits: tc.Limits}
	}
	v.trustByIdx = make([]*trustState, len(p.mu.trust))
	for _, ts := range v.trust {
		v.trustByIdx[ts.index] = ts
	}
	for _, name := range slices.Sorted(maps.Keys(policy.Tenants)) {
		i, ok := p.mu.tenantIdx[name]
		if !ok {
			i = len(p.mu.tenants)
			p.mu.tenantIdx[name] = i
			p.mu.tenants = append(p.mu.tenants, counters{})
		}
		tp := policy.Tenants[name]
		ts := &tenantState{index: i, policy: tp, subjects: map[string]struct{}{}, trust: map[vocab.TrustClass]struct{}{},
			cellMask: cellMask(tp.CellClasses), limits: tp.Limits, snapshotN: string(name)}
		for _, s := range tp.Subjects {
			ts.subjects[s] = struct{}{}
		}
		for _, k := range tp.Kinds {
			ts.kinds |= 1 << k
		}
		for _, t := range tp.TrustClasses {
			ts.trust[t] = struct{}{}
		}
		v.tenants[name] = ts
	}
	v.tenantByIdx = make([]*tenantState, len(p.mu.tenants))
	for _, ts := range v.tenants {
		v.tenantByIdx[ts.index] = ts
	}
	v.queueClasses = slices.Clone(policy.QueueClasses)
	v.prioToQueue = make([]int, policy.Limits.MaxPriority+1)
	for prio := range v.prioToQueue {
		v.prioToQueue[prio] = slices.IndexFunc(v.queueClasses, func(q QueueClassPolicy) bool {
			return q.MinPriority <= uint32(prio) && uint32(prio) <= q.MaxPriority
		})
	}
	return v
}

func cellMask(cs []vocab.CellClass) uint8 {
	var m uint8
	for _, c := range cs {
		m |= 1 << c
	}
	return m
}

// Policy returns a copy of the validated policy.
func (p *LocalQuotaProvider) Policy() Policy { return p.view.Load().policy }

// MaxPayloadBytes is the node's payload ceiling of the current policy (a
// reload may change it); the HTTP layer bounds request bodies with it.
func (p *LocalQuotaProvider) MaxPayloadBytes() uint64 {
	return p.view.Load().policy.Limits.MaxPayloadBytes
}

// TenantMaxPayloadBytes is tenant t's payload ceiling under the current
// policy: its own, within the node's (the node's for a tenant it does
// not know, which admission refuses anyway). It bounds a body the node
// streams to the guest instead of reading it before admission.
func (p *LocalQuotaProvider) TenantMaxPayloadBytes(t vocab.TenantID) (limit uint64, tenantScope bool) {
	v := p.view.Load()
	node := v.policy.Limits.MaxPayloadBytes
	if ts, ok := v.tenants[t]; ok && ts.limits.MaxPayloadBytes < node {
		return ts.limits.MaxPayloadBytes, true
	}
	return node, false
}

// LeakedPermits counts permits reclaimed by the garbage-collection safety net
// (dropped without Release or StartExecution). Each is a bug in the owner.
func (p *LocalQuotaProvider) LeakedPermits() uint64 { return p.leaked.Load() }

// WithPolicySource returns a controller that resolves policy through pin and
// reserves in this same ledger.
func (p *LocalQuotaProvider) WithPolicySource(pin catalog.Pin) Controller {
	return Controller{p: p, pin: pin}
}

// reserveLocked checks every scope with checked arithmetic and, only when all
// pass, records the reservation. It returns the rejection of the first scope
// that refuses.
//
// REQUIRES: p.mu held.
func (p *LocalQuotaProvider) reserveLocked(v *view, id liveKey, r reservation, tenant *tenantState, trust *trustState) *Rejection {
	add := counters{live: 1, queued: 1, fuel: r.fuel, memory: r.memory}
	if rej := fits(scopeNode, p.mu.node, add, v.policy.Limits.Limits); rej != nil {
		return rej
	}
	if rej := fits(scopeTenant, p.mu.tenants[tenant.index], add, tenant.limits.Limits); rej != nil {
		return rej
	}
	if rej := fits(scopeTrust, p.mu.trust[trust.index], add, trust.limits); rej != nil {
		return rej
	}
	if p.mu.queues[r.queue] >= v.queueClasses[r.queue].MaxQueued {
		return rejCapacity[scopeQueue][dimQueued]
	}
	p.mu.node = plus(p.mu.node, add)
	p.mu.tenants[tenant.index] = plus(p.mu.tenants[tenant.index], add)
	p.mu.trust[trust.index] = plus(p.mu.trust[trust.index], add)
	p.mu.queues[r.queue]++
	p.mu.cells[r.cell]++
	p.mu.seq++
	r.seq = p.mu.seq
	p.mu.live[id] = r
	return nil
}

// fits reports the first dimension in which cur+add exceeds lim. cur ≤ lim
// always holds, so lim-cur cannot underflow and the comparison cannot overflow.
func fits(s scope, cur, add counters, lim Limits) *Rejection {
	switch {
	case add.live > lim.MaxLiveActivations-min(cur.live, lim.MaxLiveActivations):
		return rejCapacity[s][dimLive]
	case add.queued > lim.MaxQueued-min(cur.queued, lim.MaxQueued):
		return rejCapacity[s][dimQueued]
	case add.fuel > lim.MaxReservedFuel-min(cur.fuel, lim.MaxReservedFuel):
		return rejCapacity[s][dimFuel]
	case add.memory > lim.MaxReservedMemory-min(cur.memory, lim.MaxReservedMemory):
		return rejCapacity[s][dimMemory]
	}
	return nil
}

func plus(a, b counters) counters {
	return counters{a.live + b.live, a.queued + b.queued, a.fuel + b.fuel, a.memory + b.memory}
}

func minus(a, b counters) counters {
	return counters{a.live - b.live, a.queued - b.queued, a.fuel - b.fuel, a.memory - b.memory}
}

// releaseLocked returns the whole reservation of id if it is the live
// reservation seq in state want. It reports whether it released anything.
//
// REQUIRES: p.mu held.
func (p *LocalQuotaProvider) releaseLocked(id liveKey, seq uint64, want uint8) bool {
	r, ok := p.mu.live[id]
	if !ok || r.seq != seq || r.state != want {
		return false
	}
	sub := counters{live: 1, fuel: r.fuel, memory: r.memory}
	if r.state == stateQueued {
		sub.queued = 1
		p.mu.queues[r.queue]--
	}
	p.mu.node = minus(p.mu.node, sub)
	p.mu.tenants[r.tenant] = minus(p.mu.tenants[r.tenant], sub)
	p.mu.trust[r.trust] = minus(p.mu.trust[r.trust], sub)
	p.mu.cells[r.cell]--
	delete(p.mu.live, id)
	return true
}

// Usage is the concurrent reservation of a scope.
type Usage struct {
	LiveActivations uint64 `json:"live_activations"`
	Queued          uint64 `json:"queued"`
	ReservedFuel    uint64 `json:"reserved_fuel"`
	ReservedMemory  uint64 `json:"reserved_memory_bytes"`
}

// ScopeSnapshot is the limits and usage of one scope.
type ScopeSnapshot struct {
	Name   string `json:"name"`
	Limits Limits `json:"limits"`
	Usage  Usage  `json:"usage"`
}

// QueueSnapshot is one queue class's queued reservations.
type QueueSnapshot struct {
	Name      string `json:"name"`
	MaxQueued uint64 `json:"max_queued"`
	Queued    uint64 `json:"queued"`
}

// CellSnapshot is one cell class's live reservations.
type CellSnapshot struct {
	Name        string `json:"name"` // the cell class
	Parallelism uint64 `json:"parallelism"`
	Live        uint64 `json:"live"`
}

// QuotaSnapshot is the ledger at one moment. These are concurrent
// reservations, not rates: there is no reset time. A snapshot is a trusted
// administrative surface; the API must authorize access to each tenant.
type QuotaSnapshot struct {
	Node         ScopeSnapshot   `json:"node"`
	Tenants      []ScopeSnapshot `json:"tenants"`
	TrustClasses []ScopeSnapshot `json:"trust_classes"`
	QueueClasses []QueueSnapshot `json:"queue_classes"`
	CellClasses  []CellSnapshot  `json:"cell_classes"`
}

func usage(c counters) Usage {
	return Usage{LiveActivations: c.live, Queued: c.queued, ReservedFuel: c.fuel, ReservedMemory: c.memory}
}

// NodeSnapshot is the node scope's limits and usage alone: Snapshot's
// Node, read without walking every tenant under the ledger's lock.
func (p *LocalQuotaProvider) NodeSnapshot() ScopeSnapshot {
	v := p.view.Load()
	p.mu.Lock()
	defer p.mu.Unlock()
	return ScopeSnapshot{Name: "node", Limits: v.policy.Limits.Limits, Usage: usage(p.mu.node)}
}

// Snapshot returns every scope's limits and usage (queued reservations included).
func (p *LocalQuotaProvider) Snapshot() QuotaSnapshot {
	v := p.view.Load()
	p.mu.Lock()
	defer p.mu.Unlock()
	s := QuotaSnapshot{Node: ScopeSnapshot{Name: "node", Limits: v.policy.Limits.Limits, Usage: usage(p.mu.node)}}
	for i, t := range v.tenantByIdx {
		if t == nil {
			continue // removed by a reload
		}
		s.Tenants = append(s.Tenants, ScopeSnapshot{Name: t.snapshotN, Limits: t.limits.Limits, Usage: usage(p.mu.tenants[i])})
	}
	for i, t := range v.trustByIdx {
		if t == nil {
			continue
		}
		s.TrustClasses = append(s.TrustClasses, ScopeSnapshot{Name: string(t.name), Limits: t.limits, Usage: usage(p.mu.trust[i])})
	}
	for i, q := range v.queueClasses {
		s.QueueClasses = append(s.QueueClasses, QueueSnapshot{Name: q.Name, MaxQueued: q.MaxQueued, Queued: p.mu.queues[i]})
	}
	for _, c := range vocab.CellClasses {
		if v.cells[c].configured {
			s.CellClasses = append(s.CellClasses, CellSnapshot{Name: c.String(), Parallelism: v.cells[c].parallelism, Live: p.mu.cells[c]})
		}
	}
	return s
}

// TenantView is what one tenant may learn of the ledger: its own scope's
// concurrent-reservation limits and usage, and the per-request ceilings that
// bind its requests.
type TenantView struct {
	Name   string           `json:"name"`
	Limits TenantViewLimits `json:"limits"`
	Usage  Usage            `json:"usage"`
}

// TenantViewLimits are a tenant's own reservation limits and the ceilings
// of each of its requests: the payload and priority ceilings are the
// smaller of the tenant's and the node's, the budget ceiling is the node's.
type TenantViewLimits struct {
	Limits
	MaxPayloadBytes uint64        `json:"max_payload_bytes"`
	MaxPriority     uint32        `json:"max_priority"`
	BudgetCeiling   BudgetCeiling `json:"budget_ceiling"`
}

// BudgetCeiling is the per-activation budget ceiling on the wire; a
// request's Latent-Budget is lowered to it.
type BudgetCeiling struct {
	CPUFuel     uint64 `json:"cpu_fuel"`
	MemoryBytes uint64 `json:"memory_bytes"`
	WallTimeMs  int64  `json:"wall_time_ms"`
}

// TenantSnapshot returns one tenant's limits, ceilings and usage.
func (p *LocalQuotaProvider) TenantSnapshot(t vocab.TenantID) (TenantView, bool) {
	v := p.view.Load()
	ts, ok := v.tenants[t]
	if !ok {
		return TenantView{}, false
	}
	node, bc := v.policy.Limits, v.policy.BudgetCeiling
	lim := TenantViewLimits{Limits: ts.limits.Limits,
		MaxPayloadBytes: min(ts.limits.MaxPayloadBytes, node.MaxPayloadBytes),
		MaxPriority:     min(ts.limits.MaxPriority, node.MaxPriority),
		BudgetCeiling: BudgetCeiling{CPUFuel: bc.CPUFuel, MemoryBytes: bc.MemoryBytes,
			WallTimeMs: bc.WallTime.Milliseconds()}}
	p.mu.Lock()
	defer p.mu.Unlock()
	return TenantView{Name: ts.snapshotN, Limits: lim, Usage: usage(p.mu.tenants[ts.index])}, true
}

// queueWait is floor(n/p)·est, or false when it overflows.
func queueWait(n, p uint64, est time.Duration) (time.Duration, bool) {
	waves := n / p
	if est == 0 || waves == 0 {
		return 0, true
	}
	if waves > uint64(maxDuration/est) {
		return 0, false
	}
	return time.Duration(waves) * est, true
}

const maxDuration = time.Duration(1<<63 - 1)

// addDurations adds non-negative durations, or reports overflow.
func addDurations(ds ...time.Duration) (time.Duration, bool) {
	var sum time.Duration
	for _, d := range ds {
		if d < 0 || d > maxDuration-sum {
			return 0, false
		}
		sum += d
	}
	return sum, true
}

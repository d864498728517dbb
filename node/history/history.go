// Package history keeps the node's recent past for the status page: a
// fixed number of points (by default the last 15 minutes at 5 s), each
// the rates and gauges of one interval, node-wide and for the tenants
// with the most traffic in it plus one "others" series. Its memory is
// fixed by its Config, whatever the traffic and however many tenants
// send it: at most MaxTracked tenants are told apart within an interval
// (the rest count as others), and at most Tenants of them are kept per
// point.
//
// The access log calls Observe once per answered request; an actor calls
// Run, which closes an interval every Interval with the gauges its
// Sampler reads; the page reads Points. Time comes from the Config's
// clock.
package history

import (
	"cmp"
	"context"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/latent-node/latent-node/vocab"
)

// Defaults of Config.
const (
	DefaultInterval   = 5 * time.Second
	DefaultPoints     = 180 // 15 minutes at 5 s
	DefaultTenants    = 8
	DefaultMaxTracked = 256
	// Others is the name of the series of every tenant not kept by name,
	// Anonymous that of the requests refused before authentication.
	Others    = "(others)"
	Anonymous = "(unauthenticated)"
)

// Config sizes a History; zero fields take the defaults.
type Config struct {
	Interval   time.Duration
	Points     int // points kept
	Tenants    int // tenants kept by name per point
	MaxTracked int // tenants told apart within one interval
	Clock      vocab.Clock
}

// Gauges are the values a point reads at its end (Sampler).
type Gauges struct {
	MemoryAdmitted uint64  `json:"memory_admitted_bytes"`
	MemoryLimit    uint64  `json:"memory_limit_bytes"`
	Live           uint64  `json:"live"`
	Queued         uint64  `json:"queued"`
	WarmIdle       int     `json:"warm_idle"`
	DataSlots      int     `json:"ingress_data_slots"`
	DataBytes      uint64  `json:"ingress_data_bytes"`
	ControlSlots   int     `json:"ingress_control_slots"`
	PressureCPU    float64 `json:"pressure_cpu"`
	PressureMemory float64 `json:"pressure_memory"`
}

// Sampler reads the gauges when a point closes.
type Sampler func() Gauges

// Obs is one answered request.
type Obs struct {
	Tenant  vocab.TenantID // "" before authentication
	Outcome string         // an executed activation's outcome, else ""
	Reason  string         // a refusal's reason, else ""
	Took    time.Duration  // from headers read to answer written
	Queue   time.Duration  // an activation's queue wait
	Fuel    uint64
}

// Rates are one series' rates and latencies over a point's interval.
type Rates struct {
	Answers  float64 `json:"answers_per_s"`
	Refusals float64 `json:"refusals_per_s"`
	P50      float64 `json:"p50_ms"`
	P99      float64 `json:"p99_ms"`
	Fuel     float64 `json:"fuel_per_s"`
}

// TenantRates are a tenant's Rates in a point.
type TenantRates struct {
	Name string `json:"name"`
	Rates
}

// Point is one interval.
type Point struct {
	T        int64              `json:"t"` // the interval's end, Unix milliseconds
	Node     Rates              `json:"node"`
	QueueP50 float64            `json:"queue_p50_ms"`
	QueueP99 float64            `json:"queue_p99_ms"`
	Outcomes map[string]float64 `json:"outcomes_per_s"` // answers by outcome
	Reasons  map[string]float64 `json:"refusals_per_s"` // refusals by reason
	Tenants  []TenantRates      `json:"tenants"`        // by traffic, Others last
	Gauges
}

// History is the ring of points and the interval being counted.
type History struct {
	cfg Config

	mu     sync.Mutex
	ring   []Point // len ≤ cfg.Points; next is where the next point goes
	next   int
	start  time.Time
	node   acc
	queue  hist
	outc   map[string]uint64
	reason map[string]uint64
	byName map[vocab.TenantID]*acc
	others acc
	free   []*acc
}

// acc counts one series within an interval.
type acc struct {
	name     vocab.TenantID
	answers  uint64
	refusals uint64
	fuel     uint64
	took     hist
}

// New returns an empty History of cfg.
func New(cfg Config) *History {
	cfg.Interval = cmp.Or(cfg.Interval, DefaultInterval)
	cfg.Points = cmp.Or(cfg.Points, DefaultPoints)
	cfg.Tenants = cmp.Or(cfg.Tenants, DefaultTenants)
	cfg.MaxTracked = max(cmp.Or(cfg.MaxTracked, DefaultMaxTracked), cfg.Tenants)
	if cfg.Clock == nil {
		cfg.Clock = vocab.WallClock
	}
	h := &History{cfg: cfg, ring: make([]Point, 0, cfg.Points), outc: map[string]uint64{}, reason: map[string]uint64{},
		byName: make(map[vocab.TenantID]*acc, cfg.MaxTracked), start: cfg.Clock.Now()}
	h.free = make([]*acc, cfg.MaxTracked)
	for i := range h.free {
		h.free[i] = &acc{}
	}
	return h
}

// Observe counts one answered request in the current interval. Outcome
// and reason names come from the node's closed vocabularies, so their
// maps stay as small as those.
func (h *History) Observe(o Obs) {
	if h == nil {
		return
	}
	if o.Tenant == "" {
		o.Tenant = Anonymous
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	a := h.byName[o.Tenant]
	if a == nil {
		if n := len(h.free); n > 0 {
			a, h.free = h.free[n-1], h.free[:n-1]
			*a = acc{name: o.Tenant}
			h.byName[o.Tenant] = a
		} else {
			a = &h.others
		}
	}
	for _, c := range [2]*acc{&h.node, a} {
		c.took.add(o.Took)
		c.fuel += o.Fuel
		if o.Reason != "" {
			c.refusals++
		} else {
			c.answers++
		}
	}
	switch {
	case o.Reason != "":
		h.reason[o.Reason]++
	case o.Outcome != "":
		h.outc[o.Outcome]++
		h.queue.add(o.Queue)
	default:
		h.outc["answered"]++ // an invocation answered without a guest run or a refusal (an internal error)
	}
}

// Run closes a point every Interval, with the gauges of sample, until ctx
// ends.
func (h *History) Run(ctx context.Context, sample Sampler) error {
	t := time.NewTicker(h.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			h.Close(sample())
		}
	}
}

// Close ends the current interval as a point with gauges g.
func (h *History) Close(g Gauges) {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := h.cfg.Clock.Now()
	secs := max(now.Sub(h.start).Seconds(), 1e-3)
	h.start = now
	p := Point{T: now.UnixMilli(), Node: h.node.rates(secs), Gauges: g,
		QueueP50: h.queue.quantile(0.5), QueueP99: h.queue.quantile(0.99),
		Outcomes: perSecond(h.outc, secs), Reasons: perSecond(h.reason, secs)}
	tracked := make([]*acc, 0, len(h.byName))
	for _, a := range h.byName {
		tracked = append(tracked, a)
	}
	slices.SortFunc(tracked, func(a, b *acc) int {
		return cmp.Or(cmp.Compare(b.answers+b.refusals, a.answers+a.refusals), cmp.Compare(a.name, b.name))
	})
	for i, a := range tracked {
		if i < h.cfg.Tenants {
			p.Tenants = append(p.Tenants, TenantRates{Name: string(a.name), Rates: a.rates(secs)})
		} else {
			h.others.merge(a)
		}
		h.free = append(h.free, a)
	}
	if h.others.answers+h.others.refusals > 0 {
		p.Tenants = append(p.Tenants, TenantRates{Name: Others, Rates: h.others.rates(secs)})
	}
	clear(h.byName)
	clear(h.outc)
	clear(h.reason)
	h.node, h.others, h.queue = acc{}, acc{}, hist{}
	if len(h.ring) < h.cfg.Points {
		h.ring = append(h.ring, p)
	} else {
		h.ring[h.next] = p
	}
	h.next = (h.next + 1) % h.cfg.Points
}

// Points returns the points kept, oldest first.
func (h *History) Points() []Point {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.ring) < h.cfg.Points {
		return slices.Clone(h.ring)
	}
	return append(slices.Clone(h.ring[h.next:]), h.ring[:h.next]...)
}

// Interval is the points' spacing.
func (h *History) Interval() time.Duration { return h.cfg.Interval }

func (a *acc) rates(secs float64) Rates {
	return Rates{Answers: float64(a.answers) / secs, Refusals: float64(a.refusals) / secs, Fuel: float64(a.fuel) / secs,
		P50: a.took.quantile(0.5), P99: a.took.quantile(0.99)}
}

func (a *acc) merge(b *acc) {
	a.answers += b.answers
	a.refusals += b.refusals
	a.fuel += b.fuel
	for i, n := range b.took {
		a.took[i] += n
	}
}

func perSecond(m map[string]uint64, secs float64) map[string]float64 {
	out := make(map[string]float64, len(m))
	for k, n := range m {
		out[k] = float64(n) / secs
	}
	return out
}

// hist is a latency histogram of fixed buckets: bucket i holds durations
// below 10 µs × 2^(i/2), the last everything longer (from about 84 s);
// a quantile is its bucket's upper bound, within a factor √2.
type hist [48]uint32

func (h *hist) add(d time.Duration) {
	i := 0
	if us := d.Microseconds(); us >= 10 {
		i = min(int(2*math.Log2(float64(us)/10))+1, len(h)-1)
	}
	h[i]++
}

// quantile is the q-quantile in milliseconds, 0 when empty.
func (h *hist) quantile(q float64) float64 {
	var n uint64
	for _, c := range h {
		n += uint64(c)
	}
	if n == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(n)))
	var seen uint64
	for i, c := range h {
		if seen += uint64(c); seen >= max(rank, 1) {
			return 0.01 * math.Pow(2, float64(i)/2)
		}
	}
	return 0.01 * math.Pow(2, float64(len(h)-1)/2)
}

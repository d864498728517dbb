package scheduler

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/latent-node/latent-node/vocab"
)

func TestConfig_Validate(t *testing.T) {
	valid := func() Config {
		return Config{
			CellClasses: map[vocab.CellClass]CellConfig{vocab.CellTiny: {Parallelism: 2}, vocab.CellSmall: {Parallelism: 4}},
			QueueClasses: []QueueConfig{{Name: "batch", MinPriority: 0, MaxPriority: 4, MaxQueued: 8},
				{Name: "interactive", MinPriority: 5, MaxPriority: 9, MaxQueued: 8, ReservedCells: 1}},
			MaxWait: time.Second,
		}.WithDefaults()
	}
	tests := []struct {
		name   string
		mutate func(*Config)
		want   []string // fields named by the error; none: valid
	}{
		{"valid", func(*Config) {}, nil},
		{"no max wait", func(c *Config) { c.MaxWait = 0 }, []string{"MaxWait"}},
		{"negative lower class after", func(c *Config) { c.LowerClassAfter = -1 }, []string{"LowerClassAfter"}},
		{"unknown fairness", func(c *Config) { c.Fairness = "lottery" }, []string{"Fairness"}},
		{"negative interval", func(c *Config) { c.AdjustInterval = -time.Second }, []string{"AdjustInterval"}},
		{"defaults not filled", func(c *Config) {
			*c = Config{CellClasses: c.CellClasses, QueueClasses: c.QueueClasses, MaxWait: c.MaxWait}
		},
			[]string{"LowerClassAfter", "Fairness", "AdjustInterval"}},
		{"no queue classes", func(c *Config) { c.QueueClasses = nil }, []string{"QueueClasses"}},
		{"unnamed and duplicate", func(c *Config) {
			c.QueueClasses[0].Name = ""
			c.QueueClasses = append(c.QueueClasses, QueueConfig{Name: "interactive", MinPriority: 10, MaxPriority: 10})
		}, []string{"QueueClasses[0].Name", "QueueClasses[2].Name"}},
		{"inverted and overlapping", func(c *Config) {
			c.QueueClasses[0].MinPriority, c.QueueClasses[0].MaxPriority = 5, 4
			c.QueueClasses[1].MinPriority = 3
		}, []string{"QueueClasses[0].MinPriority", "QueueClasses[1].MinPriority"}},
		{"negative sizes", func(c *Config) {
			c.QueueClasses[0].MaxQueued = -1
			c.QueueClasses[0].ReservedCells = -1
		}, []string{"QueueClasses[0].MaxQueued", "QueueClasses[0].ReservedCells"}},
		{"no cell classes", func(c *Config) { c.CellClasses = nil }, []string{"CellClasses"}},
		{"bad cell class", func(c *Config) { c.CellClasses[vocab.CellClass(9)] = CellConfig{Parallelism: 1} }, []string{`CellClasses["cell-class(9)"]`}},
		{"no parallelism", func(c *Config) { c.CellClasses[vocab.CellTiny] = CellConfig{} }, []string{`CellClasses["tiny"].Parallelism`}},
		{"negative target", func(c *Config) {
			c.CellClasses[vocab.CellTiny] = CellConfig{Parallelism: 2, TargetServiceTime: -1}
		}, []string{`CellClasses["tiny"].TargetServiceTime`}},
		{"reserved beyond parallelism", func(c *Config) { c.QueueClasses[1].ReservedCells = 3 }, []string{`CellClasses["tiny"].Parallelism`}},
		{"reserved leaves an unreserved class nothing", func(c *Config) { c.QueueClasses[1].ReservedCells = 2 },
			[]string{`CellClasses["tiny"].Parallelism`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := valid()
			tc.mutate(&cfg)
			before := fmt.Sprintf("%+v", cfg)
			err := cfg.Validate()
			if after := fmt.Sprintf("%+v", cfg); after != before {
				t.Errorf("Validate changed the configuration:\nbefore %s\nafter  %s", before, after)
			}
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want[0]+": ") {
				t.Fatalf("want ErrInvalidConfig naming %s, have %v", tc.want[0], err)
			}
			var ce *ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("want a *ConfigError, have %T", err)
			}
			var have []string
			for _, p := range ce.Problems {
				have = append(have, p.Field)
			}
			if strings.Join(have, ",") != strings.Join(tc.want, ",") {
				t.Errorf("fields\nhave %v\nwant %v\n(%v)", have, tc.want, err)
			}
			if tc.name == "defaults not filled" {
				return // NewCore fills them: see TestConfig_WithDefaults
			}
			if _, err := NewCore(cfg); err == nil {
				t.Error("NewCore accepted an invalid configuration")
			}
		})
	}
}

func TestConfig_WithDefaults(t *testing.T) {
	cfg := Config{CellClasses: map[vocab.CellClass]CellConfig{vocab.CellTiny: {Parallelism: 1}},
		QueueClasses: []QueueConfig{{Name: "all", MaxPriority: 9}}, MaxWait: time.Second}
	d := cfg.WithDefaults()
	if cfg.LowerClassAfter != 0 || cfg.Fairness != "" || cfg.AdjustInterval != 0 {
		t.Errorf("WithDefaults changed its receiver: %+v", cfg)
	}
	if d.LowerClassAfter != DefaultLowerClassAfter || d.Fairness != FairnessFuel || d.AdjustInterval != DefaultAdjustInterval {
		t.Errorf("defaults not filled: %+v", d)
	}
	set := Config{LowerClassAfter: 3, Fairness: FairnessRoundRobin, AdjustInterval: time.Minute}.WithDefaults()
	if set.LowerClassAfter != 3 || set.Fairness != FairnessRoundRobin || set.AdjustInterval != time.Minute {
		t.Errorf("WithDefaults replaced set fields: %+v", set)
	}
	c, err := NewCore(cfg)
	if err != nil {
		t.Fatalf("NewCore does not fill the defaults: %v", err)
	}
	if c.cfg.LowerClassAfter != DefaultLowerClassAfter || c.cfg.Fairness != FairnessFuel || c.cfg.AdjustInterval != DefaultAdjustInterval {
		t.Errorf("the core runs without the defaults: %+v", c.cfg)
	}
}

func TestCore_misuse(t *testing.T) {
	c := newSimCore(t, simConfig(1, FairnessFuel, 10))
	it := &Item{Tenant: "t", Principal: "p", Cell: simCell}
	mustEnqueue(t, c, it)
	if err := c.Enqueue(simEpoch, it); err == nil {
		t.Error("enqueued twice")
	}
	if err := c.Enqueue(simEpoch, &Item{Cell: vocab.CellTiny}); err == nil {
		t.Error("enqueued on an unconfigured cell class")
	}
	if err := c.Enqueue(simEpoch, &Item{Cell: vocab.CellClass(200)}); err == nil {
		t.Error("enqueued on an invalid cell class")
	}
	if err := c.Enqueue(simEpoch, &Item{Cell: simCell, Queue: 3}); err == nil {
		t.Error("enqueued on an unconfigured queue class")
	}
	for name, f := range map[string]func(*Item) error{
		"Done":    func(it *Item) error { return c.Done(simEpoch, it, 1, 1) },
		"Abort":   c.Abort,
		"Requeue": c.Requeue,
	} {
		if err := f(it); err == nil {
			t.Errorf("%s on a waiting item succeeded", name)
		}
	}
	if _, ok := c.Next(simEpoch, vocab.CellTiny); ok {
		t.Error("dispatched from an unconfigured cell class")
	}
	got, ok := c.Next(simEpoch, simCell)
	if !ok || got != it {
		t.Fatal("no dispatch")
	}
	if c.Remove(it) {
		t.Error("removed a running item")
	}
	if _, ok := c.YieldSlotTo(simEpoch, 7, "t", "p"); ok {
		t.Error("yield on an unconfigured queue class")
	}
	if h, n := c.Holding(-1, "t", "p"); h != 0 || n != 0 {
		t.Error("holding of an unconfigured queue class")
	}
	if c.Waiting(vocab.CellTiny, 0) != 0 || c.ObservedQueueDelay(vocab.CellTiny) != 0 {
		t.Error("figures for an unconfigured cell class")
	}
	c.LoseCell(vocab.CellTiny) // no effect, no panic
}

// TestCore_timeNeverGoesBack: an earlier now is treated as the latest seen.
func TestCore_timeNeverGoesBack(t *testing.T) {
	c := newSimCore(t, simConfig(1, FairnessFuel, 10))
	later := simEpoch.Add(time.Minute)
	a := &Item{Tenant: "t", Principal: "p", Cell: simCell}
	mustEnqueueAt(t, c, later, a)
	b := &Item{Tenant: "t", Principal: "p", Cell: simCell}
	mustEnqueueAt(t, c, simEpoch, b)
	if !b.EnqueuedAt.Equal(later) {
		t.Errorf("EnqueuedAt %v, want %v", b.EnqueuedAt, later)
	}
}

// TestCore_rebase: virtual times far in the future are shifted down
// without changing the order.
func TestCore_rebase(t *testing.T) {
	c := newSimCore(t, simConfig(1, FairnessFuel, 100))
	for _, tn := range []vocab.TenantID{"a", "b"} {
		for range 3 {
			mustEnqueue(t, c, &Item{Tenant: tn, Principal: "p", Cell: simCell})
		}
	}
	var order []vocab.TenantID
	fuel := uint64(maxCharge) // each completion charges 2^50
	for i := 0; i < 6; i++ {
		it, ok := c.Next(simEpoch, simCell)
		if !ok {
			t.Fatal("nothing to dispatch")
		}
		order = append(order, it.Tenant)
		l := c.cells[simCell].lanes[0]
		if l.vstart >= rebaseAt {
			t.Fatalf("virtual time %d not rebased", l.vstart)
		}
		if i == 2 {
			// Jump the lane past the rebase threshold.
			for _, f := range l.byName {
				f.served += rebaseAt
			}
			l.vstart += rebaseAt
		}
		if err := c.Done(simEpoch, it, fuel, time.Millisecond); err != nil {
			t.Fatal(err)
		}
	}
	if have := string(joinTenants(order)); have != "ababab" {
		t.Errorf("order %s, want ababab", have)
	}
}

func joinTenants(ts []vocab.TenantID) []byte {
	var b []byte
	for _, t := range ts {
		b = append(b, t...)
	}
	return b
}

// TestCore_memoryBounded: after a burst of many tenants and principals
// passes, no per-tenant state remains.
func TestCore_memoryBounded(t *testing.T) {
	c := newSimCore(t, simConfig(4, FairnessFuel, 1<<20))
	now := simEpoch
	var items []*Item
	for i := range 5000 {
		it := &Item{Tenant: tenantName(i), Principal: "p" + string(tenantName(i%7)), Cell: simCell, Queue: 0}
		mustEnqueueAt(t, c, now, it)
		items = append(items, it)
	}
	// A third is removed, a third evicted or expired, a third runs.
	for _, it := range items[:1666] {
		c.Remove(it)
	}
	for i := 0; i < 300; i++ {
		c.YieldSlotTo(now, 0, "newcomer", "p")
	}
	for {
		it, ok := c.Next(now, simCell)
		if !ok {
			break
		}
		if err := c.Done(now, it, 10, time.Millisecond); err != nil {
			t.Fatal(err)
		}
		if len(c.cells[simCell].lanes[0].byName) > 3400 {
			break
		}
	}
	c.Expire(now.Add(time.Hour))
	cs := c.cells[simCell]
	l := cs.lanes[0]
	if len(l.byName) != 0 || len(l.kids) != 0 || len(c.queues[0].holders) != 0 || cs.waiting != 0 || cs.age.head != nil {
		t.Errorf("state left: %d tenants, %d backlogged, %d holders, %d waiting",
			len(l.byName), len(l.kids), len(c.queues[0].holders), cs.waiting)
	}
	if len(c.pool.free) > maxPooled {
		t.Errorf("flow pool holds %d > %d", len(c.pool.free), maxPooled)
	}
}

// TestCore_queueDelay: the queue-delay average follows dispatches and
// expiries and decays while nothing waits.
func TestCore_queueDelay(t *testing.T) {
	cfg := simConfig(1, FairnessFuel, 10)
	c := newSimCore(t, cfg)
	c.Adjust(simEpoch)
	a := &Item{Tenant: "t", Principal: "p", Cell: simCell}
	mustEnqueue(t, c, a)
	it, _ := c.Next(simEpoch.Add(100*time.Millisecond), simCell)
	if d := c.ObservedQueueDelay(simCell); d != 100*time.Millisecond {
		t.Fatalf("delay %v after one 100ms wait", d)
	}
	if err := c.Done(simEpoch.Add(200*time.Millisecond), it, 1, time.Millisecond); err != nil {
		t.Fatal(err)
	}
	now := simEpoch.Add(200 * time.Millisecond)
	prev := c.ObservedQueueDelay(simCell)
	for i := range 20 {
		now = now.Add(c.cfg.AdjustInterval)
		c.Adjust(now)
		d := c.ObservedQueueDelay(simCell)
		if i > 0 && d >= prev { // the first interval saw the dispatch: no decay
			t.Fatalf("delay did not decay: %v then %v", prev, d)
		}
		prev = d
	}
	if prev > 2*time.Millisecond {
		t.Errorf("delay %v after 20 idle intervals", prev)
	}
	st := c.Stats()
	if len(st.Cells) != 1 || st.Cells[0].Class != simCell || st.Queues[0].Name != "default" || st.Queues[0].MaxQueued != 10 {
		t.Errorf("stats %+v", st)
	}
}

// TestCore_loseCells: losing cells shrinks capacity down to nothing.
func TestCore_loseCells(t *testing.T) {
	cfg := simConfig(2, FairnessFuel, 10)
	cfg.QueueClasses[0].ReservedCells = 1
	cfg.QueueClasses = append(cfg.QueueClasses, QueueConfig{Name: "hi", MinPriority: 10, MaxPriority: 10, MaxQueued: 10})
	c := newSimCore(t, cfg)
	for range 3 {
		mustEnqueue(t, c, &Item{Tenant: "t", Principal: "p", Cell: simCell})
	}
	c.LoseCell(simCell)
	c.LoseCell(simCell)
	c.LoseCell(simCell)
	if _, ok := c.Next(simEpoch, simCell); ok {
		t.Error("dispatched without usable cells")
	}
	st := c.Stats().Cells[0]
	if st.Usable != 0 || st.Quarantined != 2 || st.Window != 0 {
		t.Errorf("stats %+v", st)
	}
}

// TestCore_queueDelayFromArrival: an item that arrived before it was
// enqueued counts its delay from arrival; an arrival after enqueue (a
// caller's clock ahead) counts from the enqueue.
func TestCore_queueDelayFromArrival(t *testing.T) {
	for _, tt := range []struct {
		name    string
		arrived time.Duration // relative to the enqueue at simEpoch
		want    time.Duration
	}{
		{"unset", 0, 100 * time.Millisecond},
		{"30ms before", -30 * time.Millisecond, 130 * time.Millisecond},
		{"after enqueue", 5 * time.Millisecond, 100 * time.Millisecond},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := newSimCore(t, simConfig(1, FairnessFuel, 10))
			c.Adjust(simEpoch)
			a := &Item{Tenant: "t", Principal: "p", Cell: simCell}
			if tt.arrived != 0 {
				a.ArrivedAt = simEpoch.Add(tt.arrived)
			}
			mustEnqueue(t, c, a)
			c.Next(simEpoch.Add(100*time.Millisecond), simCell)
			if d := c.ObservedQueueDelay(simCell); d != tt.want {
				t.Fatalf("delay %v, want %v", d, tt.want)
			}
		})
	}
}

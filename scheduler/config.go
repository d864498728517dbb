package scheduler

import (
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/latent-node/latent-node/catalog"
)

// Fairness modes (Config.Fairness).
const (
	// FairnessFuel charges each dispatch an estimate of its fuel and corrects
	// it by the fuel actually used at completion: tenants get equal CPU.
	FairnessFuel = "fuel"
	// FairnessRoundRobin charges every dispatch 1: tenants get equal counts
	// of dispatches, whatever each costs.
	FairnessRoundRobin = "round-robin"
)

// Defaults applied by Validate to zero fields.
const (
	DefaultLowerClassAfter = 8
	DefaultAdjustInterval  = time.Second
)

// Config configures the scheduler. It mirrors the node's TOML: the
// [scheduler] table, [[queue_classes]] and [cell_classes.X]. Validate checks
// it once (NewCore and New call it) and fills the defaults.
type Config struct {
	// CellClasses are the configured cell classes; at least one.
	CellClasses map[catalog.CellClass]CellConfig
	// QueueClasses are indexed as admission indexes them
	// (admission.Obligations.QueueIndex): the node builds both from the same
	// [[queue_classes]] list. Priority ranges must not overlap; lanes are
	// served from the highest range down.
	QueueClasses []QueueConfig
	// MaxWait bounds the time an item waits in the queue (> 0). An item
	// waiting MaxWait is removed with ErrQueueWaitExceeded.
	MaxWait time.Duration
	// LowerClassAfter bounds the run of consecutive higher-class dispatches
	// (onto shared cells) while a lower class waits: ≥ 1; 0 means 8.
	LowerClassAfter int
	// Fairness is FairnessFuel (the default when empty) or FairnessRoundRobin.
	Fairness string
	// AdjustInterval is the period of the adaptive window (> 0; 0 means 1s):
	// the window changes at most once per interval.
	AdjustInterval time.Duration
}

// CellConfig configures one cell class.
type CellConfig struct {
	// Parallelism is the number of cells of the class (≥ 1); it must equal the
	// pool's capacity and admission's parallelism for the class.
	Parallelism int
	// TargetServiceTime is the adaptive-concurrency target: the execution
	// time per 1,000,000 units of fuel above which the window shrinks (≥ 0;
	// 0 disables adaptation: the window stays at the usable parallelism).
	TargetServiceTime time.Duration
}

// QueueConfig configures one queue class.
type QueueConfig struct {
	// Name is the class's name (non-empty, unique).
	Name string
	// MinPriority and MaxPriority bound the class's inclusive priority range.
	MinPriority, MaxPriority uint32
	// MaxQueued is the class's pending-slot limit (≥ 0), the limit that
	// YieldSlotTo shares fairly. Admission enforces it; the scheduler only
	// divides it.
	MaxQueued int
	// ReservedCells is the number of cells of every cell class that only this
	// class may use (≥ 0).
	ReservedCells int
}

// ConfigError lists every problem of a Config, each named by its
// configuration key.
type ConfigError struct {
	Problems []catalog.FieldError
}

func (e *ConfigError) Error() string {
	return catalog.JoinFieldErrors("scheduler: invalid configuration", e.Problems)
}

// ErrInvalidConfig marks a *ConfigError.
var ErrInvalidConfig = errors.New("scheduler: invalid configuration")

// Is makes errors.Is(err, ErrInvalidConfig) hold.
func (e *ConfigError) Is(target error) bool { return target == ErrInvalidConfig }

// WithDefaults returns c with the defaults in its zero fields:
// LowerClassAfter DefaultLowerClassAfter, Fairness FairnessFuel and
// AdjustInterval DefaultAdjustInterval. NewCore and New call it.
func (c Config) WithDefaults() Config {
	if c.LowerClassAfter == 0 {
		c.LowerClassAfter = DefaultLowerClassAfter
	}
	if c.Fairness == "" {
		c.Fairness = FairnessFuel
	}
	if c.AdjustInterval == 0 {
		c.AdjustInterval = DefaultAdjustInterval
	}
	return c
}

// Validate fills the defaults of zero fields and checks every field. It
// returns a *ConfigError naming every problem by its configuration key.
func (c *Config) Validate() error {
	var probs []catalog.FieldError
	add := func(field, problem string) {
		probs = append(probs, catalog.FieldError{Field: field, Problem: problem})
	}
	if c.LowerClassAfter == 0 {
		c.LowerClassAfter = DefaultLowerClassAfter
	}
	if c.Fairness == "" {
		c.Fairness = FairnessFuel
	}
	if c.AdjustInterval == 0 {
		c.AdjustInterval = DefaultAdjustInterval
	}
	if c.MaxWait <= 0 {
		add("scheduler.max_wait", "must be positive")
	}
	if c.LowerClassAfter < 1 {
		add("scheduler.lower_class_after", "must be at least 1")
	}
	if c.Fairness != FairnessFuel && c.Fairness != FairnessRoundRobin {
		add("scheduler.fairness", "must be \"fuel\" or \"round-robin\"")
	}
	if c.AdjustInterval < 0 {
		add("scheduler.adjust_interval", "must be positive")
	}

	if len(c.QueueClasses) == 0 {
		add("queue_classes", "at least one queue class is required")
	}
	names := map[string]bool{}
	reserved, unreserved := 0, false
	for i, q := range c.QueueClasses {
		f := "queue_classes[" + strconv.Itoa(i) + "]"
		switch {
		case q.Name == "":
			add(f+".name", "must not be empty")
		case names[q.Name]:
			add(f+".name", "duplicate queue class")
		}
		names[q.Name] = true
		if q.MinPriority > q.MaxPriority {
			add(f+".priorities", "minimum exceeds maximum")
		}
		for j, o := range c.QueueClasses[:i] {
			if q.MinPriority <= o.MaxPriority && o.MinPriority <= q.MaxPriority {
				add(f+".priorities", "overlaps queue_classes["+strconv.Itoa(j)+"]")
			}
		}
		if q.MaxQueued < 0 {
			add(f+".max_queued", "must not be negative")
		}
		if q.ReservedCells < 0 {
			add(f+".reserved_cells", "must not be negative")
		}
		reserved += max(q.ReservedCells, 0)
		unreserved = unreserved || q.ReservedCells == 0
	}

	if len(c.CellClasses) == 0 {
		add("cell_classes", "at least one cell class is required")
	}
	for _, class := range slices.Sorted(maps.Keys(c.CellClasses)) {
		cc := c.CellClasses[class]
		f := "cell_classes." + class.String()
		if !class.Valid() {
			add(f, "not a cell class")
			continue
		}
		if cc.Parallelism < 1 {
			add(f+".parallelism", "must be at least 1")
			continue
		}
		if cc.TargetServiceTime < 0 {
			add(f+".target_service_time", "must not be negative")
		}
		switch {
		case reserved > cc.Parallelism:
			add(f+".parallelism", "smaller than the queue classes' reserved_cells ("+strconv.Itoa(reserved)+")")
		case reserved == cc.Parallelism && unreserved:
			add(f+".parallelism", "equal to the queue classes' reserved_cells ("+strconv.Itoa(reserved)+
				"): a queue class without reserved cells could never run")
		}
	}
	if len(probs) == 0 {
		return nil
	}
	return &ConfigError{Problems: probs}
}

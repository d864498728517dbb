package scheduler

// Config, the scheduler's configuration (cell and queue classes, fairness
// mode), its defaults (WithDefaults) and its validation (ConfigError).

import (
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/latent-node/latent-node/admission"
	"github.com/latent-node/latent-node/vocab"
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

// Defaults that WithDefaults puts in zero fields.
const (
	DefaultLowerClassAfter = 8
	DefaultAdjustInterval  = time.Second
)

// Config configures the scheduler. It mirrors the node's TOML: the
// [scheduler] table, [[queue_classes]] and [cell_classes.X]. NewCore and New
// fill its defaults (WithDefaults) and check it once (Validate).
type Config struct {
	// CellClasses are the configured cell classes; at least one.
	CellClasses map[vocab.CellClass]CellConfig
	// QueueClasses are indexed as admission indexes them
	// (admission.Obligations.QueueIndex): the node builds both from the same
	// [[queue_classes]] list. Priority ranges must not overlap; lanes are
	// served from the highest range down.
	QueueClasses []QueueConfig
	// MaxWait bounds the time an item waits in the queue (> 0). An item
	// waiting MaxWait is removed with ErrQueueWaitExceeded.
	MaxWait time.Duration
	// LowerClassAfter bounds the run of consecutive higher-class dispatches
	// (onto shared cells) while a lower class waits: ≥ 1 (WithDefaults turns
	// 0 into DefaultLowerClassAfter).
	LowerClassAfter int
	// Fairness is FairnessFuel (WithDefaults turns "" into it) or
	// FairnessRoundRobin.
	Fairness string
	// AdjustInterval is the period of the adaptive window (> 0; WithDefaults
	// turns 0 into DefaultAdjustInterval):
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
	// Name is the class's name (vocab.ValidateName; unique).
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

// ConfigError lists every problem of a Config. Each problem's Field is a
// vocab.FieldPath in the Go terms of Config (`CellClasses["tiny"].Parallelism`);
// a caller that reads the configuration from a file maps the paths onto its
// own keys.
type ConfigError struct {
	Problems []vocab.FieldError
}

func (e *ConfigError) Error() string {
	return vocab.JoinFieldErrors("scheduler: invalid configuration", e.Problems)
}

// ErrInvalidConfig marks a *ConfigError.
var ErrInvalidConfig = errors.New("scheduler: invalid configuration")

// Is makes errors.Is(err, ErrInvalidConfig) hold.
func (e *ConfigError) Is(target error) bool { return target == ErrInvalidConfig }

// WithDefaults returns c with the defaults in its zero fields:
// LowerClassAfter DefaultLowerClassAfter, Fairness FairnessFuel and
// AdjustInterval DefaultAdjustInterval. NewCore and New call it before
// Validate.
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

// Validate checks every field of c as it is, without filling defaults: a
// zero LowerClassAfter, Fairness or AdjustInterval is a problem here (call
// WithDefaults first, as NewCore does). It returns a *ConfigError naming
// every problem by its field. The shape of the queue classes (names,
// ranges, overlap) is admission's rule, admission.CheckQueueClasses.
func (c *Config) Validate() error {
	var probs []vocab.FieldError
	add := func(field vocab.FieldPath, problem string) { probs = append(probs, field.Error(problem)) }
	if c.MaxWait <= 0 {
		add("MaxWait", "must be positive")
	}
	if c.LowerClassAfter < 1 {
		add("LowerClassAfter", "must be at least 1")
	}
	if c.Fairness != FairnessFuel && c.Fairness != FairnessRoundRobin {
		add("Fairness", `must be "`+FairnessFuel+`" or "`+FairnessRoundRobin+`"`)
	}
	if c.AdjustInterval <= 0 {
		add("AdjustInterval", "must be positive")
	}

	const queues = vocab.FieldPath("QueueClasses")
	shapes := make([]admission.QueueClassPolicy, len(c.QueueClasses))
	for i, q := range c.QueueClasses {
		shapes[i] = admission.QueueClassPolicy{Name: q.Name, MinPriority: q.MinPriority, MaxPriority: q.MaxPriority}
	}
	probs = append(probs, admission.CheckQueueClasses(queues, shapes)...)
	reserved, unreserved := 0, false
	for i, q := range c.QueueClasses {
		if q.MaxQueued < 0 {
			add(queues.Index(i).Field("MaxQueued"), "must not be negative")
		}
		if q.ReservedCells < 0 {
			add(queues.Index(i).Field("ReservedCells"), "must not be negative")
		}
		reserved += max(q.ReservedCells, 0)
		unreserved = unreserved || q.ReservedCells == 0
	}

	const cells = vocab.FieldPath("CellClasses")
	if len(c.CellClasses) == 0 {
		add(cells, "at least one cell class is required")
	}
	for _, class := range slices.Sorted(maps.Keys(c.CellClasses)) {
		cc := c.CellClasses[class]
		f := cells.Key(class.String())
		if !class.Valid() {
			add(f, "not a cell class")
			continue
		}
		if cc.TargetServiceTime < 0 {
			add(f.Field("TargetServiceTime"), "must not be negative (0 disables adaptive concurrency)")
		}
		if cc.Parallelism < 1 {
			add(f.Field("Parallelism"), "must be at least 1")
			continue
		}
		switch {
		case reserved > cc.Parallelism:
			add(f.Field("Parallelism"), "smaller than the sum of the queue classes' reserved cells ("+strconv.Itoa(reserved)+
				"); reserve fewer cells or add cells")
		case reserved == cc.Parallelism && unreserved:
			add(f.Field("Parallelism"), "equal to the sum of the queue classes' reserved cells ("+strconv.Itoa(reserved)+
				"): a queue class without reserved cells could never run")
		}
	}
	if len(probs) == 0 {
		return nil
	}
	return &ConfigError{Problems: probs}
}

// Package nodeconf writes node configuration files for tests and benchmarks
// that start the real binary: a Config names what a caller varies, a zero
// field takes the default in its comment, and TOML renders the file. Sizes
// and durations are strings in the file's own syntax ("64MiB", "10s").
package nodeconf

import (
	"fmt"
	"strconv"
	"strings"
)

// Config is one node configuration.
type Config struct {
	DataDir        string // node.data_dir; required
	Listen         string // node.listen; "127.0.0.1:0"
	Region         string // node.region; "local"
	Zone           string // node.zone; "local-a"
	MaxOutputBytes string // node.max_output_bytes; "64KiB"
	ShutdownGrace  string // node.shutdown_grace; "5s"
	MaxConnections int    // node.max_connections; not written
	// MaxConnectionsPerAddress is node.max_connections_per_address; not
	// written when 0.
	MaxConnectionsPerAddress int
	WriteTimeout             string   // node.write_timeout; not written when empty
	UIHosts                  []string // node.ui_hosts; not written when nil
	// MaxSignaturesPerTenant is node.max_signatures_per_tenant; not written
	// when 0.
	MaxSignaturesPerTenant int
	BudgetCeiling          Budget // [node.budget_ceiling]
	Limits                 Limits // [node.limits]; required

	// QueueClasses are the [[queue_classes]] in order; one class "all" for
	// priorities 0..Limits.MaxPriority holding Limits.MaxQueued.
	QueueClasses []QueueClass
	Cells        []Cell       // [cell_classes.*]; required
	TrustClasses []TrustClass // [trust_classes.*]; required
	Tenants      []Tenant     // [tenants.*]
	Principals   []Principal  // [[principals]] in order

	Overload  Overload
	Deadline  Deadline
	Metadata  Metadata
	Scheduler Scheduler

	// Extra is TOML appended after everything else, for the tables Config
	// has no field for ([catalog], [ingress], [deploy_limits]).
	Extra string
}

// Budget is [node.budget_ceiling].
type Budget struct {
	CPUFuel     uint64 // 5_000_000_000
	MemoryBytes string // "64MiB"
	WallTime    string // "10s"
}

// Limits are the limits of the node ([node.limits]), a trust class or a
// tenant. A trust class has the first four only.
type Limits struct {
	MaxLiveActivations int    // required
	MaxQueued          int    // required
	MaxReservedFuel    uint64 // required
	MaxReservedMemory  string // required
	MaxPayloadBytes    string // "64KiB"
	MaxPriority        int    // 9 (so max_priority = 0 cannot be written)
}

// QueueClass is one [[queue_classes]] entry.
type QueueClass struct {
	Name                     string
	MinPriority, MaxPriority int
	MaxQueued                int
}

// Cell is one [cell_classes.NAME] table.
type Cell struct {
	Class       string   // NAME; required
	Memory      string   // required
	Parallelism int      // required
	Threading   []string // ["single"]
	Features    []string // Features
}

// Features are the Wasm features a Cell offers when it lists none: every
// feature of single-threaded cells.
var Features = []string{"bulk-memory", "simd", "multi-value", "sign-extension", "nontrapping-f2i", "reference-types"}

// TrustClass is one [trust_classes.NAME] table.
type TrustClass struct {
	Name   string
	Cells  []string // cell_classes
	Limits Limits   // the first four
}

// Tenant is one [tenants.NAME] table.
type Tenant struct {
	Name         string
	TrustClasses []string
	Cells        []string // cell_classes
	Subjects     []string
	Kinds        []string // ["user"]
	Limits       Limits
}

// Principal is one [[principals]] entry.
type Principal struct {
	Subject string
	Kind    string // "user"
	Tenant  string
	// ServiceIdentity is service_identity (a "service" principal's); not
	// written when empty.
	ServiceIdentity string
	Roles           []string
	APIKeys         []string // key hashes
}

// Overload is the [overload] table.
type Overload struct {
	CPUThreshold      float64 // 1.0 (never overloaded)
	MemoryThreshold   float64 // 1.0
	MaxObservationAge string  // "2s"
	SampleInterval    string  // "100ms"
}

// Deadline is the [deadline] table.
type Deadline struct {
	EstimatedServiceTime string // "20ms"
	MinimumExecutionTime string // "1ms"
	SafetyMargin         string // "100ms"
}

// Metadata is the [metadata] table.
type Metadata struct {
	MaxIdentifierBytes int // 128
	MaxEntries         int // 32
	MaxBytes           int // 4096
}

// Scheduler is the [scheduler] table.
type Scheduler struct {
	MaxWait         string // "10s"
	LowerClassAfter int    // 8
	Fairness        string // "fuel"
}

// TOML renders the configuration.
func (c Config) TOML() string {
	w := &writer{}
	w.table("node")
	w.str("listen", or(c.Listen, "127.0.0.1:0"))
	w.str("data_dir", c.DataDir)
	w.str("region", or(c.Region, "local"))
	w.str("zone", or(c.Zone, "local-a"))
	w.str("max_output_bytes", or(c.MaxOutputBytes, "64KiB"))
	w.str("shutdown_grace", or(c.ShutdownGrace, "5s"))
	if c.MaxConnections != 0 {
		w.int("max_connections", c.MaxConnections)
	}
	if c.MaxConnectionsPerAddress != 0 {
		w.int("max_connections_per_address", c.MaxConnectionsPerAddress)
	}
	if c.WriteTimeout != "" {
		w.str("write_timeout", c.WriteTimeout)
	}
	if c.UIHosts != nil {
		w.list("ui_hosts", c.UIHosts)
	}
	if c.MaxSignaturesPerTenant != 0 {
		w.int("max_signatures_per_tenant", c.MaxSignaturesPerTenant)
	}
	w.table("node.budget_ceiling")
	w.uint("cpu_fuel", or(c.BudgetCeiling.CPUFuel, 5_000_000_000))
	w.str("memory_bytes", or(c.BudgetCeiling.MemoryBytes, "64MiB"))
	w.str("wall_time", or(c.BudgetCeiling.WallTime, "10s"))
	w.table("node.limits")
	w.limits(c.Limits, true)

	queues := c.QueueClasses
	if queues == nil {
		queues = []QueueClass{{Name: "all", MaxPriority: or(c.Limits.MaxPriority, 9), MaxQueued: c.Limits.MaxQueued}}
	}
	for _, q := range queues {
		w.array("queue_classes")
		w.str("name", q.Name)
		w.line("priorities = [%d, %d]", q.MinPriority, q.MaxPriority)
		w.int("max_queued", q.MaxQueued)
	}
	for _, cell := range c.Cells {
		w.table("cell_classes." + cell.Class)
		w.str("memory", cell.Memory)
		w.int("parallelism", cell.Parallelism)
		w.list("threading", orList(cell.Threading, []string{"single"}))
		w.list("features", orList(cell.Features, Features))
	}
	for _, tc := range c.TrustClasses {
		w.table("trust_classes." + tc.Name)
		w.list("cell_classes", tc.Cells)
		w.line("[trust_classes.%s.limits]", tc.Name)
		w.limits(tc.Limits, false)
	}
	for _, t := range c.Tenants {
		w.table("tenants." + t.Name)
		w.list("trust_classes", t.TrustClasses)
		w.list("cell_classes", t.Cells)
		w.list("subjects", t.Subjects)
		w.list("kinds", orList(t.Kinds, []string{"user"}))
		w.line("[tenants.%s.limits]", t.Name)
		w.limits(t.Limits, true)
	}
	for _, p := range c.Principals {
		w.array("principals")
		w.str("subject", p.Subject)
		w.str("kind", or(p.Kind, "user"))
		w.str("tenant", p.Tenant)
		if p.ServiceIdentity != "" {
			w.str("service_identity", p.ServiceIdentity)
		}
		w.list("roles", p.Roles)
		w.list("api_keys", p.APIKeys)
	}

	w.table("overload")
	w.float("cpu_threshold", or(c.Overload.CPUThreshold, 1))
	w.float("memory_threshold", or(c.Overload.MemoryThreshold, 1))
	w.str("max_observation_age", or(c.Overload.MaxObservationAge, "2s"))
	w.str("sample_interval", or(c.Overload.SampleInterval, "100ms"))
	w.table("deadline")
	w.str("estimated_service_time", or(c.Deadline.EstimatedServiceTime, "20ms"))
	w.str("minimum_execution_time", or(c.Deadline.MinimumExecutionTime, "1ms"))
	w.str("safety_margin", or(c.Deadline.SafetyMargin, "100ms"))
	w.table("metadata")
	w.int("maximum_identifier_bytes", or(c.Metadata.MaxIdentifierBytes, 128))
	w.int("maximum_metadata_entries", or(c.Metadata.MaxEntries, 32))
	w.int("maximum_metadata_bytes", or(c.Metadata.MaxBytes, 4096))
	w.table("scheduler")
	w.str("max_wait", or(c.Scheduler.MaxWait, "10s"))
	w.int("lower_class_after", or(c.Scheduler.LowerClassAfter, 8))
	w.str("fairness", or(c.Scheduler.Fairness, "fuel"))

	if c.Extra != "" {
		w.b.WriteString("\n" + strings.TrimSpace(c.Extra) + "\n")
	}
	return w.b.String()
}

// or returns v, or def if v is zero.
func or[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

func orList(v, def []string) []string {
	if v == nil {
		return def
	}
	return v
}

type writer struct{ b strings.Builder }

func (w *writer) line(format string, args ...any) {
	fmt.Fprintf(&w.b, format+"\n", args...)
}

// table starts [name], after a blank line unless it is the first.
func (w *writer) table(name string) {
	if w.b.Len() > 0 {
		w.b.WriteString("\n")
	}
	w.line("[%s]", name)
}

func (w *writer) array(name string) {
	w.b.WriteString("\n")
	w.line("[[%s]]", name)
}

func (w *writer) str(key, v string) { w.line("%s = %s", key, strconv.Quote(v)) }
func (w *writer) int(key string, v int) {
	w.line("%s = %s", key, grouped(strconv.Itoa(v)))
}
func (w *writer) uint(key string, v uint64) {
	w.line("%s = %s", key, grouped(strconv.FormatUint(v, 10)))
}

// float writes v with a decimal point, so TOML reads a float.
func (w *writer) float(key string, v float64) {
	s := strconv.FormatFloat(v, 'f', -1, 64)
	if !strings.ContainsAny(s, ".eE") {
		s += ".0"
	}
	w.line("%s = %s", key, s)
}

func (w *writer) list(key string, vs []string) {
	q := make([]string, len(vs))
	for i, v := range vs {
		q[i] = strconv.Quote(v)
	}
	w.line("%s = [%s]", key, strings.Join(q, ", "))
}

// limits writes the four limits every scope has, and with tenant the two
// of node and tenant scope.
func (w *writer) limits(l Limits, tenant bool) {
	w.int("max_live_activations", l.MaxLiveActivations)
	w.int("max_queued", l.MaxQueued)
	w.uint("max_reserved_fuel", l.MaxReservedFuel)
	w.str("max_reserved_memory", l.MaxReservedMemory)
	if tenant {
		w.str("max_payload_bytes", or(l.MaxPayloadBytes, "64KiB"))
		w.int("max_priority", or(l.MaxPriority, 9))
	}
}

// grouped puts an underscore between groups of three digits of a decimal
// integer of more than six digits (5_000_000_000), as TOML allows.
func grouped(s string) string {
	if len(s) <= 6 || strings.HasPrefix(s, "-") {
		return s
	}
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte('_')
		}
		b.WriteRune(r)
	}
	return b.String()
}

package nodeconf

import (
	"strings"
	"testing"
	"time"

	"github.com/latent-node/latent-node/node/config"
	"github.com/latent-node/latent-node/vocab"
)

var hash = "sha256:" + strings.Repeat("ab", 32)

// minimal is the smallest Config: one cell class, one trust class, one
// tenant with one principal, every other field at its default.
func minimal() Config {
	limits := Limits{MaxLiveActivations: 8, MaxQueued: 8, MaxReservedFuel: 1_000_000_000_000, MaxReservedMemory: "1GiB"}
	return Config{
		DataDir:      "/tmp/data",
		Limits:       limits,
		Cells:        []Cell{{Class: "tiny", Memory: "16MiB", Parallelism: 2}},
		TrustClasses: []TrustClass{{Name: "untrusted", Cells: []string{"tiny"}, Limits: limits}},
		Tenants: []Tenant{{Name: "acme", TrustClasses: []string{"untrusted"}, Cells: []string{"tiny"},
			Subjects: []string{"alice"}, Limits: limits}},
		Principals: []Principal{{Subject: "alice", Tenant: "acme", Roles: []string{"invoke"}, APIKeys: []string{hash}}},
	}
}

func TestConfig_parses(t *testing.T) {
	full := minimal()
	full.Listen, full.ShutdownGrace, full.MaxConnections = "127.0.0.1:9", "300ms", 100
	full.BudgetCeiling = Budget{CPUFuel: 7, MemoryBytes: "256MiB", WallTime: "1s"}
	full.QueueClasses = []QueueClass{{Name: "batch", MaxPriority: 4, MaxQueued: 2}, {Name: "interactive", MinPriority: 5, MaxPriority: 9, MaxQueued: 8}}
	full.Cells = append(full.Cells, Cell{Class: "small", Memory: "64MiB", Parallelism: 1, Features: []string{"simd"}})
	full.Tenants[0].Limits.MaxPayloadBytes, full.Tenants[0].Limits.MaxPriority = "32KiB", 6
	full.Overload = Overload{CPUThreshold: 0.5, MemoryThreshold: 0.75, MaxObservationAge: "3s", SampleInterval: "1s"}
	full.Scheduler = Scheduler{MaxWait: "1s", LowerClassAfter: 2, Fairness: "round-robin"}
	full.Extra = "[catalog]\nmax_services_per_tenant = 3\n"

	tests := []struct {
		name  string
		cfg   Config
		check func(t *testing.T, c *config.Config)
	}{
		{"defaults", minimal(), func(t *testing.T, c *config.Config) {
			if c.Node.ShutdownGrace != 5*time.Second || c.Node.MaxOutputBytes != 64<<10 || c.Node.Zone != "local-a" {
				t.Errorf("node: %+v", c.Node)
			}
			if len(c.QueueClasses) != 1 || c.QueueClasses[0].MaxPriority != 9 || c.QueueClasses[0].MaxQueued != 8 {
				t.Errorf("queue classes: %+v", c.QueueClasses)
			}
			if c.Overload.CPUThreshold != 1 || c.Scheduler.MaxWait != 10*time.Second || c.Metadata.MaxBytes != 4096 {
				t.Errorf("overload %+v, scheduler %+v, metadata %+v", c.Overload, c.Scheduler, c.Metadata)
			}
			if c.CellClasses[vocab.CellTiny].Features != config.DefaultFeatures {
				t.Errorf("features: %v", c.CellClasses[vocab.CellTiny].Features)
			}
		}},
		{"every field", full, func(t *testing.T, c *config.Config) {
			if c.Node.MaxConnections != 100 || c.Node.ShutdownGrace != 300*time.Millisecond || c.Node.BudgetCeiling.CPUFuel != 7 {
				t.Errorf("node: %+v", c.Node)
			}
			if len(c.QueueClasses) != 2 || c.QueueClasses[1].MinPriority != 5 {
				t.Errorf("queue classes: %+v", c.QueueClasses)
			}
			if l := c.Tenants["acme"].Limits; l.MaxPayloadBytes != 32<<10 || l.MaxPriority != 6 {
				t.Errorf("tenant limits: %+v", l)
			}
			if c.Overload.CPUThreshold != 0.5 || c.Scheduler.Fairness != "round-robin" || c.Catalog.MaxServicesPerTenant != 3 {
				t.Errorf("overload %+v, scheduler %+v, catalog %+v", c.Overload, c.Scheduler, c.Catalog)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := config.Parse([]byte(tc.cfg.TOML()))
			if err != nil {
				t.Fatalf("%v\n%s", err, tc.cfg.TOML())
			}
			tc.check(t, c)
		})
	}
}

// TestConfig_refused: what Config does not fill in is still checked by the
// node's parser.
func TestConfig_refused(t *testing.T) {
	tests := []struct {
		name string
		edit func(*Config)
	}{
		{"no node limits", func(c *Config) { c.Limits = Limits{} }},
		{"unknown extra key", func(c *Config) { c.Extra = "[catalog]\nmax_service = 1\n" }},
		{"principal of no tenant", func(c *Config) { c.Principals[0].Tenant = "beta" }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := minimal()
			tc.edit(&cfg)
			if _, err := config.Parse([]byte(cfg.TOML())); err == nil {
				t.Fatalf("parsed:\n%s", cfg.TOML())
			}
		})
	}
}

func TestConfig_TOML(t *testing.T) {
	want := `[node]
listen = "127.0.0.1:0"
data_dir = "/tmp/data"
region = "local"
zone = "local-a"
max_output_bytes = "64KiB"
shutdown_grace = "5s"

[node.budget_ceiling]
cpu_fuel = 5_000_000_000
memory_bytes = "64MiB"
wall_time = "10s"

[node.limits]
max_live_activations = 8
max_queued = 8
max_reserved_fuel = 1_000_000_000_000
max_reserved_memory = "1GiB"
max_payload_bytes = "64KiB"
max_priority = 9

[[queue_classes]]
name = "all"
priorities = [0, 9]
max_queued = 8

[cell_classes.tiny]
memory = "16MiB"
parallelism = 2
threading = ["single"]
features = ["bulk-memory", "simd", "multi-value", "sign-extension", "nontrapping-f2i", "reference-types"]

[trust_classes.untrusted]
cell_classes = ["tiny"]
[trust_classes.untrusted.limits]
max_live_activations = 8
max_queued = 8
max_reserved_fuel = 1_000_000_000_000
max_reserved_memory = "1GiB"

[tenants.acme]
trust_classes = ["untrusted"]
cell_classes = ["tiny"]
subjects = ["alice"]
kinds = ["user"]
[tenants.acme.limits]
max_live_activations = 8
max_queued = 8
max_reserved_fuel = 1_000_000_000_000
max_reserved_memory = "1GiB"
max_payload_bytes = "64KiB"
max_priority = 9

[[principals]]
subject = "alice"
kind = "user"
tenant = "acme"
roles = ["invoke"]
api_keys = ["` + hash + `"]

[overload]
cpu_threshold = 1.0
memory_threshold = 1.0
max_observation_age = "2s"
sample_interval = "100ms"

[deadline]
estimated_service_time = "20ms"
minimum_execution_time = "1ms"
safety_margin = "100ms"

[metadata]
maximum_identifier_bytes = 128
maximum_metadata_entries = 32
maximum_metadata_bytes = 4096

[scheduler]
max_wait = "10s"
lower_class_after = 8
fairness = "fuel"
`
	if have := minimal().TOML(); have != want {
		t.Fatalf("have:\n%s\nwant:\n%s", have, want)
	}
}

func TestGrouped(t *testing.T) {
	for in, want := range map[string]string{"0": "0", "123456": "123456", "1234567": "1_234_567",
		"5000000000": "5_000_000_000", "-1234567": "-1234567"} {
		if have := grouped(in); have != want {
			t.Errorf("grouped(%s): want %s, have %s", in, want, have)
		}
	}
}

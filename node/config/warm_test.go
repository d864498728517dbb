package config

import (
	"slices"
	"testing"
	"time"

	"github.com/latent-node/latent-node/runner"
)

// TestParse_warmInstances decodes the [node] keys of warm instances:
// defaults when absent (the runner's), values when given, each bound
// inclusive, a problem naming the key for a value out of range, and the
// values in the runner's configuration.
func TestParse_warmInstances(t *testing.T) {
	tests := []struct {
		name      string
		node      string
		want      []string // problem keys; nil: valid
		snapshot  uint64
		reuse     int
		idle      time.Duration
		runnerCfg bool // check RunnerConfig carries them
	}{
		{name: "defaults", snapshot: runner.DefaultMaxSnapshotBytesPerTenant, reuse: runner.DefaultReuseMaxActivations,
			idle: runner.DefaultWarmIdleTimeout, runnerCfg: true},
		{name: "set", node: "max_snapshot_bytes_per_tenant = \"2GiB\"\nreuse_max_activations = 128\nwarm_idle_timeout = \"5m\"\nmax_warm_instances = 64\n",
			snapshot: 2 << 30, reuse: 128, idle: 5 * time.Minute, runnerCfg: true},
		{name: "lower bounds", node: "max_snapshot_bytes_per_tenant = \"1MiB\"\nreuse_max_activations = 1\nwarm_idle_timeout = \"1s\"\n",
			snapshot: 1 << 20, reuse: 1, idle: time.Second},
		{name: "upper bounds", node: "max_snapshot_bytes_per_tenant = 1099511627776\nreuse_max_activations = 1000000\nwarm_idle_timeout = \"24h\"\n",
			snapshot: 1 << 40, reuse: 1_000_000, idle: 24 * time.Hour},
		{name: "snapshot bytes below 1MiB", node: "max_snapshot_bytes_per_tenant = \"1023KiB\"\n",
			want: []string{"node.max_snapshot_bytes_per_tenant"}},
		{name: "snapshot bytes zero", node: "max_snapshot_bytes_per_tenant = 0\n", want: []string{"node.max_snapshot_bytes_per_tenant"}},
		{name: "snapshot bytes not a size", node: "max_snapshot_bytes_per_tenant = \"lots\"\n",
			want: []string{"node.max_snapshot_bytes_per_tenant"}},
		{name: "no reuse", node: "reuse_max_activations = 0\n", want: []string{"node.reuse_max_activations"}},
		{name: "negative reuse", node: "reuse_max_activations = -1\n", want: []string{"node.reuse_max_activations"}},
		{name: "too much reuse", node: "reuse_max_activations = 1000001\n", want: []string{"node.reuse_max_activations"}},
		{name: "reuse not an integer", node: "reuse_max_activations = \"many\"\n", want: []string{"node.reuse_max_activations"}},
		{name: "idle below 1s", node: "warm_idle_timeout = \"999ms\"\n", want: []string{"node.warm_idle_timeout"}},
		{name: "idle zero", node: "warm_idle_timeout = \"0s\"\n", want: []string{"node.warm_idle_timeout"}},
		{name: "idle above 24h", node: "warm_idle_timeout = \"24h1s\"\n", want: []string{"node.warm_idle_timeout"}},
		{name: "idle not a duration", node: "warm_idle_timeout = 60\n", want: []string{"node.warm_idle_timeout"}},
		{name: "warm instances out of range", node: "max_warm_instances = 0\n", want: []string{"node.max_warm_instances"}},
		{name: "all three out of range", node: "max_snapshot_bytes_per_tenant = 1\nreuse_max_activations = 0\nwarm_idle_timeout = \"1ms\"\n",
			want: []string{"node.max_snapshot_bytes_per_tenant", "node.reuse_max_activations", "node.warm_idle_timeout"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Parse([]byte(doc(map[string]string{"node": base[0].text + tc.node}, "")))
			if tc.want != nil {
				if have := keysOfProblems(err); !slices.Equal(have, tc.want) {
					t.Fatalf("problems %q, want %q", have, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			n := cfg.Node
			if n.MaxSnapshotBytesPerTenant != tc.snapshot || n.ReuseMaxActivations != tc.reuse || n.WarmIdleTimeout != tc.idle {
				t.Fatalf("have %d, %d, %s; want %d, %d, %s", n.MaxSnapshotBytesPerTenant, n.ReuseMaxActivations, n.WarmIdleTimeout,
					tc.snapshot, tc.reuse, tc.idle)
			}
			if want := map[bool]int{false: runner.DefaultMaxWarmInstances, true: 64}[tc.name == "set"]; n.MaxWarmInstances != want ||
				cfg.RunnerConfig("").MaxWarmInstances != want {
				t.Fatalf("max warm instances %d (runner %d), want %d", n.MaxWarmInstances, cfg.RunnerConfig("").MaxWarmInstances, want)
			}
			if tc.runnerCfg {
				rc := cfg.RunnerConfig("")
				if rc.MaxSnapshotBytesPerTenant != tc.snapshot || rc.ReuseMaxActivations != tc.reuse || rc.WarmIdleTimeout != tc.idle {
					t.Fatalf("runner config %d, %d, %s; want %d, %d, %s", rc.MaxSnapshotBytesPerTenant, rc.ReuseMaxActivations,
						rc.WarmIdleTimeout, tc.snapshot, tc.reuse, tc.idle)
				}
			}
		})
	}
}

// TestWarmInstanceBound: warm instances, idle and running, with one per
// cell past the bound, keep to half of vm.max_map_count.
func TestWarmInstanceBound(t *testing.T) {
	for _, tc := range []struct {
		configured, cells, maxMapCount, want int
		lowered                              bool
	}{
		{16, 5, 65_530, 16, false},           // the defaults on Linux's default
		{100_000, 5, 65_530, 10_916, true},   // 65,530 / 2 / 3 - 5
		{10_916, 5, 65_530, 10_916, false},   // exactly what fits
		{100_000, 64, 262_144, 43_626, true}, // a raised vm.max_map_count
		{100_000, 5, 0, 100_000, false},      // unknown (not Linux): no bound
		{100_000, 50_000, 65_530, 1, true},   // cells alone past the share: one kept
		{100_000, 5, 2_000_000_000, 100_000, false},
	} {
		have, lowered := WarmInstanceBound(tc.configured, tc.cells, tc.maxMapCount)
		if have != tc.want || lowered != tc.lowered {
			t.Errorf("WarmInstanceBound(%d, %d, %d) = %d, %v; want %d, %v", tc.configured, tc.cells, tc.maxMapCount, have, lowered, tc.want, tc.lowered)
		}
		if tc.maxMapCount > 0 && tc.lowered && (have+tc.cells)*MappingsPerWarmInstance > tc.maxMapCount/2 && have > 1 {
			t.Errorf("%+v: %d instances and %d cells map more than half of %d", tc, have, tc.cells, tc.maxMapCount)
		}
	}
	if HostMaxMapCount() == 0 {
		return
	}
	cfg, err := Parse([]byte(doc(map[string]string{"node": base[0].text + "max_warm_instances = 100000\n"}, "")))
	if err != nil {
		t.Fatal(err)
	}
	if rc := cfg.RunnerConfig(""); rc.MaxWarmInstances*MappingsPerWarmInstance > HostMaxMapCount()/2 {
		t.Fatalf("the runner keeps %d warm instances on a host whose vm.max_map_count is %d", rc.MaxWarmInstances, HostMaxMapCount())
	}
}

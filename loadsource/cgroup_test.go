package loadsource

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/latent-node/latent-node/internal/testutil"
)

const (
	mib = 1 << 20
	gib = 1 << 30
)

// cgroupTree is the content of a fake cgroup v2 directory; "" removes a file.
type cgroupTree map[string]string

func (tree cgroupTree) write(t *testing.T, dir string) {
	t.Helper()
	for name, content := range tree {
		path := filepath.Join(dir, name)
		if content == "" {
			if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
				t.Fatal(err)
			}
			continue
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// limited is a cgroup with 1GiB of memory (256MiB used) and 2 CPUs that has
// used 1s of CPU time.
func limited() cgroupTree {
	return cgroupTree{
		"cgroup.controllers": "cpuset cpu io memory pids\n",
		"memory.current":     "268435456\n",
		"memory.max":         "1073741824\n",
		"cpu.max":            "200000 100000\n",
		"cpu.stat":           "usage_usec 1000000\nuser_usec 600000\nsystem_usec 400000\nnr_periods 0\n",
	}
}

func usage(usec string) cgroupTree { return cgroupTree{"cpu.stat": "usage_usec " + usec + "\n"} }

func TestCgroupSource_Sample(t *testing.T) {
	type call struct {
		update      cgroupTree // applied before the call
		cpu, memory float64
		err         string // substring; "" for success
	}
	tests := []struct {
		name       string
		tree       cgroupTree
		step       time.Duration // between clock readings
		hostMemory uint64
		hostCPUs   int
		calls      []call
	}{
		{
			// The first call reads usage twice around its baseline, 1s apart on
			// the fake clock; later calls are 1s after the previous one.
			name: "limits set",
			tree: limited(), step: time.Second,
			calls: []call{
				{cpu: 0, memory: 0.25},
				{update: usage("2000000"), cpu: 0.5, memory: 0.25},
				{update: cgroupTree{"cpu.stat": "usage_usec 2500000\n", "memory.current": "1073741824"}, cpu: 0.25, memory: 1},
			},
		},
		{
			name: "max falls back to the host",
			tree: limited(), step: time.Second, hostMemory: 4 * gib, hostCPUs: 4,
			calls: []call{
				{update: cgroupTree{"memory.max": "max\n", "cpu.max": "max 100000\n"}, cpu: 0, memory: 1.0 / 16},
				{update: usage("3000000"), cpu: 0.5, memory: 1.0 / 16},
			},
		},
		{
			name: "fractional quota",
			tree: limited(), step: time.Second,
			calls: []call{
				{update: cgroupTree{"cpu.max": "50000 100000"}, cpu: 0, memory: 0.25},
				{update: usage("1250000"), cpu: 0.5, memory: 0.25},
			},
		},
		{
			name: "clamped to one",
			tree: limited(), step: time.Second,
			calls: []call{
				{update: cgroupTree{"memory.current": "2147483648"}, cpu: 0, memory: 1},
				{update: usage("11000000"), cpu: 1, memory: 1},
			},
		},
		{
			name: "zero memory limit is full pressure",
			tree: limited(), step: time.Second,
			calls: []call{{update: cgroupTree{"memory.max": "0"}, cpu: 0, memory: 1}},
		},
		{
			name: "usage going backwards, then recovery",
			tree: limited(), step: time.Second,
			calls: []call{
				{cpu: 0, memory: 0.25},
				{update: usage("500000"), err: "cpu.stat: usage_usec went backwards"},
				{update: usage("1500000"), cpu: 0.5, memory: 0.25},
			},
		},
		{
			name: "zero elapsed time",
			tree: limited(), step: 0,
			calls: []call{{err: "no time elapsed"}},
		},
		{name: "memory.current malformed", tree: limited(), step: time.Second, calls: []call{{update: cgroupTree{"memory.current": "12k"}, err: "memory.current: malformed"}}},
		{name: "memory.current negative", tree: limited(), step: time.Second, calls: []call{{update: cgroupTree{"memory.current": "-1"}, err: "memory.current: malformed"}}},
		{name: "memory.max malformed", tree: limited(), step: time.Second, calls: []call{{update: cgroupTree{"memory.max": "unlimited"}, err: "memory.max: malformed"}}},
		{name: "cpu.max one field", tree: limited(), step: time.Second, calls: []call{{update: cgroupTree{"cpu.max": "100000"}, err: "cpu.max: malformed"}}},
		{name: "cpu.max zero quota", tree: limited(), step: time.Second, calls: []call{{update: cgroupTree{"cpu.max": "0 100000"}, err: "cpu.max: malformed"}}},
		{name: "cpu.max zero period", tree: limited(), step: time.Second, calls: []call{{update: cgroupTree{"cpu.max": "100000 0"}, err: "cpu.max: malformed"}}},
		{name: "cpu.max bad quota", tree: limited(), step: time.Second, calls: []call{{update: cgroupTree{"cpu.max": "1.5 100000"}, err: "cpu.max: malformed"}}},
		{name: "cpu.max max without host cpus", tree: limited(), step: time.Second, hostCPUs: -1, calls: []call{{update: cgroupTree{"cpu.max": "max 100000"}, err: "host cpus"}}},
		{name: "cpu.stat without usage", tree: limited(), step: time.Second, calls: []call{{update: cgroupTree{"cpu.stat": "user_usec 1\n"}, err: "cpu.stat: no usage_usec"}}},
		{name: "cpu.stat malformed usage", tree: limited(), step: time.Second, calls: []call{{update: usage("lots"), err: "cpu.stat: malformed"}}},
		{name: "memory.max max with zero host total", tree: limited(), step: time.Second, hostMemory: 0, calls: []call{{update: cgroupTree{"memory.max": "max"}, err: "zero total"}}},
		{name: "memory.current missing", tree: limited(), step: time.Second, calls: []call{{update: cgroupTree{"memory.current": ""}, err: "memory.current"}}},
		{name: "memory.max missing", tree: limited(), step: time.Second, calls: []call{{update: cgroupTree{"memory.max": ""}, err: "memory.max"}}},
		{name: "cpu.max missing", tree: limited(), step: time.Second, calls: []call{{update: cgroupTree{"cpu.max": ""}, err: "cpu.max"}}},
		{name: "cpu.stat missing", tree: limited(), step: time.Second, calls: []call{{update: cgroupTree{"cpu.stat": ""}, err: "cpu.stat"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			tc.tree.write(t, dir)
			src := NewCgroupSource(CgroupConfig{
				Root:       dir,
				Clock:      testutil.NewClock(t0, testutil.WithStep(tc.step)),
				HostMemory: func(context.Context) (uint64, error) { return tc.hostMemory, nil },
				HostCPUs:   func() int { return tc.hostCPUs },
			})
			src.baseline = 0
			for i, c := range tc.calls {
				c.update.write(t, dir)
				cpu, memory, err := src.Sample(context.Background())
				if c.err != "" {
					if err == nil || !strings.Contains(err.Error(), c.err) {
						t.Fatalf("call %d: want an error containing %q, have %v", i, c.err, err)
					}
					if strings.Contains(err.Error(), dir) {
						t.Fatalf("call %d: error names the host path: %v", i, err)
					}
					continue
				}
				if err != nil || cpu != c.cpu || memory != c.memory {
					t.Fatalf("call %d: want %v, %v; have %v, %v, %v", i, c.cpu, c.memory, cpu, memory, err)
				}
			}
		})
	}
}

type clockFunc func() time.Time

func (f clockFunc) Now() time.Time { return f() }

func TestCgroupSource_fileRemovedDuringBaseline(t *testing.T) {
	dir := t.TempDir()
	limited().write(t, dir)
	clock := clockFunc(func() time.Time {
		cgroupTree{"cpu.stat": ""}.write(t, dir) // after the first reading
		return t0
	})
	src := NewCgroupSource(CgroupConfig{Root: dir, Clock: clock})
	src.baseline = 0
	if _, _, err := src.Sample(context.Background()); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("want a not-exist error, have %v", err)
	}
}

func TestCgroupSource_missingFileIsNotExist(t *testing.T) {
	dir := t.TempDir()
	src := NewCgroupSource(CgroupConfig{Root: dir, Clock: testutil.NewClock(t0, testutil.WithStep(time.Second))})
	_, _, err := src.Sample(context.Background())
	if !errors.Is(err, fs.ErrNotExist) || strings.Contains(err.Error(), dir) {
		t.Fatalf("want a not-exist error without the host path, have %v", err)
	}
}

func TestCgroupSource_hostErrors(t *testing.T) {
	dir := t.TempDir()
	tree := limited()
	tree["memory.max"] = "max"
	tree.write(t, dir)
	boom := errors.New("boom")
	src := NewCgroupSource(CgroupConfig{
		Root:       dir,
		Clock:      testutil.NewClock(t0, testutil.WithStep(time.Second)),
		HostMemory: func(context.Context) (uint64, error) { return 0, boom },
	})
	src.baseline = 0
	if _, _, err := src.Sample(context.Background()); !errors.Is(err, boom) {
		t.Fatalf("want %v, have %v", boom, err)
	}
}

func TestCgroupSource_cancelledBaseline(t *testing.T) {
	dir := t.TempDir()
	limited().write(t, dir)
	src := NewCgroupSource(CgroupConfig{Root: dir, Clock: testutil.NewClock(t0, testutil.WithStep(time.Second))})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := src.Sample(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("want context.Canceled, have %v", err)
	}
}

// TestCgroupSource_defaults uses the real clock, gopsutil's host total and
// runtime.NumCPU: it checks only that the result is a pressure.
func TestCgroupSource_defaults(t *testing.T) {
	dir := t.TempDir()
	tree := limited()
	tree["memory.max"], tree["cpu.max"] = "max", "max 100000"
	tree.write(t, dir)
	src := NewCgroupSource(CgroupConfig{Root: dir})
	src.baseline = time.Millisecond
	cpu, memory, err := src.Sample(context.Background())
	if err != nil || cpu != 0 || !isPressure(memory) || memory == 0 {
		t.Fatalf("want 0 and a pressure, have %v, %v, %v", cpu, memory, err)
	}
	if src := NewCgroupSource(CgroupConfig{}); src.root != DefaultCgroupRoot {
		t.Fatalf("want the default root, have %q", src.root)
	}
}

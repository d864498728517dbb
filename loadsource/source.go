package loadsource

import (
	"context"
	"os"
	"path/filepath"
	"time"

	"github.com/cockroachdb/errors"
)

// Source measures pressure. Implementations: HostSource (the whole machine,
// via gopsutil) and CgroupSource (relative to cgroup v2 limits); DetectSource
// picks one. Sample returns fractions in [0,1] or an error; the Sampler calls
// it from one goroutine at a time, and the implementations here are also safe
// for concurrent use.
type Source interface {
	Sample(ctx context.Context) (cpu, memory float64, err error)
}

// Clock is where this package takes time from when it must: the Sampler
// stamps TakenAt with it and CgroupSource measures elapsed time with it.
type Clock interface {
	Now() time.Time
}

// DefaultCgroupRoot is where cgroup v2 is mounted; in a container with a
// private cgroup namespace (the default with cgroup v2) it is the container's
// own cgroup.
const DefaultCgroupRoot = "/sys/fs/cgroup"

// defaultBaseline is how long a CPU source waits on its first call (it has
// no earlier counters to compare with) before taking the second reading.
const defaultBaseline = 100 * time.Millisecond

// DetectSource returns a CgroupSource reading root (DefaultCgroupRoot when
// empty) when root is a cgroup v2 directory: cgroup.controllers exists and
// memory.current, memory.max, cpu.max and cpu.stat are readable. Otherwise it
// returns a HostSource. A cgroup v1 host, the root cgroup of a v2 host (it has
// no memory.max) and a cgroup without the cpu or memory controller delegated
// all get host-wide pressure. DetectSource only probes the files; it starts
// nothing.
func DetectSource(root string) Source {
	if root == "" {
		root = DefaultCgroupRoot
	}
	if isCgroupV2(root) {
		return NewCgroupSource(CgroupConfig{Root: root})
	}
	return NewHostSource()
}

func isCgroupV2(root string) bool {
	if _, err := os.Stat(filepath.Join(root, "cgroup.controllers")); err != nil {
		return false
	}
	for _, name := range []string{fileMemoryCurrent, fileMemoryMax, fileCPUMax, fileCPUStat} {
		if _, err := os.ReadFile(filepath.Join(root, name)); err != nil {
			return false
		}
	}
	return true
}

// wait blocks for d or until ctx is done.
func wait(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return errors.Wrap(ctx.Err(), "loadsource: cpu baseline")
	}
}

// clamp01 clamps v to [0,1]. REQUIRES: v is not NaN.
func clamp01(v float64) float64 {
	return min(max(v, 0), 1)
}

package loadsource

// Source and Describer, FixedSource, and Detect, which picks the source a
// node measures with.

import (
	"context"
	"os"
	"path/filepath"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/latent-node/latent-node/vocab"
)

// Source measures pressure. Implementations: PSISource (Linux pressure stall
// information, host-wide or per cgroup), HostSource (whole-machine
// utilization, via gopsutil), CgroupSource (utilization relative to cgroup v2
// limits) and FixedSource (constant readings); Detect picks one. Sample
// returns fractions in [0,1] or an error; the Sampler calls it from one
// goroutine at a time, and the implementations here are also safe for
// concurrent use.
type Source interface {
	Sample(ctx context.Context) (cpu, memory float64, err error)
}

// What a Source measures, as Describe reports it.
const (
	// KindPSIHost: host-wide stall shares from /proc/pressure (PSISource).
	KindPSIHost = "psi-host"
	// KindPSICgroup: the node's cgroup's stall shares (PSISource).
	KindPSICgroup = "psi-cgroup"
	// KindUtilizationHost: whole-machine busy CPU and used memory (HostSource).
	KindUtilizationHost = "utilization-host"
	// KindUtilizationCgroup: CPU and memory use relative to the cgroup's limits
	// (CgroupSource).
	KindUtilizationCgroup = "utilization-cgroup"
	// KindFixed: constant readings (FixedSource).
	KindFixed = "fixed"
	// KindOther: a Source that does not implement Describer.
	KindOther = "other"
)

// Describer is implemented by a Source that says what it measures. Every
// Source of this package implements it.
type Describer interface {
	// Kind is one of the Kind constants (or, for a Source from elsewhere, a
	// short stable name of its own).
	Kind() string
}

// Describe returns what s measures, for readiness, metrics and the startup
// log: s.Kind() when s implements Describer, KindOther otherwise (also for
// nil). It reads nothing.
func Describe(s Source) string {
	if d, ok := s.(Describer); ok {
		return d.Kind()
	}
	return KindOther
}

// FixedSource returns the same readings on every call: for demos and tests
// that must not depend on the machine's load. Readings outside [0,1] are
// published as they are, and the State refuses them as malformed.
type FixedSource struct {
	CPU, Memory float64
}

// Sample implements Source.
func (f FixedSource) Sample(context.Context) (cpu, memory float64, err error) {
	return f.CPU, f.Memory, nil
}

// Kind implements Describer: KindFixed.
func (FixedSource) Kind() string { return KindFixed }

// DefaultCgroupRoot is where cgroup v2 is mounted; in a container with a
// private cgroup namespace (the default with cgroup v2) it is the container's
// own cgroup.
const DefaultCgroupRoot = "/sys/fs/cgroup"

// defaultBaseline is how long a CPU source waits on its first call (it has
// no earlier counters to compare with) before taking the second reading.
const defaultBaseline = 100 * time.Millisecond

// DetectConfig says where Detect looks. Zero fields take their defaults.
type DetectConfig struct {
	// CgroupRoot is the node's cgroup v2 directory. Default:
	// DefaultCgroupRoot.
	CgroupRoot string
	// PressureDir is the host-wide PSI directory. Default:
	// DefaultPressureDir.
	PressureDir string
	// Clock is the clock of the Source returned (PSISource and CgroupSource
	// measure elapsed wall time with it). Default: the system clock.
	Clock vocab.Clock
}

// Detect returns the best Source available, preferring pressure stall
// information to utilization, and the node's cgroup to the whole host:
//
//  1. a cgroup PSISource (KindPSICgroup) when CgroupRoot is a cgroup v2
//     directory (cgroup.controllers exists) whose cpu.pressure and
//     memory.pressure read and parse;
//  2. a host PSISource (KindPSIHost) when PressureDir's cpu and memory read
//     and parse;
//  3. a CgroupSource (KindUtilizationCgroup) when CgroupRoot is a cgroup v2
//     directory with memory.current, memory.max, cpu.max and cpu.stat
//     readable;
//  4. a HostSource (KindUtilizationHost).
//
// A kernel without PSI (no files, or files that fail with EOPNOTSUPP when PSI
// is disabled at boot) falls through to utilization. Detect only reads the
// files once; it starts nothing. Whichever Source it returns fails the same
// way: an error publishes nothing and the State fails closed by age.
func Detect(cfg DetectConfig) Source {
	if cfg.CgroupRoot == "" {
		cfg.CgroupRoot = DefaultCgroupRoot
	}
	if cfg.PressureDir == "" {
		cfg.PressureDir = DefaultPressureDir
	}
	v2 := isFile(filepath.Join(cfg.CgroupRoot, "cgroup.controllers"))
	switch {
	case v2 && psiReadable(cfg.CgroupRoot, filePSICgroupCPU, filePSICgroupMemory):
		return NewCgroupPSISource(cfg.CgroupRoot, cfg.Clock)
	case psiReadable(cfg.PressureDir, filePSIHostCPU, filePSIHostMemory):
		return NewPSISource(cfg.PressureDir, cfg.Clock)
	case v2 && isCgroupV2(cfg.CgroupRoot):
		return NewCgroupSource(CgroupConfig{Root: cfg.CgroupRoot, Clock: cfg.Clock})
	}
	return NewHostSource()
}

// DetectSource is Detect with CgroupRoot root (DefaultCgroupRoot when empty),
// DefaultPressureDir and the system clock.
func DetectSource(root string) Source {
	return Detect(DetectConfig{CgroupRoot: root})
}

func isFile(path string) bool {
	_, err := os.Stat(path)
	return err == nil
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

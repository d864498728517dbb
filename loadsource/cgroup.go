package loadsource

// CgroupSource: CPU and memory utilization relative to the cgroup v2 limits.

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/latent-node/latent-node/vocab"
)

// The cgroup v2 interface files CgroupSource reads.
const (
	fileMemoryCurrent = "memory.current"
	fileMemoryMax     = "memory.max"
	fileCPUMax        = "cpu.max"
	fileCPUStat       = "cpu.stat"
)

// CgroupConfig configures a CgroupSource. Zero fields take their defaults.
type CgroupConfig struct {
	// Root is the cgroup v2 directory to read. Default: DefaultCgroupRoot.
	Root string
	// Clock measures the wall time between two CPU readings. Default: the
	// system clock (time.Now, monotonic).
	Clock vocab.Clock
	// HostMemory returns the host's total memory in bytes; it is the limit
	// when memory.max is "max". Default: gopsutil mem.VirtualMemory's Total.
	HostMemory func(context.Context) (uint64, error)
	// HostCPUs returns the number of CPUs; it is the capacity when cpu.max
	// has no quota ("max …"). Default: runtime.NumCPU (the CPUs this process
	// may run on).
	HostCPUs func() int
}

// CgroupSource measures pressure relative to the limits of a cgroup v2:
//
//	memory = memory.current / memory.max   (memory.max "max": host total; a
//	                                        zero limit is full pressure)
//	cpu    = Δ usage_usec (cpu.stat) / (elapsed wall time × quota/period)
//	                                       (cpu.max "max …": host CPUs)
//
// both clamped to [0,1]. Limits are read on every call, so a changed limit
// takes effect at the next sample. The first call has no earlier usage: it
// reads it, waits a short baseline (100ms, bounded by ctx) and reads again.
// Usage going backwards (the cgroup was recreated) or no elapsed time is an
// error, and the next call measures from the new reading. Missing or
// malformed files are errors naming the file relative to Root.
//
// Its Kind is KindUtilizationCgroup. Safe for concurrent use. NewCgroupSource
// starts nothing and reads nothing.
type CgroupSource struct {
	root       string
	clock      vocab.Clock
	hostMemory func(context.Context) (uint64, error)
	hostCPUs   func() int
	baseline   time.Duration

	mu struct {
		sync.Mutex
		usage uint64 // usage_usec at `at`
		at    time.Time
		has   bool
	}
}

// NewCgroupSource returns a CgroupSource for cfg.
func NewCgroupSource(cfg CgroupConfig) *CgroupSource {
	c := &CgroupSource{
		root:       cfg.Root,
		clock:      cfg.Clock,
		hostMemory: cfg.HostMemory,
		hostCPUs:   cfg.HostCPUs,
		baseline:   defaultBaseline,
	}
	if c.root == "" {
		c.root = DefaultCgroupRoot
	}
	if c.clock == nil {
		c.clock = vocab.WallClock
	}
	if c.hostMemory == nil {
		c.hostMemory = hostMemoryTotal
	}
	if c.hostCPUs == nil {
		c.hostCPUs = runtime.NumCPU
	}
	return c
}

// Kind implements Describer: KindUtilizationCgroup.
func (c *CgroupSource) Kind() string { return KindUtilizationCgroup }

// Sample implements Source. CPU is measured first so that the memory reading
// is the most recent one even when the first call waits for its baseline.
func (c *CgroupSource) Sample(ctx context.Context) (cpu, memory float64, err error) {
	if cpu, err = c.cpu(ctx); err != nil {
		return 0, 0, err
	}
	if memory, err = c.memory(ctx); err != nil {
		return 0, 0, err
	}
	return cpu, memory, nil
}

func (c *CgroupSource) memory(ctx context.Context) (float64, error) {
	current, err := c.readUint(fileMemoryCurrent)
	if err != nil {
		return 0, err
	}
	limit, unlimited, err := c.readLimit(fileMemoryMax)
	if err != nil {
		return 0, err
	}
	if unlimited {
		if limit, err = c.hostMemory(ctx); err != nil {
			return 0, err
		}
		if limit == 0 {
			return 0, errors.New("loadsource: host memory: zero total")
		}
	}
	if limit == 0 {
		return 1, nil
	}
	return clamp01(float64(current) / float64(limit)), nil
}

func (c *CgroupSource) cpu(ctx context.Context) (float64, error) {
	capacity, err := c.cpuCapacity()
	if err != nil {
		return 0, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	usage, err := c.readUsage()
	if err != nil {
		return 0, err
	}
	at := c.clock.Now()
	prevUsage, prevAt := c.mu.usage, c.mu.at
	if !c.mu.has {
		if err := wait(ctx, c.baseline); err != nil {
			return 0, err
		}
		prevUsage, prevAt = usage, at
		if usage, err = c.readUsage(); err != nil {
			return 0, err
		}
		at = c.clock.Now()
	}
	c.mu.usage, c.mu.at, c.mu.has = usage, at, true
	if usage < prevUsage {
		return 0, errors.Mark(errors.New("loadsource: cgroup cpu.stat: usage_usec went backwards"), ErrSourceMalformed)
	}
	elapsed := at.Sub(prevAt)
	if elapsed <= 0 {
		return 0, errors.New("loadsource: cgroup cpu: no time elapsed between readings")
	}
	used := float64(usage-prevUsage) / 1e6 // CPU seconds
	return clamp01(used / (elapsed.Seconds() * capacity)), nil
}

// cpuCapacity returns the CPUs the cgroup may use: quota/period from cpu.max
// ("$MAX $PERIOD"), or the host's CPUs when $MAX is "max".
func (c *CgroupSource) cpuCapacity() (float64, error) {
	s, err := c.read(fileCPUMax)
	if err != nil {
		return 0, err
	}
	f := strings.Fields(s)
	if len(f) != 2 {
		return 0, malformedFile(fileCPUMax)
	}
	period, err := strconv.ParseUint(f[1], 10, 64)
	if err != nil || period == 0 {
		return 0, malformedFile(fileCPUMax)
	}
	if f[0] == "max" {
		n := c.hostCPUs()
		if n <= 0 {
			return 0, errors.New("loadsource: host cpus: none")
		}
		return float64(n), nil
	}
	quota, err := strconv.ParseUint(f[0], 10, 64)
	if err != nil || quota == 0 {
		return 0, malformedFile(fileCPUMax)
	}
	return float64(quota) / float64(period), nil
}

// readUsage returns usage_usec from cpu.stat.
func (c *CgroupSource) readUsage() (uint64, error) {
	s, err := c.read(fileCPUStat)
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(s) {
		f := strings.Fields(line)
		if len(f) == 2 && f[0] == "usage_usec" {
			v, err := strconv.ParseUint(f[1], 10, 64)
			if err != nil {
				return 0, malformedFile(fileCPUStat)
			}
			return v, nil
		}
	}
	return 0, errors.New("loadsource: cgroup cpu.stat: no usage_usec")
}

// readLimit reads a file holding a byte count or "max" (unlimited).
func (c *CgroupSource) readLimit(name string) (v uint64, unlimited bool, err error) {
	s, err := c.read(name)
	if err != nil {
		return 0, false, err
	}
	if s == "max" {
		return 0, true, nil
	}
	v, err = parseUint(name, s)
	return v, false, err
}

func (c *CgroupSource) readUint(name string) (uint64, error) {
	s, err := c.read(name)
	if err != nil {
		return 0, err
	}
	return parseUint(name, s)
}

// read returns the trimmed content of root/name. Errors name the file
// relative to root, not its host path.
func (c *CgroupSource) read(name string) (string, error) {
	b, err := os.ReadFile(filepath.Join(c.root, name))
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return "", errors.Wrapf(err, "loadsource: cgroup %s", errors.Safe(name))
	}
	return strings.TrimSpace(string(b)), nil
}

func parseUint(name, s string) (uint64, error) {
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, malformedFile(name)
	}
	return v, nil
}

func malformedFile(name string) error {
	return errors.Mark(errors.Newf("loadsource: cgroup %s: malformed", errors.Safe(name)), ErrSourceMalformed)
}

func hostMemoryTotal(ctx context.Context) (uint64, error) {
	total, _, err := hostMemory(ctx)
	return total, err
}

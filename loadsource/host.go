package loadsource

// HostSource: whole-machine CPU and memory utilization, read with gopsutil.

import (
	"context"
	"sync"
	"time"

	"github.com/cockroachdb/errors"
	"github.com/shirou/gopsutil/v4/cpu"
	"github.com/shirou/gopsutil/v4/mem"
)

// HostSource measures the whole machine with gopsutil.
//
// CPU is the busy fraction of all CPU time between two consecutive calls,
// from the cumulative cpu.Times totals: busy = user + system + nice + irq +
// softirq + steal (steal is time the hypervisor did not give us, so it is
// pressure), idle = idle + iowait (an iowait CPU can run work); guest time is
// left out because Linux already counts it in user and nice. The first call
// has no earlier counters: it reads them, waits a short baseline (100ms,
// bounded by ctx) and reads again, so even the Sampler's immediate first
// sample is a real measurement. A window in which the counters did not move
// (they tick at USER_HZ, usually every 10ms) is measured again the same way.
// Busy time going backwards is an error (the next call measures from the new
// counters); idle time going backwards counts as zero idle, since Linux's
// iowait is known to decrease.
//
// Memory is 1 − Available/Total from mem.VirtualMemory. Available is the
// kernel's estimate of what new work can get without swapping (MemAvailable on
// Linux: free memory plus reclaimable page cache), which is the pressure
// admission cares about; on Linux gopsutil's Used is Total − Available, so the
// formula is the same there, and it stays meaningful on platforms whose Used
// counts cache.
//
// Its Kind is KindUtilizationHost. Safe for concurrent use. NewHostSource
// starts nothing.
type HostSource struct {
	baseline time.Duration
	times    func(context.Context) (cpuTimes, error)
	memory   func(context.Context) (total, available uint64, err error)

	mu struct {
		sync.Mutex
		prev cpuTimes
		has  bool
	}
}

// cpuTimes are cumulative CPU seconds, summed over all CPUs.
type cpuTimes struct{ busy, idle float64 }

// NewHostSource returns a HostSource.
func NewHostSource() *HostSource {
	return &HostSource{baseline: defaultBaseline, times: hostCPUTimes, memory: hostMemory}
}

// Kind implements Describer: KindUtilizationHost.
func (h *HostSource) Kind() string { return KindUtilizationHost }

// Sample implements Source.
func (h *HostSource) Sample(ctx context.Context) (cpu, memory float64, err error) {
	if cpu, err = h.cpu(ctx); err != nil {
		return 0, 0, err
	}
	total, available, err := h.memory(ctx)
	if err != nil {
		return 0, 0, err
	}
	switch {
	case total == 0:
		return 0, 0, errors.New("loadsource: host memory: zero total")
	case available > total:
		return 0, 0, errors.New("loadsource: host memory: available exceeds total")
	}
	return cpu, clamp01(1 - float64(available)/float64(total)), nil
}

func (h *HostSource) cpu(ctx context.Context) (float64, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	cur, err := h.times(ctx)
	if err != nil {
		return 0, err
	}
	prev := h.mu.prev
	if !h.mu.has || (cur.busy == prev.busy && cur.idle == prev.idle) {
		if err := wait(ctx, h.baseline); err != nil {
			return 0, err
		}
		prev = cur
		if cur, err = h.times(ctx); err != nil {
			return 0, err
		}
	}
	h.mu.prev, h.mu.has = cur, true
	return busyFraction(prev, cur)
}

// busyFraction is the busy share of the CPU time between a and b.
func busyFraction(a, b cpuTimes) (float64, error) {
	busy := b.busy - a.busy
	if busy < 0 {
		return 0, errors.New("loadsource: host cpu: busy time went backwards")
	}
	total := busy + max(b.idle-a.idle, 0)
	if total <= 0 {
		return 0, errors.New("loadsource: host cpu: no cpu time elapsed")
	}
	return clamp01(busy / total), nil
}

func hostCPUTimes(ctx context.Context) (cpuTimes, error) {
	ts, err := cpu.TimesWithContext(ctx, false)
	if err != nil {
		return cpuTimes{}, errors.Wrap(err, "loadsource: host cpu times")
	}
	if len(ts) != 1 {
		return cpuTimes{}, errors.New("loadsource: host cpu times: no single total")
	}
	t := ts[0]
	return cpuTimes{
		busy: t.User + t.System + t.Nice + t.Irq + t.Softirq + t.Steal,
		idle: t.Idle + t.Iowait,
	}, nil
}

func hostMemory(ctx context.Context) (total, available uint64, err error) {
	v, err := mem.VirtualMemoryWithContext(ctx)
	if err != nil {
		return 0, 0, errors.Wrap(err, "loadsource: host memory")
	}
	return v.Total, v.Available, nil
}

package main

// CPU time: a process's user and system time (/proc/<pid>/stat, or
// getrusage for this one) and a CPU's busy time (/proc/stat).

import (
	"os"
	"strconv"
	"strings"
	"time"
)

// clockTicks is Linux's USER_HZ, the unit of /proc/<pid>/stat CPU times.
const clockTicks = 100

// procCPU returns the user+system CPU time of process pid from
// /proc/<pid>/stat (0 where that is unavailable).
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// Fields after the parenthesised command name; utime and stime are the
	// 14th and 15th fields of the whole line.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0
	}
	u, err1 := strconv.ParseUint(f[11], 10, 64)
	st, err2 := strconv.ParseUint(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0
	}
	return time.Duration(u+st) * time.Second / clockTicks
}

// cpuUse is the CPU time the node (or the baseline server) and the
// generator used in a measured window, as a fraction of the window (1.0 =
// one CPU busy), and what every other process used of the server's pinned
// CPU (-1: unknown).
type cpuUse struct{ node, gen, others float64 }

// cpuBusy returns the time CPU cpu spent not idle (user, nice, system, irq,
// softirq, steal) from /proc/stat, and false where that is unavailable.
func cpuBusy(cpu int) (time.Duration, bool) {
	if cpu < 0 {
		return 0, false
	}
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, false
	}
	name := "cpu" + strconv.Itoa(cpu)
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) < 9 || f[0] != name {
			continue
		}
		var ticks uint64
		for _, i := range []int{1, 2, 3, 6, 7, 8} { // user nice system irq softirq steal
			v, err := strconv.ParseUint(f[i], 10, 64)
			if err != nil {
				return 0, false
			}
			ticks += v
		}
		return time.Duration(ticks) * time.Second / clockTicks, true
	}
	return 0, false
}

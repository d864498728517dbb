package testutil

// ProcStatus and ResetPeakRSS: a process's resident memory from /proc.

import (
	"os"
	"strconv"
	"strings"
)

// ProcStatus returns the resident memory (VmRSS) and its peak (VmHWM), in
// bytes, of process pid ("self": this one), read from /proc/<pid>/status;
// ok is false where it cannot be read (no /proc).
func ProcStatus(pid string) (rss, hwm uint64, ok bool) {
	data, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		return 0, 0, false
	}
	for _, line := range strings.Split(string(data), "\n") {
		for _, f := range []struct {
			prefix string
			dst    *uint64
		}{{"VmRSS:", &rss}, {"VmHWM:", &hwm}} {
			if v, found := strings.CutPrefix(line, f.prefix); found {
				if fields := strings.Fields(v); len(fields) >= 1 {
					kb, _ := strconv.ParseUint(fields[0], 10, 64)
					*f.dst = kb << 10
				}
			}
		}
	}
	return rss, hwm, true
}

// ResetPeakRSS sets this process's VmHWM back to its VmRSS (Linux's
// /proc/self/clear_refs) and reports whether the kernel let it.
func ResetPeakRSS() bool {
	f, err := os.OpenFile("/proc/self/clear_refs", os.O_WRONLY, 0)
	if err != nil {
		return false
	}
	_, err = f.Write([]byte("5"))
	return f.Close() == nil && err == nil
}

package config

import (
	"os"
	"strconv"
	"strings"
)

// HostMaxMapCount reads vm.max_map_count, the mappings a process may
// hold; 0 when it cannot be read.
func HostMaxMapCount() int {
	b, err := os.ReadFile("/proc/sys/vm/max_map_count")
	if err != nil {
		return 0
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || n < 0 {
		return 0
	}
	return n
}

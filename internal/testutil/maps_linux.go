package testutil

// Protection, the permissions of this process's memory mappings read from
// /proc/self/maps.

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"testing"
)

// Protection returns the permissions ("rw-p", "---p", …) of the mapping of
// this process that contains addr, from /proc/self/maps, or "" if none
// does. It skips the test without /proc/self/maps.
func Protection(t testing.TB, addr uintptr) string {
	t.Helper()
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		t.Skipf("no /proc/self/maps: %v", err)
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 {
			continue
		}
		lo, hi, ok := strings.Cut(fields[0], "-")
		if !ok {
			continue
		}
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		if err1 == nil && err2 == nil && uint64(addr) >= start && uint64(addr) < end {
			return fields[1]
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return ""
}

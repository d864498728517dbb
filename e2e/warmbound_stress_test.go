//go:build stress && linux

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestStress_snapshotFlood requests 30,000 activations of a snapshot
// revision at once from a node with the harness's default limits: none is
// a platform failure or a 500, every refusal is a problem naming its
// reason, and the node's memory mappings (sampled from /proc) stay under
// half of vm.max_map_count, the share docs/configuration.md gives warm
// instances.
func TestStress_snapshotFlood(t *testing.T) {
	raw, err := os.ReadFile("/proc/sys/vm/max_map_count")
	if err != nil {
		t.Skipf("no vm.max_map_count: %v", err)
	}
	maxMaps, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil {
		t.Fatal(err)
	}
	n, _ := startNode(t, nil, calm)
	n.deployState(t, "alice", "acme", "flood", "snapshot", "v1")
	maps := fmt.Sprintf("/proc/%d/maps", n.cmd.Process.Pid)
	var peak atomic.Int64
	ctx, cancel := context.WithCancel(context.Background())
	var sampler sync.WaitGroup
	sampler.Add(1)
	go func() { // owned: stopped by cancel, waited for below
		defer sampler.Done()
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			if b, err := os.ReadFile(maps); err == nil {
				if c := int64(bytes.Count(b, []byte("\n"))); c > peak.Load() {
					peak.Store(c)
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	const requests = 30_000
	var mu sync.Mutex
	statuses, reasons := map[int]int{}, map[string]int{}
	var failures []string
	var wg sync.WaitGroup
	for i := range requests {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := n.try("POST", "/v1/invoke/acme/flood/v1", "alice", strings.NewReader(fmt.Sprintf("fl%06d", i)), nil)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				failures = append(failures, err.Error())
			case r.status == 200:
			case r.status >= 500 && r.status != 503 || r.problem.Reason == "" || r.problem.Outcome == "platform-failure":
				failures = append(failures, fmt.Sprintf("%d %s", r.status, r.body))
			default:
				reasons[r.problem.Reason]++
			}
			if err == nil {
				statuses[r.status]++
			}
		}()
	}
	wg.Wait()
	cancel()
	sampler.Wait()
	t.Logf("%d requests: statuses %v, refusals by reason %v; node mappings peak %d of vm.max_map_count %d",
		requests, statuses, reasons, peak.Load(), maxMaps)
	if len(failures) > 0 {
		t.Fatalf("%d requests failed or were refused without a named reason, first: %s", len(failures), failures[0])
	}
	if statuses[200] == 0 {
		t.Fatal("no activation answered")
	}
	if peak.Load() == 0 || peak.Load() > int64(maxMaps/2) {
		t.Fatalf("node mappings peaked at %d, want above 0 and under half of %d", peak.Load(), maxMaps)
	}
}

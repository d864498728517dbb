package runner

import (
	"fmt"
	"testing"
	"time"

	"github.com/latent-node/latent-node/admission"
	"github.com/latent-node/latent-node/internal/testwasm"
	"github.com/latent-node/latent-node/vocab"
)

// TestRun_monotonicClock: a guest's monotonic clock is its activation's
// own, from MonotonicStart at microsecond resolution: it never reads more
// than the activation has run (with the node's clock since process start
// it read the test process's uptime, and its resolution was 1 ns).
func TestRun_monotonicClock(t *testing.T) {
	e := newEnv(t)
	c := ceiling(1<<30, 1<<20, 10*time.Second)
	e.deployRevision("clocks", testwasm.Bytes(t, "clocks"), vocab.ManifestRevision{Ceiling: &c})
	for i := range 20 {
		out := e.run("clocks", "", admission.BudgetRequest{})
		var now, res int64
		if _, err := fmt.Sscanf(string(out.Stdout), "%d %d\n", &now, &res); out.Kind != Success || err != nil {
			t.Fatalf("%s %q: %v %v", out.Kind, out.Stdout, out.Err, err)
		}
		if res != int64(time.Microsecond) || now%int64(time.Microsecond) != 0 {
			t.Fatalf("monotonic %d ns, resolution %d ns: want whole microseconds", now, res)
		}
		if d := time.Duration(now); d < MonotonicStart || d > MonotonicStart+out.ExecutionTime {
			t.Fatalf("activation %d: monotonic clock %v, want from %v to %v (the activation ran %v)",
				i, d, MonotonicStart, MonotonicStart+out.ExecutionTime, out.ExecutionTime)
		}
	}
}

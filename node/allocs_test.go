package node

import "testing"

// TestHTTP_invokeAllocations guards what an invocation allocates on the
// server (BenchmarkHTTP_invokeServer's path: net/http's server, the node
// and wazero's fresh instance of the demo guest). It was 87 when written:
// wazero 26, net/http's server 14, the node 47. A change that adds to
// every invocation's allocations fails here; lower the bound with a change
// that removes some. Under the race detector (make test) the same path
// counts 109-110, hence a bound of its own.
func TestHTTP_invokeAllocations(t *testing.T) {
	most := 92.0
	if raceEnabled {
		most = 118
	}
	invoke := rawInvoker(t, startServed(t))
	for range 20 { // the connection's buffers, the warm caches
		invoke()
	}
	if n := testing.AllocsPerRun(200, invoke); n > most {
		t.Fatalf("%.1f allocations per invocation, at most %.0f", n, most)
	} else {
		t.Logf("%.1f allocations per invocation", n)
	}
}

package node

import (
	"bufio"
	"net"
	"strings"
	"testing"
)

// TestHTTP_invokeAllocations guards what an invocation allocates on the
// server (BenchmarkHTTP_invokeServer's path: net/http's server, the node
// and wazero's fresh instance of the demo guest). It was 87 when written:
// wazero 26, net/http's server 14, the node 47. A change that adds to
// every invocation's allocations fails here; lower the bound with a change
// that removes some. Under the race detector (make test) the same path
// counts 110 (sync.Pool drops items at random there, among others).
func TestHTTP_invokeAllocations(t *testing.T) {
	most := 92.0
	if raceEnabled {
		most = 118
	}
	sn := startServed(t)
	conn, err := net.Dial("tcp", strings.TrimPrefix(sn.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	req := []byte("POST /v1/invoke/demo/hello/greet HTTP/1.1\r\nHost: node\r\nAuthorization: Bearer " +
		sn.admin + "\r\nContent-Length: 5\r\n\r\nworld")
	br := bufio.NewReaderSize(conn, 16<<10)
	invoke := func() {
		if _, err := conn.Write(req); err != nil {
			t.Fatal(err)
		}
		if status, n := readRawAnswer(t, br); status != 200 || n == 0 {
			t.Fatalf("status %d, %d body bytes", status, n)
		}
	}
	for range 20 { // the connection's buffers, the warm caches
		invoke()
	}
	if n := testing.AllocsPerRun(200, invoke); n > most {
		t.Fatalf("%.1f allocations per invocation, at most %.0f", n, most)
	} else {
		t.Logf("%.1f allocations per invocation", n)
	}
}

//go:build linux

package node

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/latent-node/latent-node/node/config"
)

// TestWriteTimeout_closesNonReader: a client that pipelines requests and
// never reads its answers (a tiny receive window) has its connection
// closed once an answer could not be written within node.write_timeout,
// instead of holding it busy (StateActive, never shed) forever; a client
// that reads its answers gets every one of them.
//
// On 611fe67 (no write deadline) the connection stayed open and busy, its
// server goroutine blocked in the answer's flush.
func TestWriteTimeout_closesNonReader(t *testing.T) {
	const bound = 300 * time.Millisecond
	sn := startServedWith(t, func(c *config.Config) { c.Node.WriteTimeout = bound })
	d := net.Dialer{Timeout: 2 * time.Second, Control: func(_, _ string, c syscall.RawConn) error {
		return c.Control(func(fd uintptr) { _ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 1024) })
	}}
	c, err := d.Dial("tcp", sn.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	// The writer pipelines until the node closes the connection (or the
	// test does, when it fails).
	closed := make(chan error, 1)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		batch := strings.Repeat("GET /nope HTTP/1.1\r\nHost: x\r\n\r\n", 1000)
		for {
			if _, err := io.WriteString(c, batch); err != nil {
				closed <- err
				return
			}
		}
	}()
	defer wg.Wait()
	select {
	case err := <-closed:
		t.Logf("the node closed the non-reading connection: %v", err)
	case <-time.After(20 * time.Second):
		st := sn.n.ConnStats()
		_ = c.Close()
		t.Fatalf("the non-reading connection is still open after 20s (node.write_timeout %v): %+v", bound, st)
	}
	if !waitUntil(2*time.Second, func() bool { return sn.n.ConnStats().Busy == 0 }) {
		t.Fatalf("connections still busy: %+v", sn.n.ConnStats())
	}

	// Negative control: a pipelining client that reads gets every answer.
	rc, err := net.Dial("tcp", sn.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rc.Close() }()
	const n = 2000
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, _ = io.WriteString(rc, strings.Repeat("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", n))
	}()
	br := bufio.NewReader(rc)
	for i := range n {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("answer %d of a reading client: %v", i, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
	}
}

// waitUntil reports whether cond became true within d, checking every 5ms.
func waitUntil(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		<-time.After(5 * time.Millisecond) // bounded poll of the condition
	}
	return true
}

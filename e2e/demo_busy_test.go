//go:build stress

package e2e

import (
	"context"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestDemo_busyHost: `serve --demo` answers its printed curl, every time and
// without retries, while two CPU-bound processes keep the host's CPUs busy.
// The node reads pressure (PSI stall time), and a host that is busy but
// where nothing waits for a CPU is not overloaded. Skipped where the kernel
// has no PSI (the node then falls back to utilization, which reads 1.0).
func TestDemo_busyHost(t *testing.T) {
	if _, err := os.Stat("/proc/pressure/cpu"); err != nil {
		t.Skip("no PSI on this kernel")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for range 2 {
		hog := exec.CommandContext(ctx, "sh", "-c", "while :; do :; done")
		if err := hog.Start(); err != nil {
			t.Skipf("cannot start a CPU-bound process: %v", err)
		}
		defer func() { cancel(); _ = hog.Wait() }()
	}
	addr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	p := start(t, nil, "serve", "--demo", "--listen", addr)
	keyLine := p.stdout.wait(t, 30*time.Second, func(s string) bool { return strings.HasPrefix(s, "demo api key: ") })
	key := strings.TrimPrefix(keyLine, "demo api key: ")
	curl := p.stdout.wait(t, 5*time.Second, func(s string) bool { return strings.Contains(s, "curl") })
	m := regexp.MustCompile(`--data '([^']*)'`).FindStringSubmatch(curl)
	if m == nil {
		t.Fatalf("curl line %q", curl)
	}
	waitReady(t, "http://"+addr)
	n := &node{proc: p, keys: map[string]string{"demo": key}}
	n.url = "http://" + addr
	for i := range 10 {
		r := n.invoke(t, "demo", "demo/hello/greet", m[1], nil)
		if r.status != 200 || string(r.body) != "hello, "+m[1]+"\n" {
			t.Fatalf("invoke %d on a busy host: %d %s", i, r.status, r.body)
		}
	}
}

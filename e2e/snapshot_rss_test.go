//go:build stress

package e2e

import (
	"bufio"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/latent-node/latent-node/internal/testwasm"
)

// TestSnapshot_rssUnderLoad: the Go example's WAGI router deployed as a
// snapshot reactor (route web-snap) serves 8 closed-loop clients for 15 s;
// after a 3 s warm-up the node's resident memory (VmRSS) moves by less than
// 32 MiB, far below the demo's reserved memory and the stated overhead of
// idle warm instances (16 × the 3.3 MiB image): restoring an instance after
// each activation gives back what the activation took. Needs the go
// toolchain (the example is built here).
func TestSnapshot_rssUnderLoad(t *testing.T) {
	dir := t.TempDir()
	if err := testwasm.BuildExamples(t.Context(), "go", dir); err != nil {
		t.Skipf("cannot build the Go example: %v", err)
	}
	manifest, err := os.ReadFile(filepath.Join("..", "examples", "go", "manifest.toml"))
	if err != nil {
		t.Fatal(err)
	}
	release := filepath.Join(dir, "manifest.toml")
	if err := os.WriteFile(release, manifest, 0o600); err != nil {
		t.Fatal(err)
	}
	addr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	p := start(t, calm, "serve", "--demo", "--listen", addr)
	keyLine := p.stdout.wait(t, 30*time.Second, func(s string) bool { return strings.HasPrefix(s, "demo api key: ") })
	key := strings.TrimPrefix(keyLine, "demo api key: ")
	url := "http://" + addr
	waitReady(t, url)
	if out, err := exec.Command(binary(t), "deploy", "--node", url, "--key", key, release).CombinedOutput(); err != nil {
		t.Fatalf("deploy: %v\n%s", err, out)
	}

	target := url + "/v1/invoke/demo/greet-go/web-snap/hello?name=Ada"
	stop := make(chan struct{})
	var ok, failed atomic.Int64
	var wg sync.WaitGroup
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 8}}
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				req, _ := http.NewRequest("GET", target, nil)
				req.Header.Set("Authorization", "Bearer "+key)
				resp, err := hc.Do(req)
				if err != nil {
					failed.Add(1)
					continue
				}
				_ = resp.Body.Close()
				if resp.StatusCode == 200 {
					ok.Add(1)
				} else {
					failed.Add(1)
				}
			}
		}()
	}
	defer func() { close(stop); wg.Wait() }()

	rss := func() int64 {
		f, err := os.Open("/proc/" + strconv.Itoa(p.cmd.Process.Pid) + "/status")
		if err != nil {
			t.Skipf("no /proc status: %v", err)
		}
		defer func() { _ = f.Close() }()
		s := bufio.NewScanner(f)
		for s.Scan() {
			if v, found := strings.CutPrefix(s.Text(), "VmRSS:"); found {
				kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
				return kb << 10
			}
		}
		t.Fatal("no VmRSS")
		return 0
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var low, high int64
	for i := range 18 {
		<-tick.C
		if i < 3 {
			continue // warm-up
		}
		r := rss()
		if low == 0 || r < low {
			low = r
		}
		high = max(high, r)
	}
	t.Logf("%d answers (%d failed) in 18 s; RSS after warm-up %d to %d MiB", ok.Load(), failed.Load(), low>>20, high>>20)
	if ok.Load() < 1000 {
		t.Fatalf("only %d answers: the load did not run", ok.Load())
	}
	if high-low > 32<<20 {
		t.Errorf("RSS moved by %d MiB under a steady snapshot load, want < 32 MiB", (high-low)>>20)
	}
}

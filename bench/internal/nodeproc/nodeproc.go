// Package nodeproc builds the latent-node binary and runs it for the
// benchmark harnesses (bench/nodebench, bench/catalogbench): keys from
// `latent-node keygen`, a `serve` process whose listen address is read from
// its "serving" log line, readiness through /readyz, and a stop that
// interrupts, then kills.
package nodeproc

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/cockroachdb/errors"
)

// ModuleRoot walks up from the working directory to the directory holding
// go.mod.
func ModuleRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", errors.Wrap(err, "nodeproc: working directory")
	}
	for d := wd; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", errors.Newf("nodeproc: no go.mod above %s", wd)
		}
	}
}

// Build runs `go build ./cmd/latent-node` into a new temporary
// directory and returns the directory and the binary's path.
func Build(ctx context.Context) (dir, bin string, err error) {
	root, err := ModuleRoot()
	if err != nil {
		return "", "", err
	}
	dir, err = os.MkdirTemp("", "nodebench-bin-")
	if err != nil {
		return "", "", errors.Wrap(err, "nodeproc: temp dir")
	}
	bin = filepath.Join(dir, "latent-node")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/latent-node")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		_ = os.RemoveAll(dir)
		return "", "", errors.Wrapf(err, "nodeproc: go build: %s", out)
	}
	return dir, bin, nil
}

// Keygen runs `latent-node keygen` and returns a key and its hash.
func Keygen(ctx context.Context, bin string) (key, hash string, err error) {
	out, err := exec.CommandContext(ctx, bin, "keygen").Output()
	if err != nil {
		return "", "", errors.Wrap(err, "nodeproc: keygen")
	}
	for _, l := range strings.Split(string(out), "\n") {
		if v, ok := strings.CutPrefix(l, "key:"); ok {
			key = strings.TrimSpace(v)
		}
		if v, ok := strings.CutPrefix(l, "hash:"); ok {
			hash = strings.TrimSpace(v)
		}
	}
	if !strings.HasPrefix(key, "lk_") || !strings.HasPrefix(hash, "sha256:") {
		return "", "", errors.Newf("nodeproc: keygen printed %q", out)
	}
	return key, hash, nil
}

// Proc is a running `latent-node serve`.
type Proc struct {
	cmd    *exec.Cmd
	URL    string
	PID    int
	drain  sync.WaitGroup // the stderr reader
	mu     sync.Mutex
	tail   []string // the last stderr lines
	exited chan struct{}
	err    error // cmd.Wait's, valid once exited is closed
}

// Start starts bin serve with cfgPath, pinned to cpus when cpus is not
// empty, and waits for its "serving" line and /readyz.
func Start(ctx context.Context, bin, cfgPath, cpus string) (*Proc, error) {
	args := []string{"serve", "--config", cfgPath, "--listen", "127.0.0.1:0"}
	name := bin
	if cpus != "" {
		name, args = "taskset", append([]string{"-c", cpus, bin}, args...)
	}
	cmd := exec.Command(name, args...)
	// The testing aid: a fixed, calm host load, so the generator's own CPU
	// use does not make the node refuse work.
	cmd.Env = append(os.Environ(), "LATENT_NODE_LOAD_SOURCE=fixed:0.1,0.1")
	cmd.Stdout = io.Discard
	errR, err := cmd.StderrPipe()
	if err != nil {
		return nil, errors.Wrap(err, "nodeproc: stderr pipe")
	}
	if err := cmd.Start(); err != nil {
		return nil, errors.Wrap(err, "nodeproc: start node")
	}
	n := &Proc{cmd: cmd, PID: cmd.Process.Pid, exited: make(chan struct{})}
	listen := make(chan string, 1)
	n.drain.Add(1)
	go func() {
		defer n.drain.Done()
		sc := bufio.NewScanner(errR)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		sent := false
		for sc.Scan() {
			line := sc.Text()
			n.mu.Lock()
			n.tail = append(n.tail, line)
			if len(n.tail) > 50 {
				n.tail = n.tail[len(n.tail)-50:]
			}
			n.mu.Unlock()
			if !sent && strings.Contains(line, `"msg":"serving"`) {
				var rec struct {
					Listen string `json:"listen"`
				}
				if json.Unmarshal([]byte(line), &rec) == nil && rec.Listen != "" {
					listen <- rec.Listen
					sent = true
				}
			}
		}
	}()
	go func() {
		n.drain.Wait()
		n.err = cmd.Wait()
		close(n.exited)
	}()
	select {
	case addr := <-listen:
		n.URL = "http://" + addr
	case <-n.exited:
		return nil, errors.Newf("nodeproc: node exited before serving: %v\n%s", n.err, n.Stderr())
	case <-time.After(30 * time.Second):
		n.Stop()
		return nil, errors.Newf("nodeproc: no serving line within 30s\n%s", n.Stderr())
	case <-ctx.Done():
		n.Stop()
		return nil, errors.Wrap(ctx.Err(), "nodeproc: waiting for the node")
	}
	hc := &http.Client{Timeout: time.Second}
	for i := 0; ; i++ {
		resp, err := hc.Get(n.URL + "/readyz")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return n, nil
			}
		}
		if i == 1000 {
			n.Stop()
			return nil, errors.Newf("nodeproc: %s/readyz never answered 200\n%s", n.URL, n.Stderr())
		}
		<-time.After(10 * time.Millisecond) // bounded poll of the endpoint
	}
}

func (n *Proc) Stderr() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return strings.Join(n.tail, "\n")
}

// Stop interrupts the node, kills it after 5 s, and reaps it.
func (n *Proc) Stop() {
	_ = n.cmd.Process.Signal(os.Interrupt)
	select {
	case <-n.exited:
	case <-time.After(5 * time.Second):
		_ = n.cmd.Process.Kill()
		<-n.exited
	}
}

// Exited reports whether the process has exited, and how.
func (n *Proc) Exited() (bool, error) {
	select {
	case <-n.exited:
		return true, n.err
	default:
		return false, nil
	}
}

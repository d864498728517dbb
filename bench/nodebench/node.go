package main

import (
	"bufio"
	"bytes"
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

	"github.com/latent-node/latent-node/client"
	"github.com/latent-node/latent-node/internal/testutil/nodeconf"
)

// moduleRoot walks up from the working directory to the directory holding
// go.mod.
func moduleRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", errors.Wrap(err, "nodebench: working directory")
	}
	for d := wd; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", errors.Newf("nodebench: no go.mod above %s", wd)
		}
	}
}

// buildBinary runs `go build ./cmd/latent-node` into a new temporary
// directory and returns the directory and the binary's path.
func buildBinary(ctx context.Context) (dir, bin string, err error) {
	root, err := moduleRoot()
	if err != nil {
		return "", "", err
	}
	dir, err = os.MkdirTemp("", "nodebench-bin-")
	if err != nil {
		return "", "", errors.Wrap(err, "nodebench: temp dir")
	}
	bin = filepath.Join(dir, "latent-node")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/latent-node")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		_ = os.RemoveAll(dir)
		return "", "", errors.Wrapf(err, "nodebench: go build: %s", out)
	}
	return dir, bin, nil
}

// keygen runs `latent-node keygen` and returns a key and its hash.
func keygen(ctx context.Context, bin string) (key, hash string, err error) {
	out, err := exec.CommandContext(ctx, bin, "keygen").Output()
	if err != nil {
		return "", "", errors.Wrap(err, "nodebench: keygen")
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
		return "", "", errors.Newf("nodebench: keygen printed %q", out)
	}
	return key, hash, nil
}

// tenantConfig is one tenant of the generated configuration: one
// principal of the same name with the key whose hash is keyHash.
type tenantConfig struct {
	name, keyHash string
}

// configTOML is a node with the given tenants (quiet and noisy, and the
// flooding tenants of the Jain scenario), all on tiny (2) and small (2)
// cells like the demo, with limits high enough that 64 closed-loop clients
// of one tenant queue in the node instead of being refused.
func configTOML(dataDir string, tenants []tenantConfig) string {
	tinySmall := []string{"tiny", "small"}
	wide := nodeconf.Limits{MaxLiveActivations: 512, MaxQueued: 512, MaxReservedFuel: 10_000_000_000_000, MaxReservedMemory: "64GiB"}
	cfg := nodeconf.Config{
		DataDir:       dataDir,
		ShutdownGrace: "2s",
		Limits:        wide,
		Cells: []nodeconf.Cell{{Class: "tiny", Memory: "16MiB", Parallelism: 2},
			{Class: "small", Memory: "64MiB", Parallelism: 2}},
		TrustClasses: []nodeconf.TrustClass{{Name: "untrusted", Cells: tinySmall, Limits: wide}},
	}
	for _, t := range tenants {
		cfg.Tenants = append(cfg.Tenants, nodeconf.Tenant{Name: t.name, TrustClasses: []string{"untrusted"}, Cells: tinySmall,
			Subjects: []string{t.name}, Limits: nodeconf.Limits{MaxLiveActivations: 256, MaxQueued: 256,
				MaxReservedFuel: 10_000_000_000_000, MaxReservedMemory: "32GiB"}})
		cfg.Principals = append(cfg.Principals, nodeconf.Principal{Subject: t.name, Tenant: t.name,
			Roles: []string{"invoke", "deploy"}, APIKeys: []string{t.keyHash}})
	}
	return cfg.TOML()
}

// nodeProc is a running `latent-node serve`.
type nodeProc struct {
	cmd    *exec.Cmd
	url    string
	pid    int
	drain  sync.WaitGroup // the stderr reader
	mu     sync.Mutex
	tail   []string // the last stderr lines
	exited chan struct{}
	err    error // cmd.Wait's, valid once exited is closed
}

// startNode starts bin serve with cfgPath, pinned to cpus when cpus is not
// empty, and waits for its "serving" line and /readyz.
func startNode(ctx context.Context, bin, cfgPath, cpus string) (*nodeProc, error) {
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
		return nil, errors.Wrap(err, "nodebench: stderr pipe")
	}
	if err := cmd.Start(); err != nil {
		return nil, errors.Wrap(err, "nodebench: start node")
	}
	n := &nodeProc{cmd: cmd, pid: cmd.Process.Pid, exited: make(chan struct{})}
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
		n.url = "http://" + addr
	case <-n.exited:
		return nil, errors.Newf("nodebench: node exited before serving: %v\n%s", n.err, n.stderr())
	case <-time.After(30 * time.Second):
		n.stop()
		return nil, errors.Newf("nodebench: no serving line within 30s\n%s", n.stderr())
	case <-ctx.Done():
		n.stop()
		return nil, errors.Wrap(ctx.Err(), "nodebench: waiting for the node")
	}
	hc := &http.Client{Timeout: time.Second}
	for i := 0; ; i++ {
		resp, err := hc.Get(n.url + "/readyz")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return n, nil
			}
		}
		if i == 1000 {
			n.stop()
			return nil, errors.Newf("nodebench: %s/readyz never answered 200\n%s", n.url, n.stderr())
		}
		<-time.After(10 * time.Millisecond) // bounded poll of the endpoint
	}
}

func (n *nodeProc) stderr() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return strings.Join(n.tail, "\n")
}

// stop interrupts the node, kills it after 5 s, and reaps it.
func (n *nodeProc) stop() {
	_ = n.cmd.Process.Signal(os.Interrupt)
	select {
	case <-n.exited:
	case <-time.After(5 * time.Second):
		_ = n.cmd.Process.Kill()
		<-n.exited
	}
}

// deployGuest uploads module and activates tenant/service with one route
// "run".
func deployGuest(ctx context.Context, url, key, tenant, service string, module []byte) error {
	c, err := client.New(url, key, client.WithRetry(client.RetryPolicy{}))
	if err != nil {
		return err
	}
	digest, err := c.UploadArtifact(ctx, module)
	if err != nil {
		return errors.Wrapf(err, "nodebench: upload for %s", tenant)
	}
	rv := map[string]any{"name": "v1", "artifact": digest, "trust_class": "untrusted",
		"ceiling": map[string]any{"cpu_fuel": 1_000_000_000, "memory_bytes": "8MiB", "wall_time": "5s"}}
	manifest := map[string]any{"tenant": tenant, "service": service, "revisions": []any{rv},
		"routes": []any{map[string]any{"name": "run", "targets": []any{map[string]any{"revision": "v1", "weight": 1}}}}}
	if _, err := c.Deploy(ctx, tenant, service, manifest); err != nil {
		return errors.Wrapf(err, "nodebench: deploy %s/%s", tenant, service)
	}
	return nil
}

// usage reads the caller's tenant usage from GET /v1/admission.
func usage(ctx context.Context, hc *http.Client, url, key string) (live, queued uint64, err error) {
	req, err := http.NewRequestWithContext(ctx, "GET", url+"/v1/admission", nil)
	if err != nil {
		return 0, 0, errors.Wrap(err, "nodebench: admission request")
	}
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := hc.Do(req)
	if err != nil {
		return 0, 0, errors.Wrap(err, "nodebench: admission")
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, 0, errors.Wrap(err, "nodebench: admission body")
	}
	var s struct {
		Usage struct {
			Live   uint64 `json:"live_activations"`
			Queued uint64 `json:"queued"`
		} `json:"usage"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &s) != nil {
		return 0, 0, errors.Newf("nodebench: admission: %d %s", resp.StatusCode, bytes.TrimSpace(body))
	}
	return s.Usage.Live, s.Usage.Queued, nil
}

// waitIdle polls the usage of every key's tenant until nothing is live or
// queued (at most 10 s), so a scenario starts without the last one's
// backlog.
func waitIdle(ctx context.Context, hc *http.Client, url string, keys ...string) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		busy := false
		for _, k := range keys {
			live, queued, err := usage(ctx, hc, url, k)
			if err != nil {
				return err
			}
			busy = busy || live+queued > 0
		}
		if !busy {
			return nil
		}
		if time.Now().After(deadline) {
			return errors.New("nodebench: the node did not drain within 10s")
		}
		<-time.After(10 * time.Millisecond) // bounded poll of the endpoint
	}
}

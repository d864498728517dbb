package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
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

const features = `["bulk-memory", "simd", "multi-value", "sign-extension", "nontrapping-f2i", "reference-types"]`

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
	var b strings.Builder
	fmt.Fprintf(&b, `[node]
listen = "127.0.0.1:0"
data_dir = %q
region = "local"
zone = "local-a"
max_output_bytes = "64KiB"
shutdown_grace = "2s"

[node.budget_ceiling]
cpu_fuel = 5_000_000_000
memory_bytes = "64MiB"
wall_time = "10s"

[node.limits]
max_live_activations = 512
max_queued = 512
max_reserved_fuel = 10_000_000_000_000
max_reserved_memory = "64GiB"
max_payload_bytes = "64KiB"
max_priority = 9

[[queue_classes]]
name = "all"
priorities = [0, 9]
max_queued = 512

[cell_classes.tiny]
memory = "16MiB"
parallelism = 2
threading = ["single"]
features = %s

[cell_classes.small]
memory = "64MiB"
parallelism = 2
threading = ["single"]
features = %s

[trust_classes.untrusted]
cell_classes = ["tiny", "small"]
[trust_classes.untrusted.limits]
max_live_activations = 512
max_queued = 512
max_reserved_fuel = 10_000_000_000_000
max_reserved_memory = "64GiB"

`, dataDir, features, features)
	for _, t := range tenants {
		fmt.Fprintf(&b, `[tenants.%[1]s]
trust_classes = ["untrusted"]
cell_classes = ["tiny", "small"]
subjects = [%[1]q]
kinds = ["user"]
[tenants.%[1]s.limits]
max_live_activations = 256
max_queued = 256
max_reserved_fuel = 10_000_000_000_000
max_reserved_memory = "32GiB"
max_payload_bytes = "64KiB"
max_priority = 9

`, t.name)
	}
	for _, t := range tenants {
		fmt.Fprintf(&b, `[[principals]]
subject = %[1]q
kind = "user"
tenant = %[1]q
roles = ["invoke", "deploy"]
api_keys = [%[2]q]

`, t.name, t.keyHash)
	}
	b.WriteString(`[overload]
cpu_threshold = 1.0
memory_threshold = 1.0
max_observation_age = "2s"
sample_interval = "100ms"

[deadline]
estimated_service_time = "20ms"
minimum_execution_time = "1ms"
safety_margin = "100ms"

[metadata]
maximum_identifier_bytes = 128
maximum_metadata_entries = 32
maximum_metadata_bytes = 4096

[scheduler]
max_wait = "10s"
lower_class_after = 8
fairness = "fuel"
`)
	return b.String()
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

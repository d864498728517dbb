// Package e2e holds the black-box end-to-end tests: they build
// the real latent-node binary once per test process, start it on loopback
// and talk to it over HTTP and through its CLI.
package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/latent-node/latent-node/client"
	"github.com/latent-node/latent-node/internal/testutil/nodeconf"
	"github.com/latent-node/latent-node/internal/testwasm"
)

var (
	buildDir string
	binPath  string
	buildErr error
	building sync.Once
)

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		_ = os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// binaryEnv names a latent-node binary built beforehand (make test builds
// one without the race detector and runs these tests against it); unset,
// the tests build their own.
const binaryEnv = "LATENT_NODE_E2E_BINARY"

// binary returns the latent-node binary under test: the one binaryEnv
// names, or else ./cmd/latent-node built once per test process.
func binary(t *testing.T) string {
	t.Helper()
	building.Do(func() {
		consultSources("..")
		if p := os.Getenv(binaryEnv); p != "" {
			binPath = p
			if _, err := os.Stat(p); err != nil {
				buildErr = errors.Wrapf(err, "%s names no binary", binaryEnv)
			}
			return
		}
		buildDir, buildErr = os.MkdirTemp("", "latent-node-e2e-")
		if buildErr != nil {
			return
		}
		binPath = filepath.Join(buildDir, "latent-node")
		// A cold build (etcd's client and gRPC, OpenTelemetry, wazero) takes
		// about 100 s on two cores; make check's go vet usually warmed the
		// cache before.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "go", "build", "-o", binPath, "./cmd/latent-node")
		cmd.Dir = ".." // the module root, relative to this package
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = errors.Wrapf(err, "go build: %s", out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// consultSources looks at every file of the module (but .git's) so that
// go test's cache, which keys a package's result on the files its tests
// consulted, runs these tests again when a source of the binary changed:
// the binary comes from a go build the cache does not see, and a cached
// pass would otherwise stand for code it never ran.
func consultSources(root string) {
	_ = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return nil
		case d.IsDir() && d.Name() == ".git":
			return filepath.SkipDir
		case !d.IsDir():
			_, _ = os.Stat(path)
		}
		return nil
	})
}

// lines collects a stream's lines and lets a test wait for one.
type lines struct {
	mu      sync.Mutex
	all     []string
	changed chan struct{} // closed and replaced on every line and at EOF
	eof     bool
}

func newLines(r io.Reader) *lines {
	l := &lines{changed: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			l.mu.Lock()
			l.all = append(l.all, sc.Text())
			close(l.changed)
			l.changed = make(chan struct{})
			l.mu.Unlock()
		}
		l.mu.Lock()
		l.eof = true
		close(l.changed)
		l.changed = make(chan struct{})
		l.mu.Unlock()
	}()
	return l
}

// wait returns the first line for which match is true, waiting at most d.
func (l *lines) wait(t *testing.T, d time.Duration, match func(string) bool) string {
	t.Helper()
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	seen := 0
	for {
		l.mu.Lock()
		for ; seen < len(l.all); seen++ {
			if match(l.all[seen]) {
				s := l.all[seen]
				l.mu.Unlock()
				return s
			}
		}
		ch, eof := l.changed, l.eof
		l.mu.Unlock()
		if eof {
			t.Fatalf("stream ended without the expected line; it had:\n%s", l.String())
		}
		select {
		case <-ch:
		case <-deadline.C:
			t.Fatalf("no expected line within %v; have:\n%s", d, l.String())
		}
	}
}

func (l *lines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.all, "\n")
}

// proc is a running latent-node process, killed and reaped at cleanup.
type proc struct {
	cmd    *exec.Cmd
	stdout *lines
	stderr *lines
	done   chan struct{}
	err    error // cmd.Wait's, valid once done is closed
	url    string
	cancel context.CancelFunc
}

// procLife bounds how long start and serve let the binary run.
const procLife = 90 * time.Second

// start runs the binary with args; env entries are added to the environment.
// The process is killed at once when the test ends (or after procLife).
func start(t *testing.T, env []string, args ...string) *proc {
	t.Helper()
	return startFor(t, procLife, env, args...)
}

// startFor is start with the process's longest life.
func startFor(t *testing.T, life time.Duration, env []string, args ...string) *proc {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), life)
	cmd := exec.CommandContext(ctx, binary(t), args...)
	cmd.Env = append(os.Environ(), env...)
	outR, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	errR, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd, done: make(chan struct{}), cancel: cancel}
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	p.stdout, p.stderr = newLines(outR), newLines(errR)
	go func() {
		// Wait reads the pipes to their end only after the readers did, so
		// wait for both streams first.
		<-p.stdout.closed()
		<-p.stderr.closed()
		p.err = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.done
		cancel()
		if t.Failed() {
			t.Logf("latent-node %s stderr:\n%s", strings.Join(args, " "), p.stderr.String())
		}
	})
	return p
}

// closed returns a channel closed at EOF.
func (l *lines) closed() <-chan struct{} {
	ch := make(chan struct{})
	go func() {
		for {
			l.mu.Lock()
			eof, c := l.eof, l.changed
			l.mu.Unlock()
			if eof {
				close(ch)
				return
			}
			<-c
		}
	}()
	return ch
}

// exit waits for the process to exit (at most d) and returns its exit code.
func (p *proc) exit(t *testing.T, d time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(d):
		t.Fatalf("process did not exit within %v", d)
	}
	var ee *exec.ExitError
	if errors.As(p.err, &ee) {
		return ee.ExitCode()
	}
	if p.err != nil {
		t.Fatalf("wait: %v", p.err)
	}
	return 0
}

func (p *proc) signal(t *testing.T, sig os.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
}

// calm is the environment of a node whose load source reports a quiet host
// (the LATENT_NODE_LOAD_SOURCE testing aid), so tests do not depend on the
// machine's load.
var calm = []string{"LATENT_NODE_LOAD_SOURCE=fixed:0.1,0.1"}

// serve starts `serve --config cfg --listen 127.0.0.1:0`, reads the bound
// address from the "serving" log line and waits until /readyz answers 200.
func serve(t *testing.T, cfgPath string, env []string) *proc {
	t.Helper()
	return serveFor(t, cfgPath, env, procLife)
}

// serveFor is serve with the process's longest life.
func serveFor(t *testing.T, cfgPath string, env []string, life time.Duration) *proc {
	t.Helper()
	p := startFor(t, life, env, "serve", "--config", cfgPath, "--listen", "127.0.0.1:0")
	line := p.stderr.wait(t, 30*time.Second, func(s string) bool { return strings.Contains(s, `"msg":"serving"`) })
	var rec struct {
		Listen string `json:"listen"`
	}
	if err := json.Unmarshal([]byte(line), &rec); err != nil || rec.Listen == "" {
		t.Fatalf("serving line %q: %v", line, err)
	}
	p.url = "http://" + rec.Listen
	waitReady(t, p.url)
	return p
}

func waitReady(t *testing.T, url string) {
	t.Helper()
	hc := &http.Client{Timeout: time.Second}
	for i := 0; i < 1000; i++ {
		resp, err := hc.Get(url + "/readyz")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		<-time.After(10 * time.Millisecond) // bounded poll of the endpoint
	}
	t.Fatalf("%s/readyz never answered 200", url)
}

// keygen runs `latent-node keygen` and returns the key and its hash.
func keygen(t *testing.T) (key, hash string) {
	t.Helper()
	out, err := exec.Command(binary(t), "keygen").Output()
	if err != nil {
		t.Fatal(err)
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
		t.Fatalf("keygen printed %q", out)
	}
	return key, hash
}

// params vary the configuration between tests.
type params struct {
	DataDir        string
	Grace          string // node.shutdown_grace
	TinyParallel   int
	BatchMaxQueued int
	MaxWait        string // scheduler.max_wait
	BetaLive       int    // tenants.beta max_live_activations
	MaxPayload     string // node.limits and tenants.beta max_payload_bytes ("": 64KiB)
	Hashes         map[string]string
}

func defaults(t *testing.T) params {
	return params{DataDir: t.TempDir(), Grace: "5s", TinyParallel: 2, BatchMaxQueued: 64, MaxWait: "10s", BetaLive: 1}
}

// harnessConfig is the configuration of p: tenants acme (alice, root) and
// beta (bob) with mallory a second principal of acme, batch and interactive
// queue classes, tiny and small cells, and an untrusted and a partner trust
// class.
func harnessConfig(p params) nodeconf.Config {
	wide := nodeconf.Limits{MaxLiveActivations: 256, MaxQueued: 256, MaxReservedFuel: 1_000_000_000_000, MaxReservedMemory: "16GiB",
		MaxPayloadBytes: p.MaxPayload}
	partner := nodeconf.Limits{MaxLiveActivations: 16, MaxQueued: 16, MaxReservedFuel: 100_000_000_000, MaxReservedMemory: "1GiB"}
	tinySmall := []string{"tiny", "small"}
	user := func(subject, tenant string, roles ...string) nodeconf.Principal {
		return nodeconf.Principal{Subject: subject, Tenant: tenant, Roles: roles, APIKeys: []string{p.Hashes[subject]}}
	}
	acme := nodeconf.Limits{MaxLiveActivations: 200, MaxQueued: 200, MaxReservedFuel: 1_000_000_000_000,
		MaxReservedMemory: "16GiB", MaxPayloadBytes: "32KiB", MaxPriority: 6}
	beta := nodeconf.Limits{MaxLiveActivations: p.BetaLive, MaxQueued: 8, MaxReservedFuel: 100_000_000_000, MaxReservedMemory: "1GiB",
		MaxPayloadBytes: p.MaxPayload}
	return nodeconf.Config{
		DataDir:       p.DataDir,
		ShutdownGrace: p.Grace,
		BudgetCeiling: nodeconf.Budget{MemoryBytes: "256MiB"},
		Limits:        wide,
		QueueClasses: []nodeconf.QueueClass{{Name: "batch", MaxPriority: 4, MaxQueued: p.BatchMaxQueued},
			{Name: "interactive", MinPriority: 5, MaxPriority: 9, MaxQueued: 64}},
		Cells: []nodeconf.Cell{{Class: "tiny", Memory: "16MiB", Parallelism: p.TinyParallel},
			{Class: "small", Memory: "64MiB", Parallelism: 1}},
		TrustClasses: []nodeconf.TrustClass{{Name: "untrusted", Cells: tinySmall, Limits: wide},
			{Name: "partner", Cells: tinySmall, Limits: partner}},
		Tenants: []nodeconf.Tenant{
			{Name: "acme", TrustClasses: []string{"untrusted"}, Cells: []string{"tiny"}, Subjects: []string{"alice", "root"}, Limits: acme},
			{Name: "beta", TrustClasses: []string{"untrusted", "partner"}, Cells: tinySmall, Subjects: []string{"bob"}, Limits: beta},
		},
		Principals: []nodeconf.Principal{user("alice", "acme", "invoke", "deploy"), user("mallory", "acme", "invoke", "deploy"),
			user("root", "acme", "admin"), user("bob", "beta", "invoke", "deploy")},
		Scheduler: nodeconf.Scheduler{MaxWait: p.MaxWait},
	}
}

// configTOML renders harnessConfig(p).
func configTOML(p params) string { return harnessConfig(p).TOML() }

// keys are the API keys of the configured principals, made once per process
// with the CLI.
var (
	keysOnce sync.Once
	keys     map[string]string
	hashes   map[string]string
)

func principalKeys(t *testing.T) (map[string]string, map[string]string) {
	t.Helper()
	keysOnce.Do(func() {
		keys, hashes = map[string]string{}, map[string]string{}
		for _, who := range []string{"alice", "mallory", "root", "bob"} {
			keys[who], hashes[who] = keygen(t)
		}
	})
	if len(keys) != 4 || keys["bob"] == "" {
		t.Fatal("keygen failed earlier")
	}
	return keys, hashes
}

// writeConfig writes the configuration of p and returns its path.
func writeConfig(t *testing.T, p params) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "node.toml")
	if err := os.WriteFile(path, []byte(configTOML(p)), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// node is a served node with its principals' keys.
type node struct {
	*proc
	keys map[string]string
}

func startNode(t *testing.T, mod func(*params), env []string) (*node, params) {
	t.Helper()
	k, h := principalKeys(t)
	p := defaults(t)
	p.Hashes = h
	if mod != nil {
		mod(&p)
	}
	return &node{proc: serve(t, writeConfig(t, p), env), keys: k}, p
}

// reply is a response read to its end.
type reply struct {
	status  int
	header  http.Header
	body    []byte
	problem problem
}

type problem struct {
	Type      string `json:"type"`
	Status    int    `json:"status"`
	Code      string `json:"code"`
	Reason    string `json:"reason"`
	Scope     string `json:"scope"`
	Dimension string `json:"dimension"`
	Retryable bool   `json:"retryable"`
	Outcome   string `json:"outcome"`
	ExitCode  *int   `json:"exit_code"`
	TrapKind  string `json:"trap_kind"`
	Stderr    string `json:"stderr"`
}

// httpClient stays below the node's per-address connection cap (256), so
// the node never sheds connections the tests are using.
var httpClient = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxConnsPerHost: 240, MaxIdleConnsPerHost: 128}}

// do sends one request; headers may hold "Authorization".
func (n *node) do(t *testing.T, method, path, who string, body io.Reader, headers map[string]string) reply {
	t.Helper()
	r, err := n.try(method, path, who, body, headers)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func (n *node) try(method, path, who string, body io.Reader, headers map[string]string) (reply, error) {
	if body == nil {
		body = http.NoBody
	}
	req, err := http.NewRequest(method, n.url+path, body)
	if err != nil {
		return reply{}, err
	}
	if who != "" {
		key := n.keys[who]
		if key == "" {
			key = who // a literal key
		}
		req.Header.Set("Authorization", "Bearer "+key)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return reply{}, err
	}
	defer func() { _ = resp.Body.Close() }()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return reply{}, err
	}
	r := reply{status: resp.StatusCode, header: resp.Header, body: data}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "application/problem+json") {
		if err := json.Unmarshal(data, &r.problem); err != nil {
			return reply{}, errors.Wrapf(err, "problem body %q", data)
		}
	}
	return r, nil
}

func (n *node) invoke(t *testing.T, who, target, input string, headers map[string]string) reply {
	t.Helper()
	return n.do(t, "POST", "/v1/invoke/"+target, who, strings.NewReader(input), headers)
}

// client returns the Go client for who, without retries.
func (n *node) client(t *testing.T, who string) *client.Client {
	t.Helper()
	c, err := client.New(n.url, n.keys[who], client.WithRetry(client.RetryPolicy{}))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// rev is one revision of a test service.
type rev struct {
	guest     string
	memory    string // ceiling memory_bytes
	wall      string // ceiling wall_time
	trust     string
	threading string
	features  []string
	placement map[string]any
}

// deploy uploads guest modules and activates tenant/service with one route
// "run" to revision "v1".
func (n *node) deploy(t *testing.T, who, tenant, service string, r rev) {
	t.Helper()
	ctx := context.Background()
	c := n.client(t, who)
	digest, err := c.UploadArtifact(ctx, testwasm.Bytes(t, r.guest))
	if err != nil {
		t.Fatal(err)
	}
	if r.memory == "" {
		r.memory = "8MiB"
	}
	if r.wall == "" {
		r.wall = "5s"
	}
	if r.trust == "" {
		r.trust = "untrusted"
	}
	rv := map[string]any{"name": "v1", "artifact": digest, "trust_class": r.trust,
		"ceiling": map[string]any{"cpu_fuel": 1_000_000_000, "memory_bytes": r.memory, "wall_time": r.wall}}
	if r.threading != "" {
		rv["threading"] = r.threading
	}
	if r.features != nil {
		rv["features"] = r.features
	}
	if r.placement != nil {
		rv["placement"] = r.placement
	}
	manifest := map[string]any{"tenant": tenant, "service": service, "revisions": []any{rv},
		"routes": []any{map[string]any{"name": "run", "targets": []any{map[string]any{"revision": "v1", "weight": 1}}}}}
	if _, err := c.Deploy(ctx, tenant, service, manifest); err != nil {
		t.Fatalf("deploy %s/%s: %v", tenant, service, err)
	}
}

// usage reads the caller's tenant usage from GET /v1/admission.
func (n *node) usage(t *testing.T, who string) (live, queued uint64) {
	t.Helper()
	r := n.do(t, "GET", "/v1/admission", who, nil, nil)
	var s struct {
		Usage struct {
			Live   uint64 `json:"live_activations"`
			Queued uint64 `json:"queued"`
		} `json:"usage"`
	}
	if r.status != 200 || json.Unmarshal(r.body, &s) != nil {
		t.Fatalf("admission: %d %s", r.status, r.body)
	}
	return s.Usage.Live, s.Usage.Queued
}

// waitUsage polls the caller's tenant usage until cond holds (bounded).
func (n *node) waitUsage(t *testing.T, who string, cond func(live, queued uint64) bool) {
	t.Helper()
	for i := 0; i < 1000; i++ {
		if cond(n.usage(t, who)) {
			return
		}
		<-time.After(5 * time.Millisecond) // bounded poll of the endpoint
	}
	live, queued := n.usage(t, who)
	t.Fatalf("usage never reached the expected state: live=%d queued=%d", live, queued)
}

// async runs an invocation in the background.
func (n *node) async(who, target, input string, headers map[string]string) <-chan result {
	ch := make(chan result, 1)
	go func() {
		r, err := n.try("POST", "/v1/invoke/"+target, who, strings.NewReader(input), headers)
		ch <- result{r, err}
	}()
	return ch
}

type result struct {
	reply
	err error
}

func await(t *testing.T, ch <-chan result, d time.Duration) reply {
	t.Helper()
	select {
	case r := <-ch:
		if r.err != nil {
			t.Fatal(r.err)
		}
		return r.reply
	case <-time.After(d):
		t.Fatalf("no answer within %v", d)
	}
	return reply{}
}

// checkRefusal asserts a refusal's status, reason and Retry-After presence.
func checkRefusal(t *testing.T, r reply, status int, reason string) {
	t.Helper()
	if r.status != status || r.problem.Reason != reason {
		t.Fatalf("want %d %s, have %d %s", status, reason, r.status, r.body)
	}
	if r.problem.Status != status || r.problem.Code == "" || r.problem.Type == "" {
		t.Fatalf("problem lacks fields: %s", r.body)
	}
	if (r.header.Get("Retry-After") != "") != r.problem.Retryable {
		t.Fatalf("Retry-After %q with retryable=%v: %s", r.header.Get("Retry-After"), r.problem.Retryable, r.body)
	}
}

// freePort returns a loopback port that was free a moment ago and that no
// other caller in this process was given: the kernel may hand the same
// ephemeral port to two listen-and-close probes in a row, and two nodes of
// one cluster test then tried to listen on it.
func freePort(t *testing.T) int {
	t.Helper()
	givenPorts.mu.Lock()
	defer givenPorts.mu.Unlock()
	for range 100 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		_ = l.Close()
		if !givenPorts.m[port] {
			givenPorts.m[port] = true
			return port
		}
	}
	t.Fatal("no loopback port that was not given out already")
	return 0
}

// givenPorts are the ports freePort returned.
var givenPorts = struct {
	mu sync.Mutex
	m  map[int]bool
}{m: map[int]bool{}}

var sigterm = syscall.SIGTERM

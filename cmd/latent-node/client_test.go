package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/latent-node/latent-node/client"
	"github.com/latent-node/latent-node/internal/testwasm"
	"github.com/latent-node/latent-node/loadsource"
	"github.com/latent-node/latent-node/node"
	"github.com/latent-node/latent-node/node/auth"
	"github.com/latent-node/latent-node/node/config"
	"github.com/latent-node/latent-node/vocab"
)

// startDemoNode serves the demo configuration (demo/hello deployed) in
// process, its actors owned by the test, and returns its URL and the demo
// principal's key (every role, tenant demo).
func startDemoNode(t *testing.T) (url, key string) {
	t.Helper()
	key, hash, err := auth.Generate()
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Demo(config.WithDataDir(t.TempDir()), config.WithDemoKey(hash))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Overload.SampleInterval = 10 * time.Millisecond
	n, err := node.New(context.Background(), cfg, node.Options{LoadSource: loadsource.FixedSource{CPU: 0.1, Memory: 0.1}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.DeployDemo(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	wait := node.Go(ctx, n.Actors())
	srv := httptest.NewServer(n.Handler())
	t.Cleanup(func() {
		srv.Close()
		cancel()
		_ = wait()
		n.Close(context.Background())
	})
	for i := 0; i < 500; i++ { // ready once the first load sample arrived
		resp, err := http.Get(srv.URL + "/readyz")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		<-time.After(2 * time.Millisecond) // bounded poll of the endpoint
	}
	return srv.URL, key
}

type cliRun struct {
	code        int
	out, errOut string
}

func runCLI(stdin string, args ...string) cliRun {
	var out, errOut bytes.Buffer
	code := runMain(args, strings.NewReader(stdin), &out, &errOut)
	return cliRun{code, out.String(), errOut.String()}
}

func (r cliRun) want(t *testing.T, code int, stdout, stderr []string) {
	t.Helper()
	if r.code != code {
		t.Fatalf("exit code: want %d, have %d\nstdout:\n%s\nstderr:\n%s", code, r.code, r.out, r.errOut)
	}
	for _, re := range stdout {
		if !regexp.MustCompile(re).MatchString(r.out) {
			t.Errorf("stdout does not match %q:\n%s", re, r.out)
		}
	}
	for _, re := range stderr {
		if !regexp.MustCompile(re).MatchString(r.errOut) {
			t.Errorf("stderr does not match %q:\n%s", re, r.errOut)
		}
	}
}

// TestClientCommands runs deploy, get, list, invoke -v and delete against a
// node in process.
func TestClientCommands(t *testing.T) {
	url, key := startDemoNode(t)
	t.Setenv(keyEnv, key) // the commands below take the key from the environment
	dir := t.TempDir()
	manifest := filepath.Join(dir, "release.toml")
	if err := os.WriteFile(manifest, []byte(`tenant = "demo"
service = "complain"

[[revisions]]
name = "v1"
module = "`+testwasm.Path("complain")+`"
trust_class = "untrusted"
ceiling = { cpu_fuel = 10000000, memory_bytes = "1MiB", wall_time = "2s" }

[[routes]]
name = "run"
targets = [{ revision = "v1", weight = 1 }]
`), 0o600); err != nil {
		t.Fatal(err)
	}

	t.Run("deploy", func(t *testing.T) {
		runCLI("", "deploy", "--node", url, manifest).want(t, 0, []string{`^release rel1-\S+ generation \d+\n  v1 rev1-`}, nil)
	})
	t.Run("get", func(t *testing.T) {
		runCLI("", "get", "--node", url, "demo/hello").want(t, 0, []string{
			`^demo/hello release rel1-\S+ generation [1-9]\d*\nrevisions:\n  v1 rev1-\S+\nroutes:\n  greet -> v1 weight 1\n$`}, nil)
	})
	t.Run("list", func(t *testing.T) {
		runCLI("", "list", "--node", url).want(t, 0, []string{
			`^SERVICE +GENERATION +REVISIONS\n`, `\ncomplain +[1-9]\d* +v1=rev1-\S+\n`, `\nhello +[1-9]\d* +v1=rev1-\S+\n`}, nil)
		runCLI("", "list", "--node", url, "demo").want(t, 0, []string{`\nhello +`}, nil)
	})
	t.Run("list another tenant", func(t *testing.T) {
		runCLI("", "list", "--node", url, "acme").want(t, 1, nil, []string{`403 permission-denied principal-not-authorized`})
	})
	t.Run("invoke -v", func(t *testing.T) {
		r := runCLI("ada", "invoke", "-v", "--node", url, "demo/hello/greet")
		r.want(t, 0, []string{`^hello, ada\n$`}, []string{`^< 200 OK\n`, `\n< Latent-Activation-Id: [0-9a-f]{32}\n`,
			`\n< Latent-Revision: rev1-\S+\n`, `\n< Latent-Outcome: success\n`, `\n< Latent-Fuel-Used: [1-9]\d*\n`,
			`\n< Latent-Memory-Peak-Bytes: \d+\n`, `\n< Latent-Queue-Wait-Ms: \d+\n`, `\n< Latent-Execution-Ms: \d+\n`,
			`\n< Server-Timing: \S`, `\n< Latent-Cell-Class: tiny\n`})
	})
	t.Run("invoke without -v", func(t *testing.T) { // negative control: stderr stays empty
		r := runCLI("ada", "invoke", "--node", url, "demo/hello/greet")
		r.want(t, 0, []string{`^hello, ada\n$`}, []string{`^$`})
	})
	t.Run("invoke -v failed activation", func(t *testing.T) {
		r := runCLI("", "invoke", "-v", "--node", url, "demo/complain/run")
		r.want(t, 1, []string{`^$`}, []string{`^< 502 Bad Gateway\n`, `\n< Latent-Outcome: declared-error\n`,
			`\n< Latent-Revision: rev1-\S+\n`, `\nproblem: .*outcome=declared-error.* exit_code=3 retryable=false\n`,
			`\nstderr tail:\n\| complaint: bad input\n`, `\nlatent-node: 502 .*exit=3`})
	})
	t.Run("delete", func(t *testing.T) {
		runCLI("", "delete", "--node", url, "demo/hello").want(t, 0, []string{`^deleted demo/hello at generation [1-9]\d*\n$`}, nil)
		runCLI("", "get", "--node", url, "demo/hello").want(t, 1, nil, []string{`^latent-node: 404 `})
		runCLI("", "delete", "--node", url, "demo/hello").want(t, 1, nil, []string{`^latent-node: 404 `})
		runCLI("", "delete", "--node", url, "demo/complain").want(t, 0, nil, nil)
		runCLI("", "list", "--node", url).want(t, 0, []string{`^tenant demo has no deployed services\n$`}, nil)
	})
	t.Run("unknown key", func(t *testing.T) {
		runCLI("", "list", "--node", url, "--key", "lk_unknown").want(t, 1, nil,
			[]string{`401 unauthenticated`, `check --key or LATENT_KEY`})
		runCLI("", "deploy", "--node", url, "--key", "lk_unknown", manifest).want(t, 1, nil,
			[]string{`^latent-node deploy: upload .*401 unauthenticated`, `check --key or LATENT_KEY`})
	})
}

func TestClientCommands_missingKey(t *testing.T) {
	t.Setenv(keyEnv, "")
	for _, args := range [][]string{{"get", "demo/hello"}, {"list"}, {"delete", "demo/hello"},
		{"invoke", "demo/hello/greet"}, {"deploy", "release.toml"}} {
		t.Run(args[0], func(t *testing.T) {
			runCLI("", args...).want(t, 2, []string{`^$`},
				[]string{`^latent-node ` + args[0] + `: no API key: pass --key KEY or set LATENT_KEY`})
		})
	}
	// Negative control: with the variable set the key check passes and the
	// command fails later, at the (absent) manifest.
	t.Setenv(keyEnv, "lk_x")
	runCLI("", "deploy", filepath.Join(t.TempDir(), "absent.toml")).want(t, 1, nil, []string{`^latent-node deploy: .*absent\.toml`})
}

func TestDeploy_manifestSyntaxPosition(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name, doc string
		want      string
	}{
		{"bad value", "tenant = \"demo\"\nservice = \"x\"\n\n[[revisions]]\nname = \"v1\"\nmodule = = \"a.wasm\"\n",
			`^PATH:6:10: unexpected character U\+003D '=' at start of value\n(.*\n)*6\| module = = "a.wasm"\n`},
		{"duplicate key", "tenant = \"demo\"\ntenant = \"demo\"\n", `^PATH:2:1: .*tenant`},
		// Valid TOML, an invalid manifest: reported by field, without a position.
		{"not a syntax error", "tenant = \"demo\"\nservice = \"x\"\nbogus = 1\n", `^latent-node deploy: PATH: `},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-")+".toml")
			if err := os.WriteFile(path, []byte(tc.doc), 0o600); err != nil {
				t.Fatal(err)
			}
			// The manifest is read before anything is sent: no node is needed.
			runCLI("", "deploy", "--node", "http://127.0.0.1:1", "--key", "lk_x", path).want(t, 1, nil,
				[]string{strings.ReplaceAll(tc.want, "PATH", regexp.QuoteMeta(path))})
		})
	}
}

// signalWriter records what is written and closes seen once a write
// contains want.
type signalWriter struct {
	mu   sync.Mutex
	buf  strings.Builder
	want string
	seen chan struct{}
	once sync.Once
}

func (w *signalWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if strings.Contains(w.buf.String(), w.want) {
		w.once.Do(func() { close(w.seen) })
	}
	return len(p), nil
}

// TestDeployReporting: a deploy the node takes long to answer (a large
// module compiling) says so on stderr while it waits, and once answered;
// a quick one says nothing.
func TestDeployReporting(t *testing.T) {
	// The node answers the slow deploy once the CLI reported it waits.
	w := &signalWriter{want: "compiling and preparing demo/slow", seen: make(chan struct{})}
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/slow") {
			select {
			case <-w.seen:
			case <-r.Context().Done():
				return
			}
		}
		rw.Header().Set("Content-Type", "application/json")
		_, _ = rw.Write([]byte(`{"tenant":"demo","service":"svc","release":"rel1-x","generation":1,"revisions":[]}`))
	}))
	t.Cleanup(srv.Close)
	c, err := client.New(srv.URL, "k", client.WithRetry(client.RetryPolicy{}))
	if err != nil {
		t.Fatal(err)
	}
	d, err := deployReporting(c, vocab.Manifest{Tenant: "demo", Service: "slow"}, w, time.Millisecond)
	if err != nil || d.Release != "rel1-x" {
		t.Fatalf("%+v %v", d, err)
	}
	if out := w.buf.String(); !strings.Contains(out, "deploy: answered after") {
		t.Fatalf("stderr %q", out)
	}
	quick := &signalWriter{seen: make(chan struct{})}
	if _, err := deployReporting(c, vocab.Manifest{Tenant: "demo", Service: "svc"}, quick, time.Hour); err != nil || quick.buf.Len() != 0 {
		t.Fatalf("a quick deploy: %v, stderr %q", err, quick.buf.String())
	}
}

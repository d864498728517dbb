package e2e

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/latent-node/latent-node/internal/testwasm"
)

// dataDirConfig writes the harness configuration for dataDir, with extra
// TOML appended, and returns its path.
func dataDirConfig(t *testing.T, dataDir, extra string) string {
	t.Helper()
	_, h := principalKeys(t)
	p := defaults(t)
	p.Hashes, p.DataDir = h, dataDir
	c := harnessConfig(p)
	c.Extra = extra
	path := filepath.Join(t.TempDir(), "node.toml")
	if err := os.WriteFile(path, []byte(c.TOML()), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// cli runs the binary to its end with stdin and returns its exit code,
// stdout and stderr.
func cli(t *testing.T, stdin []byte, args ...string) (int, []byte, string) {
	t.Helper()
	return cliWith(t, stdin, nil, args...)
}

// cliWith is cli with env added to the environment.
func cliWith(t *testing.T, stdin []byte, env []string, args ...string) (int, []byte, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary(t), args...)
	cmd.Stdin = bytes.NewReader(stdin)
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	return code, out.Bytes(), errb.String()
}

// stop ends a served node with SIGTERM and waits for it.
func stop(t *testing.T, p *proc) {
	t.Helper()
	p.signal(t, syscall.SIGTERM)
	if code := p.exit(t, 30*time.Second); code != 0 {
		t.Fatalf("node exited %d", code)
	}
}

// invokeBoth invokes the two services the data directory tests deploy.
func invokeBoth(t *testing.T, n *node) [2]string {
	t.Helper()
	var out [2]string
	for i, c := range []struct{ who, target string }{{"alice", "acme/echo/run"}, {"bob", "beta/hello/run"}} {
		r := n.invoke(t, c.who, c.target, "ping", nil)
		if r.status != 200 {
			t.Fatalf("%s: %d %s", c.target, r.status, r.body)
		}
		out[i] = string(r.body)
	}
	return out
}

func TestDataDir_backupRestore(t *testing.T) {
	keys, _ := principalKeys(t)
	dataDir := filepath.Join(t.TempDir(), "data")
	cfg := dataDirConfig(t, dataDir, "")
	n := &node{proc: serve(t, cfg, calm), keys: keys}
	n.deploy(t, "alice", "acme", "echo", rev{guest: "echo"})
	n.deploy(t, "bob", "beta", "hello", rev{guest: "hello"})
	want := invokeBoth(t, n)

	// Online: the node keeps serving while both backups are taken.
	backupDir := filepath.Join(t.TempDir(), "backup")
	start := time.Now()
	if code, _, stderr := cli(t, nil, "backup", "--config", cfg, "--out", backupDir); code != 0 {
		t.Fatalf("backup --out DIR: %d %s", code, stderr)
	}
	t.Logf("backup to a directory while serving: %v", time.Since(start))
	code, stream, stderr := cli(t, nil, "backup", "--config", cfg, "--out", "-")
	if code != 0 || !strings.Contains(stderr, "2 services") {
		t.Fatalf("backup --out -: %d %s", code, stderr)
	}
	t.Logf("backup stream: %d bytes; %s", len(stream), strings.TrimSpace(stderr))
	// gc refuses a data directory a running node holds.
	if code, _, stderr := cli(t, nil, "gc", "--config", cfg); code != 1 || !strings.Contains(stderr, "in use by a running node") {
		t.Fatalf("gc of a running node's data directory: %d %s", code, stderr)
	}
	invokeBoth(t, n)
	stop(t, n.proc)

	for _, form := range []string{"dir", "tar"} {
		t.Run(form, func(t *testing.T) {
			fresh := filepath.Join(t.TempDir(), "data")
			cfg2 := dataDirConfig(t, fresh, "")
			args := []string{"restore", "--config", cfg2, "--in", backupDir}
			var stdin []byte
			if form == "tar" {
				args[len(args)-1], stdin = "-", stream
			}
			start := time.Now()
			code, out, stderr := cli(t, stdin, args...)
			if code != 0 || !strings.Contains(string(out), "2 services") {
				t.Fatalf("restore: %d %s %s", code, out, stderr)
			}
			t.Logf("restore (%s): %v: %s", form, time.Since(start), strings.TrimSpace(string(out)))
			// Restoring again into the now non-empty directory is refused.
			if code, _, stderr := cli(t, stdin, args...); code != 1 || !strings.Contains(stderr, "not an empty directory") {
				t.Fatalf("restore over a restored directory: %d %s", code, stderr)
			}
			n2 := &node{proc: serve(t, cfg2, calm), keys: keys}
			if got := invokeBoth(t, n2); got != want {
				t.Fatalf("restored node answers %q, the original %q", got, want)
			}
		})
	}

	t.Run("tampered", func(t *testing.T) {
		tampered := filepath.Join(t.TempDir(), "backup")
		if err := os.CopyFS(tampered, os.DirFS(backupDir)); err != nil {
			t.Fatal(err)
		}
		arts, _ := filepath.Glob(filepath.Join(tampered, "artifacts", "sha256", "*"))
		if len(arts) != 2 {
			t.Fatalf("backup artifacts %v", arts)
		}
		data, err := os.ReadFile(arts[0])
		if err != nil {
			t.Fatal(err)
		}
		data[len(data)-1] ^= 0x20
		if err := os.WriteFile(arts[0], data, 0o600); err != nil {
			t.Fatal(err)
		}
		fresh := filepath.Join(t.TempDir(), "data")
		code, _, stderr := cli(t, nil, "restore", "--config", dataDirConfig(t, fresh, ""), "--in", tampered)
		if code != 1 || !strings.Contains(stderr, "does not match its sha256") {
			t.Fatalf("restore of a tampered backup: %d %s", code, stderr)
		}
		if _, err := os.Stat(fresh); !os.IsNotExist(err) {
			t.Fatalf("a refused restore left %s: %v", fresh, err)
		}
		left, _ := os.ReadDir(filepath.Dir(fresh))
		if len(left) != 0 {
			t.Fatalf("a refused restore left %v", left)
		}
	})
}

// cacheFiles counts the compile cache entries under dataDir.
func cacheFiles(t *testing.T, dataDir string) int {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dataDir, "compile-cache", "wazero-*", "*"))
	return len(files)
}

func TestDataDir_gc(t *testing.T) {
	keys, _ := principalKeys(t)
	dataDir := filepath.Join(t.TempDir(), "data")
	cfg := dataDirConfig(t, dataDir, "")
	short := dataDirConfig(t, dataDir, "[catalog]\nartifact_grace = \"1ms\"\n")
	n := &node{proc: serve(t, cfg, calm), keys: keys}
	n.deploy(t, "alice", "acme", "echo", rev{guest: "echo"})
	n.deploy(t, "bob", "beta", "hello", rev{guest: "hello"})
	n.deploy(t, "alice", "acme", "fib", rev{guest: "fib"})
	ctx := context.Background()
	if _, err := n.client(t, "alice").DeleteDeployment(ctx, "acme", "fib"); err != nil {
		t.Fatal(err)
	}
	if _, err := n.client(t, "alice").UploadArtifact(ctx, testwasm.Bytes(t, "exit")); err != nil {
		t.Fatal(err)
	}
	stop(t, n.proc)
	if got := cacheFiles(t, dataDir); got != 3 {
		t.Fatalf("the compile cache holds %d entries, want 3 (echo, hello, fib)", got)
	}

	// Within the grace (1 hour) no artifact goes; fib's compiled code does.
	code, out, stderr := cli(t, nil, "gc", "--config", cfg, "--dry-run")
	if code != 0 || !strings.Contains(string(out), "artifacts: would remove 0 ownership records and 0 artifacts") ||
		!strings.Contains(string(out), "compile cache: would remove 1 entries") {
		t.Fatalf("gc --dry-run: %d %s %s", code, out, stderr)
	}
	if got := cacheFiles(t, dataDir); got != 3 {
		t.Fatalf("a dry run removed compile cache entries: %d left", got)
	}
	// Past a 1 ms grace: fib's and exit's artifacts go, echo's and hello's stay.
	start := time.Now()
	code, out, stderr = cli(t, nil, "gc", "--config", short)
	if code != 0 || !strings.Contains(string(out), "artifacts: removed 2 ownership records and 2 artifacts") ||
		!strings.Contains(string(out), "compile cache: removed 1 entries") || !strings.Contains(string(out), "kept 2") {
		t.Fatalf("gc: %d %s %s", code, out, stderr)
	}
	t.Logf("gc of a stopped node: %v: %s", time.Since(start), strings.TrimSpace(string(out)))
	if got := cacheFiles(t, dataDir); got != 2 {
		t.Fatalf("the compile cache holds %d entries after gc, want 2", got)
	}
	arts, _ := filepath.Glob(filepath.Join(dataDir, "artifacts", "sha256", "*"))
	if len(arts) != 2 {
		t.Fatalf("artifacts after gc: %v", arts)
	}
	// Nothing left to collect; the node serves what it kept.
	if code, out, _ := cli(t, nil, "gc", "--config", short); code != 0 || !strings.Contains(string(out), "removed 0 ownership records") {
		t.Fatalf("second gc: %d %s", code, out)
	}
	n = &node{proc: serve(t, cfg, calm), keys: keys}
	invokeBoth(t, n)
}

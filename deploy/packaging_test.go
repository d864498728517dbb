// Package deploy holds the packaging: the production configuration, the
// systemd unit and (at the repository root) the Dockerfile and `make dist`.
// Its tests check them with the tools that consume them, where installed.
package deploy

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/latent-node/latent-node/node/config"
)

const (
	unitFile   = "systemd/latent-node.service"
	prodConfig = "config/production.toml"
	installBin = "/usr/local/bin/latent-node"
	installCfg = "/etc/latent-node/node.toml"
)

// unitSettings returns the unit's Key=value lines, in order, by key.
func unitSettings(unit string) map[string][]string {
	out := map[string][]string{}
	for _, line := range strings.Split(unit, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, "[") {
			continue
		}
		if k, v, ok := strings.Cut(line, "="); ok {
			out[k] = append(out[k], v)
		}
	}
	return out
}

// TestSystemdUnit_matchesProductionConfig checks the unit against the
// configuration it runs: the paths, the open-file limit against
// node.max_connections, the stop timeout against the shutdown bounds, and
// the sandboxing a JIT-compiling Go binary needs.
func TestSystemdUnit_matchesProductionConfig(t *testing.T) {
	unit, err := os.ReadFile(unitFile)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(prodConfig)
	if err != nil {
		t.Fatal(err)
	}
	s := unitSettings(string(unit))
	one := func(key string) string {
		t.Helper()
		if len(s[key]) != 1 {
			t.Fatalf("%s: %d settings of %s, want 1", unitFile, len(s[key]), key)
		}
		return s[key][0]
	}
	seconds := func(key string) time.Duration {
		t.Helper()
		d, err := time.ParseDuration(one(key))
		if err != nil {
			t.Fatalf("%s=%s: %v", key, one(key), err)
		}
		return d
	}
	nofile, err := strconv.Atoi(one("LimitNOFILE"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"ExecStart serves the installed configuration", one("ExecStart") == installBin+" serve --config "+installCfg},
		{"ExecStartPre checks it", one("ExecStartPre") == installBin+" check --config "+installCfg},
		{"ExecReload sends SIGHUP", one("ExecReload") == "/bin/kill -HUP $MAINPID"},
		{"Type=simple (no sd_notify)", one("Type") == "simple"},
		{"a fixed user", one("User") == "latent-node" && one("Group") == "latent-node" && one("DynamicUser") == "no"},
		{"StateDirectory is data_dir", "/var/lib/"+one("StateDirectory") == cfg.Node.DataDir},
		{"ReadWritePaths is data_dir", one("ReadWritePaths") == cfg.Node.DataDir},
		{"LimitNOFILE at least twice max_connections", cfg.Node.MaxConnections > 0 && nofile >= 2*cfg.Node.MaxConnections},
		{"TimeoutStopSec above shutdown_grace + tracing.timeout",
			seconds("TimeoutStopSec") > cfg.Node.ShutdownGrace+cfg.Tracing.Timeout},
		{"no MemoryDenyWriteExecute (wazero maps code executable)", len(s["MemoryDenyWriteExecute"]) == 0},
		{"no ProcSubset=pid (the load source reads /proc/pressure)", len(s["ProcSubset"]) == 0},
		{"hardened", one("ProtectSystem") == "strict" && one("ProtectHome") == "yes" &&
			one("PrivateTmp") == "yes" && one("NoNewPrivileges") == "yes"},
		{"Restart=on-failure", one("Restart") == "on-failure"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !tc.ok {
				t.Errorf("%s does not hold", tc.name)
			}
		})
	}
}

// verifyUnit runs systemd-analyze verify on unit, with the binary path
// pointed at an executable stand-in, and returns what it printed.
func verifyUnit(t *testing.T, analyze, unit string) string {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "latent-node")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	unit = strings.ReplaceAll(unit, installBin, bin)
	path := filepath.Join(dir, "latent-node.service")
	if err := os.WriteFile(path, []byte(unit), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(analyze, "verify", path).CombinedOutput()
	if err != nil {
		return string(out) + err.Error()
	}
	return string(out)
}

// TestSystemdUnit_verify runs systemd-analyze verify, which only warns
// about an unknown key or a bad value: any output fails.
func TestSystemdUnit_verify(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze is not installed")
	}
	unit, err := os.ReadFile(unitFile)
	if err != nil {
		t.Fatal(err)
	}
	if out := verifyUnit(t, analyze, string(unit)); out != "" {
		t.Errorf("systemd-analyze verify %s:\n%s", unitFile, out)
	}
	// Negative control: a misspelt directive is reported.
	bad := strings.Replace(string(unit), "Restart=on-failure", "Restart=on-failur", 1)
	if out := verifyUnit(t, analyze, bad); !strings.Contains(out, "on-failur") {
		t.Errorf("systemd-analyze verify of a broken unit printed %q, want a complaint", out)
	}
}

// distBuild runs `make dist` for linux/amd64 in a copy of the committed
// tree at dir, with version, commit and date given, and returns the
// binary's sha256 and path.
func distBuild(t *testing.T, dir, version, commit, date string) (string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "make", "-s", "dist", "DIST_PLATFORMS=linux/amd64",
		"VERSION="+version, "COMMIT="+commit, "DATE="+date)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make dist in %s: %v\n%s", dir, err, out)
	}
	bin := filepath.Join(dir, "dist", "latent-node-linux-amd64")
	b, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	sums, err := os.ReadFile(filepath.Join(dir, "dist", "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	if want := hex.EncodeToString(sum[:]) + "  latent-node-linux-amd64\n"; string(sums) != want {
		t.Errorf("SHA256SUMS = %q, want %q", sums, want)
	}
	return hex.EncodeToString(sum[:]), bin
}

// exportHead writes the committed tree (HEAD) into a new directory.
func exportHead(t *testing.T, root string) string {
	t.Helper()
	dir := t.TempDir()
	archive := exec.Command("git", "-C", root, "archive", "HEAD")
	tar := exec.Command("tar", "-x", "-C", dir)
	var err error
	if tar.Stdin, err = archive.StdoutPipe(); err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	archive.Stderr, tar.Stderr = &stderr, &stderr
	if err := tar.Start(); err != nil {
		t.Fatal(err)
	}
	if err := archive.Run(); err != nil {
		t.Fatalf("git archive: %v\n%s", err, stderr.String())
	}
	if err := tar.Wait(); err != nil {
		t.Fatalf("tar: %v\n%s", err, stderr.String())
	}
	return dir
}

// TestDist_reproducible builds the committed tree twice with `make dist`,
// in two directories, and wants the same bytes; a different date must
// give different bytes (the comparison can fail), and the binary prints
// the version, commit and date it was given.
func TestDist_reproducible(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the node three times")
	}
	for _, tool := range []string{"make", "git", "tar", "sha256sum"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed", tool)
		}
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	git := func(args ...string) string {
		out, err := exec.Command("git", append([]string{"-C", root}, args...)...).Output()
		if err != nil {
			t.Skipf("git %s: %v (not a git checkout?)", strings.Join(args, " "), err)
		}
		return strings.TrimSpace(string(out))
	}
	commit, date := git("rev-parse", "HEAD"), git("log", "-1", "--format=%cI")
	const version = "v0.0.0-reproducible"

	a, binA := distBuild(t, exportHead(t, root), version, commit, date)
	b, _ := distBuild(t, exportHead(t, root), version, commit, date)
	if a != b {
		t.Errorf("two builds of %s: sha256 %s and %s", commit, a, b)
	}
	c, _ := distBuild(t, exportHead(t, root), version, commit, "2000-01-01T00:00:00Z")
	if c == a {
		t.Errorf("a build with another date has the same sha256 %s: the comparison cannot fail", a)
	}
	out, err := exec.Command(binA, "version").Output()
	if err != nil {
		t.Fatal(err)
	}
	if want := "latent-node " + version + " (commit " + commit + ", " + date + ")\n"; string(out) != want {
		t.Errorf("version = %q, want %q", out, want)
	}
	t.Logf("linux/amd64 of %s: sha256 %s, twice", commit, a)
}

// containerEngine returns docker or podman when one is installed and its
// daemon (or service) answers.
func containerEngine(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"docker", "podman"} {
		path, err := exec.LookPath(name)
		if err != nil {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err = exec.CommandContext(ctx, path, "info").Run()
		cancel()
		if err == nil {
			return path
		}
	}
	return ""
}

// TestDockerfile_builds builds the image with the README's command and runs
// `latent-node version` and `check` in it.
func TestDockerfile_builds(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a container image")
	}
	engine := containerEngine(t)
	if engine == "" {
		t.Skip("no container engine (docker, podman) answers")
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	tag := "latent-node:packaging-test"
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	build := exec.CommandContext(ctx, engine, "build", "--build-arg", "VERSION=v0.0.0-image",
		"--build-arg", "COMMIT=0123abc", "--build-arg", "DATE=2026-01-01T00:00:00Z", "-t", tag, root)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("%s build: %v\n%s", engine, err, out)
	}
	t.Cleanup(func() { _ = exec.Command(engine, "rmi", "-f", tag).Run() })
	for _, tc := range []struct {
		name string
		args []string
		want *regexp.Regexp
	}{
		{"version", []string{"version"}, regexp.MustCompile(`^latent-node v0\.0\.0-image \(commit 0123abc, 2026-01-01T00:00:00Z\)\n$`)},
		{"check", []string{"check", "--config", installCfg}, regexp.MustCompile(`node\.toml: ok`)},
		{"user", nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.want == nil {
				out, err := exec.CommandContext(ctx, engine, "image", "inspect", "--format", "{{.Config.User}}", tag).Output()
				if err != nil || strings.TrimSpace(string(out)) != "65532:65532" {
					t.Errorf("image user = %q (%v), want 65532:65532", out, err)
				}
				return
			}
			out, err := exec.CommandContext(ctx, engine, append([]string{"run", "--rm", tag}, tc.args...)...).CombinedOutput()
			if err != nil || !tc.want.Match(out) {
				t.Errorf("run %v: %v\n%s", tc.args, err, out)
			}
		})
	}
}

package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRunMain(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		wantCode int
		wantOut  string
		wantErr  string
	}{
		{"version", []string{"version"}, 0, "latent-node ", ""},
		{"no command", nil, 2, "", "usage"},
		{"unknown command", []string{"frobnicate"}, 2, "", "unknown command"},
		{"help", []string{"--help"}, 0, "commands:", ""},
		{"serve help", []string{"serve", "--help"}, 0, "", "--demo"},
		{"serve without config", []string{"serve"}, 2, "", "--config FILE or --demo"},
		{"serve both", []string{"serve", "--demo", "--config", "x"}, 2, "", "not both"},
		{"check without config", []string{"check"}, 2, "", "--config is required"},
		{"check missing file", []string{"check", "--config", "/nonexistent.toml"}, 2, "", "nonexistent"},
		{"keygen", []string{"keygen"}, 0, "hash: sha256:", ""},
		{"invoke bad target", []string{"invoke", "a/b"}, 2, "", "TENANT/SERVICE/ROUTE"},
		{"deploy no manifest", []string{"deploy"}, 2, "", "release manifest"},
		{"bad flag", []string{"keygen", "--nope"}, 2, "", "flag provided but not defined"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			if have := runMain(tc.args, strings.NewReader(""), &out, &errOut); have != tc.wantCode {
				t.Fatalf("exit code: want %d, have %d (stderr %q)", tc.wantCode, have, errOut.String())
			}
			if !strings.Contains(out.String(), tc.wantOut) || !strings.Contains(errOut.String(), tc.wantErr) {
				t.Fatalf("stdout %q / stderr %q; want %q / %q", out.String(), errOut.String(), tc.wantOut, tc.wantErr)
			}
		})
	}
}

func TestCheck_reportsEveryProblem(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bad.toml")
	if err := os.WriteFile(path, []byte("[node]\nlisten = 5\nbogus = 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	if code := runMain([]string{"check", "--config", path}, nil, &out, &errOut); code != 2 {
		t.Fatalf("exit %d", code)
	}
	for _, want := range []string{"node.listen", "node.bogus"} {
		if !strings.Contains(errOut.String(), want) {
			t.Errorf("check output does not name %s:\n%s", want, errOut.String())
		}
	}
}

func TestLoadSourceFromEnv(t *testing.T) {
	t.Setenv(loadSourceEnv, "")
	if src, err := loadSourceFromEnv(); src != nil || err != nil {
		t.Fatalf("unset: %v %v", src, err)
	}
	t.Setenv(loadSourceEnv, "fixed:0.25,1")
	src, err := loadSourceFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	if cpu, mem, err := src.Sample(t.Context()); cpu != 0.25 || mem != 1 || err != nil {
		t.Fatalf("sample %v %v %v", cpu, mem, err)
	}
	for _, bad := range []string{"fixed", "fixed:1", "fixed:2,0", "fixed:x,0", "calm", "fixed:NaN,0"} {
		t.Setenv(loadSourceEnv, bad)
		if _, err := loadSourceFromEnv(); err == nil || !strings.Contains(err.Error(), loadSourceEnv) {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

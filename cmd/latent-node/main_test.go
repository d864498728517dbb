package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestRun(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		wantCode int
		wantOut  string
	}{
		{"version", []string{"version"}, 0, "latent-node "},
		{"no command", nil, 2, ""},
		{"unknown command", []string{"frobnicate"}, 2, ""},
		{"demo says it is not built yet", []string{"serve", "--demo"}, 0, "not built yet"},
		{"serve without demo", []string{"serve", "--config", "x.toml"}, 2, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			if have := run(tc.args, &out, &errOut); have != tc.wantCode {
				t.Fatalf("exit code: want %d, have %d (stderr %q)", tc.wantCode, have, errOut.String())
			}
			if !strings.Contains(out.String(), tc.wantOut) {
				t.Fatalf("stdout %q does not contain %q", out.String(), tc.wantOut)
			}
		})
	}
}

package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/latent-node/latent-node/node"
)

func TestVersion_linkerVars(t *testing.T) {
	saved := [3]string{version, commit, date}
	t.Cleanup(func() {
		version, commit, date = saved[0], saved[1], saved[2]
		node.SetBuildInfo(buildInfo())
	})
	for _, tc := range []struct {
		name, version, commit, date string
		want                        string
	}{
		{"release", "v1.2.3", "59097f5d", "2026-11-30T15:00:00Z", "latent-node v1.2.3 (commit 59097f5d, 2026-11-30T15:00:00Z)\n"},
		{"commit only", "v1.2.3", "59097f5d", "", "latent-node v1.2.3 (commit 59097f5d)\n"},
		// Tests build without -buildvcs (GOFLAGS may say so), so the
		// toolchain has no commit or date to fall back on; a test binary's
		// module version is (devel).
		{"unset", "", "", "", "latent-node (devel)\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			version, commit, date = tc.version, tc.commit, tc.date
			node.SetBuildInfo(buildInfo())
			var out, errb bytes.Buffer
			if code := runMain([]string{"version"}, strings.NewReader(""), &out, &errb); code != 0 {
				t.Fatalf("exit %d: %s", code, errb.String())
			}
			if tc.name == "unset" && !strings.HasPrefix(out.String(), "latent-node (devel)") {
				t.Errorf("version = %q, want the toolchain's (devel)", out.String())
			} else if tc.name != "unset" && out.String() != tc.want {
				t.Errorf("version = %q, want %q", out.String(), tc.want)
			}
			if bi := node.CurrentBuildInfo(); tc.version != "" && (bi.Version != tc.version || bi.Commit != tc.commit) {
				t.Errorf("node.CurrentBuildInfo = %+v: the metric would not carry the linker's values", bi)
			}
		})
	}
}

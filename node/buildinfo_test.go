package node

import (
	"runtime"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// buildLabels returns the labels of the one latent_build_info series of m.
func buildLabels(t *testing.T, m *metrics) map[string]string {
	t.Helper()
	// Only the plain collectors: the state collector needs a whole node.
	reg := prometheus.NewPedanticRegistry()
	for _, c := range m.all {
		if _, ok := c.(*stateCollector); !ok {
			reg.MustRegister(c)
		}
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "latent_build_info" {
			continue
		}
		if len(mf.GetMetric()) != 1 {
			t.Fatalf("latent_build_info has %d series, want 1", len(mf.GetMetric()))
		}
		out := map[string]string{}
		for _, l := range mf.GetMetric()[0].GetLabel() {
			out[l.GetName()] = l.GetValue()
		}
		return out
	}
	t.Fatal("latent_build_info is not registered")
	return nil
}

func TestBuildInfo_labels(t *testing.T) {
	prev := buildInfo.Load()
	t.Cleanup(func() { buildInfo.Store(prev) })
	toolchain := toolchainBuildInfo()
	for _, tc := range []struct {
		name string
		set  *BuildInfo
		want map[string]string
	}{
		{"toolchain", nil, map[string]string{"version": toolchain.Version, "commit": toolchain.Commit,
			"date": toolchain.Date, "go_version": runtime.Version()}},
		{"set by main", &BuildInfo{Version: "v1.2.3", Commit: "59097f5", Date: "2026-11-30T15:00:00Z"},
			map[string]string{"version": "v1.2.3", "commit": "59097f5", "date": "2026-11-30T15:00:00Z", "go_version": runtime.Version()}},
		{"empty fields keep the toolchain's", &BuildInfo{Commit: "abc"},
			map[string]string{"version": toolchain.Version, "commit": "abc", "date": toolchain.Date, "go_version": runtime.Version()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			buildInfo.Store(nil)
			if tc.set != nil {
				SetBuildInfo(*tc.set)
			}
			n, _ := bareNode(t)
			got := buildLabels(t, n.metrics)
			for k, v := range tc.want {
				if got[k] != v {
					t.Errorf("label %s = %q, want %q", k, got[k], v)
				}
			}
			if len(got) != len(tc.want) {
				t.Errorf("labels %v, want %v", got, tc.want)
			}
		})
	}
	if toolchain.Version == "" {
		t.Error("the toolchain's version is empty; want (devel) at least")
	}
}

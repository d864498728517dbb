package node

import (
	"bufio"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/latent-node/latent-node/catalog"
	"github.com/latent-node/latent-node/internal/testutil"
)

// TestLogInspect_levels: preparing a large module logs its start and end
// at Info, a slow small one its end, a quick small one only at Debug; the
// end carries the time taken and the error.
func TestLogInspect_levels(t *testing.T) {
	tests := []struct {
		name string
		ev   catalog.InspectEvent
		msg  string
		want map[string]any
	}{
		{"large start", catalog.InspectEvent{Digest: "sha256:aa", Tenant: "demo", Bytes: 13 << 20, Service: "app-js"},
			"preparing a module (instrument and compile)", map[string]any{"level": "INFO", "tenant": "demo", "service": "app-js"}},
		{"large end", catalog.InspectEvent{Digest: "sha256:aa", Bytes: 13 << 20, Done: true, Took: 11 * time.Second},
			"prepared a module", map[string]any{"level": "INFO", "took_ms": 11000.0}},
		{"small quick start", catalog.InspectEvent{Digest: "sha256:bb", Bytes: 4096},
			"preparing a module (instrument and compile)", map[string]any{"level": "DEBUG"}},
		{"small slow end", catalog.InspectEvent{Digest: "sha256:bb", Bytes: 4096, Done: true, Took: 2 * time.Second},
			"prepared a module", map[string]any{"level": "INFO"}},
		{"small failed end", catalog.InspectEvent{Digest: "sha256:bb", Bytes: 4096, Done: true, Err: errors.New("bad import")},
			"prepared a module", map[string]any{"level": "DEBUG", "err": "bad import"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			logs := &testutil.SyncBuffer{}
			n := &Node{log: slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}
			n.logInspect(tt.ev)
			sc := bufio.NewScanner(strings.NewReader(logs.String()))
			var lines []map[string]any
			for sc.Scan() {
				var m map[string]any
				if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
					t.Fatal(err)
				}
				lines = append(lines, m)
			}
			if len(lines) != 1 || lines[0]["msg"] != tt.msg || lines[0]["digest"] != string(tt.ev.Digest) {
				t.Fatalf("logged %v, want one line %q", lines, tt.msg)
			}
			for k, v := range tt.want {
				if lines[0][k] != v {
					t.Errorf("%s = %v, want %v", k, lines[0][k], v)
				}
			}
		})
	}
}

// TestLogInspect_deploy: the node's runner reports each module it
// prepares, with the deploying tenant.
func TestLogInspect_deploy(t *testing.T) {
	_, logs := startLoggedNode(t)
	var found bool
	sc := bufio.NewScanner(strings.NewReader(logs.String()))
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatal(err)
		}
		if m["msg"] == "prepared a module" && m["tenant"] == "demo" && m["bytes"].(float64) > 0 {
			found = true
		}
	}
	if !found {
		t.Fatalf("no \"prepared a module\" line for tenant demo in\n%s", logs.String())
	}
}

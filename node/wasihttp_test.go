package node

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestInvoke_wasiHTTP: wasi-http components of testdata/components answer
// through the node, and each way a component fails is that activation's
// outcome, never a platform failure; the node serves the next request.
func TestInvoke_wasiHTTP(t *testing.T) {
	tn := startNode(t)
	ctx := context.Background()
	for _, tc := range []struct {
		fixture, outcome string
		status           int
	}{
		{"hello", "success", 200},
		{"loop", "fuel-exhausted", 502},
		{"trap", "trap", 0},
		{"grow", "memory-exhausted", 0},
		{"noresponse", "malformed-response", 502},
		{"badstring", "trap", 0},
		{"badutf8", "trap", 0},
		{"badhandle", "trap", 0},
		{"wronghandle", "trap", 0},
		{"handleflood", "trap", 0},
		{"outbound", "success", 403}, // its outbound request is denied
	} {
		t.Run(tc.fixture, func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join("..", "testdata", "components", tc.fixture+".wasm"))
			if err != nil {
				t.Fatal(err)
			}
			digest, err := tn.c.UploadArtifact(ctx, b)
			if err != nil {
				t.Fatal(err)
			}
			rev := map[string]any{"name": "v1", "artifact": digest, "trust_class": "untrusted", "abi": "wasi-http",
				"ceiling": map[string]any{"cpu_fuel": 10_000_000, "memory_bytes": "1MiB", "wall_time": "2s"}}
			manifest := map[string]any{"tenant": "demo", "service": tc.fixture, "revisions": []any{rev},
				"routes": []any{map[string]any{"name": "run", "targets": []any{map[string]any{"revision": "v1", "weight": 1}}}}}
			if _, err := tn.c.Deploy(ctx, "demo", tc.fixture, manifest); err != nil {
				t.Fatal(err)
			}
			resp, body := tn.do(t, "GET", "/v1/invoke/demo/"+tc.fixture+"/run/a/b?q=1", tn.key, nil, nil)
			if got := resp.Header.Get("Latent-Outcome"); got != tc.outcome || tc.status != 0 && resp.StatusCode != tc.status {
				t.Fatalf("%d %s, want %d %s: %s", resp.StatusCode, got, tc.status, tc.outcome, body)
			}
			if tc.fixture == "hello" && (string(body) != "hello /a/b?q=1\n" || resp.Header.Get("X-Fixture") != "hello") {
				t.Fatalf("hello: %v %q", resp.Header, body)
			}
			if resp.StatusCode == 500 || strings.Contains(string(body), "platform-failure") {
				t.Fatalf("platform failure: %s", body)
			}
		})
	}
	// A core module with abi = "wasi-http" and a component importing
	// sockets are refused at deploy, naming the cause.
	b, _ := os.ReadFile(filepath.Join("..", "testdata", "components", "sockets.wasm"))
	digest, err := tn.c.UploadArtifact(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	rev := map[string]any{"name": "v1", "artifact": digest, "trust_class": "untrusted", "abi": "wasi-http",
		"ceiling": map[string]any{"cpu_fuel": 10_000_000, "memory_bytes": "1MiB", "wall_time": "2s"}}
	manifest := map[string]any{"tenant": "demo", "service": "sockets", "revisions": []any{rev},
		"routes": []any{map[string]any{"name": "run", "targets": []any{map[string]any{"revision": "v1", "weight": 1}}}}}
	if _, err := tn.c.Deploy(ctx, "demo", "sockets", manifest); err == nil || !strings.Contains(err.Error(), "wasi:sockets/tcp") {
		t.Fatalf("sockets deploy: %v", err)
	}
}

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

	"github.com/latent-node/latent-node/internal/testwasm"
	"github.com/latent-node/latent-node/refusal"
)

// thisArch is the architecture otherArch is not.
func thisArch() string {
	if otherArch() == "x86_64" {
		return "aarch64"
	}
	return "x86_64"
}

// TestDeployRefusesWhatCannotRun: the binary refuses, at deploy, a release
// whose revisions the node could never admit (422 invalid-manifest, every
// problem in invalid_fields naming the manifest field and what the node
// allows), publishes nothing of it, and tells an unknown service from an
// unknown route at invoke. The harness node: budget ceiling 5000000000 fuel,
// 256MiB, 10s; acme may use trust class untrusted on tiny (16MiB) cells; no
// cell offers shared threading; region local.
func TestDeployRefusesWhatCannotRun(t *testing.T) {
	n, _ := startNode(t, nil, calm)
	digest, err := n.client(t, "alice").UploadArtifact(context.Background(), testwasm.Bytes(t, "echo"))
	if err != nil {
		t.Fatal(err)
	}
	revision := func(name string, mod func(r, ceiling map[string]any)) map[string]any {
		c := map[string]any{"cpu_fuel": 1_000_000, "memory_bytes": "8MiB", "wall_time": "1s"}
		r := map[string]any{"name": name, "artifact": digest, "trust_class": "untrusted", "ceiling": c}
		if mod != nil {
			mod(r, c)
		}
		return r
	}
	type field struct{ Field, Problem string }
	tests := []struct {
		name      string
		revisions []any
		want      []field // nil: deployed
	}{
		{"fits", []any{revision("v1", nil)}, nil},
		{"trust class of another tenant", []any{revision("v1", func(r, _ map[string]any) { r["trust_class"] = "partner" })},
			[]field{{"revisions[0].trust_class", "names a trust class the tenant may not use (want one of: untrusted)"}}},
		{"trust class the node lacks", []any{revision("v1", func(r, _ map[string]any) { r["trust_class"] = "gold" })},
			[]field{{"revisions[0].trust_class", "names a trust class this node does not have (want one of: untrusted)"}}},
		{"memory above the tenant's cells", []any{revision("v1", nil), revision("v2", func(_, c map[string]any) { c["memory_bytes"] = "32MiB" })},
			[]field{{"revisions[1].ceiling.memory_bytes", "no cell class the tenant may use has 32MiB (largest: 16MiB)"}}},
		{"ceilings above the node's", []any{revision("v1", func(_, c map[string]any) {
			c["memory_bytes"], c["cpu_fuel"], c["wall_time"] = "512MiB", 6_000_000_000, "1m"
		})}, []field{{"revisions[0].ceiling.cpu_fuel", "exceeds the node's budget ceiling (5000000000)"},
			{"revisions[0].ceiling.memory_bytes", "exceeds the node's budget ceiling (256MiB)"},
			{"revisions[0].ceiling.wall_time", "exceeds the node's budget ceiling (10s)"}}},
		{"threading", []any{revision("v1", func(r, _ map[string]any) { r["threading"] = "shared" })},
			[]field{{"revisions[0].threading", "no cell class of this node offers threading shared"}}},
		{"region", []any{revision("v1", func(r, _ map[string]any) { r["placement"] = map[string]any{"regions": []string{"mars"}} })},
			[]field{{"revisions[0].placement.regions", "does not include this node's region (local)"}}},
		{"architecture", []any{revision("v1", func(r, _ map[string]any) {
			r["placement"] = map[string]any{"architectures": []string{otherArch()}}
		})}, []field{{"revisions[0].placement.architectures", "does not include this node's architecture (" + thisArch() + ")"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var targets []any
			for _, r := range tt.revisions {
				targets = append(targets, map[string]any{"revision": r.(map[string]any)["name"], "weight": 1})
			}
			body, _ := json.Marshal(map[string]any{"tenant": "acme", "service": "svc", "revisions": tt.revisions,
				"routes": []any{map[string]any{"name": "run", "targets": targets}}})
			r := n.do(t, "PUT", "/v1/deployments/acme/svc", "alice", bytes.NewReader(body), nil)
			if tt.want == nil {
				if r.status != 200 {
					t.Fatalf("want 200, have %d %s", r.status, r.body)
				}
				if r := n.invoke(t, "alice", "acme/svc/run", "ping", nil); r.status != 200 || string(r.body) != "ping" {
					t.Fatalf("the deployed release does not run: %d %s", r.status, r.body)
				}
				return
			}
			checkRefusal(t, r, 422, refusal.ReasonInvalidManifest.String())
			var p struct {
				Fields []field `json:"invalid_fields"`
			}
			if err := json.Unmarshal(r.body, &p); err != nil {
				t.Fatal(err)
			}
			if len(p.Fields) != len(tt.want) {
				t.Fatalf("want %q, have %s", tt.want, r.body)
			}
			for i := range tt.want {
				if p.Fields[i] != tt.want[i] {
					t.Errorf("problem %d: want %q, have %q", i, tt.want[i], p.Fields[i])
				}
			}
		})
	}
	// The refused releases published nothing: the service still runs the
	// release of "fits".
	r := n.do(t, "GET", "/v1/deployments/acme/svc", "alice", nil, nil)
	var d struct {
		Generation uint64 `json:"generation"`
	}
	if r.status != 200 || json.Unmarshal(r.body, &d) != nil || d.Generation != 1 {
		t.Fatalf("the deployment changed: %d %s", r.status, r.body)
	}

	t.Run("not found", func(t *testing.T) {
		for _, tc := range []struct {
			name, who, target string
			status            int
			reason            string
		}{
			{"unknown service", "alice", "acme/nope/run", 404, refusal.ReasonServiceNotFound.String()},
			{"unknown route", "alice", "acme/svc/nope", 404, refusal.ReasonRouteNotFound.String()},
			{"another tenant's route", "bob", "acme/svc/run", 403, refusal.ReasonPrincipalNotAuthorized.String()},
			{"another tenant's unknown service", "bob", "acme/nope/run", 403, refusal.ReasonPrincipalNotAuthorized.String()},
		} {
			t.Run(tc.name, func(t *testing.T) {
				r := n.invoke(t, tc.who, tc.target, "", nil)
				checkRefusal(t, r, tc.status, tc.reason)
				if tc.status == 404 && r.problem.Scope != "revision" {
					t.Fatalf("scope: %s", r.body)
				}
			})
		}
	})
}

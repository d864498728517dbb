package node

import (
	"encoding/json"
	"reflect"
	"strconv"
	"testing"

	"github.com/latent-node/latent-node/node/api"
	"github.com/latent-node/latent-node/refusal"
	"github.com/latent-node/latent-node/vocab"
)

// TestTenantWrites: a tenant gets max slots, another tenant is
// not held back by it, and an ended write frees its slot (and its entry).
func TestTenantWrites(t *testing.T) {
	tw := tenantWrites{max: 2}
	for i := range tw.max {
		if !tw.begin("acme") {
			t.Fatalf("write %d refused under the bound", i)
		}
	}
	if tw.begin("acme") {
		t.Fatal("a write over the bound was admitted")
	}
	if !tw.begin("beta") {
		t.Fatal("another tenant was held back")
	}
	tw.end("acme")
	if !tw.begin("acme") {
		t.Fatal("an ended write did not free its slot")
	}
	for range tw.max {
		tw.end("acme")
	}
	tw.end("beta")
	if len(tw.inFlight) != 0 {
		t.Fatalf("entries left: %v", tw.inFlight)
	}
}

// TestDeploy_refusesWhatCannotRun: a release whose revision the node could
// never admit is refused with 422 invalid-manifest, each problem naming the
// manifest field and what the node allows; nothing is published. The demo
// configuration has the trust class untrusted, cells up to 256MiB (single
// threading) and a budget ceiling of 5000000000 fuel, 256MiB and 10s.
func TestDeploy_refusesWhatCannotRun(t *testing.T) {
	tn := startNode(t)
	_, m, _ := tn.n.cat.Manifest("demo", "hello")
	artifact := string(m.Revisions[0].Artifact)
	revision := func(name string, mod func(map[string]any)) map[string]any {
		r := map[string]any{"name": name, "artifact": artifact, "trust_class": "untrusted",
			"ceiling": map[string]any{"cpu_fuel": 1_000_000, "memory_bytes": "8MiB", "wall_time": "1s"}}
		if mod != nil {
			mod(r)
		}
		return r
	}
	ceiling := func(key string, v any) func(map[string]any) {
		return func(r map[string]any) { r["ceiling"].(map[string]any)[key] = v }
	}
	set := func(key string, v any) func(map[string]any) { return func(r map[string]any) { r[key] = v } }
	tests := []struct {
		name      string
		revisions []any
		want      []api.FieldProblem // nil: deployed
	}{
		{"fits", []any{revision("v1", nil)}, nil},
		{"unknown trust class", []any{revision("v1", set("trust_class", "partner"))},
			[]api.FieldProblem{{Field: "revisions[0].trust_class", Problem: "names a trust class this node does not have (want one of: untrusted)"}}},
		{"fuel above the node", []any{revision("v1", ceiling("cpu_fuel", 6_000_000_000))},
			[]api.FieldProblem{{Field: "revisions[0].ceiling.cpu_fuel", Problem: "exceeds the node's budget ceiling (5000000000)"}}},
		{"memory above the node", []any{revision("v1", nil), revision("v2", ceiling("memory_bytes", "512MiB"))},
			[]api.FieldProblem{{Field: "revisions[1].ceiling.memory_bytes", Problem: "exceeds the node's budget ceiling (256MiB)"}}},
		{"wall time above the node", []any{revision("v1", ceiling("wall_time", "1m"))},
			[]api.FieldProblem{{Field: "revisions[0].ceiling.wall_time", Problem: "exceeds the node's budget ceiling (10s)"}}},
		{"threading no cell offers", []any{revision("v1", set("threading", "shared"))},
			[]api.FieldProblem{{Field: "revisions[0].threading", Problem: "no cell class of this node offers threading shared"}}},
		{"placement", []any{revision("v1", set("placement", map[string]any{"regions": []string{"mars"}}))},
			[]api.FieldProblem{{Field: "revisions[0].placement.regions", Problem: "does not include this node's region (local)"}}},
		{"every problem", []any{revision("v1", set("trust_class", "partner")), revision("v2", ceiling("memory_bytes", "1GiB"))},
			[]api.FieldProblem{{Field: "revisions[0].trust_class", Problem: "names a trust class this node does not have (want one of: untrusted)"},
				{Field: "revisions[1].ceiling.memory_bytes", Problem: "exceeds the node's budget ceiling (256MiB)"}}},
		{"the catalog's problems first", []any{revision("v1", set("threading", "many"))},
			[]api.FieldProblem{{Field: "revisions[0].threading", Problem: `unknown threading model (want "single" or "shared")`}}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			service := "svc" + strconv.Itoa(i)
			targets := []any{}
			for _, r := range tt.revisions {
				targets = append(targets, map[string]any{"revision": r.(map[string]any)["name"], "weight": 1})
			}
			body, _ := json.Marshal(map[string]any{"tenant": "demo", "service": service, "revisions": tt.revisions,
				"routes": []any{map[string]any{"name": "run", "targets": targets}}})
			resp, data := tn.do(t, "PUT", "/v1/deployments/demo/"+service, tn.key, body, nil)
			_, deployed := tn.n.cat.Pin().Deployment("demo", vocab.ServiceName(service))
			if tt.want == nil {
				if resp.StatusCode != 200 || !deployed {
					t.Fatalf("want 200, have %d %s", resp.StatusCode, data)
				}
				return
			}
			var p api.Problem
			if err := json.Unmarshal(data, &p); err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != 422 || p.Reason != refusal.ReasonInvalidManifest.String() || deployed {
				t.Fatalf("want 422 invalid-manifest and nothing deployed, have %d %s (deployed %v)", resp.StatusCode, data, deployed)
			}
			if !reflect.DeepEqual(p.Fields, tt.want) {
				t.Fatalf("want %q, have %q", tt.want, p.Fields)
			}
		})
	}
}

// TestInvoke_notFound: an unknown service and an unknown route of the
// caller's own tenant are told apart; another tenant's names are refused
// before resolving, whether they exist or not.
func TestInvoke_notFound(t *testing.T) {
	tn := startNode(t)
	tests := []struct {
		name, path string
		status     int
		reason     string
	}{
		{"found", "/v1/invoke/demo/hello/greet", 200, ""},
		{"unknown service", "/v1/invoke/demo/nope/greet", 404, refusal.ReasonServiceNotFound.String()},
		{"unknown route", "/v1/invoke/demo/hello/nope", 404, refusal.ReasonRouteNotFound.String()},
		{"another tenant's service", "/v1/invoke/acme/hello/greet", 403, refusal.ReasonPrincipalNotAuthorized.String()},
		{"another tenant's unknown service", "/v1/invoke/acme/nope/greet", 403, refusal.ReasonPrincipalNotAuthorized.String()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, data := tn.do(t, "POST", tt.path, tn.key, []byte("ada"), nil)
			var p api.Problem
			_ = json.Unmarshal(data, &p)
			if resp.StatusCode != tt.status || p.Reason != tt.reason {
				t.Fatalf("want %d %q, have %d %s", tt.status, tt.reason, resp.StatusCode, data)
			}
			if tt.status == 404 && (p.Scope != "revision" || p.Code != "admission-rejected") {
				t.Fatalf("scope/code: %s", data)
			}
		})
	}
}

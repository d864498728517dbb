package node

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/latent-node/latent-node/client"
	"github.com/latent-node/latent-node/internal/testwasm"
	"github.com/latent-node/latent-node/node/status"
)

// TestNode_snapshotImages: a snapshot revision's image appears in the
// admin admission view (in all and for its tenant) and on the status page's
// tenant table once deployed, its activations count as restored or
// recreated, and the image is released when the revision goes: when the
// service is deployed again as a fresh revision of the same module (which
// keeps the module compiled), and when a snapshot service is deleted.
func TestNode_snapshotImages(t *testing.T) {
	tn := startNode(t)
	ctx := context.Background()
	digest, err := tn.c.UploadArtifact(ctx, testwasm.Bytes(t, "state"))
	if err != nil {
		t.Fatal(err)
	}
	manifest := func(service, instance string) map[string]any {
		return map[string]any{"tenant": "demo", "service": service,
			"revisions": []any{map[string]any{"name": "v1", "artifact": digest, "trust_class": "untrusted", "instance": instance,
				"ceiling": map[string]any{"cpu_fuel": 10_000_000, "memory_bytes": "1MiB", "wall_time": "2s"}}},
			"routes": []any{map[string]any{"name": "run", "function": "handle",
				"targets": []any{map[string]any{"revision": "v1", "weight": 1}}}}}
	}
	view := func() status.Instances {
		t.Helper()
		resp, body := tn.do(t, "GET", "/v1/admin/admission", tn.key, nil, nil)
		if resp.StatusCode != 200 {
			t.Fatalf("admin admission: %d %s", resp.StatusCode, body)
		}
		var v struct {
			Instances status.Instances `json:"instances"`
		}
		if err := json.Unmarshal(body, &v); err != nil {
			t.Fatal(err)
		}
		return v.Instances
	}
	if v := view(); v.SnapshotBytes != 0 {
		t.Fatalf("before any snapshot revision: %+v", v)
	}
	for _, svc := range []string{"snap", "snap2"} {
		if _, err := tn.c.Deploy(ctx, "demo", svc, manifest(svc, "snapshot")); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		res, err := tn.c.Invoke(ctx, "demo", "snap", "run", []byte("secret"), client.InvokeOptions{})
		if err != nil || string(res.Output) != "0 1 ........\n" {
			t.Fatalf("invoke: %+v %v", res, err)
		}
	}
	v := view()
	if v.SnapshotBytes != 64<<10 || v.Tenants["demo"] != 64<<10 || v.Snapshots != 1 || v.Restored+v.Recreated != 3 {
		t.Fatalf("after deploying two snapshot services of one module and three activations: %+v", v)
	}
	ui := tn.n.views.Snapshot()
	for _, tbl := range ui.Tables {
		if tbl.Name == "tenants" {
			for _, row := range tbl.Rows {
				if row[0] == "demo" && row[len(row)-1] != "64 KiB" {
					t.Errorf("status page tenant row %v: want 64 KiB snapshot bytes last", row)
				}
			}
		}
	}
	// One service still uses the snapshot: it stays.
	if _, err := tn.c.Deploy(ctx, "demo", "snap", manifest("snap", "fresh")); err != nil {
		t.Fatal(err)
	}
	if v := view(); v.SnapshotBytes != 64<<10 || v.Idle == 0 {
		t.Fatalf("after one of two snapshot services went fresh: %+v", v)
	}
	// The last one goes: so does the image.
	if _, err := tn.c.DeleteDeployment(ctx, "demo", "snap2"); err != nil {
		t.Fatal(err)
	}
	if v := view(); v.SnapshotBytes != 0 || len(v.Tenants) != 0 || v.Idle != 0 {
		t.Fatalf("after the last snapshot revision went (its idle instances with it): %+v", v)
	}
	// The fresh revision of the module still runs.
	if res, err := tn.c.Invoke(ctx, "demo", "snap", "run", []byte("x"), client.InvokeOptions{}); err != nil || string(res.Output) != "0 1 ........\n" {
		t.Fatalf("fresh invoke: %+v %v", res, err)
	}
}

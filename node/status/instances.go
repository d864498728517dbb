package status

// The runner's warm instances as the admission view and the status page
// show them.

import "github.com/latent-node/latent-node/runner"

// Instances is the "instances" part of GET /v1/admin/admission: the
// runner's warm instances of snapshot and reuse revisions.
type Instances struct {
	// SnapshotBytes is the bytes of the snapshot images the node holds, in
	// all and per tenant (charged to node.max_snapshot_bytes_per_tenant).
	SnapshotBytes uint64            `json:"snapshot_bytes"`
	Tenants       map[string]uint64 `json:"tenant_snapshot_bytes"`
	// Snapshots is how many initialisations made a snapshot; Idle the warm
	// instances waiting for an activation.
	Snapshots uint64 `json:"snapshots"`
	Idle      int    `json:"idle"`
	// Activations by how they got their instance: a snapshot instance put
	// back (restored) or made from the snapshot (recreated), a reuse
	// instance that served before (reused) or a new one (created);
	// Recycled counts instances closed.
	Restored  uint64 `json:"restored"`
	Recreated uint64 `json:"recreated"`
	Reused    uint64 `json:"reused"`
	Created   uint64 `json:"created"`
	Recycled  uint64 `json:"recycled"`
}

// instances reads run's warm instances.
func instances(run *runner.Runner) Instances {
	s, byTenant := run.WarmStats(), run.SnapshotBytesByTenant()
	view := Instances{SnapshotBytes: s.SnapshotBytes, Tenants: make(map[string]uint64, len(byTenant)),
		Snapshots: s.Snapshots, Idle: s.Idle, Restored: s.Restored, Recreated: s.Recreated, Reused: s.Reused,
		Created: s.Created, Recycled: s.Recycled}
	for t, b := range byTenant {
		view.Tenants[string(t)] = b
	}
	return view
}

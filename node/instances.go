// Warm instances in the node: dropping a tenant's snapshots with the last
// revision that uses them, and what the admission view, the status page
// and the metrics show of them.

package node

import (
	"github.com/latent-node/latent-node/vocab"
)

// instancesView is the "instances" part of GET /v1/admin/admission: the
// runner's warm instances of snapshot and reuse revisions.
type instancesView struct {
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

// instances reads the runner's warm instances.
func (v *statusViews) instances() instancesView {
	s, byTenant := v.run.WarmStats(), v.run.SnapshotBytesByTenant()
	view := instancesView{SnapshotBytes: s.SnapshotBytes, Tenants: make(map[string]uint64, len(byTenant)),
		Snapshots: s.Snapshots, Idle: s.Idle, Restored: s.Restored, Recreated: s.Recreated, Reused: s.Reused,
		Created: s.Created, Recycled: s.Recycled}
	for t, b := range byTenant {
		view.Tenants[string(t)] = b
	}
	return view
}

// retainSnapshots lets the runner drop tenant t's snapshots that no
// snapshot revision of t deployed now uses: called after each deploy or
// delete of one of t's services (locally or applied from the cluster). The
// catalog counts the snapshots each tenant's services need as they come
// and go, so this reads a counter, not the tenant's services.
func (d *deployments) retainSnapshots(t vocab.TenantID) {
	if d.run == nil || d.cat == nil {
		return
	}
	d.run.RetainSnapshots(t, d.cat.SnapshotsInUse(t))
}

package node

import (
	"encoding/json"

	"github.com/latent-node/latent-node/vocab"
)

// The API's JSON style (checked by style_test.go): snake_case keys; every
// element of a list of objects that has an identifier names it `name`;
// durations as milliseconds under a `_ms` key; every problem with code,
// reason and scope. The types below put catalog values into that form where
// the catalog's own encoding differs.

// wireManifest is a release manifest as the API answers it: each
// revision's ceiling with its wall time as wall_time_ms.
type wireManifest struct {
	vocab.Manifest
	Revisions []wireRevision `json:"revisions"`
}

// wireRevision is a manifest revision with its wire ceiling.
type wireRevision struct {
	vocab.ManifestRevision
	Ceiling *wireCeiling `json:"ceiling"`
}

// wireCeiling is a deployment ceiling on the wire.
type wireCeiling struct {
	CPUFuel     uint64         `json:"cpu_fuel"`
	MemoryBytes vocab.ByteSize `json:"memory_bytes"`
	WallTimeMs  json.Number    `json:"wall_time_ms"`
}

func manifestWire(m vocab.Manifest) wireManifest {
	w := wireManifest{Manifest: m, Revisions: make([]wireRevision, len(m.Revisions))}
	for i, r := range m.Revisions {
		w.Revisions[i] = wireRevision{ManifestRevision: r}
		if c := r.Ceiling; c != nil {
			w.Revisions[i].Ceiling = &wireCeiling{CPUFuel: c.CPUFuel, MemoryBytes: c.MemoryBytes,
				WallTimeMs: vocab.WallTimeMs(c.WallTime)}
		}
	}
	return w
}

// deploymentAnswer is the answer of GET /v1/deployments/{tenant}/{service}.
type deploymentAnswer struct {
	vocab.Deployment
	Manifest wireManifest `json:"manifest"`
}

// listedService is one element of a service list: the service's name and
// its active release.
type listedService struct {
	Name       vocab.ServiceName   `json:"name"`
	Release    vocab.ReleaseID     `json:"release"`
	Generation vocab.Generation    `json:"generation"`
	Revisions  []vocab.RevisionRef `json:"revisions"`
}

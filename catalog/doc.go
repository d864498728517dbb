// Package catalog is the pinned deployment catalog of a latent-node: the
// store of releases, their artifacts and the pins every later layer reads.
// The words it stores them in (identities, cell classes, budgets,
// requirements, placement, trust classes, the release manifest) are package
// vocab's.
//
// # What it guarantees
//
// A release manifest names one service's revisions (each a module by its
// sha256 digest, a trust class, a threading model, a random source, required
// features, a deployment ceiling and optional placement restrictions) and its
// routes (each a function and weighted targets). Deploy validates the manifest
// (vocab.NewSpec: every problem names its field), inspects each module through a
// ModuleInspector (the runner implements it; tests use a fake), derives
// deterministic identities (vocab.Spec's, from content only, identical
// across restarts), takes the next catalog-wide Generation, persists
// the release and only then publishes it. Delete is a generation too. On any
// error nothing changes: the previous release keeps serving.
//
// Pin returns an immutable view (copy-on-write behind one atomic pointer).
// The services live in a copy-on-write B-tree ordered by tenant and name:
// a deploy or a delete copies only the path it changes (O(log N) time and
// bytes), each published view is an O(1) clone that nothing changes again,
// and a pin held by a long activation keeps alive only the nodes replaced
// since, not a copy of the catalog. The deploy path's checks (a tenant's
// services, the artifacts and snapshots its services use) read counters
// kept beside the tree; Pin.ServicesPage lists a tenant's services in name
// order from any name on, in O(log N + page).
// Pin.Resolve picks a revision of a route; Pin.Policy verifies the whole
// tenant/service/route/function/revision/release/generation tuple of a
// ResolvedRevision against the same pin and returns the revision's
// vocab.RevisionPolicy: a small typed record (ceilings, requirements, placement,
// trust class, artifact digest) that admission reads. Policy never reselects
// with another routing key, ignores the untrusted attributes a caller may
// forge, and is a bounded in-memory lookup: no filesystem, no artifact bytes,
// no compilation. A pin taken before a replacement or a deletion keeps serving
// its exact policy; a newer pin refuses the old generation with
// ErrRevisionNotAvailable.
//
// Weighted routes are deterministic. The routing hash is FNV-1a (64-bit) over
// tenant, service, route and routing key separated by 0x00, finished with the
// SplitMix64 mixer; the point hash mod Σweights falls in the interval of one
// target, the targets owning consecutive intervals in manifest order. The same
// key therefore always picks the same revision within a pin, and the hash
// does not depend on the release, so a key only moves when its point changes
// interval.
//
// # Artifacts and tenants
//
// Artifacts belong to tenants; a catalog's Artifacts (Catalog.Artifacts)
// stores them. Put(ctx, tenant, digest, r) verifies
// the bytes against the digest while storing them; identical bytes are
// stored once, and every tenant that uploads them gets its own ownership
// record with the upload time (from Config.Clock). A deploy only sees the
// artifacts its manifest's tenant owns: any other digest, whoever uploaded
// it, is refused with exactly the problem of a digest never uploaded, and is
// neither read nor inspected.
//
// Each tenant has its own bounds: services deployed, artifacts owned, bytes
// of the artifacts owned (each owner is charged the full size of a shared
// artifact), and deployed bytes: the sum of the sizes of the distinct
// artifacts its services use, which bounds what the node compiles and keeps
// for it (so one tenant cannot use up the node's compiled-code bound). A
// deploy is charged for the services the tenant would have after it: the
// release it replaces no longer counts, and an artifact used by several
// services or revisions counts once. The check is made under the catalog's
// lock before publishing, so concurrent deploys cannot both pass. Reaching
// a bound refuses only that tenant's new service, artifact or growing
// release, with ErrTenantQuota and a *QuotaError naming the dimension;
// replacing a service (without growing its deployed bytes), deleting one and
// re-uploading an owned artifact always fit. The
// node-wide MaxServices stays; with it at least tenants × per-tenant bound
// no tenant can fill the node, otherwise new services of every tenant get
// ErrCatalogFull once the node is full. Quota checks come before the costly
// work: a new service over quota is refused before inspection, an artifact
// over the count before its bytes are read, a release over the deployed
// bytes before inspection. Open enforces none of the tenant bounds: lowering
// one removes nothing, and a tenant above it loads and can only replace
// (without growing) and delete.
//
// Artifacts.CollectGarbage removes a tenant's ownership of an artifact none of its
// services in the current view uses once Config.ArtifactGrace has passed
// since its upload, and deletes the bytes when no tenant owns them any more.
// It runs under the catalog's lock, so a racing deploy either published
// first (the artifact is in use) or answers that the artifact is unknown.
// The catalog starts no goroutine: the node calls it periodically.
// PlanGarbage is CollectGarbage's dry run.
//
// # Locking
//
// A catalog has one lock, Catalog.mu. It guards the last generation
// issued, the writer's index and its counters (Catalog.mu.index) and the
// ownership state of its Artifacts, which holds a pointer to the same
// mutex: a deploy checks ownership and the tenant's quotas and publishes
// under it, and garbage collection reads what the services use and drops
// ownership under it, so neither sees the other half done. Methods named
// …Locked, and every method of index, require it held; exported methods
// of Catalog and Artifacts take it themselves where they need it and must
// not be called with it held. Reading, inspecting and preparing modules (modules, in inspect.go)
// and handing references back run without it (ModuleReleaser's rule), and
// so does reading a pin: Pin loads one atomic pointer to an immutable
// snapshot and never blocks.
//
// # Compiled modules
//
// If the inspector implements ModuleReleaser, the catalog owns one
// reference per successful Inspect and gives each back exactly once:
// immediately when the deploy fails, or when a later generation replaces or
// deletes the service. A published service holds one reference per distinct
// artifact of its revisions, taken again by Open after a restart.
//
// # Persistence
//
// Under the data directory, artifacts live at artifacts/sha256/<hex>
// (verified on write and on read), ownership records at
// catalog/owners/<sha256 of the tenant>/<hex>.rec, the last generation
// issued by a deletion at catalog/state.rec, and one record per service at
// catalog/services/<hex>.rec, which carries the generation of its release.
// Records carry a header with their kind, length and sha256 checksum.
// Every write goes to a temporary file, is fsynced, renamed and its
// directory fsynced; an artifact is written before its ownership record and
// removed after it. A deploy writes its service's record only (one fsynced
// file); a deletion writes the state record before removing the service's.
// Open takes the highest generation of the state and the service records
// as the last issued, so no generation is issued twice across a crash; it
// rebuilds identical ids, policies and ownership, or fails with an error
// naming the file (ErrCorruptRecord): nothing is skipped, nothing is
// half-applied. Its cost grows with N: it reads and checks every service
// record (a module shared by many services is read and inspected once when
// the inspector is a ModuleAcquirer). It deletes
// stored artifacts no tenant owns (left by a crash between the two writes)
// and gives a loaded service's tenant the ownership of its artifacts if the
// record is missing (a data directory from before ownership).
//
// Open takes the data directory's lock (LockDir: an flock on catalog/lock,
// held until the process exits; shared by every catalog of the process), so
// a second process, such as an offline gc while the node runs, is refused
// with ErrDirInUse.
//
// # Backup and restore
//
// Package catalog/backup copies a data directory and restores one. It
// reads and checks the files through what layout.go exports (the paths of
// the layout, IsTemp, and DecodeStateRecord, DecodeOwnerRecord and
// DecodeServiceRecord) and Config.SetDefaults for the quotas a restore is
// held to; nothing else of the catalog's internals.
//
// A write that fails because the disk is full or the quota of the data
// directory is exhausted (ENOSPC, EDQUOT) returns an error marked
// ErrStorageFull whose message names no host path; nothing changes.
//
// # Non-goals
//
// The catalog does not authenticate (the node checks that a deployer belongs
// to the manifest's tenant), does not know the node's configured tenants,
// trust classes or cell classes (admission checks policy against them), and
// never executes modules.
//
// # Internal organization
//
//   - release.go: the immutable per-service record built from a validated
//     vocab.Spec and the inspected modules, its routes, interning.
//   - pin.go: Pin, Resolve, Policy, the routing hash.
//   - index.go: the copy-on-write index of services and the writer's
//     index type with the per-tenant counters (SnapshotsInUse,
//     ServiceCount, and the snapshots whose count reached zero, which
//     Config.OnSnapshotsUnused is told of after each change), the
//     catalog's additive hash.
//   - catalog.go: Catalog (Open, Deploy, Delete, Manifest, Pin), Config.
//   - apply.go: Check, Apply and Replace (a history ordered elsewhere:
//     the cluster), Pin.Hash, Pin.AllServices.
//   - artifacts.go: Artifacts: ownership, Put, tenant quotas,
//     CollectGarbage, Get and Open for peers.
//   - layout.go: the on-disk layout's paths and the records' payloads,
//     exported for catalog/backup.
//   - store.go: atomic writes, bulk writes, record encoding, the
//     storage-full classification; exchange_*.go: swapping
//     a record with its directory's spare file (renameat2 on Linux) and
//     syncfs.
//   - inspect.go: ModuleInspector, ModuleReleaser and ModuleInfo, and
//     modules: inspecting a release's artifacts, preparing snapshots,
//     giving references back.
//   - dirlock*.go: LockDir, the data directory's flock.
//
// # Usage
//
//	cat, err := catalog.Open(ctx, catalog.Config{Dir: dataDir, Inspector: r})
//	err = cat.Artifacts().Put(ctx, "acme", digest, moduleReader)
//	dep, err := cat.Deploy(ctx, manifest) // manifest.Tenant == "acme"
//	...
//	stats, err := cat.Artifacts().CollectGarbage(ctx, clock.Now()) // periodically, from the node's actor
//
//	pin := cat.Pin()
//	rev, err := pin.Resolve(vocab.Target{Tenant: "acme", Service: "images", Route: "thumbnail"}, routingKey)
//	policy, err := pin.Policy(rev) // what admission reads, against the same pin
package catalog

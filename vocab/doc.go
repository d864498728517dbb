// Package vocab is the vocabulary every layer of a latent-node shares:
// tenant, service, route, revision and release identities, digests, cell
// classes, threading models, random sources, instance modes, guest ABIs,
// features, requirements, placement, budgets, byte sizes and durations,
// field paths and field problems, and the release manifest that a deployer
// writes in these terms. It holds no state, reads no clock and imports
// nothing of the module: the catalog (the store of releases), admission,
// the cell pool, the runner, the scheduler, the cluster and the node all
// import it.
//
// The name: it is the words the layers speak to each other, not a store
// of them. The release manifest lives here too, not in a package of its
// own: it is written in the vocabulary's types, its validation produces
// them (a Spec), and the identities of revisions and releases are derived
// from that Spec, so splitting it off would only add an import between two
// packages that change together.
//
// # What it guarantees
//
// Every caller-chosen name is 1..MaxNameBytes bytes of valid UTF-8 without
// whitespace or control characters (ValidateName); the names that are also
// URL path segments (tenant, service, route) contain no '/' and are not
// "." or ".." (ValidatePathName). An invalid name's error never echoes it.
//
// DecodeManifest reads at most MaxManifestBytes of JSON, refusing unknown
// fields and trailing data; NewSpec (and ValidateManifest) check a
// manifest without touching artifacts and report every problem, each
// naming its field, as one *ValidationError (errors.Is
// ErrInvalidManifest). Problems found later with the modules (the
// catalog's) use the same type.
//
// Identities are derived from content, never from time or order: a revision
// id ("rev1-" + 64 hex digits) hashes a canonical length-prefixed encoding of
// the tenant, service and the revision's validated fields; a release id
// ("rel1-" + 64 hex digits) hashes the revision ids and the routes in
// manifest order. Both are 69 bytes (at most MaxGeneratedIDBytes) and
// identical across restarts and nodes; field order, whitespace, size
// spellings and attribute order in the manifest do not change them.
//
// Byte sizes are integers of bytes or strings with a unit ("64MiB", "1GB");
// they are encoded as exact JSON integers. Durations are Go duration
// strings.
//
// # Internal organization
//
//   - vocab.go: CellClass, Threading, Randomness, InstanceMode, ABI,
//     Feature and FeatureSet, Requirements, Placement, Budget, Capsule and
//     the WebAssembly memory constants.
//   - ids.go: names and their validation, TenantID … FunctionName,
//     TrustClass, RevisionID, ReleaseID, Generation, Target, Digest.
//   - size.go: ByteSize and Duration, their parsing and JSON forms.
//   - field.go: FieldError and FieldPath, the one problem type of every
//     validation in the module.
//   - manifest.go: Manifest and its parts, DecodeManifest, NewSpec and
//     ValidateManifest, Spec, Problems.
//   - release.go: RevisionPolicy, RevisionRef, Deployment, Canon and the
//     derivation of revision and release ids.
//   - outbound.go: OutboundHost and OutboundHosts, a wasi-http revision's
//     allowed_outbound_hosts: their parsing and matching.
//   - clock.go: Clock, the one time source injected into admission, the
//     scheduler, the catalog, the load sampler and the node, and WallClock.
//
// # Usage
//
//	m, err := vocab.DecodeManifest(body) // a *ValidationError names each bad field
//	spec, err := vocab.NewSpec(m)
//	release := spec.ReleaseID()
//	size, err := vocab.ParseByteSize("64MiB")
package vocab

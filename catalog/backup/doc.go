// Package backup copies a latent-node's catalog data directory and restores
// one: the operator's `latent-node backup` and `latent-node restore`.
//
// It is a subpackage of catalog, not a top-level package, because it is the
// catalog's persistence seen from outside: it knows the catalog's on-disk
// layout and records (through the small surface package catalog exports
// for it: the layout's paths, IsTemp, the Decode*Record functions and
// Options.SetDefaults) and nothing of the layers above, so it sits in the
// catalog's row of the import rule and a reader finds it next to the files
// it copies. Only the CLI imports it; the catalog never does.
//
// # What it guarantees
//
// Write copies the catalog at one generation to a Sink: first a manifest
// (ManifestName) listing every other entry's size and sha256, then the
// signature when Options.SignKey is set (SignatureName, an HMAC-SHA256 of
// the manifest), then the state, service and ownership records and the
// artifacts the ownership records name. It only reads and takes no lock,
// so it works while a node serves the data directory; it reads the records
// again at the end and starts over if a deploy or a delete changed them,
// or if a record it read was being rewritten in place (the catalog reuses a
// replaced record's file as the next write's spare), which it tells from a
// corrupt record by reading the file again (at most a few times, then
// ErrRace). Every artifact is verified against
// its digest while it is copied.
//
// Restore writes a backup read from a Source into a data directory that
// does not exist or is empty (else ErrRestoreTarget). The manifest must
// come first; it is bounded by the quotas and tenants of RestoreOptions
// before anything is written, and every further entry must be listed,
// arrive once and have its listed size. Entries are written to a
// temporary sibling directory; then every entry must match the manifest,
// every artifact its digest, every record its checksum, and the catalog
// they make must satisfy the ownership rules and quotas of a deploy; then
// RestoreOptions.Verify opens it; only then is it renamed into place. A
// malformed or tampered backup is ErrInvalid naming the entry, a bad
// signature ErrSignature; on any failure nothing is left behind.
//
// A backup is a tar stream (NewTarSink, NewTarSource) or a directory
// (NewDirSink, NewDirSource); the format, the entry names and the error
// messages (which start "catalog:") are those of backups written before
// this package split from catalog, so every existing backup restores.
//
// # Internal organization
//
//   - backup.go: Write, Options, Stats, the sentinels, and the consistent
//     read of a data directory (readSnapshot) it copies; fileid_unix.go,
//     fileid_other.go: a record file's device and inode, where the system
//     has them.
//   - manifest.go: the manifest's entries, encoding and strict decoding,
//     its signature, and the entry names the layout allows (entryKind).
//   - stream.go: the tar and directory forms (sinks and sources), and the
//     staged writes into a new directory that DirSink and Restore share.
//   - restore.go: Restore, RestoreOptions, RestoreStats: the bounds the
//     manifest is held to and the checks of the staged catalog.
//
// # Usage
//
//	sink := backup.NewTarSink(w)
//	st, err := backup.Write(ctx, dataDir, sink, backup.Options{SignKey: key})
//	err = sink.Close()
//	...
//	rst, err := backup.Restore(ctx, backup.NewTarSource(r), newDataDir, backup.RestoreOptions{
//		Quotas: catalogOptions, Tenants: tenants, SignKey: key, Verify: openCatalog})
package backup

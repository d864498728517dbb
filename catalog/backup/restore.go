// Restore: a backup, bounded and checked entry by entry and as a
// whole, written into an empty data directory through a staged sibling.

package backup

import (
	"context"
	"crypto/hmac"
	"encoding/hex"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/latent-node/latent-node/catalog"
	"github.com/latent-node/latent-node/vocab"
)

// RestoreOptions bound a restore.
type RestoreOptions struct {
	// MaxArtifactBytes bounds one artifact entry (default
	// catalog.DefaultMaxArtifactBytes).
	MaxArtifactBytes int64
	// Quotas are the catalog options whose bounds the restored catalog
	// must meet, as a deploy would (zero fields: the defaults): MaxServices,
	// MaxServicesPerTenant, MaxArtifactsPerTenant, MaxArtifactBytesPerTenant,
	// MaxDeployedBytesPerTenant; Clock tells the time ownership records
	// may not be stamped beyond (by more than maxUploadSkew).
	Quotas catalog.Config
	// Tenants, when not nil, are the only tenants whose records a backup
	// may hold (the configuration's tenants).
	Tenants []vocab.TenantID
	// SignKey, when set, requires a backup signed with it (Options):
	// an unsigned or otherwise signed backup is ErrSignature, refused
	// before any entry but the manifest is read.
	SignKey []byte
	// Verify, if set, is called with the staged data directory once every
	// entry is verified, before it is renamed to the target: it should open
	// the catalog there (Open re-verifies every record and inspects every
	// module) to prove the result loads. An error aborts the restore.
	Verify func(ctx context.Context, stagedDir string) error
}

// maxUploadSkew is how far in the future (by RestoreOptions.Quotas.Clock)
// an ownership record's upload time may be: clocks of the node that wrote
// the backup and of this one differ a little; a record far in the future
// would never be collected.
const maxUploadSkew = time.Hour

// maxSmallRecordBytes bounds a state or ownership record (as the catalog
// reads them).
const maxSmallRecordBytes = 4096

// RestoreStats says what a restore wrote.
type RestoreStats struct {
	Generation                  vocab.Generation
	Services, Owners, Artifacts int
	Bytes                       int64
}

// Restore writes the backup read from src as the data directory target,
// which must not exist or be an empty directory (else ErrRestoreTarget).
//
// The backup's first entry must be its manifest (ManifestName). It is
// decoded and bounded before anything is written: at most
// Quotas.MaxServices service records, at most Quotas.MaxArtifactsPerTenant
// ownership records per tenant (of opts.Tenants when set), no more
// artifacts than ownership records, each entry within its kind's size
// bound, and the artifacts' total within Quotas.MaxArtifactBytesPerTenant
// per tenant; so the bytes written are at most the sum of the listed
// sizes. With opts.SignKey the signature entry must come next and match.
// Every further entry must be listed, arrive once and have its listed
// size, else the restore stops at once; sparse tar entries are refused.
// Entries are written to a temporary sibling directory while their sha256
// is computed; then every entry must match the manifest (and every listed
// entry be present), every artifact its digest, every record its checksum,
// every ownership record's artifact be present with the recorded size and
// its upload time not in the future; every service's artifacts must be
// owned by the service's own tenant, and each tenant stay within the
// quotas, as a deploy would check them; then opts.Verify runs on the
// staged directory; only then is it renamed to target. On any failure the
// temporary directory is removed and target is untouched. A malformed or
// tampered backup is ErrInvalid naming the entry.
//
// Backups written before the manifest came first (it was the last entry)
// are refused as a tar stream; extracted into a directory they restore
// with NewDirSource, which reads the manifest first.
func Restore(ctx context.Context, src Source, target string, opts RestoreOptions) (RestoreStats, error) {
	if opts.MaxArtifactBytes <= 0 {
		opts.MaxArtifactBytes = catalog.DefaultMaxArtifactBytes
	}
	opts.Quotas.SetDefaults()
	if opts.SignKey != nil && len(opts.SignKey) < MinSignKeyBytes {
		return RestoreStats{}, errors.Newf("catalog: a backup signing key has at least %d bytes", MinSignKeyBytes)
	}
	// The manifest, bounded, before anything is written.
	name, size, r, err := src.Next()
	if err == io.EOF || err == nil && name != ManifestName {
		return RestoreStats{}, errors.WithHint(errors.Wrapf(ErrInvalid, "the first entry must be %s", ManifestName),
			"a backup written by an older latent-node has its manifest last: extract the tar stream into a directory and restore from it (--in DIR)")
	}
	if err != nil {
		return RestoreStats{}, err
	}
	if size < 0 || size > maxManifestBytes {
		return RestoreStats{}, errors.Wrapf(ErrInvalid, "%s is too large", name)
	}
	manifest, err := io.ReadAll(io.LimitReader(r, size))
	if err != nil || int64(len(manifest)) != size {
		return RestoreStats{}, errors.Mark(errors.Wrapf(errors.CombineErrors(err, io.ErrUnexpectedEOF), "catalog: read %s", name), ErrInvalid)
	}
	listed, err := decodeManifest(manifest)
	if err != nil {
		return RestoreStats{}, errors.Mark(errors.Wrapf(err, "catalog: %s", ManifestName), ErrInvalid)
	}
	if err := boundManifest(listed, opts); err != nil {
		return RestoreStats{}, err
	}
	name, size, r, err = src.Next()
	if err != nil && err != io.EOF {
		return RestoreStats{}, err
	}
	if err == nil && name == SignatureName {
		sig, rerr := io.ReadAll(io.LimitReader(r, min(max(size, 0), 1024)))
		if opts.SignKey != nil && (rerr != nil || !hmac.Equal(sig, signManifest(opts.SignKey, manifest))) {
			return RestoreStats{}, errors.Wrapf(ErrSignature, "%s does not match this key", SignatureName)
		}
		name, size, r, err = src.Next()
		if err != nil && err != io.EOF {
			return RestoreStats{}, err
		}
	} else if opts.SignKey != nil {
		return RestoreStats{}, errors.Wrapf(ErrSignature, "the backup is not signed (no %s after the manifest)", SignatureName)
	}
	stage, err := stageDir(target)
	if err != nil {
		return RestoreStats{}, err
	}
	committed := false
	defer func() {
		if !committed {
			_ = os.RemoveAll(stage)
		}
	}()
	got := map[string]entry{}
	for ; err != io.EOF; name, size, r, err = src.Next() {
		if err != nil {
			return RestoreStats{}, err
		}
		if err := ctx.Err(); err != nil {
			return RestoreStats{}, errors.Wrap(err, "catalog: restore")
		}
		want, ok := listed[name]
		switch {
		case entryKind(name) == "":
			return RestoreStats{}, errors.Wrapf(ErrInvalid, "unexpected entry %q", name)
		case !ok:
			return RestoreStats{}, errors.Wrapf(ErrInvalid, "entry %s is not listed in the manifest", name)
		case got[name].name != "":
			return RestoreStats{}, errors.Wrapf(ErrInvalid, "entry %s appears twice", name)
		case size != want.size:
			return RestoreStats{}, errors.Wrapf(ErrInvalid, "entry %s: %d bytes, the manifest lists %d", name, size, want.size)
		}
		sum, err := writeStaged(stage, name, size, r)
		if err != nil {
			return RestoreStats{}, err
		}
		got[name] = entry{name: name, size: size, sum: sum}
	}
	st, err := checkRestored(stage, listed, got, opts)
	if err != nil {
		return RestoreStats{}, err
	}
	if opts.Verify != nil {
		if err := opts.Verify(ctx, stage); err != nil {
			return RestoreStats{}, errors.Wrap(err, "catalog: restored catalog does not open")
		}
	}
	if err := commitStage(stage, target); err != nil {
		return RestoreStats{}, err
	}
	committed = true
	return st, nil
}

// boundManifest checks the counts and sizes a manifest lists against the
// restore's bounds (Restore's comment), before anything is written.
func boundManifest(listed map[string]entry, opts RestoreOptions) error {
	q := opts.Quotas
	allowed := map[string]bool{} // owner directories of opts.Tenants
	for _, t := range opts.Tenants {
		allowed[pathBase(catalog.TenantOwnersDir(t))] = true
	}
	var services, artifacts int
	var artifactBytes int64
	owners := map[string]int{} // per owner directory (tenant)
	for _, name := range slices.Sorted(mapKeys(listed)) {
		e := listed[name]
		limit := int64(maxSmallRecordBytes)
		switch entryKind(name) {
		case "service":
			services++
			limit = catalog.MaxRecordBytes
		case "owner":
			dir := strings.Split(name, "/")[2]
			if opts.Tenants != nil && !allowed[dir] {
				return errors.Wrapf(ErrInvalid, "entry %s: ownership for a tenant the configuration does not name", name)
			}
			owners[dir]++
			if owners[dir] > q.MaxArtifactsPerTenant {
				return errors.Wrapf(ErrInvalid, "the manifest lists more than %d ownership records of one tenant (max_artifacts_per_tenant)",
					q.MaxArtifactsPerTenant)
			}
		case "artifact":
			artifacts++
			artifactBytes += e.size
			limit = opts.MaxArtifactBytes
		}
		if e.size > limit {
			return errors.Wrapf(ErrInvalid, "entry %s: %d bytes, at most %d allowed", name, e.size, limit)
		}
	}
	total := 0
	for _, n := range owners {
		total += n
	}
	switch {
	case services > q.MaxServices:
		return errors.Wrapf(ErrInvalid, "the manifest lists %d services, more than %d (max_services)", services, q.MaxServices)
	case artifacts > total:
		return errors.Wrapf(ErrInvalid, "the manifest lists %d artifacts but %d ownership records", artifacts, total)
	case artifactBytes > int64(len(owners))*q.MaxArtifactBytesPerTenant:
		return errors.Wrapf(ErrInvalid, "the manifest lists %d bytes of artifacts, more than %d tenants may own (max_artifact_bytes_per_tenant)",
			artifactBytes, len(owners))
	}
	return nil
}

// checkRestored verifies the staged entries against the manifest and each
// other, and the catalog they make against opts's tenants and quotas.
func checkRestored(stage string, listed, got map[string]entry, opts RestoreOptions) (RestoreStats, error) {
	var st RestoreStats
	for _, name := range slices.Sorted(mapKeys(listed)) {
		want, g := listed[name], got[name]
		switch {
		case g.name == "":
			return st, errors.Wrapf(ErrInvalid, "entry %s is listed in the manifest but missing", name)
		case g.size != want.size || g.sum != want.sum:
			return st, errors.Wrapf(ErrInvalid, "entry %s does not match its sha256 in the manifest", name)
		}
	}
	q := opts.Quotas
	store := layoutRoot(stage)
	tenantOK := func(t vocab.TenantID) bool { return opts.Tenants == nil || slices.Contains(opts.Tenants, t) }
	owned := map[vocab.TenantID]map[vocab.Digest]int64{} // per tenant: the artifacts it owns and their sizes
	artifacts := map[string]int64{}
	for _, name := range slices.Sorted(mapKeys(got)) {
		e := got[name]
		if _, ok := listed[name]; !ok {
			return st, errors.Wrapf(ErrInvalid, "entry %s is not listed in the manifest", name)
		}
		st.Bytes += e.size
		if entryKind(name) == "artifact" {
			if hex.EncodeToString(e.sum[:]) != pathBase(name) {
				return st, errors.Wrapf(ErrInvalid, "artifact %s does not match its digest", name)
			}
			artifacts[pathBase(name)] = e.size
			st.Artifacts++
		}
	}
	// Ownership first: services are checked against it.
	latest := q.Clock.Now().Add(maxUploadSkew).UnixNano()
	var services []catalog.ServiceRecord
	for _, name := range slices.Sorted(mapKeys(got)) {
		kind := entryKind(name)
		if kind == "artifact" {
			continue
		}
		data, _, err := readFile(store.path(name), catalog.MaxRecordBytes)
		if err != nil {
			return st, err
		}
		switch kind {
		case "state":
			gen, err := catalog.DecodeStateRecord(data)
			if err != nil {
				return st, errors.Mark(errors.Wrapf(err, "catalog: backup entry %s", name), ErrInvalid)
			}
			st.Generation = max(st.Generation, gen)
		case "owner":
			rec, err := catalog.DecodeOwnerRecord(data)
			if err != nil {
				return st, errors.Mark(errors.Wrapf(err, "catalog: backup entry %s", name), ErrInvalid)
			}
			if _, err := vocab.ParseDigest(string(rec.Digest)); err != nil || catalog.OwnerRecordPath(rec.Tenant, rec.Digest) != name {
				return st, errors.Wrapf(ErrInvalid, "ownership record %s names another tenant or artifact", name)
			}
			if !tenantOK(rec.Tenant) {
				return st, errors.Wrapf(ErrInvalid, "ownership record %s: tenant %q is not in the configuration", name, rec.Tenant)
			}
			size, ok := artifacts[rec.Digest.Hex()]
			if !ok || uint64(size) != rec.Bytes {
				return st, errors.Wrapf(ErrInvalid, "ownership record %s: its artifact is missing or of another size", name)
			}
			if rec.Uploaded > latest {
				return st, errors.Wrapf(ErrInvalid, "ownership record %s: uploaded in the future (%s)", name,
					time.Unix(0, rec.Uploaded).UTC().Format(time.RFC3339))
			}
			if owned[rec.Tenant] == nil {
				owned[rec.Tenant] = map[vocab.Digest]int64{}
			}
			owned[rec.Tenant][rec.Digest] = size
			st.Owners++
		case "service":
			rec, err := catalog.DecodeServiceRecord(data)
			if err != nil {
				return st, errors.Mark(errors.Wrapf(err, "catalog: backup entry %s", name), ErrInvalid)
			}
			if rec.Manifest.Tenant != rec.Tenant || rec.Manifest.Service != rec.Service || catalog.ServiceRecordPath(rec.Tenant, rec.Service) != name {
				return st, errors.Wrapf(ErrInvalid, "service record %s names another service", name)
			}
			if !tenantOK(rec.Tenant) {
				return st, errors.Wrapf(ErrInvalid, "service record %s: tenant %q is not in the configuration", name, rec.Tenant)
			}
			services = append(services, rec)
			st.Services++
			st.Generation = max(st.Generation, rec.Generation) // a deploy writes only its record
		}
	}
	if st.Services > 0 && got[catalog.StateFile].name == "" {
		return st, errors.Wrapf(ErrInvalid, "%s is missing", catalog.StateFile)
	}
	// Per tenant, as a deploy checks: its services use only artifacts it
	// owns, their number and deployed bytes within the quotas; and as an
	// upload checks: the bytes it owns.
	perTenant := map[vocab.TenantID]int{}
	deployed := map[vocab.TenantID]map[vocab.Digest]bool{}
	for _, rec := range services {
		t := rec.Tenant
		perTenant[t]++
		if perTenant[t] > q.MaxServicesPerTenant {
			return st, errors.Wrapf(ErrInvalid, "tenant %q has more than %d services (max_services_per_tenant)", t, q.MaxServicesPerTenant)
		}
		if deployed[t] == nil {
			deployed[t] = map[vocab.Digest]bool{}
		}
		for _, r := range rec.Manifest.Revisions {
			if _, err := vocab.ParseDigest(string(r.Artifact)); err != nil {
				return st, errors.Wrapf(ErrInvalid, "service %s/%s names an invalid artifact", t, rec.Service)
			}
			if _, ok := owned[t][r.Artifact]; !ok {
				return st, errors.Wrapf(ErrInvalid, "service %s/%s: artifact %s is not owned by tenant %q", t, rec.Service, r.Artifact, t)
			}
			deployed[t][r.Artifact] = true
		}
	}
	for _, t := range slices.Sorted(maps.Keys(deployed)) {
		var sum int64
		for d := range deployed[t] {
			sum += owned[t][d]
		}
		if sum > q.MaxDeployedBytesPerTenant {
			return st, errors.Wrapf(ErrInvalid, "tenant %q deploys %d bytes of artifacts, more than %d (max_deployed_bytes_per_tenant)",
				t, sum, q.MaxDeployedBytesPerTenant)
		}
	}
	ownedBy := map[string]bool{}
	for _, t := range slices.Sorted(maps.Keys(owned)) {
		var sum int64
		for d, size := range owned[t] {
			sum += size
			ownedBy[d.Hex()] = true
		}
		if sum > q.MaxArtifactBytesPerTenant {
			return st, errors.Wrapf(ErrInvalid, "tenant %q owns %d bytes of artifacts, more than %d (max_artifact_bytes_per_tenant)",
				t, sum, q.MaxArtifactBytesPerTenant)
		}
	}
	// An artifact nobody owns would be deleted by Open: refuse it instead,
	// a backup never holds one.
	for _, h := range slices.Sorted(mapKeys(artifacts)) {
		if !ownedBy[h] {
			return st, errors.Wrapf(ErrInvalid, "artifact %s has no ownership record", h)
		}
	}
	return st, nil
}

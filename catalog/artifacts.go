package catalog

import (
	"context"
	"encoding/json"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/latent-node/latent-node/vocab"
)

// ErrTenantQuota marks a refusal because a tenant reached one of its own
// bounds (Options.MaxServicesPerTenant, MaxArtifactsPerTenant,
// MaxArtifactBytesPerTenant, MaxDeployedBytesPerTenant). The error is a
// *QuotaError. It is not transient: the tenant must delete services, deploy
// smaller releases or let unused artifacts be collected.
var ErrTenantQuota = errors.New("catalog: tenant quota exceeded")

// Dimensions of a QuotaError.
const (
	QuotaServices      = "services"
	QuotaArtifacts     = "artifacts"
	QuotaArtifactBytes = "artifact-bytes"
	QuotaDeployedBytes = "deployed-bytes"
)

// QuotaError is a refusal for a tenant quota: which one, its limit, and what
// the tenant used before the refused request (services deployed, artifacts
// owned, bytes of the artifacts owned, bytes of the distinct artifacts its
// services use). errors.Is(err, ErrTenantQuota) holds.
type QuotaError struct {
	Dimension string
	Limit     uint64
	Used      uint64
}

func (e *QuotaError) Error() string {
	return "catalog: tenant quota exceeded: " + e.Dimension + " (limit " + strconv.FormatUint(e.Limit, 10) +
		", used " + strconv.FormatUint(e.Used, 10) + ")"
}

// Is makes errors.Is(err, ErrTenantQuota) hold.
func (e *QuotaError) Is(target error) bool { return target == ErrTenantQuota }

// ownership is one tenant's claim on a stored artifact.
type ownership struct {
	size     uint64
	uploaded time.Time
}

// tenantArtifacts is what one tenant owns.
type tenantArtifacts struct {
	owned map[vocab.Digest]ownership
	bytes uint64 // sum of the sizes owned
}

// owns reports whether tenant owns d now.
func (c *Catalog) owns(tenant vocab.TenantID, d vocab.Digest) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ownsLocked(tenant, d)
}

// REQUIRES: c.mu held.
func (c *Catalog) ownsLocked(tenant vocab.TenantID, d vocab.Digest) bool {
	ta := c.mu.owners[tenant]
	if ta == nil {
		return false
	}
	_, ok := ta.owned[d]
	return ok
}

// REQUIRES: c.mu held (or the catalog not yet shared).
func (c *Catalog) addOwnerLocked(tenant vocab.TenantID, d vocab.Digest, o ownership) {
	ta := c.mu.owners[tenant]
	if ta == nil {
		ta = &tenantArtifacts{owned: map[vocab.Digest]ownership{}}
		c.mu.owners[tenant] = ta
	}
	if prev, ok := ta.owned[d]; ok {
		ta.bytes -= prev.size
	} else {
		c.mu.blobOwners[d]++
	}
	ta.owned[d] = o
	ta.bytes += o.size
}

// REQUIRES: c.mu held.
func (c *Catalog) dropOwnerLocked(tenant vocab.TenantID, d vocab.Digest) {
	ta := c.mu.owners[tenant]
	o, ok := ta.owned[d]
	if !ok {
		return
	}
	delete(ta.owned, d)
	ta.bytes -= o.size
	if len(ta.owned) == 0 {
		delete(c.mu.owners, tenant)
	}
	if c.mu.blobOwners[d]--; c.mu.blobOwners[d] <= 0 {
		delete(c.mu.blobOwners, d)
	}
}

// artifactRoom reports whether tenant may take ownership of d of size
// bytes. Owning it already always fits (a new upload only refreshes it).
//
// REQUIRES: c.mu held.
func (c *Catalog) artifactRoomLocked(tenant vocab.TenantID, d vocab.Digest, size uint64) error {
	ta := c.mu.owners[tenant]
	if ta == nil {
		ta = &tenantArtifacts{}
	}
	if _, ok := ta.owned[d]; ok {
		return nil
	}
	if n := len(ta.owned); n >= c.opts.MaxArtifactsPerTenant {
		return &QuotaError{Dimension: QuotaArtifacts, Limit: uint64(c.opts.MaxArtifactsPerTenant), Used: uint64(n)}
	}
	if limit := uint64(c.opts.MaxArtifactBytesPerTenant); ta.bytes+size > limit || ta.bytes > limit {
		return &QuotaError{Dimension: QuotaArtifactBytes, Limit: limit, Used: ta.bytes}
	}
	return nil
}

// PutArtifact stores a module under its digest for tenant, verifying the
// digest while writing. The bytes are stored once whichever tenants upload
// them; each uploading tenant gets its own ownership record, stamped with
// Options.Clock, and only the tenant's own artifacts are visible to its
// deploys. Uploading an artifact the tenant owns again is harmless and
// restarts its grace period (see CollectGarbage). A new artifact beyond the
// tenant's artifact count or byte quota is refused with ErrTenantQuota; the
// count is checked before the bytes are read. A full disk gives
// ErrStorageFull.
func (c *Catalog) PutArtifact(ctx context.Context, tenant vocab.TenantID, d vocab.Digest, r io.Reader) error {
	return c.putArtifact(ctx, tenant, d, r, true)
}

// PutReleaseArtifact is PutArtifact for an artifact a release published
// elsewhere names (a cluster's peer fetching what it must apply): the
// tenant's artifact quotas on this node are not checked — the release was
// admitted where it was deployed, and a tenant that filled its upload
// quota on one node must not keep that node from applying the cluster's
// releases — but the artifact counts towards them, so the tenant's further
// uploads here wait until it is released. The size bound, the digest check
// and a full disk still refuse it.
func (c *Catalog) PutReleaseArtifact(ctx context.Context, tenant vocab.TenantID, d vocab.Digest, r io.Reader) error {
	return c.putArtifact(ctx, tenant, d, r, false)
}

func (c *Catalog) putArtifact(ctx context.Context, tenant vocab.TenantID, d vocab.Digest, r io.Reader, quota bool) error {
	if err := vocab.ValidatePathName(string(tenant)); err != nil {
		return errors.Mark(errors.Wrap(err, "catalog: artifact tenant"), vocab.ErrInvalidName)
	}
	if _, err := vocab.ParseDigest(string(d)); err != nil {
		return errors.Mark(errors.Wrap(err, "catalog: artifact digest"), vocab.ErrInvalidName)
	}
	if err := ctx.Err(); err != nil {
		return errors.Wrap(err, "catalog: store artifact")
	}
	if quota {
		c.mu.Lock()
		err := c.artifactRoomLocked(tenant, d, 0)
		c.mu.Unlock()
		if err != nil {
			return err
		}
	}
	staged, err := c.store.stageArtifact(d, r, c.opts.MaxArtifactBytes)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := ctx.Err(); err != nil {
		c.store.discard(staged)
		return errors.Wrap(err, "catalog: store artifact")
	}
	size := uint64(staged.size)
	if quota {
		if err := c.artifactRoomLocked(tenant, d, size); err != nil {
			c.store.discard(staged)
			return err
		}
	}
	if err := c.store.commitArtifact(staged, d); err != nil {
		c.removeUnownedLocked(d)
		return err
	}
	o := ownership{size: size, uploaded: c.opts.Clock.Now()}
	if err := c.writeOwnerLocked(tenant, d, o); err != nil {
		c.removeUnownedLocked(d)
		return err
	}
	c.addOwnerLocked(tenant, d, o)
	return nil
}

// writeOwnerLocked persists tenant's ownership of d.
//
// REQUIRES: c.mu held.
func (c *Catalog) writeOwnerLocked(tenant vocab.TenantID, d vocab.Digest, o ownership) error {
	payload, err := json.Marshal(OwnerRecord{Tenant: tenant, Digest: d, Bytes: o.size, Uploaded: o.uploaded.UnixNano()})
	if err != nil {
		return errors.Wrap(err, "catalog: encode ownership")
	}
	if err := c.store.mkdir(TenantOwnersDir(tenant)); err != nil {
		return err
	}
	return c.store.writeAtomic(OwnerRecordPath(tenant, d), encodeRecord("owner", payload))
}

// removeUnownedLocked deletes the stored artifact d if no tenant owns it
// (after a failed upload). Best effort: Open deletes what it leaves.
//
// REQUIRES: c.mu held.
func (c *Catalog) removeUnownedLocked(d vocab.Digest) {
	if c.mu.blobOwners[d] == 0 {
		_ = os.Remove(c.store.artifactPath(d))
	}
}

// GCStats says what one CollectGarbage call did.
type GCStats struct {
	// Released counts ownerships removed (a tenant's unused, expired artifacts).
	Released int
	// Deleted counts stored artifacts deleted because no tenant owned them any more.
	Deleted int
	// DeletedBytes is the size of the deleted artifacts.
	DeletedBytes uint64
	// DeletedDigests names them (a cluster member gives up holding them).
	DeletedDigests []vocab.Digest
}

// CollectGarbage removes every tenant's ownership of the artifacts that none
// of that tenant's services in the current view uses and that were uploaded
// more than Options.ArtifactGrace before now; an artifact no tenant owns any
// more is deleted. It holds the catalog's lock, so a concurrent deploy either
// published first (its artifacts are in use and kept) or finds the artifact
// gone and refuses it as unknown: no release ever names a deleted artifact.
// Old pins are unaffected (they never read artifacts). It starts nothing;
// the node calls it periodically. On error (ctx done, a file that cannot be
// removed) it returns what it did so far.
func (c *Catalog) CollectGarbage(ctx context.Context, now time.Time) (GCStats, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.collectGarbageLocked(ctx, now, true)
}

// PlanGarbage returns what CollectGarbage(ctx, now) would do now, changing
// nothing (a dry run).
func (c *Catalog) PlanGarbage(now time.Time) GCStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	st, _ := c.collectGarbageLocked(context.Background(), now, false)
	return st
}

// collectGarbageLocked is CollectGarbage; with apply false it only counts.
//
// REQUIRES: c.mu held.
func (c *Catalog) collectGarbageLocked(ctx context.Context, now time.Time, apply bool) (GCStats, error) {
	var st GCStats
	dropped := map[vocab.Digest]int{} // ownerships a dry run would drop, per artifact
	used := func(t vocab.TenantID, d vocab.Digest) bool { u := c.mu.use[t]; return u != nil && u.artifacts[d] > 0 }
	tenants := slices.Sorted(maps.Keys(c.mu.owners))
	for _, t := range tenants {
		digests := slices.Sorted(maps.Keys(c.mu.owners[t].owned))
		for _, d := range digests {
			o := c.mu.owners[t].owned[d]
			if used(t, d) || now.Sub(o.uploaded) <= c.opts.ArtifactGrace {
				continue
			}
			if !apply {
				st.Released++
				if dropped[d]++; dropped[d] == c.mu.blobOwners[d] {
					st.Deleted++
					st.DeletedBytes += o.size
					st.DeletedDigests = append(st.DeletedDigests, d)
				}
				continue
			}
			if err := ctx.Err(); err != nil {
				return st, errors.Wrap(err, "catalog: collect garbage")
			}
			if err := c.store.remove(OwnerRecordPath(t, d)); err != nil {
				return st, err
			}
			c.dropOwnerLocked(t, d)
			st.Released++
			if c.mu.blobOwners[d] > 0 {
				continue
			}
			if err := c.store.remove(ArtifactsDir + "/" + d.Hex()); err != nil {
				return st, err
			}
			st.Deleted++
			st.DeletedBytes += o.size
			st.DeletedDigests = append(st.DeletedDigests, d)
		}
	}
	return st, nil
}

// loadOwners reads every ownership record. A record must decode, sit under
// its tenant's and digest's names, and its artifact must exist with the
// recorded size; anything else is ErrCorruptRecord naming the file.
func (c *Catalog) loadOwners() error {
	c.mu.owners = map[vocab.TenantID]*tenantArtifacts{}
	c.mu.blobOwners = map[vocab.Digest]int{}
	root := c.store.path(OwnersDir)
	dirs, err := os.ReadDir(root)
	if err != nil {
		return errors.Wrapf(err, "catalog: read %s", root)
	}
	for _, dir := range dirs {
		dirName := filepath.Join(root, dir.Name())
		if !dir.IsDir() || len(dir.Name()) != 64 || !vocab.IsLowerHex(dir.Name()) {
			return errors.Wrapf(ErrCorruptRecord, "catalog: %s: unexpected file in the ownership directory", dirName)
		}
		if err := removeTemps(dirName); err != nil {
			return err
		}
		files, err := os.ReadDir(dirName)
		if err != nil {
			return errors.Wrapf(err, "catalog: read %s", dirName)
		}
		for _, f := range files {
			name := filepath.Join(dirName, f.Name())
			if err := c.loadOwner(dir.Name(), f.Name(), name); err != nil {
				return errors.Mark(errors.Wrapf(err, "catalog: %s", name), ErrCorruptRecord)
			}
		}
	}
	return nil
}

func (c *Catalog) loadOwner(dir, file, name string) error {
	if !strings.HasSuffix(file, ".rec") {
		return errors.New("not an ownership record (unexpected file in the ownership directory)")
	}
	data, err := readBounded(name, 4096)
	if err != nil {
		return err
	}
	var rec OwnerRecord
	if err := decodeRecord("owner", data, &rec); err != nil {
		return err
	}
	if vocab.ValidatePathName(string(rec.Tenant)) != nil {
		return errors.New("record names an invalid tenant")
	}
	if _, err := vocab.ParseDigest(string(rec.Digest)); err != nil {
		return errors.New("record names an invalid digest")
	}
	if OwnerRecordPath(rec.Tenant, rec.Digest) != OwnersDir+"/"+dir+"/"+file {
		return errors.New("record is stored under another tenant's or artifact's name")
	}
	art := c.store.artifactPath(rec.Digest)
	fi, err := os.Stat(art)
	switch {
	case err != nil:
		return errors.Wrap(err, "the owned artifact")
	case !fi.Mode().IsRegular() || uint64(fi.Size()) != rec.Bytes:
		return errors.Newf("the owned artifact %s does not have the recorded size", art)
	}
	c.addOwnerLocked(rec.Tenant, rec.Digest, ownership{size: rec.Bytes, uploaded: time.Unix(0, rec.Uploaded)})
	return nil
}

// settleArtifacts makes ownership and storage agree after a restart: a
// tenant's service using an artifact the tenant does not own gets the
// ownership (stamped now; a data directory written before artifacts had
// owners), and a stored artifact nobody owns (a crash between writing it and
// its ownership record, or between removing both) is deleted.
//
// REQUIRES: c.mu held.
func (c *Catalog) settleArtifactsLocked(snap *snapshot) error {
	var err error
	snap.each(func(svc *service) bool {
		for _, d := range svc.artifacts() {
			if c.ownsLocked(svc.tenant, d) {
				continue
			}
			var fi os.FileInfo
			if fi, err = os.Stat(c.store.artifactPath(d)); err != nil {
				err = errors.Wrap(err, "catalog: adopt artifact")
				return false
			}
			o := ownership{size: uint64(fi.Size()), uploaded: c.opts.Clock.Now()}
			if err = c.writeOwnerLocked(svc.tenant, d, o); err != nil {
				return false
			}
			c.addOwnerLocked(svc.tenant, d, o)
		}
		return true
	})
	if err != nil {
		return err
	}
	dir := c.store.path(ArtifactsDir)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return errors.Wrapf(err, "catalog: read %s", dir)
	}
	removed := false
	for _, e := range entries {
		if len(e.Name()) != 64 || !vocab.IsLowerHex(e.Name()) || !e.Type().IsRegular() {
			continue
		}
		d := vocab.Digest(vocab.DigestPrefix + e.Name())
		if c.mu.blobOwners[d] > 0 {
			continue
		}
		if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
			return errors.Wrapf(err, "catalog: remove unowned %s", filepath.Join(dir, e.Name()))
		}
		removed = true
	}
	if removed {
		return syncDir(dir)
	}
	return nil
}

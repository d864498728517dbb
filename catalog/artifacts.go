// Artifacts, the catalog's artifact store: uploads, each tenant's
// ownership, the tenants' artifact quotas (QuotaError) and garbage
// collection.

package catalog

import (
	"context"
	"encoding/json"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/latent-node/latent-node/vocab"
)

// ErrTenantQuota marks a refusal because a tenant reached one of its own
// bounds (Config.MaxServicesPerTenant, MaxArtifactsPerTenant,
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

// Artifacts is a catalog's artifact store: the stored modules, each
// tenant's ownership of them, the tenants' artifact quotas and garbage
// collection. A Catalog holds one (Catalog.Artifacts). It shares the
// catalog's lock: a deploy checks ownership and garbage collection reads
// what the services use under the same lock (the package's locking
// section).
type Artifacts struct {
	mu    *sync.Mutex // the catalog's lock (Catalog.mu)
	idx   *index      // the catalog's index, read for what services use; guarded by *mu
	store *diskStore
	opts  Config

	owned struct { // guarded by *mu
		tenants map[vocab.TenantID]*tenantArtifacts
		blobs   map[vocab.Digest]int // number of tenants owning each stored artifact
	}
}

// newArtifacts is the artifact store of a catalog whose lock is mu and
// whose index is idx; load fills it.
func newArtifacts(mu *sync.Mutex, idx *index, store *diskStore, opts Config) *Artifacts {
	return &Artifacts{mu: mu, idx: idx, store: store, opts: opts}
}

// Has reports whether tenant owns the stored artifact d now: whether the
// tenant's releases may use it.
func (a *Artifacts) Has(tenant vocab.TenantID, d vocab.Digest) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.ownsLocked(tenant, d)
}

// REQUIRES: *a.mu held.
func (a *Artifacts) ownsLocked(tenant vocab.TenantID, d vocab.Digest) bool {
	ta := a.owned.tenants[tenant]
	if ta == nil {
		return false
	}
	_, ok := ta.owned[d]
	return ok
}

// REQUIRES: *a.mu held (or the catalog not yet shared).
func (a *Artifacts) addLocked(tenant vocab.TenantID, d vocab.Digest, o ownership) {
	ta := a.owned.tenants[tenant]
	if ta == nil {
		ta = &tenantArtifacts{owned: map[vocab.Digest]ownership{}}
		a.owned.tenants[tenant] = ta
	}
	if prev, ok := ta.owned[d]; ok {
		ta.bytes -= prev.size
	} else {
		a.owned.blobs[d]++
	}
	ta.owned[d] = o
	ta.bytes += o.size
}

// REQUIRES: *a.mu held.
func (a *Artifacts) dropLocked(tenant vocab.TenantID, d vocab.Digest) {
	ta := a.owned.tenants[tenant]
	o, ok := ta.owned[d]
	if !ok {
		return
	}
	delete(ta.owned, d)
	ta.bytes -= o.size
	if len(ta.owned) == 0 {
		delete(a.owned.tenants, tenant)
	}
	if a.owned.blobs[d]--; a.owned.blobs[d] <= 0 {
		delete(a.owned.blobs, d)
	}
}

// roomLocked reports whether tenant may take ownership of d of size
// bytes. Owning it already always fits (a new upload only refreshes it).
//
// REQUIRES: *a.mu held.
func (a *Artifacts) roomLocked(tenant vocab.TenantID, d vocab.Digest, size uint64) error {
	ta := a.owned.tenants[tenant]
	if ta == nil {
		ta = &tenantArtifacts{}
	}
	if _, ok := ta.owned[d]; ok {
		return nil
	}
	if n := len(ta.owned); n >= a.opts.MaxArtifactsPerTenant {
		return &QuotaError{Dimension: QuotaArtifacts, Limit: uint64(a.opts.MaxArtifactsPerTenant), Used: uint64(n)}
	}
	if limit := uint64(a.opts.MaxArtifactBytesPerTenant); ta.bytes+size > limit || ta.bytes > limit {
		return &QuotaError{Dimension: QuotaArtifactBytes, Limit: limit, Used: ta.bytes}
	}
	return nil
}

// Put stores a module under its digest for tenant, verifying the
// digest while writing. The bytes are stored once whichever tenants upload
// them; each uploading tenant gets its own ownership record, stamped with
// Config.Clock, and only the tenant's own artifacts are visible to its
// deploys. Uploading an artifact the tenant owns again is harmless and
// restarts its grace period (see CollectGarbage). A new artifact beyond the
// tenant's artifact count or byte quota is refused with ErrTenantQuota; the
// count is checked before the bytes are read. A full disk gives
// ErrStorageFull.
func (a *Artifacts) Put(ctx context.Context, tenant vocab.TenantID, d vocab.Digest, r io.Reader) error {
	return a.put(ctx, tenant, d, r, true)
}

// PutRelease is Put for an artifact a release published
// elsewhere names (a cluster's peer fetching what it must apply): the
// tenant's artifact quotas on this node are not checked — the release was
// admitted where it was deployed, and a tenant that filled its upload
// quota on one node must not keep that node from applying the cluster's
// releases — but the artifact counts towards them, so the tenant's further
// uploads here wait until it is released. The size bound, the digest check
// and a full disk still refuse it.
func (a *Artifacts) PutRelease(ctx context.Context, tenant vocab.TenantID, d vocab.Digest, r io.Reader) error {
	return a.put(ctx, tenant, d, r, false)
}

func (a *Artifacts) put(ctx context.Context, tenant vocab.TenantID, d vocab.Digest, r io.Reader, quota bool) error {
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
		a.mu.Lock()
		err := a.roomLocked(tenant, d, 0)
		a.mu.Unlock()
		if err != nil {
			return err
		}
	}
	staged, err := a.store.stageArtifact(d, r, a.opts.MaxArtifactBytes)
	if err != nil {
		return err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if err := ctx.Err(); err != nil {
		a.store.discard(staged)
		return errors.Wrap(err, "catalog: store artifact")
	}
	size := uint64(staged.size)
	if quota {
		if err := a.roomLocked(tenant, d, size); err != nil {
			a.store.discard(staged)
			return err
		}
	}
	if err := a.store.commitArtifact(staged, d); err != nil {
		a.removeUnownedLocked(d)
		return err
	}
	o := ownership{size: size, uploaded: a.opts.Clock.Now()}
	if err := a.writeOwnerLocked(tenant, d, o); err != nil {
		a.removeUnownedLocked(d)
		return err
	}
	a.addLocked(tenant, d, o)
	return nil
}

// writeOwnerLocked persists tenant's ownership of d.
//
// REQUIRES: *a.mu held.
func (a *Artifacts) writeOwnerLocked(tenant vocab.TenantID, d vocab.Digest, o ownership) error {
	payload, err := json.Marshal(OwnerRecord{Tenant: tenant, Digest: d, Bytes: o.size, Uploaded: o.uploaded.UnixNano()})
	if err != nil {
		return errors.Wrap(err, "catalog: encode ownership")
	}
	if err := a.store.mkdir(TenantOwnersDir(tenant)); err != nil {
		return err
	}
	return a.store.writeAtomic(OwnerRecordPath(tenant, d), encodeRecord("owner", payload))
}

// removeUnownedLocked deletes the stored artifact d if no tenant owns it
// (after a failed upload). Best effort: Open deletes what it leaves.
//
// REQUIRES: *a.mu held.
func (a *Artifacts) removeUnownedLocked(d vocab.Digest) {
	if a.owned.blobs[d] == 0 {
		_ = os.Remove(a.store.artifactPath(d))
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
// more than Config.ArtifactGrace before now; an artifact no tenant owns any
// more is deleted. It holds the catalog's lock, so a concurrent deploy either
// published first (its artifacts are in use and kept) or finds the artifact
// gone and refuses it as unknown: no release ever names a deleted artifact.
// Old pins are unaffected (they never read artifacts). It starts nothing;
// the node calls it periodically. On error (ctx done, a file that cannot be
// removed) it returns what it did so far.
func (a *Artifacts) CollectGarbage(ctx context.Context, now time.Time) (GCStats, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.collectLocked(ctx, now, true)
}

// PlanGarbage returns what CollectGarbage(ctx, now) would do now, changing
// nothing (a dry run).
func (a *Artifacts) PlanGarbage(now time.Time) GCStats {
	a.mu.Lock()
	defer a.mu.Unlock()
	st, _ := a.collectLocked(context.Background(), now, false)
	return st
}

// collectLocked is CollectGarbage; with apply false it only counts.
//
// REQUIRES: *a.mu held.
func (a *Artifacts) collectLocked(ctx context.Context, now time.Time, apply bool) (GCStats, error) {
	var st GCStats
	dropped := map[vocab.Digest]int{} // ownerships a dry run would drop, per artifact
	tenants := slices.Sorted(maps.Keys(a.owned.tenants))
	for _, t := range tenants {
		digests := slices.Sorted(maps.Keys(a.owned.tenants[t].owned))
		for _, d := range digests {
			o := a.owned.tenants[t].owned[d]
			if a.idx.uses(t, d) || now.Sub(o.uploaded) <= a.opts.ArtifactGrace {
				continue
			}
			if !apply {
				st.Released++
				if dropped[d]++; dropped[d] == a.owned.blobs[d] {
					st.Deleted++
					st.DeletedBytes += o.size
					st.DeletedDigests = append(st.DeletedDigests, d)
				}
				continue
			}
			if err := ctx.Err(); err != nil {
				return st, errors.Wrap(err, "catalog: collect garbage")
			}
			if err := a.store.remove(OwnerRecordPath(t, d)); err != nil {
				return st, err
			}
			a.dropLocked(t, d)
			st.Released++
			if a.owned.blobs[d] > 0 {
				continue
			}
			if err := a.store.remove(ArtifactsDir + "/" + d.Hex()); err != nil {
				return st, err
			}
			st.Deleted++
			st.DeletedBytes += o.size
			st.DeletedDigests = append(st.DeletedDigests, d)
		}
	}
	return st, nil
}

// load reads every ownership record. A record must decode, sit under
// its tenant's and digest's names, and its artifact must exist with the
// recorded size; anything else is ErrCorruptRecord naming the file.
func (a *Artifacts) load() error {
	a.owned.tenants = map[vocab.TenantID]*tenantArtifacts{}
	a.owned.blobs = map[vocab.Digest]int{}
	root := a.store.path(OwnersDir)
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
			if err := a.loadOwner(dir.Name(), f.Name(), name); err != nil {
				return errors.Mark(errors.Wrapf(err, "catalog: %s", name), ErrCorruptRecord)
			}
		}
	}
	return nil
}

func (a *Artifacts) loadOwner(dir, file, name string) error {
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
	art := a.store.artifactPath(rec.Digest)
	fi, err := os.Stat(art)
	switch {
	case err != nil:
		return errors.Wrap(err, "the owned artifact")
	case !fi.Mode().IsRegular() || uint64(fi.Size()) != rec.Bytes:
		return errors.Newf("the owned artifact %s does not have the recorded size", art)
	}
	a.addLocked(rec.Tenant, rec.Digest, ownership{size: rec.Bytes, uploaded: time.Unix(0, rec.Uploaded)})
	return nil
}

// settleLocked makes ownership and storage agree after a restart: a
// tenant's service using an artifact the tenant does not own gets the
// ownership (stamped now; a data directory written before artifacts had
// owners), and a stored artifact nobody owns (a crash between writing it and
// its ownership record, or between removing both) is deleted.
//
// REQUIRES: *a.mu held.
func (a *Artifacts) settleLocked(snap *snapshot) error {
	var err error
	snap.each(func(svc *service) bool {
		for _, d := range svc.artifacts() {
			if a.ownsLocked(svc.tenant, d) {
				continue
			}
			var fi os.FileInfo
			if fi, err = os.Stat(a.store.artifactPath(d)); err != nil {
				err = errors.Wrap(err, "catalog: adopt artifact")
				return false
			}
			o := ownership{size: uint64(fi.Size()), uploaded: a.opts.Clock.Now()}
			if err = a.writeOwnerLocked(svc.tenant, d, o); err != nil {
				return false
			}
			a.addLocked(svc.tenant, d, o)
		}
		return true
	})
	if err != nil {
		return err
	}
	dir := a.store.path(ArtifactsDir)
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
		if a.owned.blobs[d] > 0 {
			continue
		}
		if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
			return errors.Wrapf(err, "catalog: remove unowned %s", filepath.Join(dir, e.Name()))
		}
		removed = true
	}
	if removed {
		return SyncDir(dir)
	}
	return nil
}

// Get returns the stored bytes of the artifact d (any tenant's), verified
// against d, for a peer that fetches it by digest: ErrArtifactNotFound when
// it is not stored.
func (a *Artifacts) Get(d vocab.Digest) ([]byte, error) {
	return a.store.get(d, a.opts.MaxArtifactBytes)
}

// Open opens the stored artifact d (any tenant's) for reading, for
// a peer that fetches it by digest: served from the file, not read into
// memory. Its bytes are not verified here; the fetching peer verifies the
// digest while it stores them (PutRelease). ErrArtifactNotFound
// when d is not stored; the caller closes the file.
func (a *Artifacts) Open(d vocab.Digest) (*os.File, error) {
	if _, err := vocab.ParseDigest(string(d)); err != nil {
		return nil, ErrArtifactNotFound
	}
	name := a.store.artifactPath(d)
	f, err := os.Open(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, ErrArtifactNotFound
	}
	if err != nil {
		return nil, errors.Wrapf(err, "catalog: open %s", name)
	}
	return f, nil
}

// Size is the size of the artifact d as tenant owns it (0 when it does
// not).
func (a *Artifacts) Size(tenant vocab.TenantID, d vocab.Digest) uint64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.sizeLocked(tenant, d)
}

// sizeLocked is Size.
//
// REQUIRES: *a.mu held.
func (a *Artifacts) sizeLocked(tenant vocab.TenantID, d vocab.Digest) uint64 {
	ta := a.owned.tenants[tenant]
	if ta == nil {
		return 0
	}
	return ta.owned[d].size
}

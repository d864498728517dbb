// The deployment control API: uploads of artifacts, deploys, reads and
// deletes of a tenant's services (and, in list.go, their listing), and
// the answers to the catalog's errors.

package node

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/latent-node/latent-node/admission"
	"github.com/latent-node/latent-node/catalog"
	"github.com/latent-node/latent-node/node/api"
	"github.com/latent-node/latent-node/node/auth"
	"github.com/latent-node/latent-node/refusal"
	"github.com/latent-node/latent-node/runner"
	"github.com/latent-node/latent-node/vocab"
)

// deployments serves the deployment control API. It holds what the routes
// need: the catalog, the runner (whose snapshots follow the catalog),
// admission (a release's revisions are checked against it), the cluster
// (deploys and deletes go through it when the node has one), the metrics
// (a service's series follow its releases) and the per-tenant write bounds.
type deployments struct {
	cat     *catalog.Catalog
	run     *runner.Runner
	prov    *admission.LocalQuotaProvider
	cluster *clusterAPI
	metrics *metrics // nil until New made them
	log     *slog.Logger
	// moduleBytes is deploy_limits.module_bytes, an artifact's bound.
	moduleBytes uint64
	uploads     tenantWrites // uploads in flight, per tenant
	deploys     tenantWrites // deploys in flight, per tenant
}

// appliedFromCluster keeps the activation metrics of a service that a
// change from etcd replaced or deleted in step with the catalog, as a local
// deploy or delete does.
func (d *deployments) appliedFromCluster(t vocab.TenantID, s vocab.ServiceName) {
	if d.metrics == nil {
		return
	}
	var keep []vocab.RevisionRef
	if dep, ok := d.cat.Pin().Deployment(t, s); ok {
		keep = dep.Revisions
	}
	d.metrics.keepRevisions(t, s, keep)
}

// handleArtifact stores an artifact for the caller's own tenant.
func (d *deployments) handleArtifact(w http.ResponseWriter, r *http.Request, p *auth.Principal) {
	digest, err := vocab.ParseDigest(r.PathValue("digest"))
	if err != nil {
		api.WriteProblem(w, badRequest(refusal.ReasonInvalidDigest, refusal.DimDigest, `want "sha256:" followed by 64 lowercase hex digits`), 0)
		return
	}
	limit := int64(d.moduleBytes)
	if r.ContentLength > limit {
		api.WriteProblem(w, tooLarge(refusal.DimArtifactBytes), 0)
		return
	}
	if !d.uploads.begin(p.Tenant) {
		api.WriteProblem(w, writesBusy(), writeRetryAfter)
		return
	}
	defer d.uploads.end(p.Tenant)
	body := &bodyReader{r: http.MaxBytesReader(w, r.Body, limit+1)}
	err = d.cat.Artifacts().Put(r.Context(), p.Tenant, digest, body)
	switch {
	case err == nil:
		api.WriteJSON(w, http.StatusCreated, map[string]string{"artifact": string(digest)})
	case body.err != nil: // the caller's body failed, whatever the catalog made of it
		api.WriteProblem(w, bodyProblem(body.err, refusal.DimArtifactBytes), 0)
	case errors.Is(err, catalog.ErrDigestMismatch):
		api.WriteProblem(w, badRequest(refusal.ReasonDigestMismatch, refusal.DimDigest, "the body does not hash to the digest in the path"), 0)
	case errors.Is(err, catalog.ErrArtifactTooLarge):
		api.WriteProblem(w, tooLarge(refusal.DimArtifactBytes), 0)
	default:
		d.writeCatalogError(w, err)
	}
}

// writeCatalogError answers the catalog errors every write can return.
func (d *deployments) writeCatalogError(w http.ResponseWriter, err error) {
	var qe *catalog.QuotaError
	switch {
	case errors.As(err, &qe):
		prob := quotaExceeded(quotaDimension(qe.Dimension))
		api.WriteProblem(w, prob, 0)
	case errors.Is(err, catalog.ErrTenantQuota):
		prob := quotaExceeded(refusal.DimNone)
		api.WriteProblem(w, prob, 0)
	case isStorageFull(err):
		d.log.Error("storage full", "err", err) // the cause names the path; the answer does not
		prob := insufficientStorage(refusal.DimStorageBytes)
		api.WriteProblem(w, prob, storageRetryAfter)
	case errors.Is(err, runner.ErrCompiledCacheFull):
		d.log.Warn("compiled module cache full", "err", err)
		prob := insufficientStorage(refusal.DimCompiledBytes)
		prob.Detail = "the node holds as many compiled modules as it may; retry once releases are replaced or deleted"
		api.WriteProblem(w, prob, storageRetryAfter)
	case errors.Is(err, catalog.ErrCatalogFull):
		api.WriteProblem(w, api.Refusal(refusal.Refusal{Code: refusal.CodeResourceExhausted, Reason: refusal.ReasonCatalogFull,
			Scope: refusal.ScopeNode, Dimension: refusal.DimServices}), 0)
	default:
		writeAnswer(w, internalAnswer(d.log, err))
	}
}

// isStorageFull reports a write the node's disk could not hold (the
// catalog's or the compilation cache's).
func isStorageFull(err error) bool {
	return errors.Is(err, catalog.ErrStorageFull) || errors.Is(err, runner.ErrStorageFull)
}

// ownTenant refuses deployment requests for another tenant.
func ownTenant(w http.ResponseWriter, r *http.Request, p *auth.Principal) (vocab.TenantID, vocab.ServiceName, bool) {
	t, s := vocab.TenantID(r.PathValue("tenant")), vocab.ServiceName(r.PathValue("service"))
	if t != p.Tenant {
		api.WriteProblem(w, forbidden(refusal.ReasonPrincipalNotAuthorized), 0)
		return "", "", false
	}
	return t, s, true
}

func (d *deployments) handleDeploy(w http.ResponseWriter, r *http.Request, p *auth.Principal) {
	t, s, ok := ownTenant(w, r, p)
	if !ok {
		return
	}
	if !d.deploys.begin(t) {
		api.WriteProblem(w, writesBusy(), writeRetryAfter)
		return
	}
	defer d.deploys.end(t)
	data, prob := readBounded(w, r, vocab.MaxManifestBytes, refusal.DimManifestBytes)
	if prob != nil {
		api.WriteProblem(w, *prob, 0)
		return
	}
	if !json.Valid(data) {
		api.WriteProblem(w, badRequest(refusal.ReasonMalformedBody, refusal.DimBody, "the manifest is not JSON"), 0)
		return
	}
	m, err := vocab.DecodeManifest(bytes.NewReader(data))
	if err == nil && (m.Tenant != t || m.Service != s) {
		err = &vocab.ValidationError{Problems: []vocab.FieldError{{Field: "tenant/service", Problem: "must match the URL path"}}}
	}
	if err == nil {
		err = d.checkRelease(m) // before any module is inspected
	}
	if err == nil && !d.holdModules(w, m) {
		return
	}
	var dep vocab.Deployment
	if err == nil {
		dep, err = d.cluster.deploy(r.Context(), w, m)
	}
	var ve *vocab.ValidationError
	switch {
	case err == nil:
		d.log.Info("deployed", "tenant", string(t), "service", string(s), "release", string(dep.Release), "generation", uint64(dep.Generation))
		d.metrics.keepRevisions(t, s, dep.Revisions)
		api.WriteJSON(w, http.StatusOK, dep)
	case errors.As(err, &ve):
		// Module refusals are field problems too: they name the deploy limit
		// or the import.
		prob := badRequest(refusal.ReasonInvalidManifest, refusal.DimManifest, ve.Error())
		for _, fe := range ve.Problems {
			prob.Fields = append(prob.Fields, api.FieldProblem{Field: fe.Field, Problem: fe.Problem})
		}
		api.WriteProblem(w, prob, 0)
	default:
		if cp, ok := clusterProblem(err); ok {
			api.WriteProblem(w, cp, 0)
			return
		}
		d.writeCatalogError(w, err)
	}
}

func (d *deployments) handleGetDeployment(w http.ResponseWriter, r *http.Request, p *auth.Principal) {
	t, s, ok := ownTenant(w, r, p)
	if !ok {
		return
	}
	dep, m, err := d.cat.Manifest(t, s) // from the service's record: the catalog keeps no manifests in memory
	switch {
	case errors.Is(err, catalog.ErrServiceNotFound):
		api.WriteProblem(w, api.Refusal(revisionNotAvailable.Refusal()), 0)
	case err != nil:
		writeAnswer(w, internalAnswer(d.log, err))
	default:
		api.WriteJSON(w, http.StatusOK, deploymentAnswer{Deployment: dep, Manifest: manifestWire(m)})
	}
}

func (d *deployments) handleDelete(w http.ResponseWriter, r *http.Request, p *auth.Principal) {
	t, s, ok := ownTenant(w, r, p)
	if !ok {
		return
	}
	gen, err := d.cluster.remove(r.Context(), w, t, s)
	cp, isCluster := clusterProblem(err)
	switch {
	case isCluster:
		api.WriteProblem(w, cp, 0)
	case errors.Is(err, catalog.ErrServiceNotFound):
		api.WriteProblem(w, api.Refusal(revisionNotAvailable.Refusal()), 0)
	case err != nil:
		writeAnswer(w, internalAnswer(d.log, err))
	default:
		d.metrics.keepRevisions(t, s, nil)
		api.WriteJSON(w, http.StatusOK, map[string]uint64{"generation": uint64(gen)})
	}
}

// holdModules charges the bytes of the modules m names (those its tenant
// owns: a deploy reads each into memory to inspect it, and may wait for a
// compile slot holding it) to the request's ingress reservation; when they
// do not fit, it answers the refusal and returns false.
func (d *deployments) holdModules(w http.ResponseWriter, m vocab.Manifest) bool {
	var n uint64
	seen := map[vocab.Digest]bool{}
	for _, r := range m.Revisions {
		if !seen[r.Artifact] {
			seen[r.Artifact] = true
			n += d.cat.Artifacts().Size(m.Tenant, r.Artifact)
		}
	}
	return api.Hold(w, n)
}

// logInspect is the catalog's Config.OnInspect: preparing a module of
// 1 MiB or more (a JavaScript engine compiles for 10 s and more on two
// cores), or for 1 s or more, is logged at Info when it starts and ends,
// so a deploy or a restart that compiles does not look hung.
func (n *Node) logInspect(ev catalog.InspectEvent) {
	level, msg := slog.LevelDebug, "preparing a module (instrument and compile)"
	if ev.Bytes >= 1<<20 || ev.Took >= time.Second {
		level = slog.LevelInfo
	}
	attrs := []any{"tenant", string(ev.Tenant), "service", string(ev.Service), "digest", string(ev.Digest), "bytes", ev.Bytes}
	if ev.Done {
		msg, attrs = "prepared a module", append(attrs, "took_ms", ev.Took.Milliseconds(), "err", ev.ErrText())
	}
	n.log.Log(context.Background(), level, msg, attrs...)
}

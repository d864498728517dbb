package node

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"path"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/cockroachdb/errors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/latent-node/latent-node/admission"
	"github.com/latent-node/latent-node/catalog"
	"github.com/latent-node/latent-node/node/api"
	"github.com/latent-node/latent-node/node/auth"
	"github.com/latent-node/latent-node/refusal"
	"github.com/latent-node/latent-node/runner"
	"github.com/latent-node/latent-node/vocab"
)

// Handler returns the node's HTTP API. Every refusal is a problem body, for
// unknown paths and methods too; a panic in a handler is logged and answered
// 500.
func (n *Node) Handler() http.Handler {
	mux := http.NewServeMux()
	// Every API route goes through the ingress governor: invocations in the
	// data pool, the rest in the control pool (see ingress.go).
	payload := func() uint64 { return n.prov.MaxPayloadBytes() }
	module := func() uint64 { return n.cfg.DeployLimits.ModuleBytes }
	manifest := func() uint64 { return vocab.MaxManifestBytes }
	none := func() uint64 { return 0 }
	data, ctl := n.dataPool, n.controlPool
	// Every method and a path suffix reach invoke: a WAGI revision takes
	// them, a stdio revision refuses them once resolved (see wagi.go).
	// Tenant-scoped routes meet one authorization rule before their
	// handler runs (authorized); the admin and cluster routes are not a
	// tenant's.
	tenant := func(pool *ingressPool, routeCap func() uint64, role auth.Roles, h authedHandler) http.HandlerFunc {
		return n.governed(pool, routeCap, role, true, h)
	}
	invoke := tenant(data, payload, auth.Invoke, n.handleInvoke)
	mux.HandleFunc("/v1/invoke/{tenant}/{service}/{route}", invoke)
	mux.HandleFunc("/v1/invoke/{tenant}/{service}/{route}/{rest...}", invoke)
	mux.HandleFunc("PUT /v1/artifacts/{digest}", tenant(ctl, module, auth.Deploy, n.handleArtifact))
	mux.HandleFunc("PUT /v1/deployments/{tenant}/{service}", tenant(ctl, manifest, auth.Deploy, n.handleDeploy))
	mux.HandleFunc("GET /v1/deployments/{tenant}/{service}", tenant(ctl, none, auth.Deploy, n.handleGetDeployment))
	mux.HandleFunc("GET /v1/deployments/{tenant}", tenant(ctl, none, auth.Deploy, n.handleListDeployments))
	mux.HandleFunc("DELETE /v1/deployments/{tenant}/{service}", tenant(ctl, none, auth.Deploy, n.handleDelete))
	mux.HandleFunc("GET /v1/admission", tenant(ctl, none, 0, n.handleAdmission))
	mux.HandleFunc("GET /v1/admin/admission", n.governed(ctl, none, auth.Admin, false, n.handleAdminAdmission))
	mux.HandleFunc("POST /v1/admin/reload", n.governed(ctl, none, auth.Admin, false, n.handleReload))
	hosts := uiHosts(n.cfg)
	mux.HandleFunc("GET /ui", uiHostOnly(hosts, n.governed(ctl, none, auth.Admin, false, n.handleUI)))
	mux.HandleFunc("GET /ui/data", uiHostOnly(hosts, n.governed(ctl, none, auth.Admin, false, n.handleUIData)))
	mux.HandleFunc("GET /v1/cluster/nodes", n.governed(ctl, none, auth.Admin, false, n.handleNodes))
	mux.HandleFunc("GET /v1/cluster/status", n.governed(ctl, none, auth.Admin, false, n.handleClusterStatus))
	mux.HandleFunc("GET /v1/cluster/artifacts/{digest}", n.peerOnly(n.handlePeerArtifact))
	mux.HandleFunc("POST /v1/cluster/replicate/{tenant}/{digest}", n.peerOnly(n.handlePeerReplicate))
	mux.HandleFunc("GET /v1/cluster/applied/{generation}", n.peerOnly(n.handlePeerApplied))
	mux.HandleFunc("GET /healthz", n.handleHealthz)
	mux.HandleFunc("GET /readyz", n.handleReadyz)
	// Metrics name tenants: only administrators read them.
	prom := promhttp.HandlerFor(n.metrics.registry, promhttp.HandlerOpts{})
	mux.HandleFunc("GET /metrics", n.authed(auth.Admin, func(w http.ResponseWriter, r *http.Request, _ *auth.Principal) {
		prom.ServeHTTP(w, r)
	}))
	// A known path with another method is 405, anything else 404, both as
	// problems (the mux's own answers are plain text).
	for _, path := range []string{"/v1/artifacts/{digest}",
		"/v1/deployments/{tenant}/{service}", "/v1/deployments/{tenant}", "/v1/admission", "/v1/admin/admission", "/v1/admin/reload", "/ui", "/ui/data", "/healthz", "/readyz", "/metrics"} {
		mux.HandleFunc(path, handleMethodNotAllowed)
	}
	mux.HandleFunc("/", handleNotFound)
	return n.accessLogged(n.recovered(cleanPaths(mux)))
}

func handleNotFound(w http.ResponseWriter, _ *http.Request) {
	api.WriteProblem(w, api.Refusal(unknownPath), 0)
}

func handleMethodNotAllowed(w http.ResponseWriter, _ *http.Request) {
	api.WriteProblem(w, api.Refusal(methodNotAllowed), 0)
}

// The refusals of a path no route serves and of a method the path's route
// does not take.
var (
	unknownPath = refusal.Refusal{Code: refusal.CodeInvalidArgument, Reason: refusal.ReasonUnknownPath,
		Scope: refusal.ScopeRequest, Dimension: refusal.DimPath}
	methodNotAllowed = refusal.Refusal{Code: refusal.CodeInvalidArgument, Reason: refusal.ReasonMethodNotAllowed,
		Scope: refusal.ScopeRequest, Dimension: refusal.DimMethod}
)

// cleanPaths answers a path the mux would redirect (not absolute, or with
// "." or ".." elements or repeated slashes) with 404 instead: the API has
// no redirects.
func cleanPaths(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p := r.URL.Path; p == "" || p[0] != '/' || cleanPath(p) != p {
			handleNotFound(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// cleanPath is path.Clean keeping a trailing slash (the mux's form).
func cleanPath(p string) string {
	np := path.Clean(p)
	if p[len(p)-1] == '/' && np != "/" {
		np += "/"
	}
	return np
}

// recovered answers a handler's panic with a 500 problem (or, when the
// answer had started, aborts the connection) and logs it, at most one line
// a second. It also bounds the writing of the answer (node.write_timeout):
// the connection's write deadline is set as the handler starts and again
// as its answer starts, so a client that does not read its answers (a
// pipelining client with a closed receive window) has its connection
// closed instead of holding it busy forever; an invocation's answer starts
// once its activation answered, so its bound follows the activation's
// deadline. The server clears the deadline after each answer.
func (n *Node) recovered(next http.Handler) http.Handler {
	bound := n.cfg.Node.WriteTimeout
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := &startedWriter{ResponseWriter: w, rc: *http.NewResponseController(w), bound: bound}
		sw.extend()
		defer func() {
			v := recover()
			if v == nil {
				return
			}
			if v == http.ErrAbortHandler { //nolint:errorlint // the sentinel is panicked as is
				panic(v)
			}
			n.panics.Log("handler panic", "method", r.Method, "route", r.Pattern, "panic", fmt.Sprint(v),
				"stack", string(debug.Stack()))
			if sw.started {
				panic(http.ErrAbortHandler) // the status line is out: cut the connection
			}
			n.writeAnswer(sw, problemAnswer(internalProblem(), 0))
		}()
		next.ServeHTTP(sw, r)
	})
}

// startedWriter records whether the answer's status line was written, and
// sets the connection's write deadline when it starts.
type startedWriter struct {
	http.ResponseWriter
	rc      http.ResponseController
	bound   time.Duration // node.write_timeout (0: no deadline)
	started bool
}

// extend sets the write deadline bound from now. Socket deadlines are wall
// clock time, whatever clock the node runs on.
func (w *startedWriter) extend() {
	if w.bound > 0 {
		_ = w.rc.SetWriteDeadline(time.Now().Add(w.bound))
	}
}

func (w *startedWriter) start() {
	if !w.started {
		w.started = true
		w.extend()
	}
}

func (w *startedWriter) WriteHeader(status int) {
	w.start()
	w.ResponseWriter.WriteHeader(status)
}

func (w *startedWriter) Write(p []byte) (int, error) {
	w.start()
	return w.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (w *startedWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

type authedHandler func(w http.ResponseWriter, r *http.Request, p *auth.Principal)

// authed authenticates the caller from its API key (never from other
// headers or the body), or, without an Authorization header, from a client
// certificate the TLS handshake verified unless a browser sent it for
// another site (crossSite), and checks its role (0: any authenticated
// principal).
func (n *Node) authed(role auth.Roles, h authedHandler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var p *auth.Principal
		var err error
		if a := r.Header.Get("Authorization"); a == "" && r.TLS != nil && len(r.TLS.VerifiedChains) > 0 {
			if crossSite(r) { // an ambient credential sent for another site (browser.go)
				api.WriteProblem(w, crossSiteRefusal(), 0)
				return
			}
			p, err = n.auth.Load().AuthenticateCertificate(r.TLS.VerifiedChains[0][0])
		} else {
			p, err = n.auth.Load().Authenticate(a)
		}
		if err != nil {
			api.WriteProblem(w, api.Refusal(refusal.Refusal{Code: refusal.CodeUnauthenticated,
				Reason: refusal.ReasonUnauthenticated, Scope: refusal.ScopePrincipal}), 0)
			return
		}
		if role != 0 && !p.Can(role) {
			api.WriteProblem(w, forbidden(refusal.ReasonRoleNotAuthorized), 0)
			return
		}
		accessOf(r.Context()).tenant = p.Tenant
		h(w, r, p)
	}
}

// authorize is the one authorization rule of the tenant-scoped routes
// (upload, deploy, get, list, delete, the tenant's admission view,
// invoke), applied by governed after authentication and the route's role,
// before the request counts against its tenant and before the handler
// runs: a {tenant} in the path must be the principal's own, and the
// current configuration (a reload changes it for the next request) must
// list the principal's subject and kind for that tenant
// (admission.LocalQuotaProvider.Authorize, the check admission repeats for
// an invocation). A refusal is answered 403 principal-not-authorized, the
// refusal of admission, held by the refusal pacer like a refused
// invocation, and authorize returns false.
func (n *Node) authorize(w http.ResponseWriter, r *http.Request, p *auth.Principal) bool {
	pr := p.AdmissionPrincipal()
	if t := r.PathValue("tenant"); (t != "" && vocab.TenantID(t) != p.Tenant) || n.prov.Authorize(&pr) != nil {
		n.holdRefusal(r.Context(), p)
		api.WriteProblem(w, api.Refusal(principalNotAuthorized.Refusal()), 0)
		return false
	}
	return true
}

// forbidden is permission-denied/reason in scope principal.
func forbidden(reason refusal.Reason) api.Problem {
	return api.Refusal(refusal.Refusal{Code: refusal.CodePermissionDenied, Reason: reason, Scope: refusal.ScopePrincipal})
}

// badRequest is invalid-argument/reason in scope request, with a detail.
func badRequest(reason refusal.Reason, dimension refusal.Dimension, detail string) api.Problem {
	p := api.Refusal(refusal.Refusal{Code: refusal.CodeInvalidArgument, Reason: reason, Scope: refusal.ScopeRequest,
		Dimension: dimension})
	p.Detail = detail
	return p
}

// tooLarge is payload-too-large in scope node.
func tooLarge(dimension refusal.Dimension) api.Problem {
	return api.Refusal(refusal.Refusal{Code: refusal.CodeResourceExhausted, Reason: refusal.ReasonPayloadTooLarge,
		Scope: refusal.ScopeNode, Dimension: dimension})
}

// storageRetryAfter is the Retry-After of an insufficient-storage answer:
// space comes back when an operator or the artifact collection frees it,
// not within a queue's drain time.
const storageRetryAfter = time.Minute

// insufficientStorage answers a write the disk could not hold. It names no
// path: the cause is logged, not answered.
func insufficientStorage(dimension refusal.Dimension) api.Problem {
	p := api.Refusal(refusal.Refusal{Code: refusal.CodeResourceExhausted, Reason: refusal.ReasonInsufficientStorage,
		Scope: refusal.ScopeNode, Dimension: dimension, Retryable: true})
	p.Detail = "the node's storage is full; retry later"
	return p
}

// quotaExceeded answers a tenant's own catalog quota (not retryable: the
// tenant must delete something first).
func quotaExceeded(dimension refusal.Dimension) api.Problem {
	return api.Refusal(refusal.Refusal{Code: refusal.CodeResourceExhausted, Reason: refusal.ReasonTenantQuotaExceeded,
		Scope: refusal.ScopeTenant, Dimension: dimension})
}

// quotaDimension is the dimension of the catalog's quota dimension d.
func quotaDimension(d string) refusal.Dimension {
	switch d {
	case catalog.QuotaServices:
		return refusal.DimServices
	case catalog.QuotaArtifacts:
		return refusal.DimArtifacts
	case catalog.QuotaArtifactBytes:
		return refusal.DimArtifactBytes
	case catalog.QuotaDeployedBytes:
		return refusal.DimDeployedBytes
	}
	return refusal.DimNone
}

// Body problems.
const (
	detailBodyTruncated = "the request body ended before its declared length or its last chunk"
	detailBodyChunked   = "the request body's chunked framing is malformed"
	detailBodyTimeout   = "the request body did not arrive within the read timeout"
	detailBodyRead      = "the request body could not be read"
)

// bodyProblem is the answer to a failed body read: 413 when the body passed
// its bound (dimension names the bound), 400 malformed-body otherwise
// (truncated, malformed chunked framing, too slow).
func bodyProblem(err error, dimension refusal.Dimension) api.Problem {
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return tooLarge(dimension)
	}
	detail := detailBodyRead
	var ne net.Error
	switch msg := err.Error(); {
	case errors.Is(err, io.ErrUnexpectedEOF):
		detail = detailBodyTruncated
	case errors.As(err, &ne) && ne.Timeout():
		detail = detailBodyTimeout
	case strings.Contains(msg, "chunk"):
		detail = detailBodyChunked
	}
	return badRequest(refusal.ReasonMalformedBody, refusal.DimBody, detail)
}

// readBounded reads a body of at most limit bytes: a declared length over
// the limit is refused before reading, a chunked body as soon as it passes
// it. A failed read is answered by bodyProblem.
func readBounded(w http.ResponseWriter, r *http.Request, limit int64, dimension refusal.Dimension) ([]byte, *api.Problem) {
	if r.ContentLength > limit {
		p := tooLarge(dimension)
		return nil, &p
	}
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		p := bodyProblem(err, dimension)
		return nil, &p
	}
	return data, nil
}

// bodyReader remembers the first error of a body its consumer reads, so a
// failure of the consumer can be blamed on the body (the caller) or on the
// node.
type bodyReader struct {
	r   io.Reader
	err error
}

func (b *bodyReader) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err != nil && err != io.EOF && b.err == nil { //nolint:errorlint // io.EOF is returned as is by readers
		b.err = err
	}
	return n, err
}

// refuseEarly answers prob to an invocation refused while its headers or
// body were checked, and ends its span with the refusal.
func refuseEarly(w http.ResponseWriter, span *activationSpan, prob api.Problem) {
	span.end(answer{status: prob.Status, problem: &prob}, w.Header())
	api.WriteProblem(w, prob, 0)
}

func (n *Node) handleInvoke(w http.ResponseWriter, r *http.Request, p *auth.Principal) {
	arrived := n.clock.Now() // the headers are read; the body is read below
	target := vocab.Target{Tenant: vocab.TenantID(r.PathValue("tenant")), Service: vocab.ServiceName(r.PathValue("service")),
		Route: vocab.RouteName(r.PathValue("route"))}
	h, err := api.ParseInvokeHeaders(r.Header, n.clock.Now())
	if h.ActivationID == "" && len(r.Header.Values("Latent-Activation-Id")) == 0 {
		// The access log already generated one and put it on the answer.
		h.ActivationID = w.Header().Get("Latent-Activation-Id")
	}
	if h.ActivationID == "" {
		h.ActivationID = newActivationID()
	}
	if w.Header().Get("Latent-Activation-Id") != h.ActivationID {
		w.Header().Set("Latent-Activation-Id", h.ActivationID)
	}
	// The span starts once the target's names are valid and name the
	// principal's tenant (invoke refuses another tenant's), before the
	// headers and the body are checked, so their refusals are traced too.
	invalid := target.Validate()
	ctx, span := r.Context(), (*activationSpan)(nil)
	if invalid == nil && target.Tenant == p.Tenant {
		ctx, span = n.startActivation(r, target, h.ActivationID, arrived)
	}
	if err != nil {
		header, _ := api.InvalidHeader(err)
		refuseEarly(w, span, badRequest(refusal.ReasonInvalidHeader, header, err.Error()))
		return
	}
	if invalid != nil {
		refuseEarly(w, span, badRequest(refusal.ReasonInvalidIdentifier, refusal.DimTarget, ""))
		return
	}
	body, prob := readBounded(w, r, int64(n.prov.MaxPayloadBytes()), refusal.DimPayloadBytes)
	if prob != nil {
		refuseEarly(w, span, *prob)
		return
	}
	ctx = withHTTPRequest(ctx, r) // method, path suffix, CGI environment
	a := n.invoke(ctx, p, target, h, body, arrived)
	span.end(a, w.Header())
	if a.headers != nil {
		a.headers.write(w.Header())
	}
	if a.refused {
		n.holdRefusal(r.Context(), p)
	}
	if a.problem != nil {
		api.WriteProblem(w, *a.problem, a.retryAfter)
		return
	}
	if a.cgi != nil {
		writeCGIAnswer(w, a)
		return
	}
	v, hd := []string{"application/octet-stream", strconv.Itoa(len(a.body))}, w.Header()
	hd["Content-Type"], hd["Content-Length"] = v[0:1:1], v[1:2:2]
	w.WriteHeader(a.status)
	_, _ = w.Write(a.body)
}

// handleArtifact stores an artifact for the caller's own tenant.
func (n *Node) handleArtifact(w http.ResponseWriter, r *http.Request, p *auth.Principal) {
	d, err := vocab.ParseDigest(r.PathValue("digest"))
	if err != nil {
		api.WriteProblem(w, badRequest(refusal.ReasonInvalidDigest, refusal.DimDigest, `want "sha256:" followed by 64 lowercase hex digits`), 0)
		return
	}
	limit := int64(n.cfg.DeployLimits.ModuleBytes)
	if r.ContentLength > limit {
		api.WriteProblem(w, tooLarge(refusal.DimArtifactBytes), 0)
		return
	}
	if !n.uploads.begin(p.Tenant) {
		api.WriteProblem(w, writesBusy(), writeRetryAfter)
		return
	}
	defer n.uploads.end(p.Tenant)
	body := &bodyReader{r: http.MaxBytesReader(w, r.Body, limit+1)}
	err = n.cat.Artifacts().Put(r.Context(), p.Tenant, d, body)
	switch {
	case err == nil:
		writeJSON(w, http.StatusCreated, map[string]string{"artifact": string(d)})
	case body.err != nil: // the caller's body failed, whatever the catalog made of it
		api.WriteProblem(w, bodyProblem(body.err, refusal.DimArtifactBytes), 0)
	case errors.Is(err, catalog.ErrDigestMismatch):
		api.WriteProblem(w, badRequest(refusal.ReasonDigestMismatch, refusal.DimDigest, "the body does not hash to the digest in the path"), 0)
	case errors.Is(err, catalog.ErrArtifactTooLarge):
		api.WriteProblem(w, tooLarge(refusal.DimArtifactBytes), 0)
	default:
		n.writeCatalogError(w, err)
	}
}

// writeCatalogError answers the catalog errors every write can return.
func (n *Node) writeCatalogError(w http.ResponseWriter, err error) {
	var qe *catalog.QuotaError
	switch {
	case errors.As(err, &qe):
		prob := quotaExceeded(quotaDimension(qe.Dimension))
		api.WriteProblem(w, prob, 0)
	case errors.Is(err, catalog.ErrTenantQuota):
		prob := quotaExceeded(refusal.DimNone)
		api.WriteProblem(w, prob, 0)
	case isStorageFull(err):
		n.log.Error("storage full", "err", err) // the cause names the path; the answer does not
		prob := insufficientStorage(refusal.DimStorageBytes)
		api.WriteProblem(w, prob, storageRetryAfter)
	case errors.Is(err, runner.ErrCompiledCacheFull):
		n.log.Warn("compiled module cache full", "err", err)
		prob := insufficientStorage(refusal.DimCompiledBytes)
		prob.Detail = "the node holds as many compiled modules as it may; retry once releases are replaced or deleted"
		api.WriteProblem(w, prob, storageRetryAfter)
	case errors.Is(err, catalog.ErrCatalogFull):
		api.WriteProblem(w, api.Refusal(refusal.Refusal{Code: refusal.CodeResourceExhausted, Reason: refusal.ReasonCatalogFull,
			Scope: refusal.ScopeNode, Dimension: refusal.DimServices}), 0)
	default:
		n.writeAnswer(w, n.internal(err))
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

func (n *Node) handleDeploy(w http.ResponseWriter, r *http.Request, p *auth.Principal) {
	t, s, ok := ownTenant(w, r, p)
	if !ok {
		return
	}
	if !n.deploys.begin(t) {
		api.WriteProblem(w, writesBusy(), writeRetryAfter)
		return
	}
	defer n.deploys.end(t)
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
		err = n.checkRelease(m) // before any module is inspected
	}
	var d vocab.Deployment
	if err == nil {
		d, err = n.deploy(r.Context(), w, m)
	}
	var ve *vocab.ValidationError
	switch {
	case err == nil:
		n.log.Info("deployed", "tenant", string(t), "service", string(s), "release", string(d.Release), "generation", uint64(d.Generation))
		n.metrics.keepRevisions(t, s, d.Revisions)
		n.retainSnapshots(t)
		writeJSON(w, http.StatusOK, d)
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
		n.writeCatalogError(w, err)
	}
}

func (n *Node) handleGetDeployment(w http.ResponseWriter, r *http.Request, p *auth.Principal) {
	t, s, ok := ownTenant(w, r, p)
	if !ok {
		return
	}
	d, m, err := n.cat.Manifest(t, s) // from the service's record: the catalog keeps no manifests in memory
	switch {
	case errors.Is(err, catalog.ErrServiceNotFound):
		api.WriteProblem(w, api.Refusal(revisionNotAvailable.Refusal()), 0)
	case err != nil:
		n.writeAnswer(w, n.internal(err))
	default:
		writeJSON(w, http.StatusOK, deploymentAnswer{Deployment: d, Manifest: manifestWire(m)})
	}
}

func (n *Node) handleDelete(w http.ResponseWriter, r *http.Request, p *auth.Principal) {
	t, s, ok := ownTenant(w, r, p)
	if !ok {
		return
	}
	gen, err := n.remove(r.Context(), w, t, s)
	cp, isCluster := clusterProblem(err)
	switch {
	case isCluster:
		api.WriteProblem(w, cp, 0)
	case errors.Is(err, catalog.ErrServiceNotFound):
		api.WriteProblem(w, api.Refusal(revisionNotAvailable.Refusal()), 0)
	case err != nil:
		n.writeAnswer(w, n.internal(err))
	default:
		n.metrics.keepRevisions(t, s, nil)
		n.retainSnapshots(t)
		writeJSON(w, http.StatusOK, map[string]uint64{"generation": uint64(gen)})
	}
}

func (n *Node) handleAdmission(w http.ResponseWriter, r *http.Request, p *auth.Principal) {
	s, ok := n.prov.TenantSnapshot(p.Tenant)
	if !ok {
		api.WriteProblem(w, forbidden(refusal.ReasonPrincipalNotAuthorized), 0)
		return
	}
	writeJSON(w, http.StatusOK, struct {
		admission.TenantView
		Ingress map[string]IngressUsage `json:"ingress"`
	}{s, n.ingressUsage(p.Tenant, false)})
}

func (n *Node) handleAdminAdmission(w http.ResponseWriter, _ *http.Request, _ *auth.Principal) {
	writeJSON(w, http.StatusOK, adminAdmission{QuotaSnapshot: n.prov.Snapshot(), Ingress: n.ingressUsage("", true),
		Instances: n.instances()})
}

// handleHealthz is liveness with its own small bound: it never waits behind
// activations and refuses at once when its bound is full.
func (n *Node) handleHealthz(w http.ResponseWriter, _ *http.Request) {
	select {
	case n.health <- struct{}{}:
		defer func() { <-n.health }()
		w.Header().Set("Content-Type", "text/plain")
		_, _ = io.WriteString(w, "ok\n")
	default:
		api.WriteProblem(w, api.Refusal(refusal.Refusal{Code: refusal.CodeUnavailable, Reason: refusal.ReasonHealthChecksBusy,
			Scope: refusal.ScopeNode, Retryable: true}), 0)
	}
}

// handleReadyz: ready when the catalog is loaded (it is, once New returned)
// and the load sample is fresh. While quarantined cells wait for their
// replacement it still answers 200, with "degraded:" and the usable cells
// of each class short of its parallelism. Latent-Load-Source says what the
// pressure readings measure.
func (n *Node) handleReadyz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Latent-Load-Source", n.loadKind)
	if _, err := n.load.Read(n.clock.Now()); err != nil {
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, "load sample not fresh\n")
		return
	}
	if why, ok := n.clusterReady(); !ok {
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, why+"\n")
		return
	}
	if n.pool.Degraded() {
		// Still serving, on fewer cells: say which, so an operator sees it
		// while the pool replaces the quarantined ones.
		w.Header().Set("Content-Type", "text/plain")
		var b strings.Builder
		b.WriteString("degraded:")
		stats := n.pool.Stats()
		for _, c := range n.cfg.SortedCellClasses() {
			if st := stats[c]; st.Usable < st.Parallelism {
				fmt.Fprintf(&b, " %s %d/%d cells usable;", c, st.Usable, st.Parallelism)
			}
		}
		_, _ = io.WriteString(w, strings.TrimSuffix(b.String(), ";")+"\n")
		return
	}
	_, _ = io.WriteString(w, "ready\n")
}

func (n *Node) writeAnswer(w http.ResponseWriter, a answer) {
	if a.problem != nil {
		api.WriteProblem(w, *a.problem, a.retryAfter)
		return
	}
	w.WriteHeader(a.status)
	_, _ = w.Write(a.body)
}

// internalProblem is the answer to the node's own failure; the cause is
// logged, never answered.
func internalProblem() api.Problem {
	return api.Refusal(refusal.Internal)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		api.WriteProblem(w, internalProblem(), 0)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(data, '\n'))
}

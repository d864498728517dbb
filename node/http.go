package node

// The node's HTTP API: its routes (Handler), authentication and
// authorization, the common refusals, bounded body reads, and the invoke
// handler.

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime/debug"
	"strings"
	"time"

	"github.com/cockroachdb/errors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/latent-node/latent-node/catalog"
	"github.com/latent-node/latent-node/node/activation"
	"github.com/latent-node/latent-node/node/api"
	"github.com/latent-node/latent-node/node/auth"
	"github.com/latent-node/latent-node/node/front"
	"github.com/latent-node/latent-node/refusal"
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
	tenant := func(pool *front.IngressPool, routeCap func() uint64, role auth.Roles, h authedHandler) http.HandlerFunc {
		return n.governed(pool, routeCap, role, true, h)
	}
	invoke := tenant(data, payload, auth.Invoke, n.acts.handle)
	mux.HandleFunc("PUT /v1/artifacts/{digest}", tenant(ctl, module, auth.Deploy, n.ctl.handleArtifact))
	mux.HandleFunc("PUT /v1/deployments/{tenant}/{service}", tenant(ctl, manifest, auth.Deploy, n.ctl.handleDeploy))
	mux.HandleFunc("GET /v1/deployments/{tenant}/{service}", tenant(ctl, none, auth.Deploy, n.ctl.handleGetDeployment))
	mux.HandleFunc("GET /v1/deployments/{tenant}", tenant(ctl, none, auth.Deploy, n.ctl.handleListDeployments))
	mux.HandleFunc("DELETE /v1/deployments/{tenant}/{service}", tenant(ctl, none, auth.Deploy, n.ctl.handleDelete))
	mux.HandleFunc("GET /v1/admission", tenant(ctl, none, 0, n.views.HandleAdmission))
	mux.HandleFunc("GET /v1/admin/admission", n.governed(ctl, none, auth.Admin, false, n.views.HandleAdminAdmission))
	mux.HandleFunc("POST /v1/admin/reload", n.governed(ctl, none, auth.Admin, false, reloadHandler(n.Reload, n.log)))
	hosts := front.UIHosts(n.cfg)
	mux.HandleFunc("GET /ui", front.UIHostOnly(hosts, n.views.HandleUI)) // the page and its assets hold no data
	mux.HandleFunc("GET /ui/assets/{name}", front.UIHostOnly(hosts, n.views.HandleAsset))
	mux.HandleFunc("GET /ui/session", front.UIHostOnly(hosts, front.UISession(n.governed(ctl, none, auth.Admin, false, n.views.HandleSession))))
	mux.HandleFunc("GET /ui/data", front.UIHostOnly(hosts, n.governed(ctl, none, auth.Admin, false, n.views.HandleUIData)))
	mux.HandleFunc("GET /ui/history", front.UIHostOnly(hosts, n.governed(ctl, none, auth.Admin, false, n.views.HandleHistory)))
	mux.HandleFunc("GET /v1/cluster/nodes", n.governed(ctl, none, auth.Admin, false, n.clusterAPI.handleNodes))
	mux.HandleFunc("GET /v1/cluster/status", n.governed(ctl, none, auth.Admin, false, n.clusterAPI.handleClusterStatus))
	mux.HandleFunc("GET /v1/cluster/artifacts/{digest}", n.clusterAPI.peerOnly(n.clusterAPI.handlePeerArtifact))
	mux.HandleFunc("POST /v1/cluster/replicate/{tenant}/{digest}", n.clusterAPI.peerOnly(n.clusterAPI.handlePeerReplicate))
	mux.HandleFunc("GET /v1/cluster/applied/{generation}", n.clusterAPI.peerOnly(n.clusterAPI.handlePeerApplied))
	mux.HandleFunc("GET /healthz", n.probes.handleHealthz)
	mux.HandleFunc("GET /readyz", n.probes.handleReadyz)
	// Metrics name tenants: only administrators read them.
	prom := promhttp.HandlerFor(n.metrics.registry, promhttp.HandlerOpts{})
	mux.HandleFunc("GET /metrics", n.authed(auth.Admin, func(w http.ResponseWriter, r *http.Request, _ *auth.Principal) {
		prom.ServeHTTP(w, r)
	}))
	// A known path with another method is 405, anything else 404, both as
	// problems (the mux's own answers are plain text).
	for _, path := range []string{"/v1/artifacts/{digest}",
		"/v1/deployments/{tenant}/{service}", "/v1/deployments/{tenant}", "/v1/admission", "/v1/admin/admission", "/v1/admin/reload", "/ui", "/ui/assets/{name}", "/ui/session", "/ui/data", "/ui/history", "/healthz", "/readyz", "/metrics"} {
		mux.HandleFunc(path, handleMethodNotAllowed)
	}
	mux.HandleFunc("/", handleNotFound)
	access := &accessLog{clock: n.clock, log: n.log, metrics: n.metrics, hist: n.views.History()}
	return access.logged(n.recovered(front.CleanPaths(front.RouteInvocations(invoke, mux), http.HandlerFunc(handleNotFound))))
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
		sw := front.NewDeadlineWriter(w, bound)
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
			if sw.Started() {
				panic(http.ErrAbortHandler) // the status line is out: cut the connection
			}
			writeAnswer(sw, problemAnswer(internalProblem(), 0))
		}()
		next.ServeHTTP(sw, r)
	})
}

type authedHandler func(w http.ResponseWriter, r *http.Request, p *auth.Principal)

// authed authenticates the caller from its API key (never from other
// headers or the body), or, without an Authorization header, from a client
// certificate the TLS handshake verified unless a browser sent it for
// another site (front.CrossSite), and checks its role (0: any authenticated
// principal).
func (n *Node) authed(role auth.Roles, h authedHandler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if p := n.authenticate(w, r, role); p != nil {
			h(w, r, p)
		}
	}
}

// authenticate is authed's check: the principal, or nil once the refusal
// is answered.
func (n *Node) authenticate(w http.ResponseWriter, r *http.Request, role auth.Roles) *auth.Principal {
	var p *auth.Principal
	var err error
	if a := r.Header.Get("Authorization"); a == "" && r.TLS != nil && len(r.TLS.VerifiedChains) > 0 {
		if front.CrossSite(r) { // an ambient credential sent for another site (node/front)
			api.WriteProblem(w, front.CrossSiteRefusal(), 0)
			return nil
		}
		p, err = n.auth.Load().AuthenticateCertificate(r.TLS.VerifiedChains[0][0])
	} else {
		p, err = n.auth.Load().Authenticate(a)
	}
	if err != nil {
		api.WriteProblem(w, api.Refusal(refusal.Refusal{Code: refusal.CodeUnauthenticated,
			Reason: refusal.ReasonUnauthenticated, Scope: refusal.ScopePrincipal}), 0)
		return nil
	}
	if role != 0 && !p.Can(role) {
		api.WriteProblem(w, forbidden(refusal.ReasonRoleNotAuthorized), 0)
		return nil
	}
	activation.Of(w).Tenant = p.Tenant
	return p
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
	t := vocab.TenantID(r.PathValue("tenant"))
	if t == "" {
		t = activation.Of(w).Target.Tenant // an invocation's (front.RouteInvocations)
	}
	if (t != "" && t != p.Tenant) || n.prov.Authorize(&pr) != nil {
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
// it. A declared length of at most declaredAtOnce is read into a buffer of
// exactly that size; a longer body grows its buffer as its bytes arrive, so
// no more than that is committed before the client sends anything. A
// failed read is answered by bodyProblem.
func readBounded(w http.ResponseWriter, r *http.Request, limit int64, dimension refusal.Dimension) ([]byte, *api.Problem) {
	if r.ContentLength > limit {
		p := tooLarge(dimension)
		return nil, &p
	}
	if r.ContentLength >= 0 && r.ContentLength <= declaredAtOnce && r.Body != nil {
		data := make([]byte, r.ContentLength)
		if _, err := io.ReadFull(r.Body, data); err != nil {
			if err == io.EOF { //nolint:errorlint // ReadFull returns io.EOF as is
				err = io.ErrUnexpectedEOF // nothing of a declared, non-empty body arrived
			}
			p := bodyProblem(err, dimension)
			return nil, &p
		}
		return data, nil
	}
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		p := bodyProblem(err, dimension)
		return nil, &p
	}
	return data, nil
}

// declaredAtOnce is the largest declared body readBounded allocates before
// reading it.
const declaredAtOnce = 64 << 10

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

// writeAnswer writes a problem answer, or a's status and body.
func writeAnswer(w http.ResponseWriter, a answer) {
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

package node

import (
	"encoding/json"
	"io"
	"net/http"
	"strconv"

	"github.com/cockroachdb/errors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/latent-node/latent-node/admission"
	"github.com/latent-node/latent-node/catalog"
	"github.com/latent-node/latent-node/node/api"
	"github.com/latent-node/latent-node/node/auth"
)

// Handler returns the node's HTTP API (DESIGN §3.3).
func (n *Node) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/invoke/{tenant}/{service}/{route}", n.authed(auth.Invoke, n.handleInvoke))
	mux.HandleFunc("PUT /v1/artifacts/{digest}", n.authed(auth.Deploy, n.handleArtifact))
	mux.HandleFunc("PUT /v1/deployments/{tenant}/{service}", n.authed(auth.Deploy, n.handleDeploy))
	mux.HandleFunc("GET /v1/deployments/{tenant}/{service}", n.authed(auth.Deploy, n.handleGetDeployment))
	mux.HandleFunc("DELETE /v1/deployments/{tenant}/{service}", n.authed(auth.Deploy, n.handleDelete))
	mux.HandleFunc("GET /v1/admission", n.authed(0, n.handleAdmission))
	mux.HandleFunc("GET /v1/admin/admission", n.authed(auth.Admin, n.handleAdminAdmission))
	mux.HandleFunc("GET /healthz", n.handleHealthz)
	mux.HandleFunc("GET /readyz", n.handleReadyz)
	mux.Handle("GET /metrics", promhttp.HandlerFor(n.metrics.registry, promhttp.HandlerOpts{}))
	return mux
}

type authedHandler func(w http.ResponseWriter, r *http.Request, p *auth.Principal)

// authed authenticates the caller from its API key (never from headers or
// the body) and checks its role (0: any authenticated principal).
func (n *Node) authed(role auth.Roles, h authedHandler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		p, err := n.auth.Authenticate(r.Header.Get("Authorization"))
		if err != nil {
			n.metrics.rejected(admission.CodeUnauthenticated, "unauthenticated", "principal", "")
			api.WriteProblem(w, api.Problem{Type: "https://latent-node.dev/problems/unauthenticated", Title: "unauthenticated",
				Status: http.StatusUnauthorized, Code: admission.CodeUnauthenticated, Reason: "unauthenticated",
				Scope: admission.ScopePrincipal}, 0)
			return
		}
		if role != 0 && !p.Can(role) {
			api.WriteProblem(w, forbidden("role-not-authorized"), 0)
			return
		}
		h(w, r, p)
	}
}

func forbidden(reason string) api.Problem {
	return api.Refusal(http.StatusForbidden, admission.CodePermissionDenied, reason, admission.ScopePrincipal, "", false)
}

func badRequest(reason, dimension, detail string) api.Problem {
	p := api.Refusal(http.StatusBadRequest, admission.CodeInvalidArgument, reason, admission.ScopeRequest, dimension, false)
	p.Detail = detail
	return p
}

func tooLarge(dimension string) api.Problem {
	return api.Refusal(http.StatusRequestEntityTooLarge, admission.CodeResourceExhausted, "payload-too-large",
		admission.ScopeNode, dimension, false)
}

// readBounded reads a body of at most limit bytes: a declared length over
// the limit is refused before reading, a chunked body as soon as it passes it.
func readBounded(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, bool) {
	if r.ContentLength > limit {
		return nil, false
	}
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	return data, err == nil
}

func (n *Node) handleInvoke(w http.ResponseWriter, r *http.Request, p *auth.Principal) {
	target := catalog.Target{Tenant: catalog.TenantID(r.PathValue("tenant")), Service: catalog.ServiceName(r.PathValue("service")),
		Route: catalog.RouteName(r.PathValue("route"))}
	h, err := api.ParseInvokeHeaders(r.Header, n.clock.Now())
	if h.ActivationID == "" {
		h.ActivationID = newActivationID()
	}
	w.Header().Set("Latent-Activation-Id", h.ActivationID)
	if err != nil {
		header, _ := api.InvalidHeader(err)
		api.WriteProblem(w, badRequest("invalid-header", header, err.Error()), 0)
		return
	}
	if err := target.Validate(); err != nil {
		api.WriteProblem(w, badRequest("invalid-identifier", "target", ""), 0)
		return
	}
	body, ok := readBounded(w, r, int64(n.cfg.Node.Limits.MaxPayloadBytes))
	if !ok {
		n.metrics.rejected(admission.CodeResourceExhausted, "payload-too-large", admission.ScopeNode, "payload-bytes")
		api.WriteProblem(w, tooLarge("payload-bytes"), 0)
		return
	}
	a := n.invoke(r.Context(), p, target, h, body)
	for k, v := range a.headers {
		w.Header().Set(k, v)
	}
	if a.problem != nil {
		api.WriteProblem(w, *a.problem, a.retryAfter)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.Itoa(len(a.body)))
	w.WriteHeader(a.status)
	_, _ = w.Write(a.body)
}

func (n *Node) handleArtifact(w http.ResponseWriter, r *http.Request, p *auth.Principal) {
	d, err := catalog.ParseDigest(r.PathValue("digest"))
	if err != nil {
		api.WriteProblem(w, badRequest("invalid-digest", "digest", `want "sha256:" followed by 64 lowercase hex digits`), 0)
		return
	}
	if r.ContentLength > catalog.DefaultMaxArtifactBytes {
		api.WriteProblem(w, tooLarge("artifact-bytes"), 0)
		return
	}
	err = n.cat.PutArtifact(r.Context(), d, http.MaxBytesReader(w, r.Body, catalog.DefaultMaxArtifactBytes+1))
	switch {
	case errors.Is(err, catalog.ErrDigestMismatch):
		api.WriteProblem(w, badRequest("digest-mismatch", "digest", "the body does not hash to the digest in the path"), 0)
	case errors.Is(err, catalog.ErrArtifactTooLarge):
		api.WriteProblem(w, tooLarge("artifact-bytes"), 0)
	case err != nil:
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			api.WriteProblem(w, tooLarge("artifact-bytes"), 0)
			return
		}
		n.writeAnswer(w, n.internal(err))
	default:
		writeJSON(w, http.StatusCreated, map[string]string{"artifact": string(d)})
	}
}

// ownTenant refuses deployment requests for another tenant.
func ownTenant(w http.ResponseWriter, r *http.Request, p *auth.Principal) (catalog.TenantID, catalog.ServiceName, bool) {
	t, s := catalog.TenantID(r.PathValue("tenant")), catalog.ServiceName(r.PathValue("service"))
	if t != p.Tenant {
		api.WriteProblem(w, forbidden("principal-not-authorized"), 0)
		return "", "", false
	}
	return t, s, true
}

func (n *Node) handleDeploy(w http.ResponseWriter, r *http.Request, p *auth.Principal) {
	t, s, ok := ownTenant(w, r, p)
	if !ok {
		return
	}
	m, err := catalog.DecodeManifest(r.Body)
	if err == nil && (m.Tenant != t || m.Service != s) {
		err = &catalog.ValidationError{Problems: []catalog.FieldError{{Field: "tenant/service", Problem: "must match the URL path"}}}
	}
	var d catalog.Deployment
	if err == nil {
		d, err = n.cat.Deploy(r.Context(), m)
	}
	var ve *catalog.ValidationError
	switch {
	case errors.As(err, &ve):
		prob := badRequest("invalid-manifest", "manifest", ve.Error())
		prob.Status = http.StatusUnprocessableEntity
		api.WriteProblem(w, prob, 0)
	case errors.Is(err, catalog.ErrCatalogFull):
		api.WriteProblem(w, api.Refusal(http.StatusInsufficientStorage, admission.CodeResourceExhausted, "catalog-full",
			admission.ScopeNode, "", false), 0)
	case err != nil:
		n.writeAnswer(w, n.internal(err))
	default:
		n.log.Info("deployed", "tenant", string(t), "service", string(s), "release", string(d.Release), "generation", uint64(d.Generation))
		writeJSON(w, http.StatusOK, d)
	}
}

func (n *Node) handleGetDeployment(w http.ResponseWriter, r *http.Request, p *auth.Principal) {
	t, s, ok := ownTenant(w, r, p)
	if !ok {
		return
	}
	pin := n.cat.Pin()
	d, found := pin.Deployment(t, s)
	if !found {
		api.WriteProblem(w, api.FromRejection(revisionNotAvailable), 0)
		return
	}
	m, _ := pin.Manifest(t, s)
	writeJSON(w, http.StatusOK, struct {
		catalog.Deployment
		Manifest catalog.Manifest `json:"manifest"`
	}{d, m})
}

func (n *Node) handleDelete(w http.ResponseWriter, r *http.Request, p *auth.Principal) {
	t, s, ok := ownTenant(w, r, p)
	if !ok {
		return
	}
	gen, err := n.cat.Delete(r.Context(), t, s)
	switch {
	case errors.Is(err, catalog.ErrServiceNotFound):
		api.WriteProblem(w, api.FromRejection(revisionNotAvailable), 0)
	case err != nil:
		n.writeAnswer(w, n.internal(err))
	default:
		writeJSON(w, http.StatusOK, map[string]uint64{"generation": uint64(gen)})
	}
}

func (n *Node) handleAdmission(w http.ResponseWriter, r *http.Request, p *auth.Principal) {
	s, ok := n.prov.TenantSnapshot(p.Tenant)
	if !ok {
		api.WriteProblem(w, forbidden("principal-not-authorized"), 0)
		return
	}
	writeJSON(w, http.StatusOK, s)
}

func (n *Node) handleAdminAdmission(w http.ResponseWriter, _ *http.Request, _ *auth.Principal) {
	writeJSON(w, http.StatusOK, n.prov.Snapshot())
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
		w.WriteHeader(http.StatusServiceUnavailable)
	}
}

// handleReadyz: ready when the catalog is loaded (it is, once New returned)
// and the load sample is fresh.
func (n *Node) handleReadyz(w http.ResponseWriter, _ *http.Request) {
	if _, err := n.load.Read(n.clock.Now()); err != nil {
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, "load sample not fresh\n")
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

func writeJSON(w http.ResponseWriter, status int, v any) {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		status, data = http.StatusInternalServerError, []byte(`{"error":"encoding"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(data, '\n'))
}

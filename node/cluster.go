package node

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/latent-node/latent-node/admission"
	"github.com/latent-node/latent-node/catalog"
	"github.com/latent-node/latent-node/cluster"
	"github.com/latent-node/latent-node/node/activation"
	"github.com/latent-node/latent-node/node/api"
	"github.com/latent-node/latent-node/node/auth"
	"github.com/latent-node/latent-node/node/config"
	"github.com/latent-node/latent-node/refusal"
	"github.com/latent-node/latent-node/vocab"
)

// A node with a [cluster] table shares its catalog through etcd (package
// cluster): deploys and deletes go through the cluster, every node applies
// them to its own catalog, and peers fetch artifacts from each other by
// digest over the endpoints below, authenticated by the cluster's peer
// token. Invocations never touch etcd.

// newCluster makes the node's cluster membership, or nil without [cluster].
// onApply is told of every service a change from etcd touched.
func newCluster(cfg *config.Config, cat *catalog.Catalog, opts Options, version string,
	onApply func(vocab.TenantID, vocab.ServiceName)) (*cluster.Cluster, error) {
	cc := cfg.Cluster
	if !cc.Enabled {
		return nil, nil
	}
	tlsCfg, err := clusterTLS(cc.TLS)
	if err != nil {
		return nil, err
	}
	return cluster.New(cluster.Config{Endpoints: cc.Endpoints, TLS: tlsCfg, Prefix: cc.Prefix, NodeID: cc.NodeID,
		AdvertiseURL: cc.AdvertiseURL, RequireHTTPS: cfg.Node.TLS.Enabled(), Version: version, LeaseTTL: cc.LeaseTTL, Replication: cc.Replication,
		MaxStaleness: cc.MaxStaleness, Log: opts.Logger, OnApply: onApply, Catalog: cat})
}

// clusterTLS builds the etcd client's TLS configuration from [cluster.tls]
// (nil when the table sets nothing).
func clusterTLS(t config.ClusterTLS) (*tls.Config, error) {
	if t == (config.ClusterTLS{}) {
		return nil, nil
	}
	c := &tls.Config{MinVersion: tls.VersionTLS12}
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, errors.Wrap(err, "cluster.tls.ca_file")
		}
		c.RootCAs = x509.NewCertPool()
		if !c.RootCAs.AppendCertsFromPEM(pem) {
			return nil, errors.Newf("cluster.tls.ca_file %s: no PEM certificate", t.CAFile)
		}
	}
	if t.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return nil, errors.Wrap(err, "cluster.tls.cert_file/key_file")
		}
		c.Certificates = []tls.Certificate{cert}
	}
	return c, nil
}

// clusterAPI is the node's side of its cluster: it publishes deploys and
// deletes through the cluster and serves the cluster's admin routes and
// the peer endpoints. Its cluster is nil without [cluster].
type clusterAPI struct {
	cluster *cluster.Cluster
	cat     *catalog.Catalog
	// prov is the live configuration's admission (its tenants).
	prov *admission.LocalQuotaProvider
	// peerReads are the slots of artifact reads served to peers.
	peerReads chan struct{}
	nodeID    string
	clock     vocab.Clock
	log       *slog.Logger
}

// deploy publishes m: through the cluster when the node has one (adding
// the Latent-Cluster-Applied header), else in the local catalog.
func (c *clusterAPI) deploy(ctx context.Context, w http.ResponseWriter, m vocab.Manifest) (vocab.Deployment, error) {
	if c.cluster == nil {
		return c.cat.Deploy(ctx, m)
	}
	res, err := c.cluster.Deploy(ctx, m)
	if err != nil {
		return vocab.Deployment{}, err
	}
	setApplied(w, res)
	w.Header().Set("Latent-Cluster-Applied-Ms", strconv.FormatFloat(float64(res.ApplyTime.Microseconds())/1000, 'f', 3, 64))
	return res.Deployment, nil
}

// remove deletes a service, through the cluster when the node has one.
func (c *clusterAPI) remove(ctx context.Context, w http.ResponseWriter, t vocab.TenantID, s vocab.ServiceName) (vocab.Generation, error) {
	if c.cluster == nil {
		return c.cat.Delete(ctx, t, s)
	}
	res, err := c.cluster.Delete(ctx, t, s)
	if err != nil {
		return 0, err
	}
	setApplied(w, res)
	return res.Generation, nil
}

// setApplied says on how many of the ready members a change was applied.
func setApplied(w http.ResponseWriter, res cluster.Result) {
	w.Header().Set("Latent-Cluster-Applied", strconv.Itoa(res.Applied)+"/"+strconv.Itoa(res.Members))
}

// clusterProblem is the answer to a cluster error of a write, or false.
func clusterProblem(err error) (api.Problem, bool) {
	switch {
	case errors.Is(err, cluster.ErrCommitUnknown):
		return api.Refusal(clusterRefusal(refusal.ReasonCommitUnknown)), true
	case errors.Is(err, cluster.ErrUnavailable):
		p := api.Refusal(clusterRefusal(refusal.ReasonClusterUnavailable))
		p.Detail = "the cluster's store cannot take the change now; invocations are not affected"
		return p, true
	case errors.Is(err, cluster.ErrConflict):
		return api.Refusal(clusterRefusal(refusal.ReasonConcurrentChange)), true
	}
	return api.Problem{}, false
}

// clusterRefusal is the retryable unavailable/reason of the cluster, in
// scope node.
func clusterRefusal(reason refusal.Reason) refusal.Refusal {
	return refusal.Refusal{Code: refusal.CodeUnavailable, Reason: reason, Scope: refusal.ScopeNode,
		Dimension: refusal.DimCluster, Retryable: true}
}

// notClustered refuses the cluster's admin routes on a standalone node.
var notClustered = refusal.Refusal{Code: refusal.CodeInvalidArgument, Reason: refusal.ReasonNotClustered,
	Scope: refusal.ScopeNode, Dimension: refusal.DimCluster}

// peerOnly serves h to peers presenting the cluster's peer token.
func (c *clusterAPI) peerOnly(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if c.cluster == nil || !c.cluster.PeerAuthorized(r.Header.Get(cluster.PeerTokenHeader)) {
			handleNotFound(w, r) // no hint that the endpoint exists
			return
		}
		activation.Of(w).Peer = true // its log lines go to the peers' bucket
		h(w, r)
	}
}

// maxPeerArtifactReads bounds the artifact reads served to peers at once;
// a request beyond it is refused 503 peer-busy (the fetching peer tries
// another holder, or its apply loop tries again).
const maxPeerArtifactReads = 4

// handlePeerArtifact serves an artifact's bytes to a peer.
func (c *clusterAPI) handlePeerArtifact(w http.ResponseWriter, r *http.Request) {
	servePeerArtifact(w, r, c.cat, c.peerReads)
}

// servePeerArtifact streams artifact {digest} from its file under one of
// slots (503 when none is free): a peer's read costs a buffer, not the
// module's size in memory.
func servePeerArtifact(w http.ResponseWriter, r *http.Request, cat *catalog.Catalog, slots chan struct{}) {
	d, err := vocab.ParseDigest(r.PathValue("digest"))
	if err != nil {
		api.WriteProblem(w, badRequest(refusal.ReasonInvalidDigest, refusal.DimDigest, ""), 0)
		return
	}
	select {
	case slots <- struct{}{}:
		defer func() { <-slots }()
	default:
		p := api.Refusal(clusterRefusal(refusal.ReasonPeerBusy))
		p.Detail = "too many artifact reads by peers at once; try another holder or later"
		w.Header().Set("Retry-After", "1")
		api.WriteProblem(w, p, 0)
		return
	}
	f, err := cat.Artifacts().Open(d)
	if err != nil {
		handleNotFound(w, r)
		return
	}
	defer func() { _ = f.Close() }()
	w.Header().Set("Content-Type", "application/wasm")
	http.ServeContent(w, r, "", time.Time{}, f)
}

// handlePeerReplicate fetches an artifact for a tenant from its holders, at
// a peer's request before it publishes a release naming it. The tenant must
// be one of the live configuration (a reload adds and removes tenants);
// the cluster grants the tenant ownership only for a digest a pending
// release of that tenant names (cluster.Replicate): 403 not-pending
// otherwise.
func (c *clusterAPI) handlePeerReplicate(w http.ResponseWriter, r *http.Request) {
	d, err := vocab.ParseDigest(r.PathValue("digest"))
	tenant := vocab.TenantID(r.PathValue("tenant"))
	if _, known := c.prov.Policy().Tenants[tenant]; err != nil || !known {
		api.WriteProblem(w, badRequest(refusal.ReasonInvalidTarget, refusal.DimPath, ""), 0)
		return
	}
	if err := c.cluster.Replicate(r.Context(), tenant, d); err != nil {
		c.log.Warn("cluster: replication refused", "tenant", string(tenant), "digest", string(d), "err", err)
		if errors.Is(err, cluster.ErrNotPending) {
			api.WriteProblem(w, api.Refusal(refusal.Refusal{Code: refusal.CodePermissionDenied, Reason: refusal.ReasonNotPending,
				Scope: refusal.ScopeTenant, Dimension: refusal.DimCluster}), 0)
			return
		}
		p, _ := clusterProblem(errors.Mark(err, cluster.ErrUnavailable))
		api.WriteProblem(w, p, 0)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// handlePeerApplied answers a peer that deployed generation {generation}
// once this node applied it (204), or 409 when the request ends first.
func (c *clusterAPI) handlePeerApplied(w http.ResponseWriter, r *http.Request) {
	gen, err := strconv.ParseUint(r.PathValue("generation"), 10, 64)
	if err != nil {
		api.WriteProblem(w, badRequest(refusal.ReasonInvalidGeneration, refusal.DimPath, ""), 0)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), peerAppliedWait)
	defer cancel()
	if !c.cluster.WaitApplied(ctx, vocab.Generation(gen)) {
		w.WriteHeader(http.StatusConflict)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// peerAppliedWait bounds how long a peer's applied question is held.
const peerAppliedWait = 10 * time.Second

// handleNodes lists the cluster's members (admin).
func (c *clusterAPI) handleNodes(w http.ResponseWriter, r *http.Request, _ *auth.Principal) {
	if c.cluster == nil {
		api.WriteProblem(w, api.Refusal(notClustered), 0)
		return
	}
	members, err := c.cluster.Members(r.Context())
	if err != nil {
		p, _ := clusterProblem(err)
		api.WriteProblem(w, p, 0)
		return
	}
	api.WriteJSON(w, http.StatusOK, struct {
		Nodes []cluster.Member `json:"nodes"`
	}{members})
}

// handleClusterStatus answers this node's own view of the cluster (admin):
// the generation it serves, its catalog hash, whether it is fresh and
// ready, the cluster's head at its last check. It needs no etcd.
func (c *clusterAPI) handleClusterStatus(w http.ResponseWriter, _ *http.Request, _ *auth.Principal) {
	if c.cluster == nil {
		api.WriteProblem(w, api.Refusal(notClustered), 0)
		return
	}
	st := c.cluster.Status()
	var lastContactMS *int64
	if !st.LastContact.IsZero() {
		v := c.clock.Now().Sub(st.LastContact).Milliseconds()
		lastContactMS = &v
	}
	errText := ""
	if st.Err != nil {
		errText = st.Err.Error()
	}
	api.WriteJSON(w, http.StatusOK, struct {
		NodeID        string `json:"node_id"`
		Generation    uint64 `json:"generation"`
		CatalogHash   string `json:"catalog_hash"`
		Fresh         bool   `json:"fresh"`
		Ready         bool   `json:"ready"`
		RemoteHead    uint64 `json:"remote_head"`
		LastContactMS *int64 `json:"last_contact_age_ms,omitempty"`
		Error         string `json:"error,omitempty"`
	}{c.nodeID, uint64(st.Generation), st.CatalogHash, st.Fresh, st.Ready, uint64(st.RemoteHead), lastContactMS, errText})
}

// ready is the /readyz verdict of the cluster membership: ok, or
// the reason the node is not ready.
func (c *clusterAPI) ready() (string, bool) {
	if c.cluster == nil {
		return "", true
	}
	st := c.cluster.Status()
	if !st.Ready {
		return "catalog stale: etcd not reached or catalog behind for longer than cluster.max_staleness", false
	}
	return "", true
}

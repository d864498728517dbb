package cluster

// Cluster and its Config: New, Run (the cluster's driver), Status, the
// member list and the freshness check of the local catalog.

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/errors"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/latent-node/latent-node/catalog"
	"github.com/latent-node/latent-node/internal/peerurl"
	"github.com/latent-node/latent-node/vocab"
)

// Errors of the cluster's operations. Deploy and Delete return the
// catalog's own errors for a release the catalog refuses.
var (
	// ErrUnavailable: etcd cannot be reached, the node's catalog is not
	// current, or an artifact could not be replicated; retry later.
	ErrUnavailable = errors.New("cluster: unavailable")
	// ErrCommitUnknown: the deploy's transaction was sent but its outcome
	// could not be read back; deploying the same release again is safe.
	ErrCommitUnknown = errors.New("cluster: commit outcome unknown")
	// ErrConflict: the service changed concurrently on every attempt.
	ErrConflict = errors.New("cluster: concurrent change")
	// ErrBehind: etcd's history is older than this node's catalog (a store
	// restored from an older backup); the node keeps its catalog.
	ErrBehind = errors.New("cluster: etcd is behind this node's catalog")
	// ErrNotPending: a peer asked this node to replicate an artifact for a
	// tenant that does not own it here, and no deploy of a release of that
	// tenant naming it is announced in etcd (Replicate).
	ErrNotPending = errors.New("cluster: no pending release of the tenant names the artifact")
)

// Timing of the freshness check and the apply loop.
const (
	// checkInterval is the period of the quorum read of the head.
	checkInterval = time.Second
	// staleAfter is how long a node stays fresh after its last successful
	// check that found its catalog current.
	staleAfter = 2500 * time.Millisecond
	// opTimeout bounds one etcd operation.
	opTimeout = 3 * time.Second
	// retryDelay is the pause before listing again after a failure.
	retryDelay = 250 * time.Millisecond
	// applyWait bounds how long Deploy waits for this node, then for the
	// other ready members, to apply its generation.
	applyWait = 5 * time.Second
	// PeerTokenHeader carries the peer token on requests between nodes.
	PeerTokenHeader = "Latent-Peer-Token"
	// tokenGrace is how long the previous peer token stays accepted after
	// this node read a new one from etcd: the other nodes read it within a
	// check interval or two.
	tokenGrace = 30 * time.Second
)

// Config configures a node's membership in a cluster.
type Config struct {
	// Endpoints are etcd's client URLs (ignored when Client is set).
	Endpoints []string
	// TLS configures the etcd connection (nil: plain).
	TLS *tls.Config
	// Client is an etcd client to use instead of dialing Endpoints; the
	// caller closes it.
	Client *clientv3.Client
	// Prefix is the key prefix (no trailing slash).
	Prefix string
	// NodeID, AdvertiseURL and Version describe this node to the others.
	// AdvertiseURL is scheme://host:port (internal/peerurl); New refuses
	// another.
	NodeID, AdvertiseURL, Version string
	// RequireHTTPS makes peers reachable only over https: a member
	// advertising an http URL is ignored (the node serves TLS itself).
	RequireHTTPS bool
	// LeaseTTL is the lease of the member record and holdings.
	LeaseTTL time.Duration
	// Replication is the number of holders an artifact needs before a
	// release naming it is published.
	Replication int
	// MaxStaleness is how long the node stays ready without being fresh.
	MaxStaleness time.Duration
	// Log receives the cluster's events (nil: discarded).
	Log *slog.Logger
	// HTTP sends the requests to peers (nil: a client with a 30 s timeout).
	// Redirects are never followed, whatever its CheckRedirect.
	HTTP *http.Client
	// OthersWait bounds how long Deploy waits for the other ready members
	// (0: applyWait).
	OthersWait time.Duration
	// OnApply, when set, is called after the catalog applied changes from
	// etcd with the services they touched (a listing: every service before
	// and after it), from the apply loop.
	OnApply func(tenant vocab.TenantID, service vocab.ServiceName)
	// ListPage is how many service records one read of a listing asks
	// etcd for (default 10,000): a listing of any size holds one page of
	// etcd's answer at a time. etcd counts the rest of the range on every
	// read, so pages much smaller than that make a large listing slower.
	ListPage int
	// Catalog is the node's catalog, the one the cluster keeps current and
	// deploys through (required).
	Catalog *catalog.Catalog
}

// Cluster is a node's view of, and membership in, the cluster. New makes
// it; Run drives it (membership, applying the history, freshness) until
// its context ends. The methods are safe for concurrent use.
type Cluster struct {
	cfg     Config
	k       keys
	cli     *clientv3.Client
	ownsCli bool
	cat     *catalog.Catalog
	log     *slog.Logger
	peers   *peers
	started time.Time

	// deploys numbers this node's deploys (their pending-release keys).
	deploys atomic.Uint64
	// kick asks the apply loop to list again (buffered, one pending).
	kick   chan struct{}
	member *membership
	art    *artifacts
	// beforeCommit, when set, runs between a deploy's check and its
	// commit (tests: another node's deploy in between).
	beforeCommit func()

	mu struct {
		sync.Mutex
		lastFresh   time.Time     // last check that found the catalog current
		lastContact time.Time     // last successful check
		remoteHead  int64         // the head's revision at the last check
		prevHead    int64         // the head at the check before
		applyErr    error         // the last failure to apply
		synced      bool          // a listing was applied (since the last failure)
		applied     chan struct{} // closed when the catalog moves on
		published   Member        // the member record last written
	}
}

// New connects to etcd (without waiting for it) and returns the cluster of
// cfg.Catalog. It starts no goroutines: call Run.
func New(cfg Config) (*Cluster, error) {
	cat := cfg.Catalog
	if cat == nil {
		return nil, errors.AssertionFailedf("cluster: Config.Catalog is required")
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if err := peerurl.Check(cfg.AdvertiseURL, cfg.RequireHTTPS); err != nil {
		return nil, errors.Wrapf(err, "cluster: advertise URL %q", cfg.AdvertiseURL)
	}
	if cfg.HTTP == nil {
		cfg.HTTP = &http.Client{Timeout: 30 * time.Second}
	}
	// The peer token travels in a header that Go forwards to a redirect's
	// target: a peer's answer never sends it elsewhere.
	hc := *cfg.HTTP
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	cfg.HTTP = &hc
	if cfg.OthersWait <= 0 {
		cfg.OthersWait = applyWait
	}
	c := &Cluster{cfg: cfg, k: keys{cfg.Prefix}, cat: cat, log: cfg.Log, peers: &peers{http: cfg.HTTP, log: cfg.Log}, started: time.Now(),
		kick: make(chan struct{}, 1)}
	c.mu.applied = make(chan struct{})
	c.member = &membership{k: c.k, cfg: &c.cfg, cat: cat, log: cfg.Log, peers: c.peers, status: c.Status,
		changed: make(chan struct{}, 1)}
	c.art = &artifacts{k: c.k, cfg: &c.cfg, cat: cat, log: cfg.Log, peers: c.peers, member: c.member, members: c.Members}
	if cfg.Client != nil {
		c.cli, c.member.cli, c.art.cli = cfg.Client, cfg.Client, cfg.Client
		return c, nil
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: cfg.Endpoints, TLS: cfg.TLS, DialTimeout: opTimeout,
		DialKeepAliveTime: 2 * time.Second, DialKeepAliveTimeout: 2 * time.Second,
		Logger: zap.NewNop()})
	if err != nil {
		return nil, errors.Wrap(err, "cluster: etcd client")
	}
	c.cli, c.member.cli, c.art.cli, c.ownsCli = cli, cli, cli, true
	return c, nil
}

// Close closes the etcd client New dialed. Call it after Run returned.
func (c *Cluster) Close() error {
	if !c.ownsCli {
		return nil
	}
	return errors.Wrap(c.cli.Close(), "cluster: close etcd client")
}

// Run is the cluster's driver: it keeps the member record and holdings
// leased, applies etcd's history to the catalog and checks freshness,
// until ctx ends. It returns nil then; etcd being unreachable is no error
// (the node keeps serving, stale).
func (c *Cluster) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	wg.Add(3)
	go func() { defer wg.Done(); c.member.run(ctx) }()
	go func() { defer wg.Done(); c.applyLoop(ctx) }()
	go func() { defer wg.Done(); c.freshness(ctx) }()
	wg.Wait()
	return nil
}

// Status is the node's cluster state.
type Status struct {
	Generation  vocab.Generation
	CatalogHash string
	// Fresh: the last check within staleAfter reached etcd and found the
	// catalog at the cluster's head.
	Fresh bool
	// Ready: fresh within MaxStaleness (or since start).
	Ready bool
	// RemoteHead is the cluster's generation at the last check.
	RemoteHead  vocab.Generation
	LastContact time.Time
	// Err is the last failure to apply etcd's history (nil when none).
	Err error
}

// Status returns the node's cluster state now.
func (c *Cluster) Status() Status {
	now := time.Now()
	pin := c.cat.Pin()
	c.mu.Lock()
	defer c.mu.Unlock()
	since := c.mu.lastFresh
	if since.IsZero() {
		since = c.started
	}
	return Status{Generation: pin.Generation(), CatalogHash: pin.Hash(),
		Fresh: c.mu.applyErr == nil && !c.mu.lastFresh.IsZero() && now.Sub(c.mu.lastFresh) < staleAfter,
		Ready: now.Sub(since) < c.cfg.MaxStaleness, RemoteHead: vocab.Generation(c.mu.remoteHead),
		LastContact: c.mu.lastContact, Err: c.mu.applyErr}
}

// PeerAuthorized reports whether token is the cluster's peer token: the
// one last read from etcd, or the one before it for tokenGrace after the
// change (the token is re-read at every freshness check, so rotating it
// in etcd needs no restart).
func (c *Cluster) PeerAuthorized(token string) bool { return c.peers.authorized(token) }

// signal sends on a one-slot channel without blocking.
func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// wait waits d or until ctx ends; false when ctx ended.
func wait(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// Unhold removes this node's holding of d (its catalog deleted the
// artifact): peers stop asking it for the bytes. A holding that outlives
// a failed Unhold ends with the node's lease.
func (c *Cluster) Unhold(ctx context.Context, d vocab.Digest) error {
	dctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	if _, err := c.cli.Delete(dctx, c.k.holder(d, c.cfg.NodeID)); err != nil {
		return errors.Mark(errors.Wrap(err, "cluster: remove holding"), ErrUnavailable)
	}
	return nil
}

// Members lists the cluster's members (their leased records), by id. A
// record whose advertise URL is not scheme://host:port (https with
// Config.RequireHTTPS) is left out and logged: no peer request, and so no
// peer token, is ever sent to it.
func (c *Cluster) Members(ctx context.Context) ([]Member, error) {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	resp, err := c.cli.Get(ctx, c.k.nodes(), clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend))
	if err != nil {
		return nil, errors.Mark(errors.Wrap(err, "cluster: list members"), ErrUnavailable)
	}
	out := make([]Member, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		var m Member
		if json.Unmarshal(kv.Value, &m) != nil || m.ID == "" {
			continue
		}
		if err := peerurl.Check(m.AdvertiseURL, c.cfg.RequireHTTPS); err != nil {
			c.log.Warn("cluster: member record ignored: invalid advertise URL", "key", string(kv.Key), "err", err)
			continue
		}
		out = append(out, m)
	}
	return out, nil
}

// freshness checks every checkInterval that etcd answers a quorum read of
// the head and that the catalog is at it; a catalog behind the head for two
// checks in a row (a silent watch) makes the apply loop list again.
func (c *Cluster) freshness(ctx context.Context) {
	for {
		c.check(ctx)
		signal(c.member.changed)
		// A stale node checks four times as often, to be fresh again soon
		// after etcd is back.
		next := checkInterval
		if !c.Status().Fresh {
			next = checkInterval / 4
		}
		if !wait(ctx, next) {
			return
		}
	}
}

func (c *Cluster) check(ctx context.Context) {
	// One read of the head and of the peer token (a rotated token is
	// picked up here).
	cctx, cancel := context.WithTimeout(ctx, checkInterval)
	resp, err := c.cli.Txn(cctx).Then(clientv3.OpGet(c.k.head()), clientv3.OpGet(c.k.secret())).Commit()
	cancel()
	if err != nil || len(resp.Responses) != 2 {
		return
	}
	now := time.Now()
	var headRev int64
	if kvs := resp.Responses[0].GetResponseRange().GetKvs(); len(kvs) == 1 {
		headRev = kvs[0].ModRevision
	}
	if kvs := resp.Responses[1].GetResponseRange().GetKvs(); len(kvs) == 1 {
		c.peers.setToken(string(kvs[0].Value), now)
	}
	gen := int64(c.cat.Pin().Generation())
	c.mu.Lock()
	defer c.mu.Unlock()
	prev := c.mu.prevHead
	c.mu.lastContact, c.mu.remoteHead, c.mu.prevHead = now, headRev, headRev
	if gen > headRev {
		// Above etcd's head: etcd lost history (restored from an older
		// backup). The apply loop lists again and reports it.
		signal(c.kick)
		return
	}
	if !c.mu.synced || c.mu.applyErr != nil {
		return
	}
	// Fresh: the catalog is at the head now, or at least at the head the
	// previous check saw. A deploy in flight leaves the catalog a moment
	// behind the head; one whole interval behind means the watch missed
	// something (a silent watch): list again.
	if gen >= prev || gen == headRev {
		c.mu.lastFresh = now
		return
	}
	signal(c.kick)
}

// noteApplied records that the catalog moved on (or an apply error) and
// wakes whoever waits for a generation.
func (c *Cluster) noteApplied(err error) {
	c.mu.Lock()
	c.mu.applyErr = err
	if err != nil {
		// Not fresh from now on (Status), but still ready until
		// max_staleness after it last was: the node fails static.
		c.mu.synced = false
	}
	close(c.mu.applied)
	c.mu.applied = make(chan struct{})
	c.mu.Unlock()
	signal(c.member.changed)
}

// waitApplied waits until the local catalog reached gen, or ctx ends.
func (c *Cluster) waitApplied(ctx context.Context, gen vocab.Generation) bool {
	for {
		c.mu.Lock()
		ch := c.mu.applied
		c.mu.Unlock()
		if c.cat.Pin().Generation() >= gen {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-ch:
		}
	}
}

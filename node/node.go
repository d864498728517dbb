package node

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/latent-node/latent-node/admission"
	"github.com/latent-node/latent-node/catalog"
	"github.com/latent-node/latent-node/cellpool"
	"github.com/latent-node/latent-node/cluster"
	"github.com/latent-node/latent-node/loadsource"
	"github.com/latent-node/latent-node/node/auth"
	"github.com/latent-node/latent-node/node/config"
	"github.com/latent-node/latent-node/node/front"
	"github.com/latent-node/latent-node/node/history"
	"github.com/latent-node/latent-node/node/status"
	"github.com/latent-node/latent-node/node/tracing"
	"github.com/latent-node/latent-node/runner"
	"github.com/latent-node/latent-node/scheduler"
	"github.com/latent-node/latent-node/vocab"
)

// This file composes the node: its Options, the Node and New, which opens
// and wires every layer (runner, catalog, cluster, cell pool, load
// sampler, scheduler, admission), the accessors of the actors serve runs,
// and the adapters the scheduler calls (cellSource, cell, executor).

// Options are the node's collaborators that are not configuration.
type Options struct {
	Logger *slog.Logger // default: discard
	Clock  vocab.Clock  // default: the wall clock
	// LoadSource overrides the host pressure source (tests).
	LoadSource loadsource.Source
	// Conns overrides node.max_connections and
	// node.max_connections_per_address (a zero field: the configuration's).
	Conns front.ConnLimits
	// RefusalRate overrides front.DefaultRefusalRate (refusals per second and
	// principal answered without being held; tests).
	RefusalRate int
}

// Node is a composed latent-node: catalog, runner, cell pool, load source,
// admission ledger, scheduler, authentication, metrics and the HTTP API.
// New starts nothing: the caller runs Actors() and serves Server() (cmd/latent-node
// wires them with oklog/run).
type Node struct {
	cfg   *config.Config
	log   *slog.Logger
	clock vocab.Clock
	cat   *catalog.Catalog
	run   *runner.Runner
	// own are the listening addresses WrapListener saw (guarded by ownMu).
	ownMu sync.Mutex
	own   []netip.AddrPort
	pool  *cellpool.Pool
	load  *loadsource.State
	// loadKind says what the load source measures (loadsource.Describe):
	// PSI stall time, or utilization where PSI is absent.
	loadKind string
	// sizing is how many guests run at once on this host (config.Sizing).
	sizing  config.GuestSizing
	yield   *front.Yield
	sampler *loadsource.Sampler
	prov    *admission.LocalQuotaProvider
	sched   *scheduler.Scheduler[*invocation, runner.Outcome]
	// auth authenticates principals; a reload swaps it (reload.go).
	auth    atomic.Pointer[auth.Authenticator]
	metrics *metrics
	conns   *front.ConnLimiter
	panics  *front.RateLog // handler panics, at most one line a second

	rejections front.RefusalLog
	pacer      *front.RefusalPacer
	// dataPool and controlPool are the ingress governor's pools.
	dataPool, controlPool *front.IngressPool
	tracer                *tracing.Tracer  // nil when [tracing] is off
	cluster               *cluster.Cluster // nil without [cluster]
	reload                reloader         // reload.go
	// The route groups Handler wires: the deployment control API
	// (control.go) and the cluster's routes (cluster.go).
	ctl        *deployments
	clusterAPI *clusterAPI
	views      *status.Views // the status page and admission views
	acts       *activations  // the activation manager (invoke.go)
	probes     *probes       // health and readiness (health.go)
}

// New composes a node from a validated configuration. It opens (or creates)
// the catalog under the data directory, compiling every deployed module
// through the runner, and fails with an error naming the file when a record
// is corrupt.
func New(ctx context.Context, cfg *config.Config, opts Options) (_ *Node, err error) {
	n := &Node{cfg: cfg, log: opts.Logger, clock: opts.Clock}
	if n.log == nil {
		n.log = slog.New(slog.DiscardHandler)
	}
	if n.clock == nil {
		n.clock = vocab.WallClock
	}
	n.conns = front.NewConnLimiter(connLimits(cfg, opts.Conns), n.log)
	n.panics = front.NewRateLog(n.log, time.Second)
	rate, burst := front.DefaultRefusalRate, front.DefaultRefusalBurst
	if opts.RefusalRate > 0 {
		rate = opts.RefusalRate
	}
	n.pacer = front.NewRefusalPacer(rate, burst)
	n.dataPool = front.NewIngressPool(front.PoolData, cfg.Ingress.Data)
	n.controlPool = front.NewIngressPool(front.PoolControl, cfg.Ingress.Control)
	defer func() {
		if err != nil {
			n.Close(context.Background())
		}
	}()
	rc := cfg.RunnerConfig(cfg.Node.DataDir)
	if rc.MaxWarmInstances < cfg.Node.MaxWarmInstances {
		n.log.Warn("node.max_warm_instances lowered: warm instances keep to half of vm.max_map_count", "configured", cfg.Node.MaxWarmInstances,
			"applied", rc.MaxWarmInstances, "vm.max_map_count", config.HostMaxMapCount())
	}
	rc.OnCacheDiscard = func(err error) {
		n.log.Warn("discarded a corrupt compile-cache entry and compiled the module again", "err", err.Error())
	}
	n.sizing = cfg.Sizing(runtime.NumCPU())
	if n.yield, err = front.NewYield(front.YieldInterval); err != nil {
		return nil, err
	}
	rc.OnSlice = n.yield.Maybe
	if n.run, err = runner.New(ctx, rc); err != nil {
		return nil, err
	}
	co := cfg.CatalogConfig()
	co.Inspector, co.OnInspect, co.OnSnapshotsUnused = n.run, n.logInspect, n.run.DropSnapshots
	if n.cat, err = catalog.Open(ctx, co); err != nil {
		return nil, err
	}
	// Opening the catalog decoded every service record: at 100,000
	// services that is gigabytes of garbage, whose pages would otherwise
	// stay resident until the scavenger returns them. One collection now
	// gives them back.
	debug.FreeOSMemory()
	n.ctl = &deployments{cat: n.cat, run: n.run, log: n.log, moduleBytes: cfg.DeployLimits.ModuleBytes,
		uploads: tenantWrites{max: MaxTenantUploads}, deploys: tenantWrites{max: MaxTenantDeploys}}
	if n.cluster, err = newCluster(cfg, n.cat, opts, buildVersion(), n.ctl.appliedFromCluster); err != nil {
		return nil, err
	}
	n.clusterAPI = &clusterAPI{cluster: n.cluster, cat: n.cat, peerReads: make(chan struct{}, maxPeerArtifactReads),
		nodeID: cfg.Cluster.NodeID, clock: n.clock, log: n.log}
	n.ctl.cluster = n.clusterAPI
	if n.pool, err = cellpool.New(cfg.CellPoolConfig()); err != nil {
		return nil, err
	}
	n.load = loadsource.NewState(cfg.Overload.MaxObservationAge)
	src := opts.LoadSource
	if src == nil {
		src = loadsource.DetectSource(loadsource.DefaultCgroupRoot)
	}
	n.loadKind = loadsource.Describe(src)
	if n.sampler, err = loadsource.NewSampler(loadsource.SamplerConfig{State: n.load, Source: src,
		Interval: cfg.Overload.SampleInterval, Clock: n.clock}); err != nil {
		return nil, err
	}
	if n.sched, err = scheduler.New(cfg.SchedulerConfig(), scheduler.Deps[*invocation, runner.Outcome]{Cells: cellSource{n.pool},
		Exec: executor{n}, Clock: n.clock, ShutdownGrace: cfg.Node.ShutdownGrace, MaxRunning: n.sizing.Guests}); err != nil {
		return nil, err
	}
	if n.prov, err = admission.NewLocalQuotaProvider(cfg.AdmissionPolicy(), admission.Options{Clock: n.clock,
		Load: n.load, QueueDelay: n.sched}); err != nil {
		return nil, err
	}
	a, err := auth.New(cfg.Principals)
	if err != nil {
		return nil, err
	}
	n.auth.Store(a)
	n.ctl.prov, n.clusterAPI.prov = n.prov, n.prov
	n.metrics = newMetrics(n)
	n.ctl.metrics = n.metrics
	n.probes = &probes{slots: make(chan struct{}, 64), load: n.load, loadKind: n.loadKind, clock: n.clock, pool: n.pool,
		classes: cfg.SortedCellClasses(), cluster: n.clusterAPI}
	n.views = status.New(status.Config{Admission: n.prov, Data: n.dataPool, Control: n.controlPool, Runner: n.run,
		Cells: n.pool, Scheduler: n.sched, Catalog: n.cat, Load: n.load, LoadKind: n.loadKind, Clock: n.clock, Log: n.log,
		Refusals: n.metrics.refusals, History: history.New(history.Config{Clock: n.clock})})
	if n.tracer, err = tracing.New(ctx, cfg.Tracing, n.clock); err != nil {
		return nil, err
	}
	n.acts = &activations{cfg: cfg, log: n.log, clock: n.clock, cat: n.cat, run: n.run, prov: n.prov, sched: n.sched,
		metrics: n.metrics, tracer: n.tracer, holdRefusal: n.holdRefusal}
	return n, nil
}

// Catalog returns the node's catalog (the demo deploys through it).
func (n *Node) Catalog() *catalog.Catalog { return n.cat }

// collectArtifacts runs the catalog's garbage collection every interval
// until ctx ends: a tenant gives up the artifacts none of its services uses
// once their grace period is over, and an artifact no tenant owns is
// deleted. It returns nil when ctx ends.
func (n *Node) collectArtifacts(ctx context.Context, every time.Duration) error {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		st, err := n.cat.Artifacts().CollectGarbage(ctx, n.clock.Now())
		switch {
		case err != nil && ctx.Err() == nil:
			n.log.Warn("artifact collection failed; retrying at the next interval", "err", err)
		case st.Released > 0 || st.Deleted > 0:
			n.log.Info("collected unused artifacts", "released", st.Released, "deleted", st.Deleted, "bytes", st.DeletedBytes)
			if n.cluster != nil { // peers stop fetching them from here
				for _, d := range st.DeletedDigests {
					if err := n.cluster.Unhold(ctx, d); err != nil && ctx.Err() == nil {
						n.log.Info("a deleted artifact's holding stays until the lease ends", "digest", string(d), "err", err)
					}
				}
			}
			// Their compiled code goes too: the cache keeps only modules the
			// runner holds. (An entry removed while a module compiles only
			// costs a compile after the next restart.)
			cs, err := n.run.CollectCompileCache(ctx, false)
			switch {
			case err != nil && ctx.Err() == nil:
				n.log.Warn("compile-cache collection failed; retrying after the next artifact collection", "err", err)
			case cs.Removed > 0:
				n.log.Info("collected unused compiled code", "entries", cs.Removed, "bytes", cs.RemovedBytes)
			}
		}
	}
}

// CollectInterval is how often the artifact collection runs for the
// configuration: a quarter of the grace period, from 1s to 5m.
func CollectInterval(cfg *config.Config) time.Duration {
	return min(max(cfg.Catalog.ArtifactGrace/4, time.Second), 5*time.Minute)
}

// Sizing is how many guests run at once on this host and how many Go
// processors the node should have (config.Sizing for this host's CPUs).
func (n *Node) Sizing() config.GuestSizing { return n.sizing }

// LoadSourceKind says what the node's pressure readings measure
// ("psi-host", "psi-cgroup", "utilization-host", "utilization-cgroup",
// "fixed"; see loadsource.Describe).
func (n *Node) LoadSourceKind() string { return n.loadKind }

// Server returns an http.Server for the node's API. Serve it on a listener
// wrapped with WrapListener, which bounds its connections (the server's
// ConnState hook feeds the bound). The server's own error lines (failed TLS
// or protocol exchanges) go to the node's logger as structured records, at
// most one a second.
func (n *Node) Server() *http.Server {
	// Reads are bounded in time as well as size (a slow body cannot hold a
	// connection forever); writes are not, since an answer waits for queueing
	// and execution, both bounded by the configuration.
	return &http.Server{Handler: n.Handler(), ReadHeaderTimeout: 10 * time.Second, ReadTimeout: time.Minute,
		IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 64 << 10,
		BaseContext: func(net.Listener) context.Context { return context.Background() },
		ConnState:   n.conns.ConnState, ErrorLog: front.NewErrorLog(n.log)}
}

// WrapListener bounds ln's connections by node.max_connections and
// node.max_connections_per_address (or Options.Conns), in total and per
// remote address: at a bound, idle keep-alive connections are closed first
// to make room, and a new connection is closed at once only when every open
// one is serving a request. Accept errors are retried after a back-off and
// logged at most once a second. Serve the result with Server().
//
// Its address joins those no guest's outgoing request may reach.
func (n *Node) WrapListener(ln net.Listener) net.Listener {
	if a, err := netip.ParseAddrPort(ln.Addr().String()); err == nil && n.run != nil {
		n.ownMu.Lock()
		n.own = append(n.own, a)
		n.run.SetOwnAddrs(n.own...)
		n.ownMu.Unlock()
	}
	return n.conns.Wrap(ln)
}

// ConnStats returns the counters of the node's connection bound.
func (n *Node) ConnStats() front.ConnStats { return n.conns.Stats() }

// Close releases the runtime and the pool and flushes the spans not yet
// exported (within tracing.timeout). Call it after the actors stopped.
func (n *Node) Close(ctx context.Context) {
	if n.yield != nil {
		n.yield.Close()
	}
	if n.pool != nil {
		_ = n.pool.Close()
	}
	if n.run != nil {
		_ = n.run.Close(ctx)
	}
	if err := n.tracer.Close(ctx); err != nil {
		n.log.Warn("could not export the last spans", "err", err)
	}
	if n.cluster != nil {
		_ = n.cluster.Close()
	}
}

// connLimits are the configuration's bounds, each overridden by a non-zero
// field of override.
func connLimits(cfg *config.Config, override front.ConnLimits) front.ConnLimits {
	lim := front.ConnLimits{MaxConns: cfg.Node.MaxConnections, MaxConnsPerAddr: cfg.Node.MaxConnectionsPerAddress}
	if override.MaxConns != 0 {
		lim.MaxConns = override.MaxConns
	}
	if override.MaxConnsPerAddr != 0 {
		lim.MaxConnsPerAddr = override.MaxConnsPerAddr
	}
	lim.WriteStall = override.WriteStall
	return lim
}

// cellSource adapts the cell pool to the scheduler.
type cellSource struct{ pool *cellpool.Pool }

func (s cellSource) TryLease(c vocab.CellClass) (scheduler.Cell, error) {
	l, err := s.pool.TryLease(c)
	if err != nil {
		return nil, err
	}
	return cell{l}, nil
}

// cell is a leased cellpool cell seen by the scheduler (Release(bool)) and
// the runner (WithMemory, AbandonMemory).
type cell struct{ *cellpool.Lease }

func (c cell) Release(quarantine bool) error {
	d := cellpool.Reuse
	if quarantine {
		d = cellpool.Quarantine
	}
	return c.Lease.Release(d)
}

var _ runner.Cell = cell{}

// executor adapts the runner to the scheduler. A cell quarantined by an
// activation is logged: it means a host fault, never a guest's doing.
type executor struct{ n *Node }

func (e executor) Execute(ctx context.Context, job *scheduler.Job[*invocation, runner.Outcome], exec *admission.ExecutionPermit,
	c scheduler.Cell) scheduler.Completion[runner.Outcome] {
	lease, ok := c.(cell)
	if !ok {
		return scheduler.Completion[runner.Outcome]{Quarantine: true, Outcome: runner.Outcome{Kind: runner.PlatformFailure,
			Err: errors.AssertionFailedf("node: unexpected cell")}}
	}
	// The guest runs on the caller's goroutine (scheduler.Do) and gives
	// its processor to the front at fuel checks (runner OnSlice) and here.
	// At each fuel check, once the front read what arrived, it also gives
	// its running slot to a newcomer the fair queue puts first, if one
	// waits (scheduler Pause), and goes on after it.
	pause := func() time.Duration { return e.n.sched.Pause(ctx, job) }
	out := e.n.run.RunWith(ctx, exec, lease, runner.Input{Body: job.Input().body, Environ: job.Input().environ, HTTP: job.Input().http, OnSlice: pause})
	// Before the scheduler picks the next job, the front reads what
	// arrived meanwhile, so the choice is between every queued tenant.
	e.n.yield.Maybe()
	if out.Quarantine {
		ob := exec.Obligations()
		e.n.log.Warn("cell quarantined after a host fault; the pool replaces it", "cell_class", ob.CellClass.String(),
			"outcome", out.Kind.String(), "err", out.Err)
	}
	return scheduler.Completion[runner.Outcome]{FuelUsed: out.FuelUsed, Quarantine: out.Quarantine, Outcome: out}
}

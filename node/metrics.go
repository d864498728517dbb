package node

// The node's Prometheus metrics: the per-route series bounded per tenant,
// the build information, and the gauges read at scrape time.

import (
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/latent-node/latent-node/internal/gcfloor"
	"github.com/latent-node/latent-node/node/activation"
	"github.com/latent-node/latent-node/node/config"
	"github.com/latent-node/latent-node/node/front"
	"github.com/latent-node/latent-node/refusal"
	"github.com/latent-node/latent-node/runner"
	"github.com/latent-node/latent-node/vocab"
)

// metrics are the node's Prometheus metrics. Label values come only from
// configured or fixed sets (tenants of the configuration, outcome kinds,
// rejection codes and reasons, cell and queue classes, route kinds, the
// node's status codes) or from the catalog (services, routes and revisions
// of active releases), so the number of series is bounded by configuration
// and the catalog, never by requests: a service's series go when it is
// deleted, a revision's when a release without it replaces it. The
// per-route series (latent_activations_total, latent_fuel_consumed_total)
// are bounded per tenant as well, by node.max_metric_series_per_tenant:
// past it, and for a revision no longer deployed, an observation counts in
// the tenant's overflow series (otherLabel) and in
// latent_metrics_series_overflow_total.
type metrics struct {
	log      *front.RefusalLog
	registry *prometheus.Registry
	// refusals holds the refusal counter alone, for the status page: it
	// polls every two seconds per open tab, and gathering the registry
	// would copy every per-route series (411 ms at 100,000), holding
	// their vectors while new series wait.
	refusals *prometheus.Registry
	// access rate-limits the access log per configured tenant.
	access *front.LogLimiter
	// outbound counts wasi-http guests' outgoing requests by result.
	outbound    *prometheus.CounterVec
	activations *prometheus.CounterVec
	rejections  *prometheus.CounterVec
	queueWait   *prometheus.HistogramVec
	execution   *prometheus.HistogramVec
	front, back prometheus.Histogram
	// refusalsHeld counts refusals held by the pacer.
	refusalsHeld prometheus.Counter
	fuel         *prometheus.CounterVec
	memoryPeak   *prometheus.HistogramVec
	httpDuration *prometheus.HistogramVec
	logDropped   *prometheus.CounterVec
	overflowed   *prometheus.CounterVec
	all          []prometheus.Collector // every registered collector

	// budget is the most per-route series (label sets) one tenant's own
	// label sets may have, fuel and outcome series together.
	budget int
	// deployed reports whether a revision is part of its service's current
	// release (in the catalog's latest pin).
	deployed func(vocab.Target, vocab.RevisionID) bool

	// The label-bound series of the per-request path, looked up once and
	// then reused: resolving a vector's labels hashes every value, and an
	// invocation observes eight series. Each map is bounded as the series
	// are: tenants by the catalog, a tenant's series by its budget;
	// series (and their entries) of replaced revisions and deleted services
	// go in keepRevisions, which finds them through their tenant and
	// service.
	mu       sync.Mutex
	tenants  map[string]*tenantSeries
	classes  map[classKey]classSeries
	requests map[requestKey]prometheus.Observer
}

// otherLabel is the service, route and revision of a tenant's overflow
// series. Revision ids always start with "rev1-", so no real revision
// carries it.
const otherLabel = "_other"

// DefaultMaxMetricSeriesPerTenant is node.max_metric_series_per_tenant's
// default.
const DefaultMaxMetricSeriesPerTenant = config.DefaultMaxMetricSeriesPerTenant

// seriesKey names a route's revision, the labels of its activation series.
type seriesKey struct{ tenant, service, route, revision string }

// owned returns k with its strings copied: the names come from the
// request's path, and a series (its cache entry, its labels) lives on long
// after the request, which must not keep the whole path alive with it.
func (k seriesKey) owned() seriesKey {
	return seriesKey{strings.Clone(k.tenant), strings.Clone(k.service), strings.Clone(k.route), strings.Clone(k.revision)}
}

// revisionSeries are the activation series of one seriesKey: key, the
// labels of each (owned: see seriesKey.owned).
type revisionSeries struct {
	key      seriesKey
	fuel     prometheus.Counter
	outcomes map[runner.Kind]prometheus.Counter
}

// tenantSeries are one tenant's per-route series, by service, and its
// overflow series.
type tenantSeries struct {
	name       string // the tenant (owned: the overflow series' label)
	used       int    // series of services[…]: one fuel series and one per outcome each
	services   map[string]map[seriesKey]*revisionSeries
	other      *revisionSeries // created at the first overflow
	overflowed prometheus.Counter
}

// classKey is a cell class and queue class.
type classKey struct{ cell, queue string }

type classSeries struct{ memoryPeak, queueWait, execution prometheus.Observer }

// requestKey is an HTTP request's route kind and status code.
type requestKey struct {
	kind   string
	status int
}

// Activation labels: tenant, service, route, revision (then the outcome).
var activationLabels = []string{"tenant", "service", "route", "revision"}

func newMetrics(n *Node) *metrics {
	m := &metrics{registry: prometheus.NewRegistry(), log: &n.rejections, tenants: map[string]*tenantSeries{},
		classes: map[classKey]classSeries{}, requests: map[requestKey]prometheus.Observer{},
		budget: DefaultMaxMetricSeriesPerTenant, deployed: n.deployed}
	if n.cfg != nil && n.cfg.Node.MaxMetricSeriesPerTenant > 0 {
		m.budget = n.cfg.Node.MaxMetricSeriesPerTenant
	}
	m.activations = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "latent_activations_total",
		Help: "Executed activations by tenant, service, route, revision and outcome."}, append(activationLabels, "outcome"))
	m.rejections = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "latent_rejections_total",
		Help: "Refused requests by code, reason, scope and dimension."}, []string{"code", "reason", "scope", "dimension"})
	m.refusals = prometheus.NewRegistry()
	m.refusals.MustRegister(m.rejections)
	buckets := prometheus.ExponentialBuckets(0.0005, 2, 16) // 0.5ms … 16s
	m.queueWait = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "latent_queue_wait_seconds",
		Help: "Time from reading an invocation's headers to its dispatch.", Buckets: buckets}, []string{"cell_class", "queue_class"})
	m.execution = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "latent_execution_seconds",
		Help: "Guest execution time.", Buckets: buckets}, []string{"cell_class", "queue_class"})
	fine := prometheus.ExponentialBuckets(0.00001, 2, 18) // 10µs … 1.3s
	m.front = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "latent_front_seconds",
		Help: "Time from reading an invocation's headers to queuing it (body, resolve, admission, submit).", Buckets: fine})
	m.back = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "latent_back_seconds",
		Help: "Time from a result's delivery until its handler ran again.", Buckets: fine})
	m.refusalsHeld = prometheus.NewCounter(prometheus.CounterOpts{Name: "latent_refusals_held_total",
		Help: "Refusals held before being answered because their principal was refused faster than the refusal rate."})
	m.fuel = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "latent_fuel_consumed_total",
		Help: "Fuel consumed by executed activations."}, activationLabels)
	m.memoryPeak = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "latent_activation_memory_peak_bytes",
		Help:    "Most of its memory grant an executed activation used at once (linear memory and call stack).",
		Buckets: prometheus.ExponentialBuckets(64<<10, 4, 10)}, []string{"cell_class"}) // 64KiB … 16GiB
	m.httpDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "latent_http_request_duration_seconds",
		Help:    "Time from the request's headers to the end of its answer, by route kind and status code.",
		Buckets: buckets}, []string{"route_kind", "code"})
	m.outbound = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "latent_outbound_requests_total",
		Help: "Outgoing HTTP requests of wasi-http guests, by result: answered, denied (not in allowed_outbound_hosts, or an address a guest may not reach) or failed."},
		[]string{"result"})
	m.logDropped = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "latent_log_lines_dropped_total",
		Help: "Access-log lines dropped by the per-tenant line and byte rate limits (" + front.SharedLogTenant +
			": requests without a configured tenant; " + front.PeerLogTenant + ": cluster peers)."},
		[]string{"tenant"})
	m.overflowed = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "latent_metrics_series_overflow_total",
		Help: "Activations counted in their tenant's overflow series (service, route and revision \"" + otherLabel +
			"\"): past the tenant's node.max_metric_series_per_tenant, or of a revision no longer deployed."},
		[]string{"tenant"})
	build := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "latent_build_info",
		Help: "Always 1; the labels name the node's version, commit and commit date and the Go release that built it."},
		[]string{"version", "commit", "date", "go_version"})
	heapLive := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "latent_go_heap_live_bytes",
		Help: "The Go heap the last garbage collection marked live. The node lets up to 64 MiB of garbage accumulate between collections, which go_memstats_heap_alloc_bytes counts."},
		func() float64 { return float64(gcfloor.LiveHeap()) })
	bi := CurrentBuildInfo()
	build.WithLabelValues(bi.Version, bi.Commit, bi.Date, runtime.Version()).Set(1)
	var tenants []string
	if n.cfg != nil {
		for t := range n.cfg.Tenants {
			tenants = append(tenants, string(t))
		}
	}
	slices.Sort(tenants)
	clock := vocab.WallClock
	if n.clock != nil {
		clock = n.clock
	}
	m.access = front.NewLogLimiter(clock, front.DefaultLogRates, tenants,
		func(t string) func() { return m.logDropped.WithLabelValues(t).Inc })
	m.all = []prometheus.Collector{m.activations, m.rejections, m.queueWait, m.execution, m.front, m.back, m.refusalsHeld, m.fuel,
		m.memoryPeak, m.httpDuration, m.logDropped, m.overflowed, m.outbound, build, heapLive,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		&stateCollector{n: n}}
	m.registry.MustRegister(m.all...)
	return m
}

// BuildInfo names the build a node runs: the labels of latent_build_info.
// Release binaries get it from the linker (cmd/latent-node's version vars,
// set by `make dist` and the Dockerfile); any other build from what the Go
// toolchain recorded.
type BuildInfo struct {
	Version string // a release tag, else the module version, else "(devel)"
	Commit  string // the git commit, "" when unknown
	Date    string // the commit's date (RFC 3339), "" when unknown
}

var buildInfo atomic.Pointer[BuildInfo]

// SetBuildInfo sets what nodes created afterwards report in
// latent_build_info; an empty field keeps the toolchain's value.
func SetBuildInfo(bi BuildInfo) {
	def := toolchainBuildInfo()
	if bi.Version == "" {
		bi.Version = def.Version
	}
	if bi.Commit == "" {
		bi.Commit = def.Commit
	}
	if bi.Date == "" {
		bi.Date = def.Date
	}
	buildInfo.Store(&bi)
}

// CurrentBuildInfo returns the build information SetBuildInfo set, or else
// what the Go toolchain recorded in the binary.
func CurrentBuildInfo() BuildInfo {
	if bi := buildInfo.Load(); bi != nil {
		return *bi
	}
	return toolchainBuildInfo()
}

// buildVersion is the node's version (CurrentBuildInfo's).
func buildVersion() string { return CurrentBuildInfo().Version }

// toolchainBuildInfo is the main module's version and the VCS revision and
// time the Go toolchain recorded (absent with -buildvcs=false, in tests and
// outside a git checkout).
func toolchainBuildInfo() BuildInfo {
	out := BuildInfo{Version: "(devel)"}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return out
	}
	if bi.Main.Version != "" {
		out.Version = bi.Main.Version
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			out.Commit = s.Value
		case "vcs.time":
			out.Date = s.Value
		}
	}
	return out
}

// observe counts the executed activation rec from its record: its
// revision's activation and fuel series, its cell and queue class's
// histograms, the front and back times.
func (m *metrics) observe(rec *activation.Record) {
	cell := rec.CellClass.String()
	m.mu.Lock()
	fuel, activations, overflowed := m.seriesLocked(rec.Target, rec.Revision, rec.Outcome)
	ck := classKey{cell, rec.QueueClass}
	cs, ok := m.classes[ck]
	if !ok {
		cs = classSeries{memoryPeak: m.memoryPeak.WithLabelValues(cell), queueWait: m.queueWait.WithLabelValues(cell, ck.queue),
			execution: m.execution.WithLabelValues(cell, ck.queue)}
		m.classes[ck] = cs
	}
	m.mu.Unlock()
	if overflowed != nil {
		overflowed.Inc()
	}
	activations.Inc()
	fuel.Add(float64(rec.FuelUsed))
	cs.memoryPeak.Observe(float64(rec.MemoryPeakBytes))
	cs.queueWait.Observe(rec.Timing.QueueWait().Seconds())
	m.front.Observe(rec.Timing.Front.Seconds())
	m.back.Observe(rec.Timing.Back.Seconds())
	cs.execution.Observe(rec.Execution.Seconds())
}

// seriesLocked returns the fuel and activation series an activation of
// revision rev of target t with the outcome kind counts in: its own label
// set's, created within the tenant's budget while rev is deployed, else the tenant's overflow series
// (and then the tenant's overflow counter, else nil).
//
// The deployed check happens under m.mu, which keepRevisions takes after
// the catalog published the release that dropped a revision: an activation
// of the dropped revision that ends later finds it gone and cannot bring its
// series back.
func (m *metrics) seriesLocked(t vocab.Target, rev vocab.RevisionID, kind runner.Kind) (fuel, activations, overflowed prometheus.Counter) {
	k := seriesKey{string(t.Tenant), string(t.Service), string(t.Route), string(rev)}
	ts := m.tenants[k.tenant]
	if ts == nil {
		ts = &tenantSeries{name: strings.Clone(k.tenant), services: map[string]map[seriesKey]*revisionSeries{}}
		m.tenants[ts.name] = ts
	}
	svc := ts.services[k.service]
	rs := svc[k]
	if rs == nil && ts.used+2 <= m.budget && (m.deployed == nil || m.deployed(t, rev)) {
		k = k.owned()
		if svc == nil {
			svc = map[seriesKey]*revisionSeries{}
			ts.services[k.service] = svc
		}
		rs = &revisionSeries{key: k, fuel: m.fuel.WithLabelValues(k.tenant, k.service, k.route, k.revision),
			outcomes: map[runner.Kind]prometheus.Counter{}}
		svc[k] = rs
		ts.used++
	}
	if rs != nil {
		if c := rs.outcomes[kind]; c != nil {
			return rs.fuel, c, nil
		}
		if ts.used+1 <= m.budget {
			o := rs.key
			c := m.activations.WithLabelValues(o.tenant, o.service, o.route, o.revision, kind.String())
			rs.outcomes[kind] = c
			ts.used++
			return rs.fuel, c, nil
		}
	}
	if ts.other == nil {
		ts.other = &revisionSeries{fuel: m.fuel.WithLabelValues(ts.name, otherLabel, otherLabel, otherLabel),
			outcomes: map[runner.Kind]prometheus.Counter{}}
		ts.overflowed = m.overflowed.WithLabelValues(ts.name)
	}
	c := ts.other.outcomes[kind] // bounded by the outcome kinds
	if c == nil {
		c = m.activations.WithLabelValues(ts.name, otherLabel, otherLabel, otherLabel, kind.String())
		ts.other.outcomes[kind] = c
	}
	return ts.other.fuel, c, ts.overflowed
}

// request observes an HTTP request's duration.
func (m *metrics) request(kind string, status int, took time.Duration) {
	k := requestKey{kind, status}
	m.mu.Lock()
	o := m.requests[k]
	if o == nil {
		o = m.httpDuration.WithLabelValues(kind, strconv.Itoa(status))
		m.requests[k] = o
	}
	m.mu.Unlock()
	o.Observe(took.Seconds())
}

// keepRevisions drops the activation series of the service's revisions
// not in keep (a new release replaced them); with keep empty, all of the
// service's series (it was deleted). It touches only the service's own
// series, and gives them back to the tenant's budget.
func (m *metrics) keepRevisions(tenant vocab.TenantID, service vocab.ServiceName, keep []vocab.RevisionRef) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ts := m.tenants[string(tenant)]
	if ts == nil {
		return
	}
	svc := ts.services[string(service)]
	for k, rs := range svc {
		if slices.ContainsFunc(keep, func(ref vocab.RevisionRef) bool { return string(ref.ID) == k.revision }) {
			continue
		}
		delete(svc, k)
		m.fuel.DeleteLabelValues(k.tenant, k.service, k.route, k.revision)
		for kind := range rs.outcomes {
			m.activations.DeleteLabelValues(k.tenant, k.service, k.route, k.revision, kind.String())
		}
		ts.used -= 1 + len(rs.outcomes)
	}
	if len(svc) == 0 {
		delete(ts.services, string(service))
	}
}

// deployed reports whether rev is a revision of t's service's release in
// the catalog's latest pin (always, for a node without a catalog: tests).
func (n *Node) deployed(t vocab.Target, rev vocab.RevisionID) bool {
	if n.cat == nil {
		return true
	}
	d, ok := n.cat.Pin().Deployment(t.Tenant, t.Service)
	return ok && slices.ContainsFunc(d.Revisions, func(ref vocab.RevisionRef) bool { return ref.ID == rev })
}

func (m *metrics) rejected(r refusal.Refusal) {
	m.rejections.WithLabelValues(r.Code.String(), r.Reason.String(), r.Scope.String(), r.Dimension.String()).Inc()
	m.log.Add(r)
}

// stateCollector reads gauges from the components at scrape time.
type stateCollector struct{ n *Node }

var (
	descCells = prometheus.NewDesc("latent_cells", "Cells per class by state (usable, busy, quarantined).",
		[]string{"cell_class", "state"}, nil)
	descWindow = prometheus.NewDesc("latent_concurrency_window", "Adaptive concurrency window per cell class.",
		[]string{"cell_class"}, nil)
	descWaiting = prometheus.NewDesc("latent_queued", "Queued activations per cell class.", []string{"cell_class"}, nil)
	descLoad    = prometheus.NewDesc("latent_load_pressure_ratio", "Last accepted load sample (0 to 1), by resource.",
		[]string{"resource"}, nil)
	descAge  = prometheus.NewDesc("latent_load_sample_age_seconds", "Age of the last accepted load sample.", nil, nil)
	descLeak = prometheus.NewDesc("latent_permits_leaked_total",
		"Admission permits reclaimed by the safety net (each a bug).", nil, nil)
	descConns = prometheus.NewDesc("latent_http_connections", "Open HTTP connections by state (busy, idle, new: no request read yet).",
		[]string{"state"}, nil)
	descConnsShed = prometheus.NewDesc("latent_http_connections_shed_total",
		"Idle, silent or write-stalled HTTP connections closed to make room under the connection bounds.", nil, nil)
	descConnsRefused = prometheus.NewDesc("latent_http_connections_refused_total",
		"HTTP connections closed at once because every open connection was serving a request.", nil, nil)
	descAcceptErrors = prometheus.NewDesc("latent_http_accept_errors_total",
		"Failed accepts of the HTTP listener (each retried after a back-off).", nil, nil)
	descReplaced = prometheus.NewDesc("latent_cells_replaced_total",
		"Quarantined cells the pool replaced with fresh ones, per class.", []string{"cell_class"}, nil)
	descReplaceFailures = prometheus.NewDesc("latent_cell_replace_failures_total",
		"Cell replacements that could not reserve memory (each retried later), per class.", []string{"cell_class"}, nil)
	descIngress = prometheus.NewDesc("latent_ingress_in_use",
		"Requests (slots) and modeled bytes each ingress pool holds.", []string{"pool", "dimension"}, nil)
	descLoadSource = prometheus.NewDesc("latent_load_source_info",
		"What the load samples measure: PSI stall time or utilization, host-wide or of the node's cgroup.", []string{"kind"}, nil)
	descPauses = prometheus.NewDesc("latent_scheduler_pauses_total",
		"Running activations that paused, at a fuel check, for a newly arrived tenant's activation the fair queue put first.", nil, nil)
	descInstances = prometheus.NewDesc("latent_instance_activations_total",
		"Activations of snapshot and reuse revisions by how they got their instance: restored (a snapshot instance put back), recreated (made from the snapshot), reused, created.",
		[]string{"mode", "path"}, nil)
	descRecycled = prometheus.NewDesc("latent_instances_recycled_total",
		"Warm instances closed: after an unsuccessful activation, a grown memory, the reuse bound, idleness or their revision going.", nil, nil)
	descWarmIdle      = prometheus.NewDesc("latent_instances_idle", "Warm instances waiting for an activation.", nil, nil)
	descSnapshotBytes = prometheus.NewDesc("latent_snapshot_bytes",
		"Bytes of the snapshot images the node holds (linear memory after initialisation).", nil, nil)
	descCompiled = prometheus.NewDesc("latent_compiled_bytes",
		"Estimated size of the compiled code the runner keeps (bounded by node.max_compiled_bytes).", nil, nil)
)

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descCells, descWindow, descWaiting, descLoad, descAge, descLeak,
		descConns, descConnsShed, descConnsRefused, descAcceptErrors, descReplaced, descReplaceFailures, descCompiled, descLoadSource, descIngress, descPauses,
		descInstances, descRecycled, descWarmIdle, descSnapshotBytes} {
		ch <- d
	}
}

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	n := c.n
	for class, st := range n.pool.Stats() {
		cc := class.String()
		ch <- prometheus.MustNewConstMetric(descCells, prometheus.GaugeValue, float64(st.Usable), cc, "usable")
		ch <- prometheus.MustNewConstMetric(descCells, prometheus.GaugeValue, float64(st.Leased), cc, "busy")
		ch <- prometheus.MustNewConstMetric(descCells, prometheus.GaugeValue, float64(st.Quarantined), cc, "quarantined")
		ch <- prometheus.MustNewConstMetric(descReplaced, prometheus.CounterValue, float64(st.Replaced), cc)
		ch <- prometheus.MustNewConstMetric(descReplaceFailures, prometheus.CounterValue, float64(st.ReplaceFailures), cc)
	}
	ch <- prometheus.MustNewConstMetric(descCompiled, prometheus.GaugeValue, float64(n.run.CompiledBytes()))
	ws := n.run.WarmStats()
	ch <- prometheus.MustNewConstMetric(descInstances, prometheus.CounterValue, float64(ws.Restored), "snapshot", "restored")
	ch <- prometheus.MustNewConstMetric(descInstances, prometheus.CounterValue, float64(ws.Recreated), "snapshot", "recreated")
	ch <- prometheus.MustNewConstMetric(descInstances, prometheus.CounterValue, float64(ws.Reused), "reuse", "reused")
	ch <- prometheus.MustNewConstMetric(descInstances, prometheus.CounterValue, float64(ws.Created), "reuse", "created")
	ch <- prometheus.MustNewConstMetric(descRecycled, prometheus.CounterValue, float64(ws.Recycled))
	ch <- prometheus.MustNewConstMetric(descWarmIdle, prometheus.GaugeValue, float64(ws.Idle))
	ch <- prometheus.MustNewConstMetric(descSnapshotBytes, prometheus.GaugeValue, float64(ws.SnapshotBytes))
	ch <- prometheus.MustNewConstMetric(descLoadSource, prometheus.GaugeValue, 1, n.loadKind)
	for name, u := range front.PoolsUsage(n.dataPool, n.controlPool, "", true) {
		ch <- prometheus.MustNewConstMetric(descIngress, prometheus.GaugeValue, float64(u.Slots), name, "slots")
		ch <- prometheus.MustNewConstMetric(descIngress, prometheus.GaugeValue, float64(u.Bytes), name, "bytes")
	}
	sched := n.sched.Stats()
	for _, st := range sched.Cells {
		ch <- prometheus.MustNewConstMetric(descWindow, prometheus.GaugeValue, float64(st.Window), st.Class.String())
		ch <- prometheus.MustNewConstMetric(descWaiting, prometheus.GaugeValue, float64(st.Waiting), st.Class.String())
	}
	ch <- prometheus.MustNewConstMetric(descPauses, prometheus.CounterValue, float64(sched.Pauses))
	snap := n.load.Snapshot(n.clock.Now())
	ch <- prometheus.MustNewConstMetric(descLoad, prometheus.GaugeValue, snap.Last.CPU, "cpu")
	ch <- prometheus.MustNewConstMetric(descLoad, prometheus.GaugeValue, snap.Last.Memory, "memory")
	ch <- prometheus.MustNewConstMetric(descAge, prometheus.GaugeValue, snap.Age.Seconds())
	ch <- prometheus.MustNewConstMetric(descLeak, prometheus.CounterValue, float64(n.prov.LeakedPermits()))
	if n.conns != nil {
		cs := n.conns.Stats()
		ch <- prometheus.MustNewConstMetric(descConns, prometheus.GaugeValue, float64(cs.Idle), "idle")
		ch <- prometheus.MustNewConstMetric(descConns, prometheus.GaugeValue, float64(cs.New), "new")
		ch <- prometheus.MustNewConstMetric(descConns, prometheus.GaugeValue, float64(cs.Busy), "busy")
		ch <- prometheus.MustNewConstMetric(descConnsShed, prometheus.CounterValue, float64(cs.Shed))
		ch <- prometheus.MustNewConstMetric(descConnsRefused, prometheus.CounterValue, float64(cs.Refused))
		ch <- prometheus.MustNewConstMetric(descAcceptErrors, prometheus.CounterValue, float64(cs.AcceptErrors))
	}
}

package config

// Config, the node's configuration: its tables, Load and Parse, and the
// configurations of the layers derived from it.

import (
	"io"
	"maps"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cockroachdb/errors"
	"github.com/pelletier/go-toml/v2"

	"github.com/latent-node/latent-node/admission"
	"github.com/latent-node/latent-node/catalog"
	"github.com/latent-node/latent-node/cellpool"
	"github.com/latent-node/latent-node/runner"
	"github.com/latent-node/latent-node/scheduler"
	"github.com/latent-node/latent-node/vocab"
)

// MaxFileBytes bounds a configuration file. A larger file is refused before
// it is parsed.
const MaxFileBytes = 1 << 20

// CompileCacheDir is the subdirectory of the data directory that holds
// wazero's compilation cache (RunnerConfig).
const CompileCacheDir = "compile-cache"

// Defaults of the optional keys. Every limits table, the budget ceiling, each
// queue class's max_queued, each cell class's memory and parallelism and
// every allowlist have no default: they must be written out.
const (
	DefaultListen         = "127.0.0.1:8080"
	DefaultRegion         = "local"
	DefaultZone           = "local"
	DefaultMaxOutputBytes = runner.DefaultMaxOutputBytes // 1 MiB
	// DefaultMaxStreamedBytes bounds a wasi-http response streamed past
	// max_output_bytes.
	DefaultMaxStreamedBytes = 256 << 20
	DefaultShutdownGrace    = 10 * time.Second
	DefaultWriteTimeout     = 30 * time.Second

	DefaultCPUThreshold      = 0.95
	DefaultMemoryThreshold   = 0.90
	DefaultMaxObservationAge = 2 * time.Second
	DefaultSampleInterval    = 250 * time.Millisecond

	DefaultEstimatedServiceTime = 20 * time.Millisecond
	DefaultMinimumExecutionTime = time.Millisecond
	DefaultSafetyMargin         = 2 * time.Millisecond

	DefaultMaxIdentifierBytes = 128
	DefaultMaxMetadataEntries = 32
	DefaultMaxMetadataBytes   = 4096

	DefaultMaxWait = 10 * time.Second
	// DefaultLowerClassAfter and DefaultFairness are the scheduler's own
	// defaults.
	DefaultLowerClassAfter = scheduler.DefaultLowerClassAfter
	DefaultFairness        = FairnessFuel
)

// Fairness modes of [scheduler] fairness: the scheduler's.
const (
	FairnessFuel       = scheduler.FairnessFuel       // cost-aware: charged by fuel consumed
	FairnessRoundRobin = scheduler.FairnessRoundRobin // every dispatch costs 1
)

// Config is a validated node configuration. Parse, Load and
// Demo return it only when every rule holds; it is plain data afterwards.
// A caller that changes it must call Validate again.
type Config struct {
	Node         Node
	QueueClasses []QueueClass // [[queue_classes]], in file order
	CellClasses  map[vocab.CellClass]CellClass
	TrustClasses map[vocab.TrustClass]TrustClass
	Tenants      map[vocab.TenantID]Tenant
	Principals   []Principal // [[principals]], in file order
	Overload     Overload
	Deadline     admission.DeadlinePolicy
	Metadata     admission.MetadataPolicy
	Scheduler    Scheduler
	DeployLimits DeployLimits  // [deploy_limits]
	Catalog      CatalogLimits // [catalog]
	Ingress      Ingress       // [ingress]
	Tracing      Tracing       // [tracing]
	Cluster      Cluster       // [cluster]; without it the node is standalone
}

// Cluster is the [cluster] table: the node shares its catalog with other
// nodes through etcd. Without the table (Enabled false) the node keeps its
// catalog alone, as a standalone node.
type Cluster struct {
	// Enabled is true when the file has a [cluster] table.
	Enabled bool
	// Endpoints are the etcd client URLs ("http://10.0.0.1:2379").
	Endpoints []string
	// Prefix is the key prefix of this cluster's records in etcd.
	Prefix string
	// NodeID names this node among the cluster's members; unique.
	NodeID string
	// AdvertiseURL is the URL other nodes and balancers reach this node's
	// API at ("http://10.0.0.5:8080").
	AdvertiseURL string
	// LeaseTTL is the lease of the node's membership record and artifact
	// holdings: a node that stops renewing disappears after it.
	LeaseTTL time.Duration
	// Replication is the number of nodes that must hold a new artifact
	// before a release naming it is published (fewer when fewer nodes
	// are ready).
	Replication int
	// MaxStaleness is how long the node stays ready without confirming
	// that its catalog is current; it keeps serving its last catalog
	// after that, but /readyz answers 503.
	MaxStaleness time.Duration
	// TLS configures the etcd client's TLS ([cluster.tls]).
	TLS ClusterTLS
}

// ClusterTLS is the [cluster.tls] table: the CA that signs etcd's
// certificates and the node's client certificate, all PEM files.
type ClusterTLS struct {
	CAFile, CertFile, KeyFile string
}

// Defaults of the [cluster] table.
const (
	DefaultClusterPrefix       = "/latent/v1"
	DefaultClusterLeaseTTL     = 5 * time.Second
	DefaultClusterReplication  = 2
	DefaultClusterMaxStaleness = 30 * time.Second
)

// Tracing is the [tracing] table: OpenTelemetry spans of activations,
// exported over OTLP/HTTP. Off by default.
type Tracing struct {
	// Enabled turns tracing on; off, the node does no tracing work.
	Enabled bool
	// Endpoint is the OTLP/HTTP traces URL ("http://collector:4318/v1/traces");
	// required when Enabled.
	Endpoint string
	// SampleRatio is the share of traces sampled when the caller's
	// traceparent does not decide (0 to 1).
	SampleRatio float64
	// RespectRemoteSampled lets the caller's traceparent decide sampling
	// (its sampled flag forces a span, its unsampled flag suppresses it).
	// Off, the default, the node samples by SampleRatio alone and the
	// caller's trace id only continues the trace.
	RespectRemoteSampled bool
	// ServiceName is the resource's service.name.
	ServiceName string
	// Timeout bounds one export, and the flush at shutdown.
	Timeout time.Duration
	// BatchTimeout is the longest a finished span waits before export.
	BatchTimeout time.Duration
}

// Defaults of the [tracing] table.
const (
	DefaultTracingServiceName  = "latent-node"
	DefaultTracingSampleRatio  = 1.0
	DefaultTracingTimeout      = 10 * time.Second
	DefaultTracingBatchTimeout = 5 * time.Second
)

// Node is the [node] table.
type Node struct {
	// Listen is the HTTP listen address, host:port (host may be empty for
	// every interface; port 0 picks a free port). Default 127.0.0.1:8080.
	Listen string
	// DataDir holds the catalog, the artifacts and the compile cache.
	// Required, unless the caller supplies it (WithDataDir).
	DataDir string
	// Architecture, Region and Zone are the node's placement identity.
	// Architecture defaults to this host's (HostArchitecture); region and
	// zone default to "local".
	Architecture, Region, Zone string
	// MaxOutputBytes caps a guest's stdout: 1 byte to 1 GiB, default 1 MiB.
	MaxOutputBytes int
	// MaxStreamedBytes caps the body of a wasi-http guest's response that
	// outgrows MaxOutputBytes and is sent as the guest writes it (the node
	// holds at most MaxOutputBytes of it): 0 (no streaming: such a
	// response is output-exceeded) to 1 TiB, default 256 MiB.
	MaxStreamedBytes uint64
	// ShutdownGrace is how long running activations may finish after a
	// shutdown signal before they are cancelled (≥ 0, default 10s).
	ShutdownGrace time.Duration
	// BudgetCeiling is the hard per-activation ceiling ([node.budget_ceiling]:
	// cpu_fuel, memory_bytes, wall_time; all required and positive).
	BudgetCeiling vocab.Budget
	// Limits are the node-scope limits ([node.limits], all six required).
	Limits admission.TenantLimits
	// MaxConnections bounds concurrent client connections (idle keep-alive
	// connections are shed first at the bound). 0, the default, derives it:
	// 4096, or less to stay 64 descriptors below the open-file limit.
	MaxConnections int
	// MaxConnectionsPerAddress bounds one remote address's connections
	// (default 256).
	MaxConnectionsPerAddress int
	// CompileConcurrency is how many modules compile at once, each on a
	// lower-priority worker thread (1..64, default 1).
	CompileConcurrency int
	// MaxSignaturesPerTenant bounds the distinct function signatures new
	// to the node that one tenant's deploys may bring (default 20,000): the
	// runtime keeps every signature it compiled until the node restarts.
	MaxSignaturesPerTenant int
	// MaxRunningGuests bounds the guests running at once across every cell
	// class. 0, the default, means the CPUs this process may use: the
	// backlog then waits in the fair queue, not in the operating system's
	// run queue. See GuestSizing.
	MaxRunningGuests int
	// MaxCompiledBytes bounds the (estimated) size of the compiled code of
	// every deployed module together; a deploy past it is refused with 507
	// (default 1 GiB, at least 1 MiB).
	MaxCompiledBytes uint64
	// MaxMetricSeriesPerTenant bounds one tenant's per-route metric series
	// (latent_activations_total and latent_fuel_consumed_total label sets);
	// past it, activations count in the tenant's overflow series (1 to
	// 1,000,000, default 1000).
	MaxMetricSeriesPerTenant int
	// WriteTimeout bounds the writing of one answer: from the moment a
	// request's handler starts, and again from the moment its answer
	// starts (an invocation's once its activation answered), the answer
	// must be written within it, or the connection is closed (1ms to 1h,
	// default 30s). A client that does not read its answers holds a
	// connection at most this long.
	WriteTimeout time.Duration
	// MaxSnapshotBytesPerTenant bounds the snapshot images (linear memory
	// after initialisation) the node keeps for one tenant's revisions with
	// instance = "snapshot"; a deploy past it is refused (default 256 MiB,
	// at least 1 MiB).
	MaxSnapshotBytesPerTenant uint64
	// ReuseMaxActivations is how many activations a warm instance of a
	// revision with instance = "reuse" serves before it is recycled (1 to
	// 1,000,000, default 1000).
	ReuseMaxActivations int
	// WarmIdleTimeout is how long a warm instance (snapshot or reuse) may
	// stay unused before it is closed (1s to 24h, default 60s).
	WarmIdleTimeout time.Duration
	// MaxWarmInstances bounds the idle warm instances the node keeps
	// across all snapshot and reuse revisions; the longest idle goes first
	// (1 to 100,000, default 16). Each holds up to its linear memory.
	MaxWarmInstances int
	// UIHosts are the host names the status page (/ui, /ui/data) answers
	// under: a request whose Host is neither an IP address nor one of them
	// is refused (DNS rebinding). Names compare without port and case;
	// default "localhost" and the listen address's host when it is a name.
	UIHosts []string
	// TLS is [node.tls]: HTTPS on the API listener (off by default).
	TLS NodeTLS
}

// QueueClass is one [[queue_classes]] entry.
type QueueClass struct {
	Name string
	// MinPriority and MaxPriority are the inclusive range `priorities =
	// [first, last]`. The ranges of all classes are disjoint and cover
	// 0..node.limits.max_priority.
	MinPriority, MaxPriority uint32
	// MaxQueued is the class's pending-slot limit (required; 0 disables it).
	MaxQueued uint64
	// ReservedCells is the number of cells of every cell class that only this
	// class may use (default 0). The sum over all classes is at most every
	// cell class's parallelism.
	ReservedCells uint32
}

// CellClass is one [cell_classes.NAME] table.
type CellClass struct {
	// MemoryBytes is the linear memory of each cell: a positive multiple of
	// 64 KiB, at most 4 GiB. Required.
	MemoryBytes uint64
	// Parallelism is the number of cells, 1..cellpool.MaxParallelism. Required.
	Parallelism int
	// Threading lists the threading models offered (default ["single"]).
	Threading []vocab.Threading
	// Features are the WebAssembly features offered (default: DefaultFeatures).
	Features vocab.FeatureSet
	// TargetServiceTime is the adaptive-concurrency target (execution time
	// per 1,000,000 fuel); 0 disables adaptation. ≥ 0, default 0.
	TargetServiceTime time.Duration
}

// DefaultFeatures is what a cell class offers when it does not list
// features: every feature the runner supports in single-threaded cells.
var DefaultFeatures = vocab.FeatureSetOf(vocab.FeatureBulkMemory, vocab.FeatureSIMD,
	vocab.FeatureMultiValue, vocab.FeatureSignExtension, vocab.FeatureNontrappingF2I,
	vocab.FeatureReferenceTypes)

// TrustClass is one [trust_classes.NAME] table.
type TrustClass struct {
	CellClasses []vocab.CellClass // required list; may be empty (no cell)
	Limits      admission.Limits  // all four required
}

// Tenant is one [tenants.NAME] table. Every list is required and is an exact
// allowlist: an empty list denies everything.
type Tenant struct {
	TrustClasses []vocab.TrustClass
	CellClasses  []vocab.CellClass
	Subjects     []string
	Kinds        []admission.PrincipalKind
	Limits       admission.TenantLimits // all six required
}

// Principal is one [[principals]] entry: who a key authenticates as.
type Principal struct {
	Subject         string
	Kind            admission.PrincipalKind
	Tenant          vocab.TenantID
	ServiceIdentity string // required for kind = "service", absent for users
	Roles           Roles  // at least one
	// APIKeys are the hashes ("sha256:" + 64 lowercase hex digits) of the
	// keys that authenticate as this principal. A hash belongs to one
	// principal only.
	APIKeys []string
	// ClientCertificateSubjects are the subjects (RFC 2253 distinguished
	// names of the whole subject, "CN=ci,O=acme"; see
	// auth.Authenticator.AuthenticateCertificate) of the client
	// certificates that authenticate as this principal, when any CA of
	// node.tls.client_ca_file verifies them. A subject belongs to one
	// principal only. A principal has at least one API key or subject.
	ClientCertificateSubjects []string
	// ClientCertificateIssuers, when set, are the issuers (RFC 2253
	// distinguished names, compared like subjects) one of which must have
	// issued the client certificate: a certificate with a listed subject
	// from another CA of client_ca_file does not authenticate. Empty: any
	// CA of client_ca_file vouches for the subjects.
	ClientCertificateIssuers []string
}

// Overload is the [overload] table.
type Overload struct {
	CPUThreshold      float64       // (0, 1], default 0.95
	MemoryThreshold   float64       // (0, 1], default 0.90
	MaxObservationAge time.Duration // > 0, default 2s
	// SampleInterval is the load sampler's period: > 0 and shorter than
	// MaxObservationAge (or samples would go stale between two samples).
	// Default 250ms.
	SampleInterval time.Duration
}

// Scheduler is the [scheduler] table.
type Scheduler struct {
	MaxWait         time.Duration // > 0, default 10s
	LowerClassAfter int           // ≥ 1, default 8
	Fairness        string        // FairnessFuel (default) or FairnessRoundRobin
}

// Option adjusts Parse, Load and Demo.
type Option func(*options)

type options struct {
	dataDir, listen string
	demoKeys        []string
}

// WithDataDir sets node.data_dir, replacing any value in the file (serve
// --demo supplies a temporary directory). An empty dir changes nothing.
func WithDataDir(dir string) Option { return func(o *options) { o.dataDir = dir } }

// WithListen sets node.listen, replacing any value in the file (serve
// --listen). An empty address changes nothing.
func WithListen(addr string) Option { return func(o *options) { o.listen = addr } }

// WithDemoKey adds an API key hash ("sha256:…", see auth.Generate) to the
// principal with subject "demo" of tenant "demo", the one principal of the
// demo configuration. Without that principal the option is a problem.
func WithDemoKey(hash string) Option {
	return func(o *options) { o.demoKeys = append(o.demoKeys, hash) }
}

// Load reads and parses the file at path (at most MaxFileBytes). A
// configuration with problems returns a *Error (File set to path) listing
// every one; a file that cannot be read returns an error naming it.
func Load(path string, opts ...Option) (*Config, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, errors.Wrap(err, "config")
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return nil, errors.Wrap(err, "config: read "+path)
	}
	if len(data) > MaxFileBytes {
		return nil, errors.WithHint(errors.Newf("config: %s is larger than 1 MiB", path),
			"a node configuration is a few kilobytes; check that the path names the right file")
	}
	cfg, err := Parse(data, opts...)
	if err != nil {
		if e := (*Error)(nil); errors.As(err, &e) {
			e.File = path
		}
		return nil, err
	}
	return cfg, nil
}

// Parse decodes and validates a configuration. Decoding is strict: unknown
// keys, values of the wrong type, missing required keys, bad sizes and
// durations are problems. Then every range and cross-field rule is checked.
// It returns a *Error listing every problem (sorted, without duplicates) or
// the valid Config.
func Parse(data []byte, opts ...Option) (*Config, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	if len(data) > MaxFileBytes {
		return nil, &Error{Problems: []Problem{{Problem: "the configuration is larger than 1 MiB"}}}
	}
	var doc map[string]any
	if err := toml.Unmarshal(data, &doc); err != nil {
		return nil, &Error{Problems: []Problem{syntaxProblem(err)}}
	}
	d := decoder{}
	cfg := d.config(doc)
	o.apply(cfg, &d.problems)
	probs := merge(d.problems, cfg.check())
	if len(probs) > 0 {
		return nil, &Error{Problems: probs}
	}
	return cfg, nil
}

func (o *options) apply(cfg *Config, probs *[]Problem) {
	if o.dataDir != "" {
		cfg.Node.DataDir = o.dataDir
	}
	if o.listen != "" {
		cfg.Node.Listen = o.listen
	}
	if len(o.demoKeys) == 0 {
		return
	}
	i := slices.IndexFunc(cfg.Principals, func(p Principal) bool { return p.Tenant == "demo" && p.Subject == "demo" })
	if i < 0 {
		*probs = append(*probs, Problem{Field: "principals",
			Problem: `no principal with subject "demo" of tenant "demo" to receive the demo key`})
		return
	}
	cfg.Principals[i].APIKeys = append(cfg.Principals[i].APIKeys, o.demoKeys...)
}

// syntaxProblem turns a go-toml error into a problem with its position. It
// has no key path: go-toml's key of a syntax error is relative to the
// current table, and the position is exact.
func syntaxProblem(err error) Problem {
	msg := strings.TrimPrefix(err.Error(), "toml: ")
	var de *toml.DecodeError
	if !errors.As(err, &de) {
		return Problem{Problem: "invalid TOML: " + msg}
	}
	row, col := de.Position()
	return Problem{Problem: "invalid TOML at line " + strconv.Itoa(row) + ", column " + strconv.Itoa(col) + ": " + msg}
}

// CatalogConfig returns the catalog's options for the data directory: the
// node-wide and per-tenant bounds, and the module size bound from
// [deploy_limits]. The caller adds the inspector (and a clock in tests).
func (c *Config) CatalogConfig() catalog.Config {
	return catalog.Config{Dir: c.Node.DataDir, MaxServices: int(c.Catalog.MaxServices),
		MaxArtifactBytes: int64(c.DeployLimits.ModuleBytes), MaxServicesPerTenant: int(c.Catalog.MaxServicesPerTenant),
		MaxArtifactsPerTenant: int(c.Catalog.MaxArtifactsPerTenant), MaxArtifactBytesPerTenant: int64(c.Catalog.MaxArtifactBytesPerTenant),
		MaxDeployedBytesPerTenant: int64(c.Catalog.MaxDeployedBytesPerTenant), ArtifactGrace: c.Catalog.ArtifactGrace}
}

// AdmissionPolicy returns the admission policy of the configuration. It
// shares no memory with c.
func (c *Config) AdmissionPolicy() admission.Policy {
	p := admission.Policy{
		BudgetCeiling: c.Node.BudgetCeiling,
		Limits:        c.Node.Limits,
		QueueClasses:  make([]admission.QueueClassPolicy, len(c.QueueClasses)),
		CellClasses:   make(map[vocab.CellClass]admission.CellClassPolicy, len(c.CellClasses)),
		TrustClasses:  make(map[vocab.TrustClass]admission.TrustClassPolicy, len(c.TrustClasses)),
		Tenants:       make(map[vocab.TenantID]admission.TenantPolicy, len(c.Tenants)),
		Overload: admission.OverloadPolicy{
			CPUThreshold:      c.Overload.CPUThreshold,
			MemoryThreshold:   c.Overload.MemoryThreshold,
			MaxObservationAge: c.Overload.MaxObservationAge,
		},
		Deadline: c.Deadline,
		Metadata: c.Metadata,
		Placement: admission.NodePlacement{
			Architecture: c.Node.Architecture, Region: c.Node.Region, Zone: c.Node.Zone,
		},
	}
	for i, q := range c.QueueClasses {
		p.QueueClasses[i] = admission.QueueClassPolicy{Name: q.Name, MinPriority: q.MinPriority,
			MaxPriority: q.MaxPriority, MaxQueued: q.MaxQueued, ReservedCells: q.ReservedCells}
	}
	for class, cc := range c.CellClasses {
		p.CellClasses[class] = admission.CellClassPolicy{MemoryBytes: cc.MemoryBytes,
			Parallelism: uint32(cc.Parallelism), Threading: slices.Clone(cc.Threading), Features: cc.Features}
	}
	for name, tc := range c.TrustClasses {
		p.TrustClasses[name] = admission.TrustClassPolicy{CellClasses: slices.Clone(tc.CellClasses), Limits: tc.Limits}
	}
	for name, t := range c.Tenants {
		p.Tenants[name] = admission.TenantPolicy{TrustClasses: slices.Clone(t.TrustClasses),
			CellClasses: slices.Clone(t.CellClasses), Subjects: slices.Clone(t.Subjects),
			Kinds: slices.Clone(t.Kinds), Limits: t.Limits}
	}
	return p
}

// SchedulerConfig returns the scheduler's configuration: [scheduler], the
// queue classes in file order and the cell classes. The file has no key for
// the adaptive window's period: it is scheduler.DefaultAdjustInterval.
// Validate checks it with scheduler.Config.Validate.
func (c *Config) SchedulerConfig() scheduler.Config {
	sc := scheduler.Config{CellClasses: make(map[vocab.CellClass]scheduler.CellConfig, len(c.CellClasses)),
		QueueClasses: make([]scheduler.QueueConfig, len(c.QueueClasses)), MaxWait: c.Scheduler.MaxWait,
		LowerClassAfter: c.Scheduler.LowerClassAfter, Fairness: c.Scheduler.Fairness,
		AdjustInterval: scheduler.DefaultAdjustInterval}
	for class, cc := range c.CellClasses {
		sc.CellClasses[class] = scheduler.CellConfig{Parallelism: cc.Parallelism, TargetServiceTime: cc.TargetServiceTime}
	}
	for i, q := range c.QueueClasses {
		sc.QueueClasses[i] = scheduler.QueueConfig{Name: q.Name, MinPriority: q.MinPriority, MaxPriority: q.MaxPriority,
			MaxQueued: int(min(q.MaxQueued, math.MaxInt)), ReservedCells: int(q.ReservedCells)}
	}
	return sc
}

// CellPoolConfig returns the cell pool configuration: one pool class per
// configured cell class, with its parallelism and memory.
func (c *Config) CellPoolConfig() cellpool.Config {
	cfg := cellpool.Config{Classes: make(map[vocab.CellClass]cellpool.ClassConfig, len(c.CellClasses))}
	for class, cc := range c.CellClasses {
		cfg.Classes[class] = cellpool.ClassConfig{Parallelism: cc.Parallelism, MemoryBytes: cc.MemoryBytes}
	}
	return cfg
}

// RunnerConfig returns the runner configuration: the compile cache in
// dataDir/compile-cache (normally dataDir is c.Node.DataDir; an empty
// dataDir keeps the cache in memory), the output cap, the deploy limits,
// the compile bounds and the bounds of warm instances (max_warm_instances
// as WarmInstanceBound applies it on this host). The fuel slice is the
// runner's default.
func (c *Config) RunnerConfig(dataDir string) runner.Config {
	streamed := int64(c.Node.MaxStreamedBytes)
	if streamed == 0 {
		streamed = -1 // off
	}
	cfg := runner.Config{MaxOutputBytes: c.Node.MaxOutputBytes, MaxStreamedBytes: streamed, Limits: c.DeployLimits, FuelSlice: GuestFuelSlice,
		CompileConcurrency: c.Node.CompileConcurrency, MaxCompiledBytes: c.Node.MaxCompiledBytes,
		MaxSignaturesPerTenant: c.Node.MaxSignaturesPerTenant, MaxSnapshotBytesPerTenant: c.Node.MaxSnapshotBytesPerTenant,
		ReuseMaxActivations: c.Node.ReuseMaxActivations, WarmIdleTimeout: c.Node.WarmIdleTimeout,
		MaxWarmInstances: c.Node.MaxWarmInstances}
	cfg.MaxWarmInstances, _ = WarmInstanceBound(c.Node.MaxWarmInstances, c.Sizing(1).Cells, HostMaxMapCount())
	if dataDir != "" {
		cfg.CacheDir = filepath.Join(dataDir, CompileCacheDir)
	}
	return cfg
}

// GuestFuelSlice is the fuel a guest runs between two checks of the node
// (about 0.1 ms of compiled code): its deadline and cancellation, a turn
// for the network front, and a pause for a newcomer the fair queue puts
// first. A check costs a host call, well under 1 % at this period.
const GuestFuelSlice = 1 << 17

// GuestSizing is what the configured parallelism means on a host with cpus
// CPUs available to the process: at most Guests guests run at once (the
// cells of every class together, capped by node.max_running_guests or by
// the CPUs). Go keeps its default processors (one per CPU); guests give
// theirs to the network front when an activation ends and at every fuel
// slice, so requests are read and answers written while guests run.
type GuestSizing struct {
	CPUs, Cells, Guests int
}

// Sizing returns the guest sizing of c on a host with cpus CPUs.
func (c *Config) Sizing(cpus int) GuestSizing {
	cells := 0
	for _, cc := range c.CellClasses {
		cells += cc.Parallelism
	}
	limit := c.Node.MaxRunningGuests
	if limit <= 0 {
		limit = max(cpus, 1)
	}
	return GuestSizing{CPUs: cpus, Cells: cells, Guests: min(cells, limit)}
}

// String says it in one line, for `latent-node check` and the start-up log.
func (g GuestSizing) String() string {
	cpus := strconv.Itoa(g.CPUs) + " CPUs"
	if g.CPUs == 1 {
		cpus = "1 CPU"
	}
	return cpus + ": at most " + strconv.Itoa(g.Guests) + " of " + strconv.Itoa(g.Cells) +
		" cells run guests at once; the rest of the backlog waits in the fair queue"
}

// SortedCellClasses returns the configured cell classes in their fixed
// order (tiny to xlarge).
func (c *Config) SortedCellClasses() []vocab.CellClass {
	return slices.Sorted(maps.Keys(c.CellClasses))
}

// HostArchitecture is the default node.architecture: this host's
// architecture in the names manifests use (amd64 → x86_64, arm64 → aarch64,
// 386 → x86; other GOARCH values unchanged).
func HostArchitecture() string { return architectureOf(runtime.GOARCH) }

func architectureOf(goarch string) string {
	switch goarch {
	case "amd64":
		return "x86_64"
	case "arm64":
		return "aarch64"
	case "386":
		return "x86"
	}
	return goarch
}

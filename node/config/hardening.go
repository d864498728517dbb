package config

// The tables that bound the node's work ([deploy_limits], [catalog],
// [ingress], connections, compiles and warm instances), and the checks of
// those, [tracing] and [cluster].

import (
	"math"
	"net/url"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/latent-node/latent-node/catalog"
	"github.com/latent-node/latent-node/internal/peerurl"
	"github.com/latent-node/latent-node/runner"
	"github.com/latent-node/latent-node/vocab"
)

// DeployLimits is the [deploy_limits] table: what a module may contain to be
// deployed (the runner's deploy limits). They bound the time and memory
// compiling any accepted module takes (the README's security model states
// the measured bound). A module over one of them is refused with a 422 that
// names the key. Every key is optional and must be at least 1.
type DeployLimits = runner.Limits

// DefaultDeployLimits are the limits of keys the file leaves out.
var DefaultDeployLimits = runner.DefaultLimits()

type limitKey struct {
	key string
	dst *uint64
}

// deployLimitKeys lists the [deploy_limits] keys (schema) with their
// fields.
func deployLimitKeys(l *DeployLimits) []limitKey {
	v := reflect.ValueOf(l).Elem()
	var out []limitKey
	for _, k := range schema[v.Type()] {
		out = append(out, limitKey{k.name, v.FieldByName(k.field).Addr().Interface().(*uint64)})
	}
	return out
}

// CatalogLimits is the [catalog] table: how much of the deployment catalog
// one tenant, and the node, may hold.
type CatalogLimits struct {
	// MaxServices bounds deployed services on the node (default 4096).
	MaxServices uint64
	// MaxServicesPerTenant bounds one tenant's services (default 256).
	MaxServicesPerTenant uint64
	// MaxArtifactsPerTenant bounds the modules one tenant has uploaded and
	// not yet had collected (default 256).
	MaxArtifactsPerTenant uint64
	// MaxArtifactBytesPerTenant bounds their bytes (default 1 GiB).
	MaxArtifactBytesPerTenant uint64
	// MaxDeployedBytesPerTenant bounds the bytes of the distinct modules
	// the tenant's releases use (default 128 MiB): the compiled code one
	// tenant keeps is about six times that.
	MaxDeployedBytesPerTenant uint64
	// ArtifactGrace is how long an uploaded module no release of its tenant
	// references is kept before it is collected (default 1h, > 0).
	ArtifactGrace time.Duration
}

// DefaultCatalogLimits are the [catalog] values of keys the file leaves out.
var DefaultCatalogLimits = CatalogLimits{
	MaxServices:               catalog.DefaultMaxServices,
	MaxServicesPerTenant:      catalog.DefaultMaxServicesPerTenant,
	MaxArtifactsPerTenant:     catalog.DefaultMaxArtifactsPerTenant,
	MaxArtifactBytesPerTenant: catalog.DefaultMaxArtifactBytesPerTenant,
	MaxDeployedBytesPerTenant: catalog.DefaultMaxDeployedBytesPerTenant,
	ArtifactGrace:             catalog.DefaultArtifactGrace,
}

// Defaults of the [node] keys that bound connections and compiles.
const (
	// DefaultMaxConnections: 0 means "derive it": 4096, lowered to leave 64
	// descriptors below the process's open-file limit.
	DefaultMaxConnections           = 0
	DefaultMaxConnectionsPerAddress = 256
	DefaultCompileConcurrency       = 1
	DefaultMaxSignaturesPerTenant   = runner.DefaultMaxSignaturesPerTenant
	maxSignaturesPerTenant          = 10_000_000
	DefaultMaxCompiledBytes         = runner.DefaultMaxCompiledBytes
	maxCompileConcurrency           = 64
	// DefaultMaxMetricSeriesPerTenant is node.max_metric_series_per_tenant's
	// default: per-route series (label sets) of one tenant.
	DefaultMaxMetricSeriesPerTenant = 1000
	maxMetricSeriesPerTenant        = 1_000_000
)

// Defaults and bounds of the [node] keys of warm instances (revisions with
// instance = "snapshot" or "reuse").
const (
	DefaultMaxSnapshotBytesPerTenant = runner.DefaultMaxSnapshotBytesPerTenant
	minSnapshotBytesPerTenant        = 1 << 20
	DefaultReuseMaxActivations       = runner.DefaultReuseMaxActivations
	maxReuseActivations              = 1_000_000
	DefaultWarmIdleTimeout           = runner.DefaultWarmIdleTimeout
	minWarmIdleTimeout               = time.Second
	maxWarmIdleTimeout               = 24 * time.Hour
	DefaultMaxWarmInstances          = runner.DefaultMaxWarmInstances
	maxWarmInstances                 = 100_000
)

func (c *Config) checkHardening(v *checker) {
	for _, k := range deployLimitKeys(&c.DeployLimits) {
		if *k.dst < 1 {
			v.add("deploy_limits."+k.key, "must be at least 1")
		}
	}
	if c.DeployLimits.ModuleBytes > math.MaxInt32 {
		v.add("deploy_limits.module_bytes", "must be at most 2GiB")
	}
	cl := c.Catalog
	for _, k := range []struct {
		key string
		n   uint64
	}{
		{"max_services", cl.MaxServices}, {"max_services_per_tenant", cl.MaxServicesPerTenant},
		{"max_artifacts_per_tenant", cl.MaxArtifactsPerTenant}, {"max_artifact_bytes_per_tenant", cl.MaxArtifactBytesPerTenant},
		{"max_deployed_bytes_per_tenant", cl.MaxDeployedBytesPerTenant},
	} {
		if k.n < 1 {
			v.add("catalog."+k.key, "must be at least 1")
		}
	}
	if cl.MaxServicesPerTenant > cl.MaxServices && cl.MaxServices >= 1 {
		v.add("catalog.max_services_per_tenant", "must be at most catalog.max_services ("+
			strconv.FormatUint(cl.MaxServices, 10)+")")
	}
	if cl.ArtifactGrace <= 0 {
		v.add("catalog.artifact_grace", "must be positive")
	}
	n := c.Node
	if n.MaxConnections < 0 {
		v.add("node.max_connections", "must not be negative (0 derives it from the open-file limit)")
	}
	if n.MaxConnectionsPerAddress < 1 {
		v.add("node.max_connections_per_address", "must be at least 1")
	}
	if n.MaxCompiledBytes < 1<<20 {
		v.add("node.max_compiled_bytes", "must be at least 1MiB")
	}
	if n.MaxRunningGuests < 0 {
		v.add("node.max_running_guests", "must not be negative (0: the CPUs this process may use)")
	}
	if n.CompileConcurrency < 1 || n.CompileConcurrency > maxCompileConcurrency {
		v.add("node.compile_concurrency", "must be from 1 to "+strconv.Itoa(maxCompileConcurrency))
	}
	if n.MaxSignaturesPerTenant < 1 || n.MaxSignaturesPerTenant > maxSignaturesPerTenant {
		v.add("node.max_signatures_per_tenant", "must be from 1 to "+strconv.Itoa(maxSignaturesPerTenant))
	}
	if n.MaxMetricSeriesPerTenant < 1 || n.MaxMetricSeriesPerTenant > maxMetricSeriesPerTenant {
		v.add("node.max_metric_series_per_tenant", "must be from 1 to "+strconv.Itoa(maxMetricSeriesPerTenant))
	}
	if n.MaxSnapshotBytesPerTenant < minSnapshotBytesPerTenant {
		v.add("node.max_snapshot_bytes_per_tenant", "must be at least 1MiB")
	}
	if n.ReuseMaxActivations < 1 || n.ReuseMaxActivations > maxReuseActivations {
		v.add("node.reuse_max_activations", "must be from 1 to 1000000")
	}
	if n.WarmIdleTimeout < minWarmIdleTimeout || n.WarmIdleTimeout > maxWarmIdleTimeout {
		v.add("node.warm_idle_timeout", "must be from 1s to 24h")
	}
	if n.MaxWarmInstances < 1 || n.MaxWarmInstances > maxWarmInstances {
		v.add("node.max_warm_instances", "must be from 1 to "+strconv.Itoa(maxWarmInstances))
	}
}

// IngressOverheadBytes is added to every request's modeled bytes (headers,
// buffers, the answer).
const IngressOverheadBytes = 4 << 10

// IngressPool is one pool of the ingress governor ([ingress.data],
// [ingress.control]): how many requests it holds at once, their modeled
// bytes (a declared Content-Length, or the route's body cap for a body of
// unknown length, plus IngressOverheadBytes each), how many requests one
// tenant and one principal may hold, and how many modeled bytes. Slots are
// at least 1, per_principal <= per_tenant <= slots; bytes are at least 1MiB
// and bytes_per_principal <= bytes_per_tenant <= bytes, each at least the
// largest request of the pool's routes (its body cap plus the overhead:
// node.limits.max_payload_bytes for the data pool, deploy_limits.module_bytes
// for the control pool), or such a request could never be admitted.
type IngressPool struct {
	Slots        int
	Bytes        uint64
	PerTenant    int
	PerPrincipal int
	// BytesPerTenant and BytesPerPrincipal bound the modeled bytes of the
	// requests one tenant, and one principal, holds at once, queued or
	// executing. A key the file leaves out takes its default, lowered to
	// the pool's bytes (per tenant) or to bytes_per_tenant (per principal)
	// when those are smaller.
	BytesPerTenant    uint64
	BytesPerPrincipal uint64
}

// Ingress is the [ingress] table: the data pool serves invocations, the
// control pool uploads, deploys and the admission views.
type Ingress struct {
	Data, Control IngressPool
}

// DefaultIngress are the pools' limits of keys the file leaves out.
var DefaultIngress = Ingress{
	Data: IngressPool{Slots: 4096, Bytes: 1 << 30, PerTenant: 2048, PerPrincipal: 1024,
		BytesPerTenant: 512 << 20, BytesPerPrincipal: 256 << 20},
	Control: IngressPool{Slots: 32, Bytes: 512 << 20, PerTenant: 8, PerPrincipal: 4,
		BytesPerTenant: 256 << 20, BytesPerPrincipal: 128 << 20},
}

// ingressLargest returns the largest modeled bytes of one request of each
// pool's routes, with the key that bounds it ("" when that key is itself
// out of range and reported there).
func (c *Config) ingressLargest() (data, control uint64, dataKey, controlKey string) {
	data, dataKey = c.Node.Limits.MaxPayloadBytes+IngressOverheadBytes, "node.limits.max_payload_bytes"
	if mb := c.DeployLimits.ModuleBytes; mb >= 1 && mb <= math.MaxInt32 {
		control, controlKey = max(mb, vocab.MaxManifestBytes)+IngressOverheadBytes, "deploy_limits.module_bytes"
	}
	return data, control, dataKey, controlKey
}

func (c *Config) checkIngress(v *checker) {
	data, control, dataKey, controlKey := c.ingressLargest()
	for _, pool := range []struct {
		key     string
		p       IngressPool
		largest uint64
		capKey  string
	}{{"data", c.Ingress.Data, data, dataKey}, {"control", c.Ingress.Control, control, controlKey}} {
		k := "ingress." + pool.key + "."
		p := pool.p
		if p.Slots < 1 {
			v.add(k+"slots", "must be at least 1")
		}
		if p.PerTenant < 1 || p.PerTenant > p.Slots && p.Slots >= 1 {
			v.add(k+"per_tenant", "must be from 1 to "+k+"slots")
		}
		if p.PerPrincipal < 1 || p.PerPrincipal > p.PerTenant && p.PerTenant >= 1 {
			v.add(k+"per_principal", "must be from 1 to "+k+"per_tenant")
		}
		// bytes >= bytes_per_tenant >= bytes_per_principal >= the largest
		// request; each is checked only when the one above it holds, so a
		// default lowered to a bad bound is not reported twice.
		least := sizeString(pool.largest) + " (the largest request: " + pool.capKey + " + 4KiB)"
		if pool.capKey == "" {
			pool.largest, least = 0, ""
		}
		if p.Bytes < 1<<20 {
			v.add(k+"bytes", "must be at least 1MiB")
			continue
		}
		if p.Bytes < pool.largest {
			v.add(k+"bytes", "must be at least "+least)
			continue
		}
		if p.BytesPerTenant < pool.largest || p.BytesPerTenant > p.Bytes {
			v.add(k+"bytes_per_tenant", "must be from "+orLeast(least)+" to "+k+"bytes ("+sizeString(p.Bytes)+")")
			continue
		}
		if p.BytesPerPrincipal < pool.largest || p.BytesPerPrincipal > p.BytesPerTenant {
			v.add(k+"bytes_per_principal", "must be from "+orLeast(least)+" to "+k+"bytes_per_tenant ("+
				sizeString(p.BytesPerTenant)+")")
		}
	}
}

func orLeast(least string) string {
	if least == "" {
		return "1 byte"
	}
	return least
}

// sizeString writes n bytes in the largest binary unit that divides it.
func sizeString(n uint64) string {
	for _, u := range []struct {
		shift uint
		name  string
	}{{30, "GiB"}, {20, "MiB"}, {10, "KiB"}} {
		if n >= 1<<u.shift && n%(1<<u.shift) == 0 {
			return strconv.FormatUint(n>>u.shift, 10) + u.name
		}
	}
	return strconv.FormatUint(n, 10) + " bytes"
}

// checkTracing checks [tracing]: the endpoint is needed only when tracing
// is on, the other keys always.
func (c *Config) checkTracing(v *checker) {
	t := c.Tracing
	if t.Enabled {
		u, err := url.Parse(t.Endpoint)
		switch {
		case t.Endpoint == "":
			v.add("tracing.endpoint", "missing: required when tracing.enabled is true")
		case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
			v.add("tracing.endpoint", `must be an http or https URL such as "http://127.0.0.1:4318/v1/traces"`)
		}
	}
	if !(t.SampleRatio >= 0 && t.SampleRatio <= 1) {
		v.add("tracing.sample_ratio", "must be between 0 and 1")
	}
	if t.ServiceName == "" {
		v.add("tracing.service_name", "must not be empty")
	}
	if t.Timeout <= 0 {
		v.add("tracing.timeout", "must be positive")
	}
	if t.BatchTimeout <= 0 {
		v.add("tracing.batch_timeout", "must be positive")
	}
}

// nodeIDPattern is a cluster node id: it names etcd keys and appears in
// URLs and logs, so it is a DNS label.
var nodeIDPattern = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// checkCluster checks [cluster] when the file has it.
func (c *Config) checkCluster(v *checker) {
	cl := c.Cluster
	if !cl.Enabled {
		return
	}
	if len(cl.Endpoints) == 0 {
		v.add("cluster.endpoints", `must name at least one etcd client URL such as "http://127.0.0.1:2379"`)
	}
	for i, e := range cl.Endpoints {
		if u, err := url.Parse(e); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			v.add("cluster.endpoints["+strconv.Itoa(i)+"]", `must be an http or https URL such as "http://127.0.0.1:2379"`)
		}
	}
	if !strings.HasPrefix(cl.Prefix, "/") || strings.HasSuffix(cl.Prefix, "/") || strings.Contains(cl.Prefix, "//") {
		v.add("cluster.prefix", `must start with "/" and not end with one, such as "/latent/v1"`)
	}
	if !nodeIDPattern.MatchString(cl.NodeID) {
		v.add("cluster.node_id", "must be 1 to 63 lower-case letters, digits and '-', starting and ending with a letter or digit")
	}
	if err := peerurl.Check(cl.AdvertiseURL, c.Node.TLS.Enabled()); err != nil {
		v.add("cluster.advertise_url", `must be this node's API as scheme://host:port such as "http://10.0.0.5:8080" (https with [node.tls]): `+
			err.Error())
	}
	if cl.LeaseTTL < 2*time.Second || cl.LeaseTTL > time.Hour {
		v.add("cluster.lease_ttl", "must be between 2s and 1h")
	}
	if cl.Replication < 1 || cl.Replication > 64 {
		v.add("cluster.replication", "must be between 1 and 64")
	}
	if cl.MaxStaleness < time.Second {
		v.add("cluster.max_staleness", "must be at least 1s")
	}
	t := cl.TLS
	if (t.CertFile == "") != (t.KeyFile == "") {
		v.add("cluster.tls", "cert_file and key_file go together: set both or neither")
	}
}

package config

import (
	"maps"
	"math"
	"reflect"
	"slices"
	"strconv"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/latent-node/latent-node/admission"
	"github.com/latent-node/latent-node/vocab"
)

// The document is parsed by go-toml into a generic tree (tables are
// map[string]any, arrays []any, integers int64) and decoded here against the
// schema that docs/configuration.md documents. go-toml's own struct decoding
// stops at the first value of the wrong type and then drops the unknown-key
// report, and its key paths lose array indices; walking the tree reports
// every unknown key, wrong type, missing key, bad size and bad duration at
// once, each with its full key path ("principals[2].api_keys[0]").

// The walk follows schema: the keys of each table, by the table's Go type,
// each with its Go field and options. The Go type of the field gives the
// rest: strings (and types of kind string), integers bounded by their type
// (int to math.MaxInt32, uint32, uint64 to math.MaxInt64), float64 (an
// integer is accepted), bool, time.Duration (a Go duration string); a struct is a
// table, a slice of structs an array of tables, a map of structs a table of
// named tables, any other slice an array of strings. A type in parsers is
// written as a string and parsed. A field not in schema has no key.
//
// The keys are string literals in a table rather than struct tags: the
// types of other packages (admission's limits, the runner's deploy limits)
// need them too, and the reference's drift test (docs_test.go) finds the
// candidate key names among the package's string literals.

// key is one key of a table: the Go field (a promoted field is fine), the
// key's name in the file, and its options.
type key struct {
	field, name string
	opts        keyOpts
}

type keyOpts uint8

const (
	// required: a missing key is "missing required key" (or "missing
	// required table" for a table); requiredLimit and requiredQueue say
	// why, for the limits tables and the queue class's max_queued.
	required keyOpts = 1 << iota
	requiredLimit
	requiredQueue
	// asSize: an integer of bytes or a string such as "64MiB".
	asSize
	// asSet: an array of strings whose parsed values are OR-ed together.
	asSet
	// byHook: the struct decodes the key itself (keyDecoder).
	byHook
)

// missing returns the problem of the key when it is missing, "" when it is
// optional.
func (k key) missing(table bool) string {
	switch {
	case k.opts&requiredLimit != 0:
		return "missing required key: every limits table names all of its fields (0 grants no capacity)"
	case k.opts&requiredQueue != 0:
		return "missing required key: the class's queue limit (0 grants no capacity)"
	case k.opts&required != 0 && table:
		return "missing required table"
	case k.opts&required != 0:
		return "missing required key"
	}
	return ""
}

var limitsKeys = []key{{"MaxLiveActivations", "max_live_activations", requiredLimit},
	{"MaxQueued", "max_queued", requiredLimit}, {"MaxReservedFuel", "max_reserved_fuel", requiredLimit},
	{"MaxReservedMemory", "max_reserved_memory", requiredLimit | asSize}}

// schema lists the keys of every table, by the table's Go type.
var schema = map[reflect.Type][]key{
	reflect.TypeFor[Config](): {{"Node", "node", required}, {"QueueClasses", "queue_classes", 0},
		{"CellClasses", "cell_classes", 0}, {"TrustClasses", "trust_classes", 0}, {"Tenants", "tenants", 0},
		{"Principals", "principals", 0}, {"Overload", "overload", 0}, {"Deadline", "deadline", 0},
		{"Metadata", "metadata", 0}, {"Scheduler", "scheduler", 0}, {"DeployLimits", "deploy_limits", 0},
		{"Catalog", "catalog", 0}, {"Ingress", "ingress", 0}, {"Tracing", "tracing", 0},
		{"Cluster", "cluster", 0}},
	reflect.TypeFor[Node](): {{"Listen", "listen", 0}, {"DataDir", "data_dir", 0},
		{"Architecture", "architecture", 0}, {"Region", "region", 0}, {"Zone", "zone", 0},
		{"MaxOutputBytes", "max_output_bytes", asSize},
		{"MaxStreamedBytes", "max_streamed_bytes", asSize}, {"ShutdownGrace", "shutdown_grace", 0},
		{"MaxConnections", "max_connections", 0}, {"MaxConnectionsPerAddress", "max_connections_per_address", 0},
		{"CompileConcurrency", "compile_concurrency", 0}, {"MaxRunningGuests", "max_running_guests", 0},
		{"MaxSignaturesPerTenant", "max_signatures_per_tenant", 0},
		{"MaxMetricSeriesPerTenant", "max_metric_series_per_tenant", 0},
		{"MaxCompiledBytes", "max_compiled_bytes", asSize}, {"WriteTimeout", "write_timeout", 0},
		{"MaxSnapshotBytesPerTenant", "max_snapshot_bytes_per_tenant", asSize},
		{"ReuseMaxActivations", "reuse_max_activations", 0}, {"WarmIdleTimeout", "warm_idle_timeout", 0},
		{"MaxWarmInstances", "max_warm_instances", 0},
		{"UIHosts", "ui_hosts", 0}, {"BudgetCeiling", "budget_ceiling", required},
		{"Limits", "limits", required}, {"TLS", "tls", 0}},
	reflect.TypeFor[NodeTLS](): {{"CertFile", "cert_file", 0}, {"KeyFile", "key_file", 0},
		{"ClientCAFile", "client_ca_file", 0}},
	reflect.TypeFor[vocab.Budget](): {{"CPUFuel", "cpu_fuel", required},
		{"MemoryBytes", "memory_bytes", required | asSize}, {"WallTime", "wall_time", required}},
	reflect.TypeFor[admission.Limits](): limitsKeys,
	reflect.TypeFor[admission.TenantLimits](): append(slices.Clip(limitsKeys),
		key{"MaxPayloadBytes", "max_payload_bytes", requiredLimit | asSize},
		key{"MaxPriority", "max_priority", requiredLimit}),
	reflect.TypeFor[QueueClass](): {{"Name", "name", required}, {"MinPriority", "priorities", required | byHook},
		{"MaxQueued", "max_queued", requiredQueue}, {"ReservedCells", "reserved_cells", 0}},
	reflect.TypeFor[CellClass](): {{"MemoryBytes", "memory", required | asSize},
		{"Parallelism", "parallelism", required}, {"Threading", "threading", 0},
		{"Features", "features", asSet}, {"TargetServiceTime", "target_service_time", 0}},
	reflect.TypeFor[TrustClass](): {{"CellClasses", "cell_classes", required}, {"Limits", "limits", required}},
	reflect.TypeFor[Tenant](): {{"TrustClasses", "trust_classes", required},
		{"CellClasses", "cell_classes", required}, {"Subjects", "subjects", required},
		{"Kinds", "kinds", required}, {"Limits", "limits", required}},
	reflect.TypeFor[Principal](): {{"Subject", "subject", required}, {"Kind", "kind", required},
		{"Tenant", "tenant", required}, {"ServiceIdentity", "service_identity", 0},
		{"Roles", "roles", required | asSet}, {"APIKeys", "api_keys", 0},
		{"ClientCertificateSubjects", "client_certificate_subjects", 0},
		{"ClientCertificateIssuers", "client_certificate_issuers", 0}},
	reflect.TypeFor[Overload](): {{"CPUThreshold", "cpu_threshold", 0}, {"MemoryThreshold", "memory_threshold", 0},
		{"MaxObservationAge", "max_observation_age", 0}, {"SampleInterval", "sample_interval", 0}},
	reflect.TypeFor[admission.DeadlinePolicy](): {{"EstimatedServiceTime", "estimated_service_time", 0},
		{"MinimumExecutionTime", "minimum_execution_time", 0}, {"SafetyMargin", "safety_margin", 0}},
	reflect.TypeFor[admission.MetadataPolicy](): {{"MaxIdentifierBytes", "maximum_identifier_bytes", 0},
		{"MaxEntries", "maximum_metadata_entries", 0}, {"MaxBytes", "maximum_metadata_bytes", 0}},
	reflect.TypeFor[Scheduler](): {{"MaxWait", "max_wait", 0}, {"LowerClassAfter", "lower_class_after", 0},
		{"Fairness", "fairness", 0}},
	reflect.TypeFor[DeployLimits](): {{"ModuleBytes", "module_bytes", asSize}, {"Functions", "functions", 0},
		{"FunctionLocals", "function_locals", 0}, {"TotalLocals", "total_locals", 0},
		{"FunctionBodyBytes", "function_body_bytes", asSize}, {"CodeBytes", "code_bytes", asSize},
		{"NestingDepth", "nesting_depth", 0}, {"DataBytes", "data_bytes", asSize}, {"Imports", "imports", 0},
		{"Exports", "exports", 0}, {"Tables", "tables", 0}, {"TableElements", "table_elements", 0},
		{"Globals", "globals", 0}, {"Types", "types", 0}, {"TypeParams", "type_params", 0},
		{"LoopLocalWork", "loop_local_work", 0}},
	reflect.TypeFor[CatalogLimits](): {{"MaxServices", "max_services", 0},
		{"MaxServicesPerTenant", "max_services_per_tenant", 0},
		{"MaxArtifactsPerTenant", "max_artifacts_per_tenant", 0},
		{"MaxArtifactBytesPerTenant", "max_artifact_bytes_per_tenant", asSize},
		{"MaxDeployedBytesPerTenant", "max_deployed_bytes_per_tenant", asSize},
		{"ArtifactGrace", "artifact_grace", 0}},
	reflect.TypeFor[Ingress](): {{"Data", "data", 0}, {"Control", "control", 0}},
	reflect.TypeFor[Tracing](): {{"Enabled", "enabled", 0}, {"Endpoint", "endpoint", 0},
		{"SampleRatio", "sample_ratio", 0}, {"RespectRemoteSampled", "respect_remote_sampled", 0}, {"ServiceName", "service_name", 0}, {"Timeout", "timeout", 0},
		{"BatchTimeout", "batch_timeout", 0}},
	reflect.TypeFor[Cluster](): {{"Endpoints", "endpoints", required}, {"Prefix", "prefix", 0},
		{"NodeID", "node_id", required}, {"AdvertiseURL", "advertise_url", required}, {"LeaseTTL", "lease_ttl", 0},
		{"Replication", "replication", 0}, {"MaxStaleness", "max_staleness", 0}, {"TLS", "tls", 0}},
	reflect.TypeFor[ClusterTLS](): {{"CAFile", "ca_file", 0}, {"CertFile", "cert_file", 0}, {"KeyFile", "key_file", 0}},
	reflect.TypeFor[IngressPool](): {{"Slots", "slots", 0}, {"Bytes", "bytes", asSize},
		{"PerTenant", "per_tenant", 0}, {"PerPrincipal", "per_principal", 0},
		{"BytesPerTenant", "bytes_per_tenant", asSize}, {"BytesPerPrincipal", "bytes_per_principal", asSize}},
}

// hints say why a key that exists elsewhere is refused in a table of the
// type.
var hints = map[reflect.Type]map[string]string{
	reflect.TypeFor[admission.Limits](): {
		"max_payload_bytes": "payload and priority ceilings exist only in node and tenant limits",
		"max_priority":      "payload and priority ceilings exist only in node and tenant limits",
	},
}

// parsers decode the types written as strings (for a set: one element).
var parsers = map[reflect.Type]func(string) (any, error){
	reflect.TypeFor[vocab.CellClass]():         parser(vocab.ParseCellClass),
	reflect.TypeFor[vocab.Threading]():         parser(vocab.ParseThreading),
	reflect.TypeFor[admission.PrincipalKind](): parser(parseKind),
	reflect.TypeFor[Roles]():                   parser(ParseRole),
	reflect.TypeFor[vocab.FeatureSet](): func(s string) (any, error) {
		f, err := vocab.ParseFeature(s)
		return vocab.FeatureSetOf(f), err
	},
}

func parser[T any](parse func(string) (T, error)) func(string) (any, error) {
	return func(s string) (any, error) { return parse(s) }
}

// Hand-written parts of the walk, implemented by pointers to config types.
type (
	// defaulter sets the defaults of the i-th element of an array of
	// tables, or of an entry of a table of named tables (i is 0), before
	// it is decoded.
	defaulter interface{ setDefaults(i int) }
	// keyDecoder decodes the key with the hook option.
	keyDecoder interface {
		decodeKey(d *decoder, path string, v any)
	}
	// afterDecoder adjusts the struct after its table m is decoded.
	afterDecoder interface{ afterDecode(m map[string]any) }
)

// MaxQueueClasses bounds [[queue_classes]]: a handful is typical, and
// overlap checking is quadratic in their number.
const MaxQueueClasses = 256

// sentinelPriority is where decode parks the range of a queue class whose
// priorities could not be decoded: one value per class, far above any
// allowed priority, so the broken class neither overlaps nor covers another
// and only its own problem is reported.
const sentinelPriority = math.MaxUint32 - 1<<20

type decoder struct {
	problems []Problem
}

func (d *decoder) add(key, msg string) {
	d.problems = append(d.problems, Problem{Field: key, Problem: msg})
}

// config decodes the whole document. The result holds every value that
// decoded; the decoder holds the problems of the rest.
func (d *decoder) config(doc map[string]any) *Config {
	c := &Config{
		Node: Node{
			Listen: DefaultListen, Architecture: HostArchitecture(), Region: DefaultRegion, Zone: DefaultZone,
			MaxOutputBytes: DefaultMaxOutputBytes, MaxStreamedBytes: DefaultMaxStreamedBytes, ShutdownGrace: DefaultShutdownGrace, WriteTimeout: DefaultWriteTimeout,
			MaxConnections: DefaultMaxConnections, MaxConnectionsPerAddress: DefaultMaxConnectionsPerAddress,
			CompileConcurrency: DefaultCompileConcurrency, MaxCompiledBytes: DefaultMaxCompiledBytes,
			MaxSignaturesPerTenant: DefaultMaxSignaturesPerTenant, MaxMetricSeriesPerTenant: DefaultMaxMetricSeriesPerTenant,
			MaxSnapshotBytesPerTenant: DefaultMaxSnapshotBytesPerTenant, ReuseMaxActivations: DefaultReuseMaxActivations,
			WarmIdleTimeout: DefaultWarmIdleTimeout, MaxWarmInstances: DefaultMaxWarmInstances,
		},
		DeployLimits: DefaultDeployLimits,
		Catalog:      DefaultCatalogLimits,
		Ingress:      DefaultIngress,
		CellClasses:  map[vocab.CellClass]CellClass{},
		TrustClasses: map[vocab.TrustClass]TrustClass{},
		Tenants:      map[vocab.TenantID]Tenant{},
		Overload: Overload{CPUThreshold: DefaultCPUThreshold, MemoryThreshold: DefaultMemoryThreshold,
			MaxObservationAge: DefaultMaxObservationAge, SampleInterval: DefaultSampleInterval},
		Deadline: admission.DeadlinePolicy{EstimatedServiceTime: DefaultEstimatedServiceTime,
			MinimumExecutionTime: DefaultMinimumExecutionTime, SafetyMargin: DefaultSafetyMargin},
		Metadata: admission.MetadataPolicy{MaxIdentifierBytes: DefaultMaxIdentifierBytes,
			MaxEntries: DefaultMaxMetadataEntries, MaxBytes: DefaultMaxMetadataBytes},
		Scheduler: Scheduler{MaxWait: DefaultMaxWait, LowerClassAfter: DefaultLowerClassAfter, Fairness: DefaultFairness},
		Tracing: Tracing{SampleRatio: DefaultTracingSampleRatio, ServiceName: DefaultTracingServiceName,
			Timeout: DefaultTracingTimeout, BatchTimeout: DefaultTracingBatchTimeout},
		Cluster: Cluster{Prefix: DefaultClusterPrefix, LeaseTTL: DefaultClusterLeaseTTL,
			Replication: DefaultClusterReplication, MaxStaleness: DefaultClusterMaxStaleness},
	}
	if list, ok := doc["queue_classes"].([]any); ok && len(list) > MaxQueueClasses {
		d.add("queue_classes", "at most "+strconv.Itoa(MaxQueueClasses)+" queue classes (only the decoding of the first "+
			strconv.Itoa(MaxQueueClasses)+" is checked)")
		doc["queue_classes"] = list[:MaxQueueClasses]
	}
	d.table("", doc, reflect.ValueOf(c).Elem())
	return c
}

// table decodes the table m at path into the struct dst and reports the
// keys of m that dst has no field for.
func (d *decoder) table(path string, m map[string]any, dst reflect.Value) {
	known := map[string]bool{}
	for _, k := range schema[dst.Type()] {
		known[k.name] = true
		p := childKey(path, k.name)
		v, ok := m[k.name]
		fv := dst.FieldByName(k.field)
		switch {
		case !ok:
			if msg := k.missing(fv.Kind() == reflect.Struct); msg != "" {
				d.add(p, msg)
			}
		case k.opts&byHook != 0:
			dst.Addr().Interface().(keyDecoder).decodeKey(d, p, v)
		default:
			d.value(p, v, k, fv)
		}
	}
	if a, ok := dst.Addr().Interface().(afterDecoder); ok {
		a.afterDecode(m)
	}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if known[k] {
			continue
		}
		msg := "unknown key"
		if h, ok := hints[dst.Type()][k]; ok {
			msg += " (" + h + ")"
		} else if s := suggest(k, known); s != "" {
			msg += " (did you mean " + s + "?)"
		}
		d.add(childKey(path, k), msg)
	}
}

// asTable returns v as a table, or reports that it is not one.
func (d *decoder) asTable(path string, v any) (map[string]any, bool) {
	m, ok := v.(map[string]any)
	if !ok {
		d.add(path, "must be a table, not "+kindOf(v))
	}
	return m, ok
}

// element returns a new element of type t, with its defaults (defaulter),
// decoded from v when v is a table.
func (d *decoder) element(path string, i int, v any, t reflect.Type) reflect.Value {
	el := reflect.New(t).Elem()
	if def, ok := el.Addr().Interface().(defaulter); ok {
		def.setDefaults(i)
	}
	if m, ok := d.asTable(path, v); ok {
		d.table(path, m, el)
	}
	return el
}

var durationType = reflect.TypeFor[time.Duration]()

// value decodes v, the value of key k at path, into dst. A value with a
// problem leaves dst as it was.
func (d *decoder) value(path string, v any, k key, dst reflect.Value) {
	t := dst.Type()
	switch {
	case k.opts&asSize != 0:
		d.size(path, v, dst)
	case t == durationType:
		s, isStr := v.(string)
		if !isStr {
			d.add(path, `must be a duration string such as "2s" or "150ms", not `+kindOf(v))
			return
		}
		dur, err := time.ParseDuration(s)
		if err != nil {
			d.add(path, `invalid duration: want a Go duration string such as "2s" or "150ms"`)
			return
		}
		dst.SetInt(int64(dur))
	case k.opts&asSet != 0 || t.Kind() == reflect.Slice && t.Elem().Kind() != reflect.Struct:
		d.strings(path, v, k, dst)
	case parsers[t] != nil || t.Kind() == reflect.String:
		s, isStr := v.(string)
		if !isStr {
			d.add(path, "must be a string, not "+kindOf(v))
		} else if x, ok := d.parse(path, s, t); ok {
			dst.Set(x)
		}
	case t.Kind() == reflect.Struct:
		if m, ok := d.asTable(path, v); ok {
			d.table(path, m, dst)
		}
	case t.Kind() == reflect.Slice: // an array of tables
		list, isList := v.([]any)
		if !isList {
			d.add(path, "must be an array of tables ([["+k.name+"]]), not "+kindOf(v))
			return
		}
		out := reflect.Zero(t)
		for i, e := range list {
			out = reflect.Append(out, d.element(indexKey(path, i), i, e, t.Elem()))
		}
		dst.Set(out)
	case t.Kind() == reflect.Map: // a table of named tables
		m, ok := d.asTable(path, v)
		if !ok {
			return
		}
		for _, name := range slices.Sorted(maps.Keys(m)) {
			p := childKey(path, name)
			if k, ok := d.parse(p, name, t.Key()); ok {
				dst.SetMapIndex(k, d.element(p, 0, m[name], t.Elem()))
			}
		}
	case t.Kind() == reflect.Bool:
		if b, ok := v.(bool); ok {
			dst.SetBool(b)
		} else {
			d.add(path, "must be a boolean, not "+kindOf(v))
		}
	case t.Kind() == reflect.Float64:
		switch x := v.(type) {
		case float64:
			dst.SetFloat(x)
		case int64:
			dst.SetFloat(float64(x))
		default:
			d.add(path, "must be a number, not "+kindOf(v))
		}
	case t.Kind() == reflect.Int:
		if n, ok := d.integer(path, v, math.MaxInt32); ok {
			dst.SetInt(int64(n))
		}
	case t.Kind() == reflect.Uint32:
		if n, ok := d.integer(path, v, math.MaxUint32); ok {
			dst.SetUint(n)
		}
	case t.Kind() == reflect.Uint64:
		if n, ok := d.integer(path, v, math.MaxInt64); ok {
			dst.SetUint(n)
		}
	default:
		panic(errors.AssertionFailedf("config: %s: no decoding for %s", path, t))
	}
}

// parse converts the string s into a value of type t: through parsers, or
// as is for a type of kind string.
func (d *decoder) parse(path, s string, t reflect.Type) (reflect.Value, bool) {
	p, ok := parsers[t]
	if !ok {
		return reflect.ValueOf(s).Convert(t), true
	}
	x, err := p(s)
	if err != nil {
		d.add(path, err.Error())
		return reflect.Value{}, false
	}
	return reflect.ValueOf(x), true
}

// strings decodes an array of strings into a slice, or into a set (asSet)
// as the OR of its elements. Elements with a problem are left out; an
// optional array with an element that is not a string keeps its default,
// and its strings are not parsed.
func (d *decoder) strings(path string, v any, k key, dst reflect.Value) {
	list, isList := v.([]any)
	if !isList {
		d.add(path, "must be an array of strings, not "+kindOf(v))
		return
	}
	var strs, paths []string
	for i, e := range list {
		if s, isStr := e.(string); isStr {
			strs, paths = append(strs, s), append(paths, indexKey(path, i))
		} else {
			d.add(indexKey(path, i), "must be a string, not "+kindOf(e))
		}
	}
	if len(strs) < len(list) && k.missing(false) == "" {
		return
	}
	t, elem := dst.Type(), dst.Type()
	out := reflect.New(t).Elem()
	if k.opts&asSet == 0 {
		elem, out = t.Elem(), reflect.MakeSlice(t, 0, len(strs))
	}
	for i, s := range strs {
		switch x, ok := d.parse(paths[i], s, elem); {
		case !ok:
		case k.opts&asSet != 0:
			out.SetUint(out.Uint() | x.Uint())
		default:
			out = reflect.Append(out, x)
		}
	}
	dst.Set(out)
}

// size decodes a size: an integer of bytes or a string such as "64MiB". An
// int field saturates at math.MaxInt32 (validation names the excess).
func (d *decoder) size(path string, v any, dst reflect.Value) {
	var n uint64
	switch s := v.(type) {
	case int64:
		if s < 0 {
			d.add(path, "must not be negative")
			return
		}
		n = uint64(s)
	case string:
		b, err := vocab.ParseByteSize(s)
		if err != nil {
			d.add(path, "invalid size: "+err.Error())
			return
		}
		n = uint64(b)
	default:
		d.add(path, `must be a size: an integer of bytes or a string such as "64MiB", not `+kindOf(v))
		return
	}
	if dst.Kind() == reflect.Int {
		dst.SetInt(int64(min(n, math.MaxInt32)))
		return
	}
	dst.SetUint(n)
}

// integer decodes a non-negative integer of at most limit.
func (d *decoder) integer(path string, v any, limit uint64) (uint64, bool) {
	n, isInt := v.(int64)
	switch {
	case !isInt:
		d.add(path, "must be an integer, not "+kindOf(v))
	case n < 0:
		d.add(path, "must not be negative")
	case uint64(n) > limit:
		d.add(path, "must be at most "+strconv.FormatUint(limit, 10))
	default:
		return uint64(n), true
	}
	return 0, false
}

func kindOf(v any) string {
	switch v.(type) {
	case string:
		return "a string"
	case int64:
		return "an integer"
	case float64:
		return "a float"
	case bool:
		return "a boolean"
	case []any:
		return "an array"
	case map[string]any:
		return "a table"
	}
	return "a date or time"
}

// The hand-written parts.

func (q *QueueClass) setDefaults(i int) {
	q.MinPriority = sentinelPriority + uint32(i)
	q.MaxPriority = q.MinPriority
}

// decodeKey decodes `priorities = [first, last]`.
func (q *QueueClass) decodeKey(d *decoder, path string, v any) {
	list, ok := v.([]any)
	if !ok || len(list) != 2 {
		d.add(path, "must be [first, last]: two priorities, the inclusive range of the class")
		return
	}
	var r [2]uint32
	for i, e := range list {
		n, ok := d.integer(indexKey(path, i), e, math.MaxUint32)
		if !ok {
			return
		}
		r[i] = uint32(n)
	}
	q.MinPriority, q.MaxPriority = r[0], r[1]
}

func (c *CellClass) setDefaults(int) {
	c.Threading = []vocab.Threading{vocab.ThreadingSingle}
	c.Features = DefaultFeatures
}

// afterDecode marks the cluster mode on: the file has a [cluster] table.
func (c *Cluster) afterDecode(map[string]any) { c.Enabled = true }

// afterDecode lowers the defaults of the per-tenant and per-principal bytes
// the table leaves out to the bound above them.
func (p *IngressPool) afterDecode(m map[string]any) {
	if _, set := m["bytes_per_tenant"]; !set {
		p.BytesPerTenant = min(p.BytesPerTenant, p.Bytes)
	}
	if _, set := m["bytes_per_principal"]; !set {
		p.BytesPerPrincipal = min(p.BytesPerPrincipal, p.BytesPerTenant)
	}
}

func parseKind(s string) (admission.PrincipalKind, error) {
	switch s {
	case "user":
		return admission.KindUser, nil
	case "service":
		return admission.KindService, nil
	}
	return 0, errUnknownKind
}

// suggest returns the known key closest to key (edit distance at most 2),
// or "".
func suggest(key string, known map[string]bool) string {
	if len(key) > 64 {
		return ""
	}
	best, bestDist := "", 3
	for _, k := range slices.Sorted(maps.Keys(known)) {
		if dist := editDistance(key, k); dist < bestDist {
			best, bestDist = k, dist
		}
	}
	return best
}

// editDistance is the Levenshtein distance of two short strings.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

package config

import (
	"maps"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/latent-node/latent-node/admission"
	"github.com/latent-node/latent-node/catalog"
)

// The document is parsed by go-toml into a generic tree (tables are
// map[string]any, arrays []any, integers int64) and decoded here against the
// schema that docs/configuration.md documents. go-toml's own struct decoding
// stops at the first value of the wrong type and then drops the unknown-key
// report, and its key paths lose array indices; walking the tree reports
// every unknown key, wrong type, missing key, bad size and bad duration at
// once, each with its full key path ("principals[2].api_keys[0]").

// Messages for missing keys; optional means there is a default.
const (
	optional      = ""
	required      = "missing required key"
	requiredTable = "missing required table"
	requiredLimit = "missing required key: every limits table names all of its fields (0 grants no capacity)"
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

// table is one TOML table being decoded. Every key looked up is known;
// finish reports the others. Methods on a nil *table (a missing or mistyped
// table, already reported) do nothing.
type table struct {
	d     *decoder
	path  string
	m     map[string]any
	known map[string]bool
	hints map[string]string // why a key that exists elsewhere is refused here
}

func (d *decoder) table(path string, v any) *table {
	m, ok := v.(map[string]any)
	if !ok {
		d.add(path, "must be a table, not "+kindOf(v))
		return nil
	}
	return &table{d: d, path: path, m: m, known: map[string]bool{}}
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

// get looks key up, marks it known and reports it when it is missing and req
// is not optional.
func (t *table) get(key, req string) (v any, path string, ok bool) {
	if t == nil {
		return nil, "", false
	}
	t.known[key] = true
	path = childKey(t.path, key)
	v, ok = t.m[key]
	if !ok && req != optional {
		t.d.add(path, req)
	}
	return v, path, ok
}

// sub returns the sub-table key (nil when it is missing or not a table).
func (t *table) sub(key, req string) *table {
	v, path, ok := t.get(key, req)
	if !ok {
		return nil
	}
	return t.d.table(path, v)
}

// each calls f for every entry of a table of named tables, in key order.
func (t *table) each(f func(name, path string, v any)) {
	if t == nil {
		return
	}
	for _, k := range slices.Sorted(maps.Keys(t.m)) {
		t.known[k] = true
		f(k, childKey(t.path, k), t.m[k])
	}
}

// finish reports every key of the table that was not looked up.
func (t *table) finish() {
	if t == nil {
		return
	}
	for _, k := range slices.Sorted(maps.Keys(t.m)) {
		if t.known[k] {
			continue
		}
		msg := "unknown key"
		if h, ok := t.hints[k]; ok {
			msg += " (" + h + ")"
		} else if s := suggest(k, t.known); s != "" {
			msg += " (did you mean " + s + "?)"
		}
		t.d.add(childKey(t.path, k), msg)
	}
}

func (t *table) setString(dst *string, key, req string) {
	v, path, ok := t.get(key, req)
	if !ok {
		return
	}
	s, isStr := v.(string)
	if !isStr {
		t.d.add(path, "must be a string, not "+kindOf(v))
		return
	}
	*dst = s
}

// integer decodes a non-negative integer of at most limit.
func (t *table) integer(key, req string, limit uint64) (uint64, bool) {
	v, path, ok := t.get(key, req)
	if !ok {
		return 0, false
	}
	return t.d.integer(path, v, limit)
}

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

func (t *table) setUint64(dst *uint64, key, req string) {
	if n, ok := t.integer(key, req, math.MaxInt64); ok {
		*dst = n
	}
}

func (t *table) setUint32(dst *uint32, key, req string) {
	if n, ok := t.integer(key, req, math.MaxUint32); ok {
		*dst = uint32(n)
	}
}

func (t *table) setInt(dst *int, key, req string) {
	if n, ok := t.integer(key, req, math.MaxInt32); ok {
		*dst = int(n)
	}
}

func (t *table) setFloat(dst *float64, key, req string) {
	v, path, ok := t.get(key, req)
	if !ok {
		return
	}
	switch f := v.(type) {
	case float64:
		*dst = f
	case int64:
		*dst = float64(f)
	default:
		t.d.add(path, "must be a number, not "+kindOf(v))
	}
}

// setSize decodes a size: an integer of bytes or a string such as "64MiB".
func (t *table) setSize(dst *uint64, key, req string) {
	v, path, ok := t.get(key, req)
	if !ok {
		return
	}
	switch s := v.(type) {
	case int64:
		if s < 0 {
			t.d.add(path, "must not be negative")
			return
		}
		*dst = uint64(s)
	case string:
		n, err := catalog.ParseByteSize(s)
		if err != nil {
			t.d.add(path, "invalid size: "+err.Error())
			return
		}
		*dst = uint64(n)
	default:
		t.d.add(path, `must be a size: an integer of bytes or a string such as "64MiB", not `+kindOf(v))
	}
}

// setDuration decodes a Go duration string.
func (t *table) setDuration(dst *time.Duration, key, req string) {
	v, path, ok := t.get(key, req)
	if !ok {
		return
	}
	s, isStr := v.(string)
	if !isStr {
		t.d.add(path, `must be a duration string such as "2s" or "150ms", not `+kindOf(v))
		return
	}
	dur, err := time.ParseDuration(s)
	if err != nil {
		t.d.add(path, `invalid duration: want a Go duration string such as "2s" or "150ms"`)
		return
	}
	*dst = dur
}

// strings decodes a list of strings. It returns the key path of each element
// for problems about one of them, and ok when the key is present and every
// element is a string.
func (t *table) strings(key, req string) (vals, paths []string, ok bool) {
	v, path, present := t.get(key, req)
	if !present {
		return nil, nil, false
	}
	list, isList := v.([]any)
	if !isList {
		t.d.add(path, "must be an array of strings, not "+kindOf(v))
		return nil, nil, false
	}
	ok = true
	for i, e := range list {
		p := indexKey(path, i)
		s, isStr := e.(string)
		if !isStr {
			t.d.add(p, "must be a string, not "+kindOf(e))
			ok = false
			continue
		}
		vals, paths = append(vals, s), append(paths, p)
	}
	return vals, paths, ok
}

// tables decodes an array of tables ([[name]] or an array of inline tables).
// It returns one entry per element, nil for an element that is not a table,
// so indices stay those of the file.
func (t *table) tables(key string) []*table {
	v, path, ok := t.get(key, optional)
	if !ok {
		return nil
	}
	list, isList := v.([]any)
	if !isList {
		t.d.add(path, "must be an array of tables ([["+key+"]]), not "+kindOf(v))
		return nil
	}
	out := make([]*table, len(list))
	for i, e := range list {
		out[i] = t.d.table(indexKey(path, i), e)
	}
	return out
}

// config decodes the whole document. The result holds every value that
// decoded; the decoder holds the problems of the rest.
func (d *decoder) config(doc map[string]any) *Config {
	c := &Config{
		Node: Node{
			Listen: DefaultListen, Architecture: HostArchitecture(), Region: DefaultRegion, Zone: DefaultZone,
			MaxOutputBytes: DefaultMaxOutputBytes, ShutdownGrace: DefaultShutdownGrace,
			MaxConnections: DefaultMaxConnections, MaxConnectionsPerAddress: DefaultMaxConnectionsPerAddress,
			CompileConcurrency: DefaultCompileConcurrency, MaxCompiledBytes: DefaultMaxCompiledBytes,
		},
		DeployLimits: DefaultDeployLimits,
		Catalog:      DefaultCatalogLimits,
		Ingress:      DefaultIngress,
		CellClasses:  map[catalog.CellClass]CellClass{},
		TrustClasses: map[catalog.TrustClass]TrustClass{},
		Tenants:      map[catalog.TenantID]Tenant{},
		Overload: Overload{CPUThreshold: DefaultCPUThreshold, MemoryThreshold: DefaultMemoryThreshold,
			MaxObservationAge: DefaultMaxObservationAge, SampleInterval: DefaultSampleInterval},
		Deadline: admission.DeadlinePolicy{EstimatedServiceTime: DefaultEstimatedServiceTime,
			MinimumExecutionTime: DefaultMinimumExecutionTime, SafetyMargin: DefaultSafetyMargin},
		Metadata: admission.MetadataPolicy{MaxIdentifierBytes: DefaultMaxIdentifierBytes,
			MaxEntries: DefaultMaxMetadataEntries, MaxBytes: DefaultMaxMetadataBytes},
		Scheduler: Scheduler{MaxWait: DefaultMaxWait, LowerClassAfter: DefaultLowerClassAfter, Fairness: DefaultFairness},
	}
	root := &table{d: d, m: doc, known: map[string]bool{}}

	d.node(&c.Node, root.sub("node", requiredTable))

	queues := root.tables("queue_classes")
	if len(queues) > MaxQueueClasses {
		d.add("queue_classes", "at most "+strconv.Itoa(MaxQueueClasses)+" queue classes (only the decoding of the first "+
			strconv.Itoa(MaxQueueClasses)+" is checked)")
		queues = queues[:MaxQueueClasses]
	}
	for i, t := range queues {
		c.QueueClasses = append(c.QueueClasses, d.queueClass(i, t))
	}
	root.sub("cell_classes", optional).each(func(name, path string, v any) {
		class, err := catalog.ParseCellClass(name)
		if err != nil {
			d.add(path, err.Error())
			return
		}
		c.CellClasses[class] = d.cellClass(d.table(path, v))
	})
	root.sub("trust_classes", optional).each(func(name, path string, v any) {
		c.TrustClasses[catalog.TrustClass(name)] = d.trustClass(d.table(path, v))
	})
	root.sub("tenants", optional).each(func(name, path string, v any) {
		c.Tenants[catalog.TenantID(name)] = d.tenant(d.table(path, v))
	})
	for _, t := range root.tables("principals") {
		c.Principals = append(c.Principals, d.principal(t))
	}

	if t := root.sub("overload", optional); t != nil {
		o := &c.Overload
		t.setFloat(&o.CPUThreshold, "cpu_threshold", optional)
		t.setFloat(&o.MemoryThreshold, "memory_threshold", optional)
		t.setDuration(&o.MaxObservationAge, "max_observation_age", optional)
		t.setDuration(&o.SampleInterval, "sample_interval", optional)
		t.finish()
	}
	if t := root.sub("deadline", optional); t != nil {
		dl := &c.Deadline
		t.setDuration(&dl.EstimatedServiceTime, "estimated_service_time", optional)
		t.setDuration(&dl.MinimumExecutionTime, "minimum_execution_time", optional)
		t.setDuration(&dl.SafetyMargin, "safety_margin", optional)
		t.finish()
	}
	if t := root.sub("metadata", optional); t != nil {
		m := &c.Metadata
		t.setInt(&m.MaxIdentifierBytes, "maximum_identifier_bytes", optional)
		t.setInt(&m.MaxEntries, "maximum_metadata_entries", optional)
		t.setInt(&m.MaxBytes, "maximum_metadata_bytes", optional)
		t.finish()
	}
	if t := root.sub("scheduler", optional); t != nil {
		s := &c.Scheduler
		t.setDuration(&s.MaxWait, "max_wait", optional)
		t.setInt(&s.LowerClassAfter, "lower_class_after", optional)
		t.setString(&s.Fairness, "fairness", optional)
		t.finish()
	}
	d.deployLimits(&c.DeployLimits, root.sub("deploy_limits", optional))
	d.catalogLimits(&c.Catalog, root.sub("catalog", optional))
	d.ingress(&c.Ingress, root.sub("ingress", optional))
	root.finish()
	return c
}

func (d *decoder) node(n *Node, t *table) {
	t.setString(&n.Listen, "listen", optional)
	t.setString(&n.DataDir, "data_dir", optional)
	t.setString(&n.Architecture, "architecture", optional)
	t.setString(&n.Region, "region", optional)
	t.setString(&n.Zone, "zone", optional)
	out := uint64(n.MaxOutputBytes)
	t.setSize(&out, "max_output_bytes", optional)
	n.MaxOutputBytes = int(min(out, maxOutputBytes+1)) // validation names the excess
	t.setDuration(&n.ShutdownGrace, "shutdown_grace", optional)
	t.setInt(&n.MaxConnections, "max_connections", optional)
	t.setInt(&n.MaxConnectionsPerAddress, "max_connections_per_address", optional)
	t.setInt(&n.CompileConcurrency, "compile_concurrency", optional)
	t.setInt(&n.MaxRunningGuests, "max_running_guests", optional)
	t.setSize(&n.MaxCompiledBytes, "max_compiled_bytes", optional)

	b := t.sub("budget_ceiling", requiredTable)
	b.setUint64(&n.BudgetCeiling.CPUFuel, "cpu_fuel", required)
	b.setSize(&n.BudgetCeiling.MemoryBytes, "memory_bytes", required)
	b.setDuration(&n.BudgetCeiling.WallTime, "wall_time", required)
	b.finish()

	tenantLimits(&n.Limits, t.sub("limits", requiredTable))
	t.finish()
}

func limits(l *admission.Limits, t *table) {
	t.setUint64(&l.MaxLiveActivations, "max_live_activations", requiredLimit)
	t.setUint64(&l.MaxQueued, "max_queued", requiredLimit)
	t.setUint64(&l.MaxReservedFuel, "max_reserved_fuel", requiredLimit)
	t.setSize(&l.MaxReservedMemory, "max_reserved_memory", requiredLimit)
}

func tenantLimits(l *admission.TenantLimits, t *table) {
	limits(&l.Limits, t)
	t.setSize(&l.MaxPayloadBytes, "max_payload_bytes", requiredLimit)
	t.setUint32(&l.MaxPriority, "max_priority", requiredLimit)
	t.finish()
}

func (d *decoder) queueClass(i int, t *table) QueueClass {
	q := QueueClass{MinPriority: sentinelPriority + uint32(i), MaxPriority: sentinelPriority + uint32(i)}
	if t == nil {
		return q
	}
	t.setString(&q.Name, "name", required)
	if v, path, ok := t.get("priorities", required); ok {
		if r, ok := d.priorities(path, v); ok {
			q.MinPriority, q.MaxPriority = r[0], r[1]
		}
	}
	t.setUint64(&q.MaxQueued, "max_queued", "missing required key: the class's queue limit (0 grants no capacity)")
	t.setUint32(&q.ReservedCells, "reserved_cells", optional)
	t.finish()
	return q
}

// priorities decodes `priorities = [first, last]`.
func (d *decoder) priorities(path string, v any) ([2]uint32, bool) {
	list, ok := v.([]any)
	if !ok || len(list) != 2 {
		d.add(path, "must be [first, last]: two priorities, the inclusive range of the class")
		return [2]uint32{}, false
	}
	var r [2]uint32
	for i, e := range list {
		n, ok := d.integer(indexKey(path, i), e, math.MaxUint32)
		if !ok {
			return r, false
		}
		r[i] = uint32(n)
	}
	return r, true
}

func (d *decoder) cellClass(t *table) CellClass {
	cc := CellClass{Threading: []catalog.Threading{catalog.ThreadingSingle}, Features: DefaultFeatures}
	t.setSize(&cc.MemoryBytes, "memory", required)
	t.setInt(&cc.Parallelism, "parallelism", required)
	if names, paths, ok := t.strings("threading", optional); ok {
		cc.Threading = []catalog.Threading{}
		for i, n := range names {
			th, err := catalog.ParseThreading(n)
			if err != nil {
				d.add(paths[i], err.Error())
				continue
			}
			cc.Threading = append(cc.Threading, th)
		}
	}
	if names, paths, ok := t.strings("features", optional); ok {
		cc.Features = 0
		for i, n := range names {
			f, err := catalog.ParseFeature(n)
			if err != nil {
				d.add(paths[i], err.Error())
				continue
			}
			cc.Features |= catalog.FeatureSetOf(f)
		}
	}
	t.setDuration(&cc.TargetServiceTime, "target_service_time", optional)
	t.finish()
	return cc
}

// cellClasses decodes a required list of cell class names.
func (d *decoder) cellClasses(t *table) []catalog.CellClass {
	names, paths, _ := t.strings("cell_classes", required)
	out := []catalog.CellClass{}
	for i, n := range names {
		c, err := catalog.ParseCellClass(n)
		if err != nil {
			d.add(paths[i], err.Error())
			continue
		}
		out = append(out, c)
	}
	return out
}

func (d *decoder) trustClass(t *table) TrustClass {
	var tc TrustClass
	tc.CellClasses = d.cellClasses(t)
	if l := t.sub("limits", requiredTable); l != nil {
		limits(&tc.Limits, l)
		l.hints = map[string]string{
			"max_payload_bytes": "payload and priority ceilings exist only in node and tenant limits",
			"max_priority":      "payload and priority ceilings exist only in node and tenant limits",
		}
		l.finish()
	}
	t.finish()
	return tc
}

func (d *decoder) tenant(t *table) Tenant {
	var tn Tenant
	names, _, _ := t.strings("trust_classes", required)
	tn.TrustClasses = []catalog.TrustClass{}
	for _, n := range names {
		tn.TrustClasses = append(tn.TrustClasses, catalog.TrustClass(n))
	}
	tn.CellClasses = d.cellClasses(t)
	tn.Subjects, _, _ = t.strings("subjects", required)
	tn.Subjects = append([]string{}, tn.Subjects...)
	kinds, paths, _ := t.strings("kinds", required)
	tn.Kinds = []admission.PrincipalKind{}
	for i, k := range kinds {
		kind, err := parseKind(k)
		if err != nil {
			d.add(paths[i], err.Error())
			continue
		}
		tn.Kinds = append(tn.Kinds, kind)
	}
	tenantLimits(&tn.Limits, t.sub("limits", requiredTable))
	t.finish()
	return tn
}

func (d *decoder) principal(t *table) Principal {
	var p Principal
	t.setString(&p.Subject, "subject", required)
	if v, path, ok := t.get("kind", required); ok {
		if s, isStr := v.(string); !isStr {
			d.add(path, "must be a string, not "+kindOf(v))
		} else if k, err := parseKind(s); err != nil {
			d.add(path, err.Error())
		} else {
			p.Kind = k
		}
	}
	var tenant string
	t.setString(&tenant, "tenant", required)
	p.Tenant = catalog.TenantID(tenant)
	t.setString(&p.ServiceIdentity, "service_identity", optional)
	roles, paths, _ := t.strings("roles", required)
	for i, r := range roles {
		role, err := ParseRole(r)
		if err != nil {
			d.add(paths[i], err.Error())
			continue
		}
		p.Roles |= role
	}
	keys, _, _ := t.strings("api_keys", required)
	p.APIKeys = append([]string{}, keys...)
	t.finish()
	return p
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

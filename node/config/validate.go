package config

// Validation of a configuration: Problem and Error, the cross-field checks,
// and the mapping of the layers' field paths to the file's key paths.

import (
	"cmp"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/latent-node/latent-node/admission"
	"github.com/latent-node/latent-node/cellpool"
	"github.com/latent-node/latent-node/scheduler"
	"github.com/latent-node/latent-node/vocab"
)

// Problem is one configuration problem, the module's one field-problem
// type: Field is the TOML key path it concerns
// ("tenants.acme.limits.max_queued", "principals[0].api_keys[1]"; empty for
// the document as a whole) and Problem what to fix. String renders
// "<key>: <problem>" (just the problem when there is no key).
type Problem = vocab.FieldError

// Error lists every problem of a configuration, sorted by key path (array
// indices in numeric order) and then message, without duplicates.
// errors.Is(err, ErrInvalid) holds.
type Error struct {
	// File is the path Load read, when the configuration came from a file.
	File     string
	Problems []Problem
}

// ErrInvalid marks a *Error.
var ErrInvalid = errors.New("config: invalid configuration")

// Error renders the problems one per line, "<key>: <message>", with no
// header: `latent-node check` prints it as is.
func (e *Error) Error() string {
	var b strings.Builder
	for i, p := range e.Problems {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(p.String())
	}
	return b.String()
}

// Is makes errors.Is(err, ErrInvalid) hold.
func (e *Error) Is(target error) bool { return target == ErrInvalid }

var errUnknownKind = errors.New(`unknown principal kind (want "user" or "service")`)

// maxOutputBytes bounds node.max_output_bytes (the runner buffers stdout).
const maxOutputBytes = 1 << 30

// maxStreamedBytes bounds node.max_streamed_bytes.
const maxStreamedBytes = 1 << 40

// Validate checks every range and cross-field rule of c, including the
// admission policy's own (Policy.Validate), the scheduler's
// (scheduler.Config.Validate) and the cell pool's (cellpool.Config.Validate), and returns a *Error listing every problem,
// or nil. It changes nothing. Parse, Load and Demo call it; call it again
// after changing a Config.
func (c *Config) Validate() error {
	if probs := merge(nil, c.check()); len(probs) > 0 {
		return &Error{Problems: probs}
	}
	return nil
}

type checker struct{ problems []Problem }

func (v *checker) add(key, msg string) {
	v.problems = append(v.problems, Problem{Field: key, Problem: msg})
}

// check returns the problems of the typed configuration: the node's own rules
// here, then the admission policy's (Policy.Validate) and the
// scheduler's (scheduler.Config.Validate), their field paths mapped onto key
// paths by fileKey. Admission and the scheduler share the shape of queue and
// cell classes; a scheduler problem at a key admission already reported (or
// below it) is dropped, so one broken value is reported once.
func (c *Config) check() []Problem {
	var v checker
	c.checkNode(&v)
	c.checkClasses(&v)
	c.checkPrincipals(&v)
	c.checkHardening(&v)
	c.checkIngress(&v)
	c.checkTracing(&v)
	c.checkCluster(&v)
	c.checkTLS(&v)

	o := c.Overload
	switch {
	case o.SampleInterval <= 0:
		v.add("overload.sample_interval", "must be positive")
	case o.MaxObservationAge > 0 && o.SampleInterval >= o.MaxObservationAge:
		v.add("overload.sample_interval", "must be shorter than overload.max_observation_age ("+
			o.MaxObservationAge.String()+"), or every sample goes stale before the next one and the node refuses all work")
	}

	pol, sc := c.AdmissionPolicy(), c.SchedulerConfig()
	admitted := map[string]bool{}
	for _, f := range fieldProblems(pol.Validate()) {
		admitted[f.Field] = true
		v.problems = append(v.problems, f)
	}
	others := fieldProblems(sc.Validate())
	if len(c.CellClasses) > 0 { // none configured: admission reported it
		others = append(others, fieldProblems(c.CellPoolConfig().Validate())...)
	}
	for _, f := range others {
		if !shadowed(f.Field, admitted) {
			v.problems = append(v.problems, f)
		}
	}
	return v.problems
}

// fieldProblems returns the problems of err, a validation error of
// admission, the scheduler or the cell pool, with their field paths mapped
// onto key paths. An error of another kind is one problem of the document
// as a whole.
func fieldProblems(err error) []Problem {
	if err == nil {
		return nil
	}
	var (
		list []vocab.FieldError
		pe   *admission.PolicyError
		se   *scheduler.ConfigError
		ce   *cellpool.ConfigError
	)
	switch {
	case errors.As(err, &pe):
		list = pe.Problems
	case errors.As(err, &se):
		list = se.Problems
	case errors.As(err, &ce):
		list = ce.Problems
	default:
		return []Problem{{Problem: err.Error()}}
	}
	out := make([]Problem, len(list))
	for i, f := range list {
		out[i] = Problem{Field: fileKey(vocab.FieldPath(f.Field)), Problem: f.Problem}
	}
	return out
}

// fileKeys maps the Go field paths of admission.Policy and
// scheduler.Config (the configurations AdmissionPolicy and SchedulerConfig
// build) onto the key paths of the file. In a Go pattern "[]" stands for a
// list index or a map key; in a key pattern "[]" stands for the index and
// "*" for the (quoted) key, in the same order.
var fileKeys = map[string]string{
	"BudgetCeiling":             "node.budget_ceiling",
	"BudgetCeiling.CPUFuel":     "node.budget_ceiling.cpu_fuel",
	"BudgetCeiling.MemoryBytes": "node.budget_ceiling.memory_bytes",
	"BudgetCeiling.WallTime":    "node.budget_ceiling.wall_time",
	"Limits":                    "node.limits",
	"Limits.MaxPriority":        "node.limits.max_priority",
	"Placement.Architecture":    "node.architecture",
	"Placement.Region":          "node.region",
	"Placement.Zone":            "node.zone",

	"QueueClasses":                 "queue_classes",
	"QueueClasses[]":               "queue_classes[]",
	"QueueClasses[].Name":          "queue_classes[].name",
	"QueueClasses[].MinPriority":   "queue_classes[].priorities",
	"QueueClasses[].MaxPriority":   "queue_classes[].priorities",
	"QueueClasses[].MaxQueued":     "queue_classes[].max_queued",
	"QueueClasses[].ReservedCells": "queue_classes[].reserved_cells",

	"CellClasses":                     "cell_classes",
	"CellClasses[]":                   "cell_classes.*",
	"CellClasses[].MemoryBytes":       "cell_classes.*.memory",
	"CellClasses[].Parallelism":       "cell_classes.*.parallelism",
	"CellClasses[].Threading":         "cell_classes.*.threading",
	"CellClasses[].TargetServiceTime": "cell_classes.*.target_service_time",

	"Classes":               "cell_classes",
	"Classes[]":             "cell_classes.*",
	"Classes[].MemoryBytes": "cell_classes.*.memory",
	"Classes[].Parallelism": "cell_classes.*.parallelism",

	"TrustClasses":               "trust_classes",
	"TrustClasses[]":             "trust_classes.*",
	"TrustClasses[].CellClasses": "trust_classes.*.cell_classes",

	"Tenants":                      "tenants",
	"Tenants[]":                    "tenants.*",
	"Tenants[].TrustClasses":       "tenants.*.trust_classes",
	"Tenants[].CellClasses":        "tenants.*.cell_classes",
	"Tenants[].Subjects":           "tenants.*.subjects",
	"Tenants[].Kinds":              "tenants.*.kinds",
	"Tenants[].Limits.MaxPriority": "tenants.*.limits.max_priority",

	"Overload.CPUThreshold":         "overload.cpu_threshold",
	"Overload.MemoryThreshold":      "overload.memory_threshold",
	"Overload.MaxObservationAge":    "overload.max_observation_age",
	"Deadline.EstimatedServiceTime": "deadline.estimated_service_time",
	"Deadline.MinimumExecutionTime": "deadline.minimum_execution_time",
	"Deadline.SafetyMargin":         "deadline.safety_margin",
	"Metadata.MaxIdentifierBytes":   "metadata.maximum_identifier_bytes",
	"Metadata.MaxEntries":           "metadata.maximum_metadata_entries",
	"Metadata.MaxBytes":             "metadata.maximum_metadata_bytes",

	"MaxWait":         "scheduler.max_wait",
	"LowerClassAfter": "scheduler.lower_class_after",
	"Fairness":        "scheduler.fairness",
}

// fileKey returns the key path of the Go field path p (see fileKeys). A
// path with no key in the file (a value the node sets itself, such as
// the scheduler's AdjustInterval) keeps its Go spelling, so the problem is
// still reported.
func fileKey(p vocab.FieldPath) string {
	key, ok := mapFieldPath(p)
	if !ok {
		return string(p)
	}
	return key
}

func mapFieldPath(p vocab.FieldPath) (string, bool) {
	steps, ok := p.Steps()
	if !ok {
		return "", false
	}
	var pattern strings.Builder
	for _, s := range steps {
		switch {
		case s.Index >= 0 || s.Key:
			pattern.WriteString("[]")
		default:
			if pattern.Len() > 0 {
				pattern.WriteByte('.')
			}
			pattern.WriteString(s.Name)
		}
	}
	tmpl, ok := fileKeys[pattern.String()]
	if !ok {
		return "", false
	}
	var b strings.Builder
	for _, s := range steps {
		if s.Index < 0 && !s.Key {
			continue
		}
		i := strings.IndexAny(tmpl, "[*")
		if i < 0 {
			return "", false
		}
		b.WriteString(tmpl[:i])
		switch {
		case s.Key && tmpl[i] == '*':
			b.WriteString(quoteKey(s.Name))
			tmpl = tmpl[i+1:]
		case s.Index >= 0 && strings.HasPrefix(tmpl[i:], "[]"):
			b.WriteString("[" + strconv.Itoa(s.Index) + "]")
			tmpl = tmpl[i+2:]
		default:
			return "", false
		}
	}
	b.WriteString(tmpl)
	return b.String(), true
}

func (c *Config) checkNode(v *checker) {
	n := c.Node
	if err := checkListen(n.Listen); err != nil {
		v.add("node.listen", err.Error())
	}
	if n.DataDir == "" {
		v.add("node.data_dir", "missing required key: the directory for the catalog, the artifacts and the compile cache")
	}
	if n.MaxOutputBytes < 1 || n.MaxOutputBytes > maxOutputBytes {
		v.add("node.max_output_bytes", "must be from 1 byte to 1GiB")
	}
	if n.MaxStreamedBytes > maxStreamedBytes {
		v.add("node.max_streamed_bytes", "must be from 0 (no streaming) to 1TiB")
	}
	if n.ShutdownGrace < 0 {
		v.add("node.shutdown_grace", "must not be negative")
	}
	if n.WriteTimeout < time.Millisecond || n.WriteTimeout > time.Hour {
		v.add("node.write_timeout", "must be from 1ms to 1h")
	}
	for i, h := range n.UIHosts {
		if strings.HasSuffix(h, ".") || vocab.ValidateName(strings.ToLower(h)) != nil && net.ParseIP(h) == nil {
			v.add("node.ui_hosts["+strconv.Itoa(i)+"]", "must be a host name (no port) or an IP address")
		}
	}
}

// checkListen accepts host:port with a numeric port (0 picks a free one)
// and an empty host (every interface), an IP address or a host name.
func checkListen(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return errors.New(`must be host:port, such as "127.0.0.1:8080" or ":8080"`)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return errors.New("the port must be a number from 0 to 65535")
	}
	if host != "" && net.ParseIP(host) == nil && vocab.ValidateName(host) != nil {
		return errors.New("the host must be empty, an IP address or a host name")
	}
	return nil
}

func (c *Config) checkClasses(v *checker) {
	// xlarge is never implied: a tenant that lists it needs a trust class
	// that lists it too.
	for _, name := range slices.Sorted(maps.Keys(c.Tenants)) {
		t := c.Tenants[name]
		if !slices.Contains(t.CellClasses, vocab.CellXLarge) {
			continue
		}
		if !slices.ContainsFunc(t.TrustClasses, func(tc vocab.TrustClass) bool {
			return slices.Contains(c.TrustClasses[tc].CellClasses, vocab.CellXLarge)
		}) {
			v.add("tenants."+quoteKey(string(name))+".cell_classes",
				"lists xlarge, but none of the tenant's trust classes does: xlarge needs explicit permission in both")
		}
	}

	// A tenant name is a path segment of every request; it must fit the
	// identifier bound that admission applies to targets.
	if maxID := c.Metadata.MaxIdentifierBytes; maxID > 0 {
		for _, name := range slices.Sorted(maps.Keys(c.Tenants)) {
			if vocab.ValidatePathName(string(name)) == nil && len(name) > maxID {
				v.add("tenants."+quoteKey(string(name)), "the tenant name is longer than metadata.maximum_identifier_bytes ("+
					strconv.Itoa(maxID)+")")
			}
		}
	}
}

func (c *Config) checkPrincipals(v *checker) {
	if len(c.Principals) == 0 {
		v.add("principals", "at least one principal is required: without one no request can authenticate")
	}
	maxID := c.Metadata.MaxIdentifierBytes
	if maxID < 1 || maxID > vocab.MaxNameBytes {
		maxID = vocab.MaxNameBytes // admission reports the bound itself
	}
	type who struct {
		tenant  vocab.TenantID
		subject string
	}
	subjects := map[who]int{}
	owners := map[string]int{}
	for i, p := range c.Principals {
		f := "principals[" + strconv.Itoa(i) + "]"
		if err := vocab.ValidateNameWithin(p.Subject, maxID); err != nil {
			v.add(f+".subject", err.Error())
		} else if j, dup := subjects[who{p.Tenant, p.Subject}]; dup {
			v.add(f+".subject", "principals["+strconv.Itoa(j)+"] has the same subject and tenant; "+
				"list several api_keys in one principal instead")
		} else {
			subjects[who{p.Tenant, p.Subject}] = i
		}
		if _, ok := c.Tenants[p.Tenant]; !ok {
			v.add(f+".tenant", "names a tenant that is not configured")
		}
		switch p.Kind {
		case admission.KindService:
			if p.ServiceIdentity == "" {
				v.add(f+".service_identity", `missing required key: kind = "service" needs a service identity`)
			} else if err := vocab.ValidateNameWithin(p.ServiceIdentity, maxID); err != nil {
				v.add(f+".service_identity", err.Error())
			}
		case admission.KindUser:
			if p.ServiceIdentity != "" {
				v.add(f+".service_identity", `only principals of kind = "service" have a service identity`)
			}
		default:
			v.add(f+".kind", `must be "user" or "service"`)
		}
		if p.Roles == 0 {
			v.add(f+".roles", `at least one role is required ("invoke", "deploy" or "admin")`)
		} else if p.Roles&^(RoleInvoke|RoleDeploy|RoleAdmin) != 0 {
			v.add(f+".roles", "holds an unknown role")
		}
		if len(p.APIKeys) == 0 && len(p.ClientCertificateSubjects) == 0 {
			v.add(f+".api_keys", `at least one key hash is required ("latent-node keygen" prints one), or a client certificate subject`)
		}
		for j, k := range p.APIKeys {
			kf := f + ".api_keys[" + strconv.Itoa(j) + "]"
			if _, err := vocab.ParseDigest(k); err != nil {
				msg := `must be "sha256:" followed by 64 lowercase hex digits, as "latent-node keygen" prints`
				if strings.HasPrefix(k, "lk_") {
					msg = `is an API key, not its hash: store only the "sha256:" hash that "latent-node keygen" prints, and rotate this key`
				}
				v.add(kf, msg)
				continue
			}
			switch owner, dup := owners[k]; {
			case !dup:
				owners[k] = i
			case owner == i:
				v.add(kf, "the same key hash is listed twice")
			default:
				v.add(kf, "the same key hash belongs to principals["+strconv.Itoa(owner)+"]: a key authenticates exactly one principal")
			}
		}
	}
}

// merge combines the decoder's problems with the validator's, sorted and
// without duplicates. A validation problem is dropped when decoding already
// reported its key or a key above it (a missing or mistyped value is
// validated as zero, and "must be positive" would repeat "missing required
// key"), and the queue-class coverage problem is dropped when a class's
// priorities did not decode. Linear in the number of problems.
func merge(decoded, validated []Problem) []Problem {
	reported := make(map[string]bool, len(decoded))
	brokenRange := false
	for _, d := range decoded {
		reported[d.Field] = true
		brokenRange = brokenRange || strings.HasPrefix(d.Field, "queue_classes[") && strings.Contains(d.Field, ".priorities")
	}
	out := slices.Clone(decoded)
	for _, p := range validated {
		if !shadowed(p.Field, reported) && !(p.Field == "queue_classes" && brokenRange) {
			out = append(out, p)
		}
	}
	slices.SortFunc(out, func(a, b Problem) int {
		if c := compareKeys(a.Field, b.Field); c != 0 {
			return c
		}
		return strings.Compare(a.Problem, b.Problem)
	})
	return slices.Compact(out)
}

// shadowed reports whether key or one of its ancestors ("a.b" and "a" for
// "a.b[0].c") is in reported.
func shadowed(key string, reported map[string]bool) bool {
	if reported[key] {
		return true
	}
	for i := 1; i < len(key); i++ {
		if (key[i] == '.' || key[i] == '[') && reported[key[:i]] {
			return true
		}
	}
	return false
}

// compareKeys orders key paths byte-wise, except that runs of digits compare
// as numbers, so principals[2] sorts before principals[10].
func compareKeys(a, b string) int {
	for a != "" && b != "" {
		if isDigit(a[0]) && isDigit(b[0]) {
			na, nb := digits(a), digits(b)
			ta, tb := strings.TrimLeft(a[:na], "0"), strings.TrimLeft(b[:nb], "0")
			if c := cmp.Compare(len(ta), len(tb)); c != 0 {
				return c
			}
			if c := strings.Compare(ta, tb); c != 0 {
				return c
			}
			if c := cmp.Compare(na, nb); c != 0 {
				return c
			}
			a, b = a[na:], b[nb:]
			continue
		}
		if a[0] != b[0] {
			return cmp.Compare(a[0], b[0])
		}
		a, b = a[1:], b[1:]
	}
	return cmp.Compare(len(a), len(b))
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

func digits(s string) int {
	n := 0
	for n < len(s) && isDigit(s[n]) {
		n++
	}
	return n
}

// childKey appends key to the path parent, quoting it when it is not a
// bare TOML key.
func childKey(parent, key string) string {
	if parent == "" {
		return quoteKey(key)
	}
	return parent + "." + quoteKey(key)
}

func indexKey(parent string, i int) string { return parent + "[" + strconv.Itoa(i) + "]" }

// quoteKey returns key as written in TOML: bare when it consists of
// A-Za-z0-9_- only, otherwise a basic string with escapes.
func quoteKey(key string) string {
	bare := key != ""
	for i := 0; i < len(key) && bare; i++ {
		c := key[i]
		bare = c == '_' || c == '-' || isDigit(c) || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
	}
	if bare {
		return key
	}
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range key {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f:
			b.WriteString(`\u00`)
			b.WriteByte("0123456789abcdef"[r>>4])
			b.WriteByte("0123456789abcdef"[r&0xf])
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

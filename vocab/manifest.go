// The release manifest: its JSON form, strict decoding (DecodeManifest),
// and validation into a Spec (NewSpec, ValidateManifest).

package vocab

import (
	"bytes"
	"encoding/json"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/cockroachdb/errors"
)

// Bounds on a release manifest. They keep the catalog's memory, the policy
// records and the deploy work proportional to a small constant per service.
const (
	MaxManifestBytes       = 256 << 10 // encoded JSON
	MaxRevisions           = 32
	MaxRoutes              = 64
	MaxTargetsPerRoute     = 16
	MaxWeight              = 10_000
	MaxPlacementValues     = 16 // per list
	MaxRevisionAttributes  = 16
	MaxAttributeValueBytes = 256
	MaxCeilingWallTime     = 24 * time.Hour
)

// DefaultFunction is the entrypoint of the wasi-stdio contract.
const DefaultFunction FunctionName = "_start"

// Manifest is a release manifest: what a deployer sends to activate a
// release of one service (JSON over HTTP; the CLI reads the TOML form and
// uploads the modules it names first).
type Manifest struct {
	Tenant    TenantID           `json:"tenant"`
	Service   ServiceName        `json:"service"`
	Revisions []ManifestRevision `json:"revisions"`
	Routes    []ManifestRoute    `json:"routes"`
}

// ManifestRevision is one revision of a manifest.
type ManifestRevision struct {
	Name     RevisionName `json:"name"`
	Artifact Digest       `json:"artifact"`
	// Module is the CLI's path form; the catalog refuses it with a hint.
	Module     string             `json:"module,omitempty"`
	TrustClass TrustClass         `json:"trust_class"`
	Threading  string             `json:"threading,omitempty"` // "single" (default) or "shared"
	Random     string             `json:"random,omitempty"`    // random_get: "secure" (default) or "deterministic" (replayable)
	ABI        string             `json:"abi,omitempty"`       // guest ABI: "stdio" (default), "wagi" (CGI over HTTP) or "wasi-http" (a WASI 0.2 component)
	Instance   string             `json:"instance,omitempty"`  // "fresh" (default), "snapshot" or "reuse"
	Init       FunctionName       `json:"init,omitempty"`      // initialisation export of a snapshot or reuse instance
	Features   []string           `json:"features,omitempty"`  // required features
	Ceiling    *ManifestCeiling   `json:"ceiling"`             // deployment ceiling, required
	Placement  *ManifestPlacement `json:"placement,omitempty"`
	Attributes map[string]string  `json:"attributes,omitempty"` // informational labels, never policy
	// AllowedOutboundHosts are the hosts a wasi-http revision may send
	// requests to, in Spin's syntax (OutboundHost); none: no request.
	AllowedOutboundHosts []string `json:"allowed_outbound_hosts,omitempty"`
}

// ManifestCeiling is a revision's deployment ceiling; every field is required
// and positive. Its JSON input takes the wall time either as a Go duration
// string under "wall_time" ("2s") or as milliseconds under "wall_time_ms"
// (an integer or a decimal), exactly one of them. It is encoded with
// "wall_time" (the catalog's records keep that form); the API answers it
// with "wall_time_ms" (package node).
type ManifestCeiling struct {
	CPUFuel     uint64   `json:"cpu_fuel"`
	MemoryBytes ByteSize `json:"memory_bytes"`
	WallTime    Duration `json:"wall_time"`
	// bothWallTimes records an input that set wall_time and wall_time_ms
	// (DecodeManifest refuses it as a field problem).
	bothWallTimes bool
}

// manifestCeilingJSON is the input form of a ManifestCeiling.
type manifestCeilingJSON struct {
	CPUFuel     uint64    `json:"cpu_fuel"`
	MemoryBytes ByteSize  `json:"memory_bytes"`
	WallTime    *Duration `json:"wall_time"`
	WallTimeMs  *float64  `json:"wall_time_ms"`
}

// maxWallTimeMs bounds wall_time_ms before it is converted (validation
// applies MaxCeilingWallTime afterwards).
const maxWallTimeMs = 1e12

// WallTimeMs is d in milliseconds as a JSON number: an integer when d is
// whole milliseconds, a decimal otherwise.
func WallTimeMs(d Duration) json.Number {
	return json.Number(strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', -1, 64))
}

// UnmarshalJSON reads either "wall_time" (a Go duration string) or
// "wall_time_ms" (milliseconds), refusing unknown fields.
func (c *ManifestCeiling) UnmarshalJSON(data []byte) error {
	var w manifestCeilingJSON
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&w); err != nil {
		return err
	}
	*c = ManifestCeiling{CPUFuel: w.CPUFuel, MemoryBytes: w.MemoryBytes}
	if w.WallTime != nil {
		c.WallTime = *w.WallTime
	}
	if w.WallTimeMs != nil {
		ms := *w.WallTimeMs
		if ms < 0 || ms > maxWallTimeMs {
			return errors.New("wall_time_ms: want a non-negative number of milliseconds")
		}
		c.bothWallTimes = w.WallTime != nil
		if w.WallTime == nil {
			c.WallTime = Duration(math.Round(ms * float64(time.Millisecond)))
		}
	}
	return nil
}

// ManifestPlacement restricts where a revision may run; empty lists allow any.
type ManifestPlacement struct {
	Architectures []string `json:"architectures,omitempty"`
	Regions       []string `json:"regions,omitempty"`
	Zones         []string `json:"zones,omitempty"`
}

// ManifestRoute is one route of a manifest.
type ManifestRoute struct {
	Name     RouteName        `json:"name"`
	Function FunctionName     `json:"function,omitempty"` // default "_start"
	Targets  []ManifestTarget `json:"targets"`
}

// ManifestTarget is one weighted target of a route.
type ManifestTarget struct {
	Revision RevisionName `json:"revision"`
	Weight   int64        `json:"weight"`
}

// ErrInvalidManifest marks every manifest the catalog refuses for its content.
var ErrInvalidManifest = errors.New("catalog: invalid release manifest")

// ValidationError lists every problem found in a manifest.
type ValidationError struct {
	Problems []FieldError
}

func (e *ValidationError) Error() string {
	return JoinFieldErrors("invalid release manifest", e.Problems)
}

// Is makes errors.Is(err, ErrInvalidManifest) hold.
func (e *ValidationError) Is(target error) bool { return target == ErrInvalidManifest }

// Problems collects the problems of a manifest, each naming its field; the
// catalog adds the ones it finds with the modules. The zero value is empty.
type Problems struct{ list []FieldError }

// Add records the problem format (with args) of field.
func (p *Problems) Add(field, format string, args ...any) {
	p.list = append(p.list, FieldError{Field: field, Problem: errors.Newf(format, args...).Error()})
}

// AddErr records err's message as the problem of field.
func (p *Problems) AddErr(field string, err error) {
	p.list = append(p.list, FieldError{Field: field, Problem: err.Error()})
}

// Err returns a *ValidationError listing the problems, or nil when there
// are none.
func (p *Problems) Err() error {
	if len(p.list) == 0 {
		return nil
	}
	return &ValidationError{Problems: p.list}
}

// DecodeManifest reads a JSON manifest of at most MaxManifestBytes, refusing
// unknown fields and trailing data. It does not validate the content: Deploy
// does (see ValidateManifest).
func DecodeManifest(r io.Reader) (Manifest, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxManifestBytes+1))
	if err != nil {
		return Manifest{}, errors.Wrap(err, "catalog: read manifest")
	}
	if len(data) > MaxManifestBytes {
		return Manifest{}, &ValidationError{Problems: []FieldError{{Field: "(manifest)", Problem: "larger than " + strconv.Itoa(MaxManifestBytes) + " bytes"}}}
	}
	var m Manifest
	if err := DecodeStrict(data, &m); err != nil {
		return Manifest{}, &ValidationError{Problems: []FieldError{jsonFieldError(err)}}
	}
	var p Problems
	for i, r := range m.Revisions {
		if r.Ceiling != nil && r.Ceiling.bothWallTimes {
			p.Add("revisions["+strconv.Itoa(i)+"].ceiling.wall_time_ms", "set wall_time or wall_time_ms, not both")
		}
	}
	if err := p.Err(); err != nil {
		return Manifest{}, err
	}
	return m, nil
}

// DecodeStrict decodes one JSON value from data into v, refusing unknown
// fields and trailing data: the rule of manifests and of the catalog's
// records.
func DecodeStrict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("unexpected data after the JSON value")
	}
	return nil
}

func jsonFieldError(err error) FieldError {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		return FieldError{Field: te.Field, Problem: "want a JSON " + te.Type.Kind().String() + ", not a " + te.Value}
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return FieldError{Field: "(manifest)", Problem: "malformed JSON at byte " + strconv.FormatInt(se.Offset, 10)}
	}
	msg := err.Error()
	if strings.HasPrefix(msg, "json: unknown field ") {
		return FieldError{Field: strings.Trim(strings.TrimPrefix(msg, "json: unknown field "), `"`), Problem: "unknown field"}
	}
	return FieldError{Field: "(manifest)", Problem: strings.TrimPrefix(msg, "json: ")}
}

// Spec is a validated manifest in the vocabulary's types (NewSpec builds
// it): the revisions and routes in manifest order, defaults applied.
type Spec struct {
	Tenant    TenantID
	Service   ServiceName
	Revisions []RevisionSpec
	Routes    []RouteSpec
}

// RevisionSpec is one validated revision of a Spec.
type RevisionSpec struct {
	Name       RevisionName
	Artifact   Digest
	TrustClass TrustClass
	Threading  Threading
	Random     Randomness
	ABI        ABI
	Instance   InstanceMode
	Init       FunctionName
	Features   FeatureSet
	Ceiling    Budget
	Placement  Placement
	Attributes []Attribute
	Outbound   OutboundHosts
}

// RouteSpec is one validated route of a Spec; Function defaults to
// DefaultFunction.
type RouteSpec struct {
	Name     RouteName
	Function FunctionName
	Targets  []TargetSpec
}

// TargetSpec is one weighted target of a RouteSpec.
type TargetSpec struct {
	Revision int // index into Spec.Revisions
	Weight   uint32
}

// Attribute is an informational key/value label of a revision. Attributes are
// never policy.
type Attribute struct {
	Key, Value string
}

// ValidateManifest checks a manifest without touching artifacts and returns
// every problem, each naming its field.
func ValidateManifest(m Manifest) error {
	_, err := NewSpec(m)
	return err
}

// NewSpec validates m, as ValidateManifest does, and returns it in the
// vocabulary's types.
func NewSpec(m Manifest) (Spec, error) {
	var p Problems
	s := Spec{Tenant: m.Tenant, Service: m.Service}
	if err := ValidatePathName(string(m.Tenant)); err != nil {
		p.AddErr("tenant", err)
	}
	if err := ValidatePathName(string(m.Service)); err != nil {
		p.AddErr("service", err)
	}
	switch {
	case len(m.Revisions) == 0:
		p.Add("revisions", "at least one revision is required")
	case len(m.Revisions) > MaxRevisions:
		p.Add("revisions", "at most %d revisions are allowed", MaxRevisions)
	}
	switch {
	case len(m.Routes) == 0:
		p.Add("routes", "at least one route is required")
	case len(m.Routes) > MaxRoutes:
		p.Add("routes", "at most %d routes are allowed", MaxRoutes)
	}
	if len(p.list) > 0 && (len(m.Revisions) > MaxRevisions || len(m.Routes) > MaxRoutes) {
		return Spec{}, p.Err() // do not walk oversized lists
	}

	index := make(map[RevisionName]int, len(m.Revisions))
	for i, r := range m.Revisions {
		f := "revisions[" + strconv.Itoa(i) + "]"
		rs := validateRevision(&p, f, r)
		if ValidateName(string(r.Name)) == nil {
			if _, dup := index[r.Name]; dup {
				p.Add(f+".name", "duplicate revision name")
			} else {
				index[r.Name] = i
			}
		}
		s.Revisions = append(s.Revisions, rs)
	}

	referenced := make([]bool, len(m.Revisions))
	routeNames := make(map[RouteName]bool, len(m.Routes))
	for i, r := range m.Routes {
		f := "routes[" + strconv.Itoa(i) + "]"
		rs := RouteSpec{Name: r.Name, Function: r.Function}
		if err := ValidatePathName(string(r.Name)); err != nil {
			p.AddErr(f+".name", err)
		} else if routeNames[r.Name] {
			p.Add(f+".name", "duplicate route name")
		}
		routeNames[r.Name] = true
		if rs.Function == "" {
			rs.Function = DefaultFunction
		}
		if err := ValidateName(string(rs.Function)); err != nil {
			p.AddErr(f+".function", err)
		}
		switch {
		case len(r.Targets) == 0:
			p.Add(f+".targets", "at least one target is required")
		case len(r.Targets) > MaxTargetsPerRoute:
			p.Add(f+".targets", "at most %d targets are allowed", MaxTargetsPerRoute)
			continue
		}
		seen := make(map[RevisionName]bool, len(r.Targets))
		for j, t := range r.Targets {
			tf := f + ".targets[" + strconv.Itoa(j) + "]"
			idx, ok := index[t.Revision]
			switch {
			case t.Revision == "":
				p.Add(tf+".revision", "must name a revision")
			case !ok:
				p.Add(tf+".revision", "names no revision of this manifest")
			case seen[t.Revision]:
				p.Add(tf+".revision", "duplicate target")
			}
			seen[t.Revision] = true
			if t.Weight < 1 || t.Weight > MaxWeight {
				p.Add(tf+".weight", "must be an integer from 1 to %d", MaxWeight)
			}
			if ok {
				referenced[idx] = true
				rs.Targets = append(rs.Targets, TargetSpec{Revision: idx, Weight: uint32(max(t.Weight, 0))})
			}
		}
		s.Routes = append(s.Routes, rs)
	}
	for i, r := range m.Revisions {
		if _, ok := index[r.Name]; ok && index[r.Name] == i && !referenced[i] {
			p.Add("revisions["+strconv.Itoa(i)+"]", "no route targets this revision")
		}
	}
	if err := p.Err(); err != nil {
		return Spec{}, err
	}
	return s, nil
}

func validateRevision(p *Problems, f string, r ManifestRevision) RevisionSpec {
	rs := RevisionSpec{Name: r.Name, Artifact: r.Artifact, TrustClass: r.TrustClass, Threading: ThreadingSingle}
	if err := ValidateName(string(r.Name)); err != nil {
		p.AddErr(f+".name", err)
	}
	if r.Module != "" {
		p.Add(f+".module", "module paths are read by the CLI; upload the module and name it by artifact digest")
	}
	if _, err := ParseDigest(string(r.Artifact)); err != nil {
		p.AddErr(f+".artifact", err)
	}
	if err := ValidateName(string(r.TrustClass)); err != nil {
		p.AddErr(f+".trust_class", err)
	}
	if r.Threading != "" {
		th, err := ParseThreading(r.Threading)
		if err != nil {
			p.AddErr(f+".threading", err)
		}
		rs.Threading = th
	}
	if r.Random != "" {
		rnd, err := ParseRandomness(r.Random)
		if err != nil {
			p.AddErr(f+".random", err)
		}
		rs.Random = rnd
	}
	if r.ABI != "" {
		abi, err := ParseABI(r.ABI)
		if err != nil {
			p.AddErr(f+".abi", err)
		}
		rs.ABI = abi
	}
	instanceOK := true
	if r.Instance != "" {
		mode, err := ParseInstanceMode(r.Instance)
		if err != nil {
			p.AddErr(f+".instance", err)
			instanceOK = false
		}
		rs.Instance = mode
	}
	if r.Init != "" {
		rs.Init = r.Init
		if err := ValidateName(string(r.Init)); err != nil {
			p.AddErr(f+".init", err)
		} else if instanceOK && rs.Instance == InstanceFresh {
			p.Add(f+".init", `an initialisation export needs instance = "snapshot" or "reuse" (a fresh instance runs the module's own start)`)
		}
	}
	if len(r.AllowedOutboundHosts) > 0 && rs.ABI != ABIWASIHTTP {
		p.Add(f+".allowed_outbound_hosts", `only a revision with abi = "wasi-http" makes outbound requests`)
	} else if len(r.AllowedOutboundHosts) > MaxOutboundHosts {
		p.Add(f+".allowed_outbound_hosts", "at most %d entries", MaxOutboundHosts)
	} else {
		for j, e := range r.AllowedOutboundHosts {
			h, err := ParseOutboundHost(e)
			if err != nil {
				p.AddErr(f+".allowed_outbound_hosts["+strconv.Itoa(j)+"]", err)
				continue
			}
			rs.Outbound = append(rs.Outbound, h)
		}
	}
	if len(r.Features) > int(numFeatures) {
		p.Add(f+".features", "at most %d features", numFeatures)
	} else {
		for j, name := range r.Features {
			ft, err := ParseFeature(name)
			ff := f + ".features[" + strconv.Itoa(j) + "]"
			switch {
			case err != nil:
				p.AddErr(ff, err)
			case rs.Features.Has(ft):
				p.Add(ff, "duplicate feature")
			}
			if err == nil {
				rs.Features |= FeatureSetOf(ft)
			}
		}
	}
	if rs.Threading == ThreadingShared && !rs.Features.Has(FeatureThreads) {
		rs.Features |= FeatureSetOf(FeatureThreads)
	}
	if r.Ceiling == nil {
		p.Add(f+".ceiling", "a deployment ceiling (cpu_fuel, memory_bytes, wall_time) is required")
	} else {
		c := r.Ceiling
		if c.CPUFuel == 0 {
			p.Add(f+".ceiling.cpu_fuel", "must be positive")
		}
		switch {
		case c.MemoryBytes == 0:
			p.Add(f+".ceiling.memory_bytes", "must be positive")
		case c.MemoryBytes > MaxWasm32MemoryBytes:
			p.Add(f+".ceiling.memory_bytes", "must be at most 4GiB (the wasm32 limit)")
		}
		switch {
		case c.WallTime <= 0:
			p.Add(f+".ceiling.wall_time", "must be positive")
		case time.Duration(c.WallTime) > MaxCeilingWallTime:
			p.Add(f+".ceiling.wall_time", "must be at most %s", MaxCeilingWallTime)
		}
		rs.Ceiling = Budget{CPUFuel: c.CPUFuel, MemoryBytes: uint64(c.MemoryBytes), WallTime: time.Duration(c.WallTime)}
	}
	if r.Placement != nil {
		lists := []struct {
			name string
			vals []string
		}{{"architectures", r.Placement.Architectures}, {"regions", r.Placement.Regions}, {"zones", r.Placement.Zones}}
		for _, l := range lists {
			if len(l.vals) > MaxPlacementValues {
				p.Add(f+".placement."+l.name, "at most %d values", MaxPlacementValues)
				continue
			}
			for j, v := range l.vals {
				if err := ValidateName(v); err != nil {
					p.AddErr(f+".placement."+l.name+"["+strconv.Itoa(j)+"]", err)
				}
			}
		}
		rs.Placement = NewPlacement(r.Placement.Architectures, r.Placement.Regions, r.Placement.Zones)
	}
	if len(r.Attributes) > MaxRevisionAttributes {
		p.Add(f+".attributes", "at most %d attributes", MaxRevisionAttributes)
	} else {
		keys := slices.Sorted(maps.Keys(r.Attributes))
		for _, k := range keys {
			v := r.Attributes[k]
			if err := ValidateName(k); err != nil {
				p.AddErr(f+".attributes", errors.Wrap(err, "key"))
				continue
			}
			if !validValue(v) {
				p.Add(f+".attributes."+k, "must be valid UTF-8 of at most %d bytes without control characters", MaxAttributeValueBytes)
				continue
			}
			rs.Attributes = append(rs.Attributes, Attribute{Key: k, Value: v})
		}
	}
	return rs
}

func validValue(v string) bool {
	if len(v) > MaxAttributeValueBytes || !utf8.ValidString(v) {
		return false
	}
	for _, r := range v {
		if unicode.IsControl(r) {
			return false
		}
	}
	return true
}

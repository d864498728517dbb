// Tests of names, byte sizes, the enumerations, and the manifest's
// decoding and validation, with their fuzz targets.

package vocab

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/errors"
)

func TestValidateName(t *testing.T) {
	tests := []struct {
		name     string
		in       string
		ok       bool
		pathOK   bool
		contains string
	}{
		{"plain", "acme", true, true, ""},
		{"unicode", "café-ünïcode", true, true, ""},
		{"underscore start", "_start", true, true, ""},
		{"empty", "", false, false, "empty"},
		{"space", "a b", false, false, "whitespace"},
		{"tab", "a\tb", false, false, "whitespace"},
		{"newline", "a\n", false, false, "whitespace"},
		{"nul", "a\x00b", false, false, "control"},
		{"del", "a\x7fb", false, false, "control"},
		{"nbsp", "a\u00a0b", false, false, "whitespace"},
		{"invalid utf-8", "a\xffb", false, false, "UTF-8"},
		{"max bytes", strings.Repeat("x", MaxNameBytes), true, true, ""},
		{"over max bytes", strings.Repeat("x", MaxNameBytes+1), false, false, "at most"},
		{"slash is a name but not a path segment", "a/b", true, false, "'/'"},
		{"dot", ".", true, false, `"."`},
		{"dotdot", "..", true, false, `".."`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidateName(tc.in)
			if (err == nil) != tc.ok {
				t.Fatalf("ValidateName: want ok=%v, have %v", tc.ok, err)
			}
			perr := ValidatePathName(tc.in)
			if (perr == nil) != tc.pathOK {
				t.Fatalf("ValidatePathName: want ok=%v, have %v", tc.pathOK, perr)
			}
			for _, e := range []error{err, perr} {
				if e == nil {
					continue
				}
				if !errors.Is(e, ErrInvalidName) {
					t.Errorf("error %v is not marked ErrInvalidName", e)
				}
				if tc.in != "" && len(tc.in) > 2 && strings.Contains(e.Error(), tc.in) {
					t.Errorf("error %q echoes the name", e)
				}
			}
			if err != nil && !strings.Contains(err.Error(), tc.contains) {
				t.Errorf("error %q does not mention %q", err, tc.contains)
			}
			if err == nil && perr != nil && !strings.Contains(perr.Error(), tc.contains) {
				t.Errorf("error %q does not mention %q", perr, tc.contains)
			}
		})
	}
	if err := ValidateNameWithin("abcdef", 5); err == nil {
		t.Error("ValidateNameWithin ignored its bound")
	}
}

func TestParseByteSize(t *testing.T) {
	tests := []struct {
		in   string
		want ByteSize
		ok   bool
	}{
		{"0", 0, true},
		{"1048576", 1 << 20, true},
		{"1_048_576", 1 << 20, true},
		{"64MiB", 64 << 20, true},
		{"512KiB", 512 << 10, true},
		{"1GiB", 1 << 30, true},
		{"2TiB", 2 << 40, true},
		{"1KB", 1000, true},
		{"5MB", 5_000_000, true},
		{"3GB", 3_000_000_000, true},
		{"10B", 10, true},
		{"", 0, false},
		{"MiB", 0, false},
		{"-1", 0, false},
		{"+1", 0, false},
		{"1.5GiB", 0, false},
		{"1 GiB", 0, false},
		{"1gib", 0, false},
		{"99999999999TiB", 0, false},
		{"18446744073709551616", 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			have, err := ParseByteSize(tc.in)
			if (err == nil) != tc.ok || have != tc.want {
				t.Fatalf("want %d ok=%v, have %d err=%v", tc.want, tc.ok, have, err)
			}
			if tc.ok {
				back, err := ParseByteSize(have.String())
				if err != nil || back != have {
					t.Fatalf("String %q does not round-trip: %d %v", have.String(), back, err)
				}
			}
		})
	}
}

func TestVocabulary(t *testing.T) {
	for i, c := range CellClasses {
		p, err := ParseCellClass(c.String())
		if err != nil || p != c {
			t.Errorf("cell class %v does not round-trip", c)
		}
		if i > 0 && !(CellClasses[i-1] < c) {
			t.Errorf("cell classes out of order at %v", c)
		}
	}
	if _, err := ParseCellClass("huge"); err == nil {
		t.Error("ParseCellClass accepted huge")
	}
	if CellClass(0).Valid() || CellClass(9).Valid() || CellClass(9).String() != "cell-class(9)" {
		t.Error("invalid cell classes are not recognized")
	}
	for _, r := range []Randomness{RandomSecure, RandomDeterministic} {
		if p, err := ParseRandomness(r.String()); err != nil || p != r {
			t.Errorf("random source %v does not round-trip", r)
		}
	}
	if Randomness(0) != RandomSecure {
		t.Error("the zero random source is not secure")
	}
	if _, err := ParseRandomness(""); err == nil {
		t.Error("ParseRandomness accepted an empty name")
	}
	for _, a := range []ABI{ABIStdio, ABIWAGI} {
		if p, err := ParseABI(a.String()); err != nil || p != a {
			t.Errorf("guest ABI %v does not round-trip", a)
		}
	}
	if ABI(0) != ABIStdio || ABI(7).String() != "abi(7)" {
		t.Error("the zero guest ABI is not stdio")
	}
	if _, err := ParseABI("WAGI"); err == nil {
		t.Error("ParseABI accepted WAGI")
	}
	all := FeatureSet(0)
	for f := Feature(0); f < numFeatures; f++ {
		p, err := ParseFeature(f.String())
		if err != nil || p != f {
			t.Errorf("feature %v does not round-trip", f)
		}
		all |= FeatureSetOf(f)
	}
	if all.Len() != int(numFeatures) || !FeatureSetOf(FeatureSIMD).SubsetOf(all) || all.SubsetOf(FeatureSetOf(FeatureSIMD)) {
		t.Error("feature set algebra is wrong")
	}
	var fs FeatureSet
	if err := fs.UnmarshalJSON([]byte(`["simd","threads"]`)); err != nil || fs != FeatureSetOf(FeatureSIMD, FeatureThreads) {
		t.Errorf("feature set JSON: %v %v", fs, err)
	}
	if err := fs.UnmarshalJSON([]byte(`["gc"]`)); err == nil {
		t.Error("unknown feature accepted")
	}
	b := Budget{CPUFuel: 1, MemoryBytes: 1, WallTime: 1}
	if err := b.CheckPhase1(); err != nil {
		t.Errorf("phase 1 budget refused: %v", err)
	}
	for name, later := range map[string]Budget{
		"network-egress-bytes": {NetworkEgressBytes: 1},
		"storage-bytes":        {StorageBytes: 1},
		"accelerators":         {Accelerators: 1},
	} {
		err := later.CheckPhase1()
		if !errors.Is(err, ErrUnsupportedBudgetDimension) || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: want unsupported dimension naming it, have %v", name, err)
		}
	}
	p := NewPlacement([]string{"x86_64", "aarch64", "x86_64"}, nil, []string{"z1"})
	if !slices.Equal(p.Architectures(), []string{"aarch64", "x86_64"}) {
		t.Errorf("placement not sorted/deduplicated: %v", p.Architectures())
	}
	if !p.Allows("x86_64", "anywhere", "z1") || p.Allows("riscv64", "r", "z1") || p.Allows("x86_64", "r", "z2") {
		t.Error("placement Allows is wrong")
	}
	p.Architectures()[0] = "mutated"
	if p.Architectures()[0] != "aarch64" {
		t.Error("placement leaked its internal slice")
	}
}

func validManifest() Manifest {
	return Manifest{
		Tenant: "acme", Service: "images",
		Revisions: []ManifestRevision{revision("v1", digestA), revision("v2", digestB)},
		Routes:    []ManifestRoute{mroute("thumbnail", target("v1", 90), target("v2", 10))},
	}
}

func TestValidateManifest(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(m *Manifest)
		fields []string // the fields the problems must name, in order
	}{
		{"valid", func(m *Manifest) {}, nil},
		{"empty tenant", func(m *Manifest) { m.Tenant = "" }, []string{"tenant"}},
		{"tenant with slash", func(m *Manifest) { m.Tenant = "a/b" }, []string{"tenant"}},
		{"over-long service", func(m *Manifest) { m.Service = ServiceName(strings.Repeat("s", 129)) }, []string{"service"}},
		{"no revisions", func(m *Manifest) { m.Revisions = nil; m.Routes = nil },
			[]string{"revisions", "routes"}},
		{"too many revisions", func(m *Manifest) {
			for i := 0; i <= MaxRevisions; i++ {
				m.Revisions = append(m.Revisions, revision("x", digestA))
			}
		}, []string{"revisions"}},
		{"duplicate revision", func(m *Manifest) { m.Revisions[1].Name = "v1" },
			[]string{"revisions[1].name", "routes[0].targets[1].revision"}},
		{"bad revision name", func(m *Manifest) { m.Revisions[0].Name = "v 1" },
			[]string{"revisions[0].name", "routes[0].targets[0].revision"}},
		{"module path", func(m *Manifest) { m.Revisions[0].Module = "thumb.wasm" }, []string{"revisions[0].module"}},
		{"bad digest", func(m *Manifest) { m.Revisions[0].Artifact = "sha256:XYZ" }, []string{"revisions[0].artifact"}},
		{"uppercase digest", func(m *Manifest) { m.Revisions[0].Artifact = Digest(strings.ToUpper(string(digestA))) },
			[]string{"revisions[0].artifact"}},
		{"missing trust class", func(m *Manifest) { m.Revisions[0].TrustClass = "" }, []string{"revisions[0].trust_class"}},
		{"bad threading", func(m *Manifest) { m.Revisions[0].Threading = "green" }, []string{"revisions[0].threading"}},
		{"deterministic random", func(m *Manifest) { m.Revisions[0].Random = "deterministic" }, nil},
		{"bad random", func(m *Manifest) { m.Revisions[1].Random = "replay" }, []string{"revisions[1].random"}},
		{"wagi abi", func(m *Manifest) { m.Revisions[0].ABI = "wagi" }, nil},
		{"bad abi", func(m *Manifest) { m.Revisions[1].ABI = "cgi" }, []string{"revisions[1].abi"}},
		{"unknown feature", func(m *Manifest) { m.Revisions[0].Features = []string{"simd", "gc"} },
			[]string{"revisions[0].features[1]"}},
		{"duplicate feature", func(m *Manifest) { m.Revisions[0].Features = []string{"simd", "simd"} },
			[]string{"revisions[0].features[1]"}},
		{"missing ceiling", func(m *Manifest) { m.Revisions[1].Ceiling = nil }, []string{"revisions[1].ceiling"}},
		{"zero ceiling", func(m *Manifest) { m.Revisions[0].Ceiling = &ManifestCeiling{} },
			[]string{"revisions[0].ceiling.cpu_fuel", "revisions[0].ceiling.memory_bytes", "revisions[0].ceiling.wall_time"}},
		{"negative wall time", func(m *Manifest) { m.Revisions[0].Ceiling.WallTime = -1 },
			[]string{"revisions[0].ceiling.wall_time"}},
		{"huge wall time", func(m *Manifest) { m.Revisions[0].Ceiling.WallTime = Duration(25 * 3600e9) },
			[]string{"revisions[0].ceiling.wall_time"}},
		{"memory over 4GiB", func(m *Manifest) { m.Revisions[0].Ceiling.MemoryBytes = MaxWasm32MemoryBytes + 1 },
			[]string{"revisions[0].ceiling.memory_bytes"}},
		{"bad placement value", func(m *Manifest) {
			m.Revisions[0].Placement = &ManifestPlacement{Regions: []string{"eu", ""}}
		}, []string{"revisions[0].placement.regions[1]"}},
		{"too many placement values", func(m *Manifest) {
			m.Revisions[0].Placement = &ManifestPlacement{Zones: slices.Repeat([]string{"z"}, MaxPlacementValues+1)}
		}, []string{"revisions[0].placement.zones"}},
		{"bad attribute value", func(m *Manifest) {
			m.Revisions[0].Attributes = map[string]string{"team": "a\x00b"}
		}, []string{"revisions[0].attributes.team"}},
		{"bad attribute key", func(m *Manifest) {
			m.Revisions[0].Attributes = map[string]string{"a b": "x"}
		}, []string{"revisions[0].attributes"}},
		{"unreferenced revision", func(m *Manifest) { m.Routes[0].Targets = m.Routes[0].Targets[:1] },
			[]string{"revisions[1]"}},
		{"no routes", func(m *Manifest) { m.Routes = nil },
			[]string{"routes", "revisions[0]", "revisions[1]"}},
		{"duplicate route", func(m *Manifest) { m.Routes = append(m.Routes, m.Routes[0]) }, []string{"routes[1].name"}},
		{"route with slash", func(m *Manifest) { m.Routes[0].Name = "a/b" }, []string{"routes[0].name"}},
		{"bad function", func(m *Manifest) { m.Routes[0].Function = "has space" }, []string{"routes[0].function"}},
		{"no targets", func(m *Manifest) { m.Routes[0].Targets = nil },
			[]string{"routes[0].targets", "revisions[0]", "revisions[1]"}},
		{"unknown revision", func(m *Manifest) { m.Routes[0].Targets[1].Revision = "v3" },
			[]string{"routes[0].targets[1].revision", "revisions[1]"}},
		{"empty target revision", func(m *Manifest) { m.Routes[0].Targets[1].Revision = "" },
			[]string{"routes[0].targets[1].revision", "revisions[1]"}},
		{"duplicate target", func(m *Manifest) { m.Routes[0].Targets[1].Revision = "v1" },
			[]string{"routes[0].targets[1].revision", "revisions[1]"}},
		{"zero weight", func(m *Manifest) { m.Routes[0].Targets[0].Weight = 0 }, []string{"routes[0].targets[0].weight"}},
		{"negative weight", func(m *Manifest) { m.Routes[0].Targets[1].Weight = -5 }, []string{"routes[0].targets[1].weight"}},
		{"over-large weight", func(m *Manifest) { m.Routes[0].Targets[1].Weight = MaxWeight + 1 },
			[]string{"routes[0].targets[1].weight"}},
		{"too many targets", func(m *Manifest) {
			m.Routes[0].Targets = slices.Repeat([]ManifestTarget{target("v1", 1)}, MaxTargetsPerRoute+1)
		}, []string{"routes[0].targets", "revisions[0]", "revisions[1]"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := validManifest()
			tc.mutate(&m)
			err := ValidateManifest(m)
			if tc.fields == nil {
				if err != nil {
					t.Fatalf("want valid, have %v", err)
				}
				return
			}
			if !errors.Is(err, ErrInvalidManifest) {
				t.Fatalf("want ErrInvalidManifest, have %v", err)
			}
			if have := problemFields(t, err); !slices.Equal(have, tc.fields) {
				t.Fatalf("want problems in %q, have %q (%v)", tc.fields, have, err)
			}
		})
	}
}

func TestDecodeManifest(t *testing.T) {
	good := `{"tenant":"acme","service":"images",
	  "revisions":[{"name":"v1","artifact":"` + string(digestA) + `","trust_class":"untrusted",
	    "features":["simd"],"ceiling":{"cpu_fuel":100000000,"memory_bytes":"32MiB","wall_time":"2s"},
	    "placement":{"architectures":["x86_64"]}}],
	  "routes":[{"name":"thumbnail","function":"_start","targets":[{"revision":"v1","weight":100}]}]}`
	m, err := DecodeManifest(strings.NewReader(good))
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	if m.Revisions[0].Ceiling.MemoryBytes != 32<<20 || m.Revisions[0].Ceiling.WallTime != Duration(2e9) {
		t.Fatalf("sizes and durations not parsed: %+v", m.Revisions[0].Ceiling)
	}
	if err := ValidateManifest(m); err != nil {
		t.Fatalf("validate: %v", err)
	}

	tests := []struct {
		name, in, field string
	}{
		{"unknown field", `{"tenant":"a","colour":"red"}`, "colour"},
		{"trailing data", `{"tenant":"a"} {}`, "(manifest)"},
		{"malformed", `{"tenant":`, "(manifest)"},
		{"syntax", `{"tenant" "a"}`, "(manifest)"},
		{"string weight", `{"routes":[{"targets":[{"weight":"10"}]}]}`, "routes.targets.weight"},
		{"fractional weight", `{"routes":[{"targets":[{"weight":1.5}]}]}`, "routes.targets.weight"},
		{"bad size", `{"revisions":[{"ceiling":{"memory_bytes":"lots"}}]}`, "(manifest)"},
		{"bad duration", `{"revisions":[{"ceiling":{"wall_time":"soon"}}]}`, "(manifest)"},
		{"oversized", `{"tenant":"` + strings.Repeat("a", MaxManifestBytes) + `"}`, "(manifest)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeManifest(strings.NewReader(tc.in))
			if !errors.Is(err, ErrInvalidManifest) {
				t.Fatalf("want ErrInvalidManifest, have %v", err)
			}
			if have := problemFields(t, err); len(have) != 1 || have[0] != tc.field {
				t.Fatalf("want field %q, have %q (%v)", tc.field, have, err)
			}
		})
	}
}

// FuzzDecodeManifest: decoding and validating arbitrary bytes never panics,
// validation is deterministic, and a valid manifest survives a JSON round trip
// with the same identities.
func FuzzDecodeManifest(f *testing.F) {
	f.Add([]byte(`{"tenant":"acme","service":"images","revisions":[{"name":"v1","artifact":"` + string(digestA) +
		`","trust_class":"t","ceiling":{"cpu_fuel":1,"memory_bytes":"1MiB","wall_time":"1s"}}],` +
		`"routes":[{"name":"r","targets":[{"revision":"v1","weight":1}]}]}`))
	f.Add([]byte(`{"revisions":[{"ceiling":{"memory_bytes":123}}],"routes":[{"targets":[{"weight":-1}]}]}`))
	f.Add([]byte(`{"tenant":"acme","service":"images","revisions":[{"name":"v1","artifact":"` + string(digestA) +
		`","trust_class":"t","instance":"snapshot","init":"wizer.initialize",` +
		`"ceiling":{"cpu_fuel":1,"memory_bytes":"1MiB","wall_time":"1s"}}],` +
		`"routes":[{"name":"r","function":"handle","targets":[{"revision":"v1","weight":1}]}]}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := DecodeManifest(strings.NewReader(string(data)))
		if err != nil {
			if !errors.Is(err, ErrInvalidManifest) {
				t.Fatalf("decode error not marked: %v", err)
			}
			return
		}
		s1, err1 := NewSpec(m)
		s2, err2 := NewSpec(cloneManifest(m))
		if (err1 == nil) != (err2 == nil) {
			t.Fatalf("validation not deterministic: %v vs %v", err1, err2)
		}
		if err1 != nil {
			if err1.Error() != err2.Error() {
				t.Fatalf("problems not deterministic:\n%v\n%v", err1, err2)
			}
			return
		}
		if s1.ReleaseID() != s2.ReleaseID() {
			t.Fatal("release id changed across a JSON round trip")
		}
		for i := range s1.Revisions {
			if s1.RevisionID(i) != s2.RevisionID(i) {
				t.Fatal("revision id changed across a JSON round trip")
			}
		}
	})
}

func FuzzValidateName(f *testing.F) {
	for _, s := range []string{"acme", "", "a b", "a/b", "..", "\xff", "é"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		err := ValidateName(s)
		if err == nil {
			if s == "" || len(s) > MaxNameBytes || strings.ContainsFunc(s, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
				t.Fatalf("accepted %q", s)
			}
		}
		if ValidatePathName(s) == nil && (err != nil || strings.Contains(s, "/")) {
			t.Fatalf("path name accepted %q", s)
		}
	})
}

// TestInstance_validate: the manifest's instance mode and initialisation
// export, checked without the modules. Every refusal names its field; an
// init is refused without a snapshot or reuse mode, but not reported twice
// when the mode itself is wrong.
func TestInstance_validate(t *testing.T) {
	tests := []struct {
		name           string
		instance, init string
		fields         []string
	}{
		{name: "default", fields: nil},
		{name: "fresh spelled out", instance: "fresh"},
		{name: "snapshot", instance: "snapshot"},
		{name: "reuse", instance: "reuse"},
		{name: "snapshot with init", instance: "snapshot", init: "wizer.initialize"},
		{name: "reuse with init", instance: "reuse", init: "_initialize"},
		{name: "unknown mode", instance: "warm", fields: []string{"revisions[0].instance"}},
		{name: "mode is case sensitive", instance: "Snapshot", fields: []string{"revisions[0].instance"}},
		{name: "init without a mode", init: "_initialize", fields: []string{"revisions[0].init"}},
		{name: "init with fresh", instance: "fresh", init: "_initialize", fields: []string{"revisions[0].init"}},
		{name: "init not a name", instance: "snapshot", init: "a b", fields: []string{"revisions[0].init"}},
		{name: "init too long", instance: "reuse", init: strings.Repeat("i", MaxNameBytes+1),
			fields: []string{"revisions[0].init"}},
		{name: "init with an unknown mode: the mode only", instance: "cold", init: "_initialize",
			fields: []string{"revisions[0].instance"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := twoRevisions(digestA, digestB)
			m.Revisions[0].Instance, m.Revisions[0].Init = tc.instance, FunctionName(tc.init)
			err := ValidateManifest(m)
			if tc.fields == nil {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrInvalidManifest) {
				t.Fatalf("want ErrInvalidManifest, have %v", err)
			}
			if have := problemFields(t, err); !slices.Equal(have, tc.fields) {
				t.Fatalf("fields %q, want %q (%v)", have, tc.fields, err)
			}
		})
	}
}

// TestRandom_manifestJSON: the field decodes from the JSON manifest by its
// name, and an unknown value is refused naming it.
func TestRandom_manifestJSON(t *testing.T) {
	for _, tc := range []struct {
		value string
		ok    bool
	}{
		{"secure", true},
		{"deterministic", true},
		{"Deterministic", false},
		{"fixed", false},
	} {
		t.Run(tc.value, func(t *testing.T) {
			m := validManifest()
			js, err := json.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			js = bytes.Replace(js, []byte(`"trust_class"`), []byte(`"random":"`+tc.value+`","trust_class"`), 1)
			dec, err := DecodeManifest(bytes.NewReader(js))
			if err != nil {
				t.Fatal(err)
			}
			if dec.Revisions[0].Random != tc.value {
				t.Fatalf("decoded random %q, want %q", dec.Revisions[0].Random, tc.value)
			}
			err = ValidateManifest(dec)
			if tc.ok {
				if err != nil {
					t.Fatalf("want valid, have %v", err)
				}
				return
			}
			if fields := problemFields(t, err); !reflect.DeepEqual(fields, []string{"revisions[0].random"}) {
				t.Fatalf("want a problem in revisions[0].random, have %q (%v)", fields, err)
			}
		})
	}
}

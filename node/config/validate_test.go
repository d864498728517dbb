package config

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/latent-node/latent-node/admission"
	"github.com/latent-node/latent-node/scheduler"
	"github.com/latent-node/latent-node/vocab"
)

func TestFileKey(t *testing.T) {
	tests := []struct {
		name string
		path vocab.FieldPath
		want string
	}{
		{"top-level field", "MaxWait", "scheduler.max_wait"},
		{"renamed table", vocab.FieldPath("Placement").Field("Zone"), "node.zone"},
		{"list element", vocab.FieldPath("QueueClasses").Index(12).Field("MaxPriority"), "queue_classes[12].priorities"},
		{"map element", vocab.FieldPath("CellClasses").Key("tiny").Field("MemoryBytes"), "cell_classes.tiny.memory"},
		{"quoted map key", vocab.FieldPath("Tenants").Key("a.b").Field("Limits").Field("MaxPriority"),
			`tenants."a.b".limits.max_priority`},
		{"map itself", vocab.FieldPath("TrustClasses").Key(`x"y`), `trust_classes."x\"y"`},
		// No key in the file: the Go path is kept, so the problem still shows.
		{"unmapped field", "AdjustInterval", "AdjustInterval"},
		{"index where a key belongs", vocab.FieldPath("Tenants").Index(0).Field("Kinds"), "Tenants[0].Kinds"},
		{"key where an index belongs", vocab.FieldPath("QueueClasses").Key("0").Field("Name"), `QueueClasses["0"].Name`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if have := fileKey(tc.path); have != tc.want {
				t.Fatalf("fileKey(%q): want %s, have %s", tc.path, tc.want, have)
			}
		})
	}
}

// TestFileKeys_cover checks that every field admission and the scheduler
// report for broken values has a key in the file (but the values the node
// sets itself), so fileKeys follows their validation.
func TestFileKeys_cover(t *testing.T) {
	noKey := map[string]bool{"AdjustInterval": true}
	check := func(t *testing.T, problems []vocab.FieldError) {
		t.Helper()
		if len(problems) == 0 {
			t.Fatal("no problems: the broken value is valid")
		}
		for _, p := range problems {
			if _, ok := mapFieldPath(vocab.FieldPath(p.Field)); !ok && !noKey[p.Field] {
				t.Errorf("%s (%s) has no key in the file", p.Field, p.Problem)
			}
		}
	}
	policies := []admission.Policy{{}, {
		BudgetCeiling: vocab.Budget{Accelerators: 1},
		Limits:        admission.TenantLimits{MaxPriority: 5000},
		QueueClasses:  []admission.QueueClassPolicy{{Name: ""}, {Name: "a", MinPriority: 3, MaxPriority: 1}, {Name: "a"}},
		CellClasses:   map[vocab.CellClass]admission.CellClassPolicy{vocab.CellTiny: {}, vocab.CellClass(9): {}},
		TrustClasses:  map[vocab.TrustClass]admission.TrustClassPolicy{"a.b": {CellClasses: []vocab.CellClass{vocab.CellLarge}}, "": {}},
		Tenants: map[vocab.TenantID]admission.TenantPolicy{"t.x": {TrustClasses: []vocab.TrustClass{"none"},
			CellClasses: []vocab.CellClass{vocab.CellLarge}, Subjects: []string{"a b"}, Kinds: []admission.PrincipalKind{9},
			Limits: admission.TenantLimits{MaxPriority: 5000}}, "/": {}},
		Overload: admission.OverloadPolicy{CPUThreshold: 2, MemoryThreshold: -1, MaxObservationAge: -1},
		Deadline: admission.DeadlinePolicy{EstimatedServiceTime: -1, MinimumExecutionTime: -1, SafetyMargin: -1},
		Metadata: admission.MetadataPolicy{MaxIdentifierBytes: -1, MaxEntries: -1, MaxBytes: -1},
	}}
	for i, p := range policies {
		var pe *admission.PolicyError
		if !errors.As(p.Validate(), &pe) {
			t.Fatalf("policy %d: want a PolicyError", i)
		}
		check(t, pe.Problems)
	}
	configs := []scheduler.Config{{}, {
		CellClasses: map[vocab.CellClass]scheduler.CellConfig{vocab.CellTiny: {Parallelism: 1, TargetServiceTime: -1},
			vocab.CellSmall: {}, vocab.CellClass(9): {}},
		QueueClasses: []scheduler.QueueConfig{{Name: "", MinPriority: 2, MaxPriority: 1, MaxQueued: -1, ReservedCells: 3},
			{Name: "b", ReservedCells: -1}},
		MaxWait: -1, LowerClassAfter: -1, Fairness: "lottery", AdjustInterval: -time.Second,
	}}
	for i, c := range configs {
		var ce *scheduler.ConfigError
		if !errors.As(c.Validate(), &ce) {
			t.Fatalf("config %d: want a ConfigError", i)
		}
		check(t, ce.Problems)
	}
}

// TestCheck_schedulerAfterAdmission checks that a value admission and the
// scheduler both refuse is reported once, by admission, and that a problem
// only the scheduler sees is reported.
func TestCheck_schedulerAfterAdmission(t *testing.T) {
	cfg, err := Demo(WithDataDir(t.TempDir()), WithDemoKey("sha256:"+strings.Repeat("a", 64)))
	if err != nil {
		t.Fatal(err)
	}
	class := cfg.SortedCellClasses()[0]
	cc := cfg.CellClasses[class]
	cc.Parallelism = 0
	cfg.CellClasses[class] = cc
	key := "cell_classes." + class.String() + ".parallelism"
	var e *Error
	if !errors.As(cfg.Validate(), &e) {
		t.Fatal("want a *Error")
	}
	var at []string
	for _, p := range e.Problems {
		if p.Field == key {
			at = append(at, p.Problem)
		}
	}
	if len(at) != 1 || at[0] != "must be positive" {
		t.Errorf("%s: want admission's one problem, have %q", key, at)
	}

	cc.Parallelism = 1
	cfg.CellClasses[class] = cc
	cfg.QueueClasses[0].ReservedCells = 2
	if !errors.As(cfg.Validate(), &e) {
		t.Fatal("reserved cells beyond the parallelism: want a *Error")
	}
	if !slices.ContainsFunc(e.Problems, func(p Problem) bool {
		return p.Field == key && strings.HasPrefix(p.Problem, "smaller than the sum of the queue classes' reserved cells (2)")
	}) {
		t.Errorf("want the scheduler's problem at %s, have %v", key, e)
	}
}

package config

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/cockroachdb/errors"

	"github.com/latent-node/latent-node/cellpool"
	"github.com/latent-node/latent-node/vocab"
)

// FuzzParse: Parse never panics; an accepted configuration converts into an
// admission policy that validates and into a usable cell pool and runner
// configuration; a refused one lists at least one problem, sorted, without
// duplicates, each one line of valid UTF-8.
//
//	go test ./node/config -run '^$' -fuzz '^FuzzParse$' -fuzztime 60s -fuzzminimizetime 5s
//
// (The seeds are whole configurations of a few kilobytes; with the default
// -fuzzminimizetime of 60s, minimizing each new interesting input stalls the
// exec counter for up to a minute.)
func FuzzParse(f *testing.F) {
	seeds, _ := filepath.Glob("testdata/*.toml")
	for _, path := range seeds {
		data, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add(DemoTOML)
	f.Add([]byte(doc(nil, "")))
	f.Add([]byte(doc(map[string]string{"queue_classes": strings.Replace(base[3].text, "[5, 9]", "[5]", 1)}, "")))
	f.Add([]byte("[tenants.\"a.b\"]\nlimits = {}\n[[principals]]\n"))
	f.Add([]byte("x = [[[1]]]\n[a]\nb.c = 1979-05-27\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := Parse(data, WithDataDir("/data"))
		if err != nil {
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("not a *Error: %v", err)
			}
			if len(e.Problems) == 0 {
				t.Fatal("a *Error without problems")
			}
			if !slices.IsSortedFunc(e.Problems, func(a, b Problem) int {
				if c := compareKeys(a.Field, b.Field); c != 0 {
					return c
				}
				return strings.Compare(a.Problem, b.Problem)
			}) {
				t.Fatalf("problems not sorted:\n%v", err)
			}
			for i, p := range e.Problems {
				if i > 0 && p == e.Problems[i-1] {
					t.Fatalf("duplicate problem %q", p)
				}
				if p.Problem == "" || strings.Contains(p.String(), "\n") || !utf8.ValidString(p.String()) {
					t.Fatalf("bad problem %q", p)
				}
			}
			return
		}
		pol := cfg.AdmissionPolicy()
		if err := pol.Validate(); err != nil {
			t.Fatalf("accepted configuration, invalid admission policy: %v", err)
		}
		if err := cfg.Validate(); err != nil {
			t.Fatalf("accepted configuration fails Validate: %v", err)
		}
		for class, cc := range cfg.CellPoolConfig().Classes {
			if !class.Valid() || cc.Parallelism < 1 || cc.Parallelism > cellpool.MaxParallelism ||
				cc.MemoryBytes == 0 || cc.MemoryBytes%cellpool.PageSize != 0 || cc.MemoryBytes > cellpool.MaxMemoryBytes {
				t.Fatalf("unusable cell class %v: %+v", class, cc)
			}
		}
		if rc := cfg.RunnerConfig(cfg.Node.DataDir); rc.MaxOutputBytes <= 0 {
			t.Fatalf("runner config %+v", rc)
		}
		if cfg.Overload.MaxObservationAge <= 0 || cfg.Overload.SampleInterval <= 0 {
			t.Fatalf("overload %+v", cfg.Overload)
		}
		for _, p := range cfg.Principals {
			if _, ok := cfg.Tenants[p.Tenant]; !ok || p.Roles == 0 || len(p.APIKeys) == 0 {
				t.Fatalf("principal %+v", p)
			}
			for _, k := range p.APIKeys {
				if _, err := vocab.ParseDigest(k); err != nil {
					t.Fatalf("key hash %q", k)
				}
			}
		}
	})
}

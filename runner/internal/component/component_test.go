package component

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/errors"

	"github.com/latent-node/latent-node/runner/internal/coremerge"
)

func fixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "testdata", "components", name+".wasm"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func fixtures(t testing.TB) map[string][]byte {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join("..", "..", "..", "testdata", "components", "*.wasm"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	out := map[string][]byte{}
	for _, p := range paths {
		name := strings.TrimSuffix(filepath.Base(p), ".wasm")
		out[name] = fixture(t, name)
	}
	return out
}

// TestPlan_fixtures plans every fixture and merges it: each exports the
// handler, lowers only versioned WASI functions, and merges into a core
// module.
func TestPlan_fixtures(t *testing.T) {
	for name, b := range fixtures(t) {
		t.Run(name, func(t *testing.T) {
			if !IsComponent(b) {
				t.Fatal("IsComponent = false")
			}
			res, err := Plan(b, DefaultLimits())
			if err != nil {
				t.Fatal(err)
			}
			if !slices.ContainsFunc(res.Lifts, func(l Lift) bool {
				return strings.HasPrefix(l.Interface, "wasi:http/incoming-handler@0.2.") && l.Func == "handle"
			}) {
				t.Errorf("lifts %+v: no wasi:http/incoming-handler handle", res.Lifts)
			}
			for _, l := range res.Lowers {
				if !strings.HasPrefix(l.Module, "wasi:") || !strings.HasSuffix(l.Module, "@0.2") {
					t.Errorf("lower %+v: host module not a wasi 0.2 interface", l)
				}
			}
			merged, err := coremerge.Merge(res.Merge)
			if err != nil {
				t.Fatal(err)
			}
			if IsComponent(merged) || string(merged[:4]) != "\x00asm" {
				t.Errorf("merged module starts %x", merged[:8])
			}
		})
	}
}

// TestPlan_hello checks what the hello fixture asks for, against its WIT.
func TestPlan_hello(t *testing.T) {
	res, err := Plan(fixture(t, "hello"), DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(res.Imports, "wasi:http/types@0.2.10") {
		t.Errorf("imports %v: no wasi:http/types@0.2.10", res.Imports)
	}
	want := map[string]bool{"[constructor]fields": false, "[static]response-outparam.set": false}
	for _, l := range res.Lowers {
		if _, ok := want[l.Func]; ok && l.Module == "wasi:http/types@0.2" {
			want[l.Func] = true
		}
	}
	for f, seen := range want {
		if !seen {
			t.Errorf("no lower of wasi:http/types %s in %+v", f, res.Lowers)
		}
	}
}

// TestPlan_limits lowers each limit under what the hello fixture needs:
// each is a limit error naming its key; with the default limits the same
// component plans (the negative control, TestPlan_fixtures).
func TestPlan_limits(t *testing.T) {
	b := fixture(t, "hello")
	tests := []struct {
		key string
		set func(*Limits)
	}{
		{"max_bytes", func(l *Limits) { l.MaxBytes = len(b) - 1 }},
		{"max_depth", func(l *Limits) { l.MaxDepth = 0 }},
		{"max_types", func(l *Limits) { l.MaxTypes = 2 }},
		{"max_type_nodes", func(l *Limits) { l.MaxTypeNodes = 5 }},
		{"max_core_modules", func(l *Limits) { l.MaxCoreModules = 1 }},
		{"max_instances", func(l *Limits) { l.MaxInstances = 1 }},
		{"max_imports", func(l *Limits) { l.MaxImports = 1 }},
		{"max_exports", func(l *Limits) { l.MaxExports = 0 }},
		{"max_aliases", func(l *Limits) { l.MaxAliases = 2 }},
		{"max_canons", func(l *Limits) { l.MaxCanons = 1 }},
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			lim := DefaultLimits()
			tt.set(&lim)
			_, err := Plan(b, lim)
			var e *Error
			if !errors.As(err, &e) || e.Reason != ReasonLimit || e.Key != tt.key {
				t.Fatalf("Plan = %v, want a limit error on %s", err, tt.key)
			}
		})
	}
}

// TestPlan_truncated: a prefix of a component is refused as malformed
// unless it ends on a section boundary (then it is a smaller component,
// which the runner refuses for lacking the handler); never a panic.
func TestPlan_truncated(t *testing.T) {
	b := fixture(t, "hello")
	planned := 0
	for n := 0; n < len(b); n++ {
		_, err := Plan(b[:n], DefaultLimits())
		var e *Error
		switch {
		case err == nil && n >= 8:
			planned++
		case !errors.As(err, &e):
			t.Fatalf("Plan of %d of %d bytes = %v, want an *Error", n, len(b), err)
		}
	}
	// Exactly the prefixes on a top-level section boundary plan.
	boundaries := 0 // the preamble alone, and after each section but the last
	r := &reader{b: b, pos: 8}
	for !r.done() {
		r.byte()
		r.bytes(int(r.u32()))
		boundaries++
	}
	if r.err != nil || planned != boundaries {
		t.Errorf("%d prefixes planned, want the %d on section boundaries (%v)", planned, boundaries, r.err)
	}
}

// TestPlan_coreModule: a core module is not a component.
func TestPlan_coreModule(t *testing.T) {
	core := []byte("\x00asm\x01\x00\x00\x00")
	if IsComponent(core) {
		t.Fatal("IsComponent(core module) = true")
	}
	var e *Error
	if _, err := Plan(core, DefaultLimits()); !errors.As(err, &e) || e.Reason != ReasonMalformed {
		t.Fatalf("Plan(core module) = %v, want malformed", err)
	}
}

func TestHostModule(t *testing.T) {
	tests := []struct{ in, want string }{
		{"wasi:http/types@0.2.0", "wasi:http/types@0.2"},
		{"wasi:http/types@0.2.10", "wasi:http/types@0.2"},
		{"wasi:io/streams@0.2.12", "wasi:io/streams@0.2"},
		{"wasi:http/types@0.3.0", ""},
		{"wasi:http/types@1.2.0", ""},
		{"wasi:http/types@0.2.0-rc-2023-11-10", ""},
		{"wasi:http/types@0.2.01", ""},
		{"wasi:http/types@0.2", ""},
		{"wasi:http/types", ""},
		{"types@0.2.0", ""},
	}
	for _, tt := range tests {
		got, err := HostModule(tt.in)
		if tt.want == "" {
			var e *Error
			if !errors.As(err, &e) || e.Reason != ReasonUnsupportedImport {
				t.Errorf("HostModule(%q) = %q, %v; want unsupported-import", tt.in, got, err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("HostModule(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}

func TestHostName(t *testing.T) {
	tests := []struct {
		fn      string
		realloc int
		enc     string
		want    string
	}{
		{"[method]fields.get", -1, "utf8", "[method]fields.get"},
		{"[method]fields.get", 2, "", "[method]fields.get!r2"},
		{"[method]fields.get", 0, "utf16", "[method]fields.get!r0!utf16"},
		{"[method]fields.get", -1, "latin1+utf16", "[method]fields.get!latin1+utf16"},
	}
	for _, tt := range tests {
		if got := HostName(tt.fn, tt.realloc, tt.enc); got != tt.want {
			t.Errorf("HostName(%q, %d, %q) = %q, want %q", tt.fn, tt.realloc, tt.enc, got, tt.want)
		}
	}
}

// FuzzPlan plans hostile bytes, seeded with the fixtures: the result is a
// plan or an *Error, and a plan merges or is refused by coremerge's
// errors; nothing panics.
func FuzzPlan(f *testing.F) {
	for _, b := range fixtures(f) {
		f.Add(b)
	}
	lim := DefaultLimits()
	lim.MaxBytes = 1 << 20
	f.Fuzz(func(t *testing.T, b []byte) {
		res, err := Plan(b, lim)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("Plan: %v is not an *Error", err)
			}
			return
		}
		if _, err := coremerge.Merge(res.Merge); err != nil &&
			!errors.Is(err, coremerge.ErrInvalid) && !errors.Is(err, coremerge.ErrUnsupported) {
			t.Fatalf("Merge: %v is neither ErrInvalid nor ErrUnsupported", err)
		}
	})
}

// TestPlan_adapted: the fixture built as rustc's wasm32-wasip2 target
// builds (a program importing WASI preview 1 and the preview 1 adapter)
// plans four core modules, the adapter's imports among the component's.
func TestPlan_adapted(t *testing.T) {
	r, err := Plan(fixture(t, "adapted"), DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Merge.Modules) != 4 {
		t.Fatalf("%d core modules, want 4 (program, adapter, shim, fixup)", len(r.Merge.Modules))
	}
	for _, want := range []string{"wasi:cli/stderr@0.2.12", "wasi:cli/environment@0.2.12", "wasi:filesystem/preopens@0.2.12", "wasi:http/types@0.2.10"} {
		if !slices.Contains(r.Imports, want) {
			t.Fatalf("imports %q lack %s", r.Imports, want)
		}
	}
}

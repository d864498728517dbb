package importcheck

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

const mod = "github.com/latent-node/latent-node"

func TestCheck(t *testing.T) {
	tests := []struct {
		name string
		pkg  Package
		want int
	}{
		{"upstream import is fine", Package{ImportPath: mod + "/admission", Imports: []string{mod + "/catalog", "fmt"}}, 0},
		{"narrow package imports its allowed one", Package{ImportPath: mod + "/node/front", Imports: []string{mod + "/node/config"}}, 0},
		{"narrow package imports its allowed ones", Package{ImportPath: mod + "/node/front", Imports: []string{mod + "/node/api", mod + "/refusal", mod + "/vocab"}}, 0},
		{"narrow package imports the rest of node", Package{ImportPath: mod + "/node/front", Imports: []string{mod + "/node/auth"}}, 1},
		{"downstream import is refused", Package{ImportPath: mod + "/catalog", Imports: []string{mod + "/admission"}}, 1},
		{"vocab is upstream of every layer", Package{ImportPath: mod + "/cluster", Imports: []string{mod + "/vocab", mod + "/catalog"}}, 0},
		{"vocab imports no layer", Package{ImportPath: mod + "/vocab", Imports: []string{mod + "/catalog"}}, 1},
		{"sideways import is refused", Package{ImportPath: mod + "/scheduler", Imports: []string{mod + "/runner"}}, 1},
		{"node from a layer is refused", Package{ImportPath: mod + "/runner", Imports: []string{mod + "/node/config"}}, 1},
		{"cmd may import node", Package{ImportPath: mod + "/cmd/latent-node", Imports: []string{mod + "/node", mod + "/client"}}, 0},
		{"client imports nothing of the module", Package{ImportPath: mod + "/client", Imports: []string{mod + "/catalog"}}, 1},
		{"client imports no third-party module", Package{ImportPath: mod + "/client", Imports: []string{"github.com/cockroachdb/errors"}}, 1},
		{"client tests import no third-party module", Package{ImportPath: mod + "/client", TestImports: []string{"golang.org/x/sync/errgroup"}}, 1},
		{"client may use stdlib errors", Package{ImportPath: mod + "/client", Imports: []string{"errors", "fmt", "net/http"}, TestImports: []string{"errors", "testing"}}, 0},
		{"client's external tests may import client", Package{ImportPath: mod + "/client", XTestImports: []string{mod + "/client", "testing"}}, 0},
		{"subpackage counts as its top", Package{ImportPath: mod + "/runner/internal/fuel", Imports: []string{mod + "/scheduler"}}, 1},
		{"refusal imports nothing of the module", Package{ImportPath: mod + "/refusal", Imports: []string{mod + "/internal/gcfloor"}}, 1},
		{"every layer may import refusal", Package{ImportPath: mod + "/catalog", Imports: []string{mod + "/refusal"}}, 0},
		{"client may not import refusal", Package{ImportPath: mod + "/client", Imports: []string{mod + "/refusal"}}, 1},
		{"stdlib errors is refused", Package{ImportPath: mod + "/catalog", Imports: []string{"errors"}}, 1},
		{"stdlib errors in tests is refused", Package{ImportPath: mod + "/catalog", XTestImports: []string{"errors"}}, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			have := Check(mod, []Package{tc.pkg})
			if len(have) != tc.want {
				t.Fatalf("want %d violations, have %q", tc.want, have)
			}
		})
	}
}

// TestRepository checks the module itself.
func TestRepository(t *testing.T) {
	root := moduleRoot(t)
	cmd := exec.Command("go", "list", "-e", "-json", "./...")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var pkgs []Package
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p Package
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("decode go list output: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) < 5 {
		t.Fatalf("go list found only %d packages", len(pkgs))
	}
	for _, v := range Check(mod, pkgs) {
		t.Error(v)
	}
}

// clockFree lists directories whose non-test code must not read the wall
// clock: time enters them through an injected vocab.Clock, whose
// production implementation, vocab.WallClock, is the one place allowed to
// read it (clockDrivers).
var clockFree = []string{"vocab", "catalog", "admission", "loadsource", "scheduler"}

var clockDrivers = map[string]bool{
	filepath.Join("vocab", "clock.go"): true, // vocab.WallClock
}

var wallClock = regexp.MustCompile(`\btime\.(Now|Since|Until)\(|\bfmt\.Errorf\(`)

// TestSourceRules greps for calls a linter does not flag: wall-clock reads in
// clock-free packages, and fmt.Errorf anywhere but in the StdlibOnly packages
// (errors come from cockroachdb/errors).
func TestSourceRules(t *testing.T) {
	root := moduleRoot(t)
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range wallClock.FindAll(src, -1) {
			call := string(m)
			if strings.HasPrefix(call, "fmt.") {
				if stdlibOnly(rel) {
					continue
				}
				t.Errorf("%s: %s: use errors.Newf/Wrapf from github.com/cockroachdb/errors", rel, call)
				continue
			}
			if strings.HasSuffix(rel, "_test.go") || clockDrivers[rel] {
				continue
			}
			for _, dir := range clockFree {
				if strings.HasPrefix(rel, dir+string(filepath.Separator)) {
					t.Errorf("%s: %s: %s takes time from an injected clock", rel, call, dir)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// stdlibOnly reports whether the file at rel belongs to a StdlibOnly package.
func stdlibOnly(rel string) bool {
	for _, dir := range StdlibOnly {
		if strings.HasPrefix(rel, dir+string(filepath.Separator)) {
			return true
		}
	}
	return false
}

func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		t.Fatalf("module root not found at %s", dir)
	}
	return dir
}

// Checks that what the repository says of itself (docs/threat-model.md, the
// Makefile's test selection) still matches its tests.

package importcheck

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestThreatModel_namesTests checks that every test docs/threat-model.md
// names as proof exists: a function `func TestX(` or `func FuzzX(` in a
// _test.go file of the module and, for `TestX/sub_name`, a subtest
// `t.Run("sub name"` in the same file. A renamed or deleted test fails here
// instead of leaving the threat model pointing at nothing.
func TestThreatModel_namesTests(t *testing.T) {
	root := filepath.Join("..", "..")
	doc, err := os.ReadFile(filepath.Join(root, "docs", "threat-model.md"))
	if err != nil {
		t.Fatal(err)
	}
	sources := map[string]string{} // test file path -> contents
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, "_test.go") {
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			sources[path] = string(b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	names := regexp.MustCompile("`((?:Test|Fuzz)[A-Za-z0-9_]+)(/[^`]+)?`").FindAllStringSubmatch(string(doc), -1)
	if len(names) < 20 {
		t.Fatalf("found %d test names in docs/threat-model.md; the pattern no longer reads it", len(names))
	}
	for _, m := range names {
		fn, sub := m[1], strings.TrimPrefix(m[2], "/")
		found := false
		for _, src := range sources {
			if !strings.Contains(src, "func "+fn+"(") {
				continue
			}
			if sub == "" || strings.Contains(src, `t.Run("`+strings.ReplaceAll(sub, "_", " ")+`"`) {
				found = true
				break
			}
		}
		if !found {
			t.Errorf("docs/threat-model.md names %s, which no test file defines", m[0])
		}
	}
}

// TestClusterTestNames: make test runs the cluster package's tests with
// -run '^TestCluster' (together with e2e's cluster tests, without the race
// detector), so a test of the package named otherwise would never run
// there. Every Test function of cluster/ must start with TestCluster.
func TestClusterTestNames(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "cluster", "*_test.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no cluster test files: %v", err)
	}
	testFunc := regexp.MustCompile(`(?m)^func (Test[A-Za-z0-9_]*)\(`)
	n := 0
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range testFunc.FindAllStringSubmatch(string(src), -1) {
			n++
			if name := m[1]; name != "TestMain" && !strings.HasPrefix(name, "TestCluster") {
				t.Errorf("%s: %s does not start with TestCluster, so make test never runs it", filepath.Base(f), name)
			}
		}
	}
	if n < 10 {
		t.Fatalf("found %d test functions in cluster/; the pattern no longer reads them", n)
	}
}

// TestDocGo_namesEveryFile checks that every package whose doc.go has an
// "Internal organization" section names each of its non-test Go files
// there (by name, or by a pattern such as dirlock*.go): a file added
// without a word on what it holds fails here.
func TestDocGo_namesEveryFile(t *testing.T) {
	root := filepath.Join("..", "..")
	checked := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || d.Name() != "doc.go" {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		_, section, ok := strings.Cut(string(src), "// # Internal organization")
		if !ok {
			return nil
		}
		if next := strings.Index(section, "\n// # "); next >= 0 {
			section = section[:next]
		}
		names := regexp.MustCompile(`[A-Za-z0-9_*]+\.go`).FindAllString(section, -1)
		dir := filepath.Dir(path)
		entries, err := os.ReadDir(dir)
		if err != nil {
			return err
		}
		for _, e := range entries {
			f := e.Name()
			if e.IsDir() || !strings.HasSuffix(f, ".go") || strings.HasSuffix(f, "_test.go") || f == "doc.go" {
				continue
			}
			named := false
			for _, n := range names {
				if ok, _ := filepath.Match(n, f); ok {
					named = true
					break
				}
			}
			if !named {
				t.Errorf("%s: its Internal organization does not name %s", path, f)
			}
		}
		checked++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 5 {
		t.Fatalf("checked %d doc.go files; the walk no longer finds them", checked)
	}
}

// TestArchitecture_importTable checks that the import table of
// docs/architecture.md ("The import rule") lists exactly the packages of
// Allowed, each with exactly the packages Allowed lets it import ("nothing of this module …"
// for an empty list).
func TestArchitecture_importTable(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "## The import rule")
	if !ok {
		t.Fatal("docs/architecture.md has no import rule section")
	}
	row := regexp.MustCompile("(?m)^\\| `([a-z]+)` \\| ((?:`[a-z]+`(?:, )?)+|nothing of this module[^|]*) \\|$")
	listed := map[string][]string{}
	for _, m := range row.FindAllStringSubmatch(section, -1) {
		deps := []string{}
		if !strings.HasPrefix(m[2], "nothing of this module") {
			for _, d := range strings.Split(m[2], ", ") {
				deps = append(deps, strings.Trim(d, "`"))
			}
		}
		listed[m[1]] = deps
	}
	for pkg, allowed := range Allowed {
		deps, ok := listed[pkg]
		if !ok {
			t.Errorf("docs/architecture.md's import table has no row for %s", pkg)
			continue
		}
		if strings.Join(deps, ",") != strings.Join(allowed, ",") {
			t.Errorf("docs/architecture.md says %s may import %v; the rule says %v", pkg, deps, allowed)
		}
	}
	for pkg := range listed {
		if _, ok := Allowed[pkg]; !ok {
			t.Errorf("docs/architecture.md's import table lists %s, which the rule does not", pkg)
		}
	}
}

// TestArchitecture_packageTable checks that docs/architecture.md's package
// section ("## Packages") names every package of the module with
// production code, as `path`, as `name` for a package under internal/, or
// under a `dir/…` or `dir/` entry that covers a whole directory, and that
// every package it sets in bold exists.
func TestArchitecture_packageTable(t *testing.T) {
	root := filepath.Join("..", "..")
	doc, err := os.ReadFile(filepath.Join(root, "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "## Packages")
	section, _, ok2 := strings.Cut(section, "\n## ")
	if !ok || !ok2 {
		t.Fatal("docs/architecture.md has no package section")
	}
	mentioned := map[string]bool{}
	for _, m := range regexp.MustCompile("`([a-z0-9/…-]+)`").FindAllStringSubmatch(section, -1) {
		mentioned[m[1]] = true
	}
	covered := func(pkg string) bool {
		if mentioned[pkg] || mentioned[pkg+"/"] {
			return true
		}
		if rest, ok := strings.CutPrefix(pkg, "internal/"); ok && mentioned[rest] {
			return true
		}
		for dir := filepath.Dir(pkg); dir != "."; dir = filepath.Dir(dir) {
			if mentioned[dir+"/…"] || mentioned[dir+"/"] {
				return true
			}
		}
		return false
	}
	var pkgs []string
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata" || d.Name() == "examples") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		rel, err := filepath.Rel(root, filepath.Dir(path))
		if err != nil || rel == "." {
			return err
		}
		if len(pkgs) == 0 || pkgs[len(pkgs)-1] != filepath.ToSlash(rel) {
			pkgs = append(pkgs, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(pkgs) < 15 {
		t.Fatalf("found %d packages; the walk no longer finds them", len(pkgs))
	}
	for _, p := range pkgs {
		if !covered(p) {
			t.Errorf("docs/architecture.md's package section does not name %s", p)
		}
	}
	for _, m := range regexp.MustCompile("\\*\\*`([a-z0-9/-]+)`\\*\\*").FindAllStringSubmatch(section, -1) {
		if st, err := os.Stat(filepath.Join(root, m[1])); err != nil || !st.IsDir() {
			t.Errorf("docs/architecture.md's package section names %s, which is not a directory of the module", m[1])
		}
	}
}

// TestArchitecture_actorTable checks docs/architecture.md's actor table
// against the source: its rows run by `Node.Actors` are exactly the actors
// node.Actors lists (the Name of each Actor literal in node/actors.go).
func TestArchitecture_actorTable(t *testing.T) {
	root := filepath.Join("..", "..")
	doc, err := os.ReadFile(filepath.Join(root, "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile(filepath.Join(root, "node", "actors.go"))
	if err != nil {
		t.Fatal(err)
	}
	_, body, ok := strings.Cut(string(src), "func (n *Node) Actors() []Actor {")
	body, _, ok2 := strings.Cut(body, "\n}\n")
	if !ok || !ok2 {
		t.Fatal("node/actors.go has no Actors method")
	}
	var inCode []string
	for _, m := range regexp.MustCompile(`Actor\{Name: "([a-z-]+)"|\{Name: "([a-z-]+)"`).FindAllStringSubmatch(body, -1) {
		inCode = append(inCode, m[1]+m[2])
	}
	var inDoc []string
	for _, m := range regexp.MustCompile("(?m)^\\| `([a-z-]+)` \\| `Node.Actors` \\|").FindAllStringSubmatch(string(doc), -1) {
		inDoc = append(inDoc, m[1])
	}
	if len(inCode) < 5 {
		t.Fatalf("found %d actors in node/actors.go; the pattern no longer reads it", len(inCode))
	}
	slices.Sort(inCode)
	slices.Sort(inDoc)
	if !slices.Equal(inCode, inDoc) {
		t.Errorf("docs/architecture.md's actor table lists %v run by Node.Actors; node/actors.go lists %v", inDoc, inCode)
	}
}

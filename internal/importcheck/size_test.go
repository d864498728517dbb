package importcheck

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Size bounds that keep each package and type readable in one sitting:
// non-test lines per package (the fuel rewriter, one algorithm with its
// decoder, is exempt) and methods per type.
const (
	maxPackageLines = 3500
	maxTypeMethods  = 25
)

// sizeExempt are the packages (module-relative directories) allowed past
// maxPackageLines.
var sizeExempt = map[string]bool{"runner/internal/fuel": true}

// TestSize_packagesAndTypes fails when a package of the module has more
// than maxPackageLines non-test lines or a type more than maxTypeMethods
// methods, so a package that grows past the bound is split when it does,
// not found later.
func TestSize_packagesAndTypes(t *testing.T) {
	root := filepath.Join("..", "..")
	lines := map[string]int{}   // directory -> non-test lines
	methods := map[string]int{} // directory.Type -> methods
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		dir, _ := filepath.Rel(root, filepath.Dir(path))
		dir = filepath.ToSlash(dir)
		lines[dir] += bytes.Count(src, []byte("\n"))
		f, err := parser.ParseFile(token.NewFileSet(), path, src, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Recv == nil || len(fn.Recv.List) == 0 {
				continue
			}
			methods[dir+"."+receiverName(fn.Recv.List[0].Type)]++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(lines) < 20 || lines["node"] == 0 {
		t.Fatalf("counted %d packages; the walk no longer finds the module", len(lines))
	}
	for dir, n := range lines {
		if n > maxPackageLines && !sizeExempt[dir] {
			t.Errorf("%s: %d non-test lines, more than %d: split it", dir, n, maxPackageLines)
		}
	}
	for typ, n := range methods {
		if n > maxTypeMethods {
			t.Errorf("%s: %d methods, more than %d: split it", typ, n, maxTypeMethods)
		}
	}
}

// receiverName is the type name of a method's receiver (T, *T, T[P], *T[P]).
func receiverName(e ast.Expr) string {
	for {
		switch x := e.(type) {
		case *ast.StarExpr:
			e = x.X
		case *ast.IndexExpr:
			e = x.X
		case *ast.IndexListExpr:
			e = x.X
		case *ast.Ident:
			return x.Name
		default:
			return "?"
		}
	}
}

package testwasm

// The compiled fixtures under testdata/wasm: their directory, paths, names
// and bytes.

import (
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
)

// Ext is the file extension of the compiled fixtures.
const Ext = ".wasm"

// dir locates testdata/wasm once per process.
var dir = sync.OnceValue(func() string {
	// Normal case: this source file lives at <module>/internal/testwasm/.
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		d := filepath.Join(filepath.Dir(file), "..", "..", "testdata", "wasm")
		if isDir(d) {
			return d
		}
	}
	// Built with -trimpath (source paths are not absolute): walk up from the
	// working directory, which for `go test` is the package directory, to the
	// module root.
	if wd, err := os.Getwd(); err == nil {
		for d := wd; ; d = filepath.Dir(d) {
			cand := filepath.Join(d, "testdata", "wasm")
			if isFile(filepath.Join(d, "go.mod")) && isDir(cand) {
				return cand
			}
			if filepath.Dir(d) == d {
				break
			}
		}
	}
	// Best effort; callers fail with a "no such file" error naming this path.
	return filepath.Join("testdata", "wasm")
})

func isDir(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}

func isFile(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular()
}

// Dir returns the absolute path of the fixture directory, testdata/wasm at
// the module root. It is located relative to this package's source file.
func Dir() string {
	return dir()
}

// Path returns the path of fixture name inside Dir. A name without an
// extension refers to the compiled module, so Path("echo") is
// Dir()/echo.wasm; a name with an extension is used as is, so
// Path("echo.wat") is the source.
func Path(name string) string {
	if filepath.Ext(name) == "" {
		name += Ext
	}
	return filepath.Join(Dir(), name)
}

// Bytes returns the contents of fixture <name>.wasm, failing the test if it
// cannot be read. A trailing ".wasm" in name is accepted. Each call returns
// a fresh slice that the caller may modify.
func Bytes(t testing.TB, name string) []byte {
	t.Helper()
	p := Path(strings.TrimSuffix(name, Ext))
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("testwasm: reading fixture %q: %v (run make wasm?)", name, err)
	}
	return b
}

// Names returns the base names (without ".wasm") of all compiled fixtures
// in Dir, sorted. It panics if Dir cannot be read.
func Names() []string {
	entries, err := os.ReadDir(Dir())
	if err != nil {
		panic("testwasm: " + err.Error())
	}
	var names []string
	for _, e := range entries {
		if e.Type().IsRegular() && strings.HasSuffix(e.Name(), Ext) {
			names = append(names, strings.TrimSuffix(e.Name(), Ext))
		}
	}
	slices.Sort(names)
	return names
}

// Component returns the contents of the component fixture
// testdata/components/<name>.wasm (a WASI 0.2 component of the wasi:http
// proxy world), failing the test if it cannot be read.
func Component(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(Dir(), "..", "components", name+Ext))
	if err != nil {
		t.Fatalf("testwasm: reading component fixture %q: %v", name, err)
	}
	return b
}

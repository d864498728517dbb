package hostilewasm

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestHandlerCore: every lying handler is valid WebAssembly with the
// imports and exports of hello.core.wat.
func TestHandlerCore(t *testing.T) {
	r := newRuntime(t)
	for _, lie := range append([]Lie{LieNone}, Lies...) {
		t.Run(lie.String(), func(t *testing.T) {
			cm := compile(t, r, HandlerCore(lie))
			if len(cm.ImportedFunctions()) != len(handlerImports) {
				t.Fatalf("%d imports, want %d", len(cm.ImportedFunctions()), len(handlerImports))
			}
			exports := cm.ExportedFunctions()
			for _, name := range []string{"cabi_realloc", "wasi:http/incoming-handler@0.2.10#handle"} {
				if _, ok := exports[name]; !ok {
					t.Fatalf("no export %s", name)
				}
			}
		})
	}
}

// TestLyingComponent replaces the template's handler and nothing else, and
// refuses what is not a component with a core module.
func TestLyingComponent(t *testing.T) {
	template, err := os.ReadFile(filepath.Join("..", "..", "testdata", "components", "hello.wasm"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := LyingComponent(template, LieDanglingHandle)
	if err != nil {
		t.Fatal(err)
	}
	core := HandlerCore(LieDanglingHandle)
	if !bytes.Contains(c, core) || bytes.Equal(c, template) {
		t.Fatal("the lying handler is not in the component")
	}
	if !bytes.HasSuffix(c, template[len(template)-64:]) {
		t.Fatal("the rest of the template changed")
	}
	for name, b := range map[string][]byte{
		"core module": core,
		"truncated":   template[:20],
		"no module":   template[:8],
	} {
		if _, err := LyingComponent(b, LieNone); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

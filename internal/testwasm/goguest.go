package testwasm

// The Go guest, built once per test process for wasip1.

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// goGuestTimeout bounds the one `go build` of the Go guest.
const goGuestTimeout = 5 * time.Minute

// goGuest caches the Go guest build for the whole test process. A failure is
// cached too (as a message), so every caller of BuildGoGuest reports it.
var goGuest struct {
	once    sync.Once
	wasm    []byte
	failure string
}

// GoGuestDir returns the directory of the Go guest's main package,
// Dir()/goguest.
func GoGuestDir() string {
	return filepath.Join(Dir(), "goguest")
}

// BuildGoGuest returns a WASI preview1 command compiled from the Go program
// in GoGuestDir with
//
//	GOOS=wasip1 GOARCH=wasm go build -trimpath -ldflags=-buildid= -o <tmp>/goguest.wasm <dir>
//
// The guest reads {"words":[...]} as JSON from stdin, writes
// {"total":N,"unique":U,"sorted":[...],"counts":{...}} plus "\n" to stdout
// and three lines to stderr (its arguments and environment as JSON, a
// summary, and "goguest: random " + 8 bytes from crypto/rand in hex), and
// exits with status 3 on invalid JSON.
//
// The build runs at most once per process; later callers share its result
// (each gets its own copy of the bytes). A failed build fails every caller.
// The test is skipped if the go tool is not on PATH.
func BuildGoGuest(t testing.TB) []byte {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("testwasm: go tool not on PATH, cannot build the Go guest: %v", err)
	}
	goGuest.once.Do(func() {
		// Preset in case the first caller's t.TempDir aborts the build.
		goGuest.failure = "Go guest build did not complete"
		goGuest.wasm, goGuest.failure = buildGoGuest(goBin, t.TempDir())
	})
	if goGuest.failure != "" {
		t.Fatalf("testwasm: %s", goGuest.failure)
	}
	return bytes.Clone(goGuest.wasm)
}

// buildGoGuest returns the built module, or a non-empty failure message.
func buildGoGuest(goBin, outDir string) (wasm []byte, failure string) {
	pkgDir := GoGuestDir()
	out := filepath.Join(outDir, "goguest.wasm")

	ctx, cancel := context.WithTimeout(context.Background(), goGuestTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, goBin, "build", "-trimpath", "-ldflags=-buildid=", "-o", out, pkgDir)
	cmd.Dir = pkgDir
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")
	var output []byte
	if err := WithBuildLock(func() (err error) { output, err = cmd.CombinedOutput(); return err }); err != nil {
		return nil, fmt.Sprintf("building Go guest (GOOS=wasip1 GOARCH=wasm %s): %v\n%s", cmd, err, output)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		return nil, fmt.Sprintf("reading built Go guest: %v", err)
	}
	return b, ""
}

package testwasm

// The guest examples of examples/, built with examples/build.sh.

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/cockroachdb/errors"
)

// examplesTimeout bounds one run of examples/build.sh.
const examplesTimeout = 10 * time.Minute

// ExamplesDir returns the directory of the guest examples, examples/ at the
// module root.
func ExamplesDir() string {
	return filepath.Join(filepath.Dir(filepath.Dir(Dir())), "examples")
}

// ErrNoToolchain marks a build of examples whose toolchain is not on this
// machine (examples/build.sh's exit status 3).
var ErrNoToolchain = errors.New("testwasm: the examples' toolchain is missing")

// BuildExamples runs `sh examples/build.sh lang outDir`, which builds the
// examples of lang (go, rust or c) into outDir: for each example
// <name>.wasm (a WASI command) and <name>-reactor.wasm (the same program as
// a reactor: it exports _initialize and an entry function instead of
// _start). See examples/README.md for the names. A missing toolchain is an
// error marked ErrNoToolchain that carries the script's message (what to
// install); any other failure carries the script's output.
func BuildExamples(ctx context.Context, lang, outDir string) error {
	sh, err := exec.LookPath("sh")
	if err != nil {
		return errors.Mark(errors.Wrap(err, "testwasm: no sh to run examples/build.sh"), ErrNoToolchain)
	}
	ctx, cancel := context.WithTimeout(ctx, examplesTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, sh, filepath.Join(ExamplesDir(), "build.sh"), lang, outDir)
	var out []byte
	err = WithBuildLock(func() (err error) { out, err = cmd.CombinedOutput(); return err })
	if err == nil {
		return nil
	}
	var exit *exec.ExitError
	if errors.As(err, &exit) && exit.ExitCode() == 3 {
		return errors.Mark(errors.Newf("testwasm: %s", bytes.TrimSpace(out)), ErrNoToolchain)
	}
	return errors.Wrapf(err, "testwasm: examples/build.sh %s: %s", lang, out)
}

// BuildExamplesT builds the examples of lang into a temporary directory of
// t (see BuildExamples) and returns it. The test is skipped, naming what to
// install, when the toolchain is missing, and fails when the build does.
func BuildExamplesT(t testing.TB, lang string) string {
	t.Helper()
	dir := t.TempDir()
	err := BuildExamples(context.Background(), lang, dir)
	if errors.Is(err, ErrNoToolchain) {
		t.Skip(err.Error())
	}
	if err != nil {
		t.Fatalf("%+v", err)
	}
	return dir
}

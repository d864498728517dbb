//go:build stress

package stress

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestHostileLong runs the end-to-end hostile-tenant suite (e2e.TestHostile,
// against the real latent-node binary) at its stress scale: every attack
// runs more times (2,000 failing instantiations per module, 500 rounds of
// concurrent stack bombs, 15 large modules deployed and deleted and 15
// refused, five rounds of compile bombs and connection floods) and the heap
// may take up to two minutes to come back. The suite lives in e2e because it
// needs that package's process harness; LATENT_HOSTILE_SCALE selects the
// scale.
func TestHostileLong(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "test", "-count=1", "-v", "-timeout=35m", "-run=^TestHostile$", "./e2e/")
	cmd.Dir = ".." // the module root, relative to this package
	cmd.Env = append(os.Environ(), "LATENT_HOSTILE_SCALE=stress")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	var all []string
	for sc.Scan() {
		all = append(all, sc.Text())
	}
	err = cmd.Wait() // reaps the child on success, failure and timeout
	text := strings.Join(all, "\n")
	if ctx.Err() != nil {
		t.Fatalf("the hostile suite exceeded its deadline and was killed:\n%s", text)
	}
	if err != nil || !strings.Contains(text, "--- PASS: TestHostile ") {
		t.Fatalf("the hostile suite failed (%v):\n%s", err, text)
	}
	t.Log(text)
}

package config

import (
	"testing"

	"github.com/cockroachdb/datadriven"
)

// TestGolden runs the datadriven script testdata/problems.txt. Its one
// command, check, parses its input as a configuration file and prints the
// listing `latent-node check` prints: every problem, one a line, or "ok"
// for a valid file. To regenerate the expected outputs after an intended
// change:
//
//	go test ./node/config -run TestGolden -rewrite
func TestGolden(t *testing.T) {
	datadriven.RunTest(t, "testdata/problems.txt", func(t *testing.T, d *datadriven.TestData) string {
		if d.Cmd != "check" {
			t.Fatalf("%s: unknown command %q", d.Pos, d.Cmd)
		}
		if _, err := Parse([]byte(d.Input)); err != nil {
			return err.Error()
		}
		return "ok"
	})
}

package config

import (
	"flag"
	"os"
	"testing"
)

// To regenerate testdata/problems.golden after an intended change:
//
//	go test ./node/config -run TestGolden -rewrite
var rewrite = flag.Bool("rewrite", false, "rewrite the golden files in testdata")

// TestGolden checks the full listing of a configuration with many problems:
// what `latent-node check` prints.
func TestGolden(t *testing.T) {
	_, err := Load("testdata/problems.toml")
	if err == nil {
		t.Fatal("want problems")
	}
	have := err.Error() + "\n"
	const golden = "testdata/problems.golden"
	if *rewrite {
		if err := os.WriteFile(golden, []byte(have), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run with -rewrite to create it)", err)
	}
	if have != string(want) {
		t.Fatalf("the listing changed (run with -rewrite if intended):\nwant:\n%s\nhave:\n%s", want, have)
	}
}

package config

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestParse_hugeAdversarial feeds large documents built to produce as many
// problems as possible: Parse lists them, and this package's part stays
// linear (merging and checking use maps, queue classes are bounded).
//
// Shapes with many keys in one table are kept at 128 KiB: go-toml v2.4.3
// checks duplicate keys by scanning the siblings of each key, which is
// quadratic in the keys of one table (about 20 s for 110,000 keys in 1 MiB;
// pelletier/go-toml#1100 indexes it). Arrays of tables are linear there and
// run at the full MaxFileBytes.
//
// Under -short or the race detector the documents are 16× smaller.
func TestParse_hugeAdversarial(t *testing.T) {
	full, wide, scale := MaxFileBytes, 128<<10, 1
	if testing.Short() || raceEnabled {
		full, wide, scale = full/16, wide/16, 20
	}
	fill := func(limit int, prefix, suffix string, unit func(i int) string) []byte {
		var b strings.Builder
		b.WriteString(prefix)
		for i := 0; ; i++ {
			u := unit(i)
			if b.Len()+len(u)+len(suffix) > limit {
				b.WriteString(suffix)
				return []byte(b.String())
			}
			b.WriteString(u)
		}
	}
	hash := `"sha256:` + strings.Repeat("a", 64) + `", `
	tests := []struct {
		name     string
		data     []byte
		problems int // at least, at full size
	}{
		{"unknown keys", fill(wide, "", "", func(i int) string { return "k" + strconv.Itoa(i) + " = 1\n" }), 10_000},
		{"empty tenants", fill(wide, "", "", func(i int) string { return "[tenants.t" + strconv.Itoa(i) + "]\n" }), 10_000},
		{"empty principals", fill(full, "", "", func(int) string { return "[[principals]]\n" }), 300_000},
		{"broken principals", fill(full, "", "", func(i int) string {
			return "[[principals]]\nsubject=\"s\"\nkind=\"service\"\ntenant=\"t" + strconv.Itoa(i%7) + "\"\nroles=[\"root\"]\napi_keys=[\"lk_x\"]\n"
		}), 50_000},
		{"overlapping queue classes", fill(full, "", "", func(int) string { return "[[queue_classes]]\npriorities=[0,0]\n" }), 2 * MaxQueueClasses},
		{"one shared key hash", fill(full, "[[principals]]\napi_keys = [", "]\n", func(int) string { return hash }), 10_000},
		{"deep dotted key", fill(wide, "", "b = 1\n", func(int) string { return "a." }), 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			_, err := Parse(tc.data)
			elapsed := time.Since(start)
			if err == nil {
				t.Fatal("want problems")
			}
			n := len(err.(*Error).Problems)
			if n < max(tc.problems/scale, 1) {
				t.Fatalf("want at least %d problems, have %d:\n%.500s", tc.problems, n, err)
			}
			t.Logf("%d bytes → %d problems in %v", len(tc.data), n, elapsed)
		})
	}
}

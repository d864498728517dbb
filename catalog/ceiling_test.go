package catalog

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/latent-node/latent-node/vocab"
)

// TestManifestCeiling_wallTime: a ceiling's wall time comes as a duration
// string (wall_time) or as milliseconds (wall_time_ms), exactly one of them;
// it is encoded back as wall_time.
func TestManifestCeiling_wallTime(t *testing.T) {
	for _, tc := range []struct {
		name    string
		ceiling string
		want    time.Duration
		problem string // a field problem's field, or a decode error's text
	}{
		{"duration string", `"wall_time":"2s"`, 2 * time.Second, ""},
		{"milliseconds", `"wall_time_ms":1500`, 1500 * time.Millisecond, ""},
		{"decimal milliseconds", `"wall_time_ms":1.5`, 1500 * time.Microsecond, ""},
		{"both", `"wall_time":"2s","wall_time_ms":2000`, 0, "revisions[0].ceiling.wall_time_ms"},
		{"negative milliseconds", `"wall_time_ms":-1`, 0, "non-negative number of milliseconds"},
		{"milliseconds as a string", `"wall_time_ms":"2s"`, 0, "wall_time_ms"},
		{"unknown field", `"wall_time_us":5`, 0, "wall_time_us"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			doc := `{"tenant":"acme","service":"s","revisions":[{"name":"v1","artifact":"` + string(digestA) +
				`","trust_class":"untrusted","ceiling":{"cpu_fuel":1,"memory_bytes":65536,` + tc.ceiling + `}}],"routes":[]}`
			m, err := vocab.DecodeManifest(strings.NewReader(doc))
			if tc.problem != "" {
				var ve *vocab.ValidationError
				if !errors.As(err, &ve) || !strings.Contains(ve.Error(), tc.problem) {
					t.Fatalf("want a problem naming %q, got %v", tc.problem, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := time.Duration(m.Revisions[0].Ceiling.WallTime); got != tc.want {
				t.Fatalf("wall time %v, want %v", got, tc.want)
			}
			// The catalog's records keep the duration string.
			data, _ := json.Marshal(m.Revisions[0].Ceiling)
			if want := `"wall_time":"` + tc.want.String() + `"`; !strings.Contains(string(data), want) {
				t.Fatalf("encoded %s, want %s", data, want)
			}
		})
	}
}

func TestWallTimeMs(t *testing.T) {
	for d, want := range map[time.Duration]string{2 * time.Second: "2000", 1500 * time.Microsecond: "1.5",
		time.Nanosecond: "0.000001", 24 * time.Hour: "86400000"} {
		if got := vocab.WallTimeMs(vocab.Duration(d)); string(got) != want {
			t.Errorf("WallTimeMs(%v) = %s, want %s", d, got, want)
		}
	}
}

package config_test

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/latent-node/latent-node/node/config"
)

// productionConfig is the commented production configuration shipped for
// operators (the systemd unit and the container image point at it).
const productionConfig = "../../deploy/config/production.toml"

// TestProductionConfig_loads loads the file the way `latent-node check`
// and `latent-node serve` do and fails on any problem.
func TestProductionConfig_loads(t *testing.T) {
	cfg, err := config.Load(productionConfig)
	if err != nil {
		t.Fatalf("%s: %v", productionConfig, err)
	}
	for _, tc := range []struct {
		name      string
		got, want any
	}{
		{"data_dir (the systemd unit's StateDirectory)", cfg.Node.DataDir, "/var/lib/latent-node"},
		{"listen (loopback: TLS terminates in front)", cfg.Node.Listen, "127.0.0.1:8080"},
		{"tenants", len(cfg.Tenants), 2},
		{"cluster (commented out)", cfg.Cluster.Enabled, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.got != tc.want {
				t.Errorf("%v, want %v", tc.got, tc.want)
			}
		})
	}
}

// TestProductionConfig_everyKey fails when the decoder accepts a key the
// production configuration neither sets nor shows commented out.
func TestProductionConfig_everyKey(t *testing.T) {
	b, err := os.ReadFile(productionConfig)
	if err != nil {
		t.Fatal(err)
	}
	known := decoderKeys(t, candidateNames(t, nil))
	if len(known) < 50 {
		t.Fatalf("the probe found only %d keys", len(known))
	}
	inFile := fileKeys(string(b))
	for _, k := range missingKeys(known, inFile) {
		t.Errorf("the decoder accepts %s, but %s neither sets it nor shows it commented out", k, productionConfig)
	}
}

// TestMissingKeys_reportsDrift is the negative control: a key taken out of
// the real file, active or commented, is reported.
func TestMissingKeys_reportsDrift(t *testing.T) {
	b, err := os.ReadFile(productionConfig)
	if err != nil {
		t.Fatal(err)
	}
	known := decoderKeys(t, candidateNames(t, nil))
	for _, tc := range []struct{ name, drop, want string }{
		{"active key", "max_live_activations", "node.limits.max_live_activations"},
		{"commented key", "lease_ttl", "cluster.lease_ttl"},
		{"named table's key", "target_service_time", "cell_classes.<>.target_service_time"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			setting := regexp.MustCompile(`^[#\s]*` + tc.drop + `\s*=`)
			var kept []string
			for _, line := range strings.Split(string(b), "\n") {
				if !setting.MatchString(line) {
					kept = append(kept, line)
				}
			}
			if missing := missingKeys(known, fileKeys(strings.Join(kept, "\n"))); !slices.Contains(missing, tc.want) {
				t.Errorf("without %s: missing = %q, want it to contain %s", tc.drop, missing, tc.want)
			}
		})
	}
}

var (
	tomlTable = regexp.MustCompile(`^#?\s*(\[\[?)\s*([a-z0-9_.\-]+)\s*\]\]?\s*(#.*)?$`)
	tomlKey   = regexp.MustCompile(`^#?\s*([a-z_]+)\s*=`)
)

// fileKeys returns the key paths a TOML file sets or shows commented out
// ("# key = value" under a "[table]" or "# [table]" header), with "[]" after
// an array of tables' name.
func fileKeys(doc string) []string {
	var keys []string
	table := ""
	for _, line := range strings.Split(doc, "\n") {
		line = strings.TrimSpace(line)
		if m := tomlTable.FindStringSubmatch(line); m != nil {
			table = m[2]
			if m[1] == "[[" {
				table += "[]"
			}
			continue
		}
		if m := tomlKey.FindStringSubmatch(line); m != nil {
			if table == "" {
				keys = append(keys, m[1])
			} else {
				keys = append(keys, table+"."+m[1])
			}
		}
	}
	return keys
}

// missingKeys returns the known key paths (doc syntax, "<>" for any entry)
// that no path of inFile matches.
func missingKeys(known, inFile []string) []string {
	var missing []string
	for _, k := range known {
		want := strings.Split(entry.ReplaceAllString(k, "<>"), ".")
		if !slices.ContainsFunc(inFile, func(f string) bool {
			got := strings.Split(f, ".")
			if len(got) != len(want) {
				return false
			}
			for i := range want {
				if want[i] != "<>" && want[i] != got[i] {
					return false
				}
			}
			return true
		}) {
			missing = append(missing, entry.ReplaceAllString(k, "<>"))
		}
	}
	return missing
}

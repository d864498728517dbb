package main

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/latent-node/latent-node/internal/testwasm"
)

// TestDeploy_instanceModes: the TOML manifest's instance and init reach the
// node, which answers them in the deployment's manifest and refuses them by
// field. A fresh revision, the mode left out or spelled out, keeps the id
// of the manifest without it; snapshot and reuse change it.
func TestDeploy_instanceModes(t *testing.T) {
	url, key := startDemoNode(t)
	t.Setenv(keyEnv, key)
	dir := t.TempDir()
	deploy := func(t *testing.T, service, extra string) cliRun {
		t.Helper()
		path := filepath.Join(dir, service+".toml")
		doc := `tenant = "demo"
service = "` + service + `"

[[revisions]]
name = "v1"
module = "` + testwasm.Path("complain") + `"
trust_class = "untrusted"
ceiling = { cpu_fuel = 10000000, memory_bytes = "1MiB", wall_time = "2s" }
` + extra + `
[[routes]]
name = "run"
targets = [{ revision = "v1", weight = 1 }]
`
		if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
		return runCLI("", "deploy", "--node", url, path)
	}
	revID := regexp.MustCompile(`(?m)^  v1 (rev1-[0-9a-f]{64})$`)

	tests := []struct {
		name, extra    string
		code           int
		stderr         string
		instance, init string // answered in the deployment's manifest
		sameID         bool   // v1 keeps the id of the manifest without instance
	}{
		{name: "fresh", extra: `instance = "fresh"`, instance: "fresh", sameID: true},
		{name: "snapshot", extra: `instance = "snapshot"`, instance: "snapshot"},
		{name: "reuse", extra: `instance = "reuse"`, instance: "reuse"},
		{name: "unknown mode", extra: `instance = "warm"`, code: 1,
			stderr: `(?s)422 .*revisions\[0\]\.instance: unknown instance mode`},
		{name: "init without a mode", extra: `init = "_initialize"`, code: 1,
			stderr: `(?s)422 .*revisions\[0\]\.init: an initialisation export needs instance`},
		{name: "init not exported", extra: "instance = \"snapshot\"\ninit = \"setup\"", code: 1,
			stderr: `(?s)422 .*revisions\[0\]\.init: the module does not export this function`},
		{name: "init not a string", extra: "instance = \"snapshot\"\ninit = 5", code: 1,
			stderr: `(?s)init.*want a JSON string`},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			service := "instance" + string(rune('a'+i))
			base := deploy(t, service, "") // the same manifest without the fields
			base.want(t, 0, nil, nil)
			plainID := revID.FindStringSubmatch(base.out)[1]
			run := deploy(t, service, tc.extra)
			if tc.code != 0 {
				run.want(t, tc.code, nil, []string{tc.stderr})
				return
			}
			run.want(t, 0, nil, nil)
			if id := revID.FindStringSubmatch(run.out)[1]; (id == plainID) != tc.sameID {
				t.Errorf("v1 id %s, without instance %s: same %v, want %v", id, plainID, id == plainID, tc.sameID)
			}
			var d struct {
				Manifest struct {
					Revisions []struct {
						Instance string `json:"instance"`
						Init     string `json:"init"`
					} `json:"revisions"`
				} `json:"manifest"`
			}
			getJSON(t, url+"/v1/deployments/demo/"+service, key, &d)
			if r := d.Manifest.Revisions[0]; r.Instance != tc.instance || r.Init != tc.init {
				t.Errorf("answered instance %q init %q, want %q %q", r.Instance, r.Init, tc.instance, tc.init)
			}
		})
	}
}

func getJSON(t *testing.T, url, key string, v any) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v %s", url, resp.StatusCode, err, data)
	}
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("GET %s: %v: %s", url, err, data)
	}
}

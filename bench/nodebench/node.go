package main

// The node under test: its generated configuration, deploying a guest and
// reading or waiting out its tenants' usage.

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/latent-node/latent-node/client"
	"github.com/latent-node/latent-node/internal/testutil/nodeconf"
)

// tenantConfig is one tenant of the generated configuration: one
// principal of the same name with the key whose hash is keyHash.
type tenantConfig struct {
	name, keyHash string
}

// configTOML is a node with the given tenants (quiet and noisy, and the
// flooding tenants of the Jain scenario), all on tiny (2) and small (2)
// cells like the demo, with limits high enough that 64 closed-loop clients
// of one tenant queue in the node instead of being refused.
func configTOML(dataDir string, tenants []tenantConfig) string {
	tinySmall := []string{"tiny", "small"}
	wide := nodeconf.Limits{MaxLiveActivations: 512, MaxQueued: 512, MaxReservedFuel: 10_000_000_000_000, MaxReservedMemory: "64GiB"}
	cfg := nodeconf.Config{
		DataDir:       dataDir,
		ShutdownGrace: "2s",
		Limits:        wide,
		Cells: []nodeconf.Cell{{Class: "tiny", Memory: "16MiB", Parallelism: 2},
			{Class: "small", Memory: "64MiB", Parallelism: 2}},
		TrustClasses: []nodeconf.TrustClass{{Name: "untrusted", Cells: tinySmall, Limits: wide}},
	}
	for _, t := range tenants {
		cfg.Tenants = append(cfg.Tenants, nodeconf.Tenant{Name: t.name, TrustClasses: []string{"untrusted"}, Cells: tinySmall,
			Subjects: []string{t.name}, Limits: nodeconf.Limits{MaxLiveActivations: 256, MaxQueued: 256,
				MaxReservedFuel: 10_000_000_000_000, MaxReservedMemory: "32GiB"}})
		cfg.Principals = append(cfg.Principals, nodeconf.Principal{Subject: t.name, Tenant: t.name,
			Roles: []string{"invoke", "deploy"}, APIKeys: []string{t.keyHash}})
	}
	return cfg.TOML()
}

// deployGuest uploads module and activates tenant/service with one route
// "run".
func deployGuest(ctx context.Context, url, key, tenant, service string, module []byte) error {
	c, err := client.New(url, key, client.WithRetry(client.RetryPolicy{}))
	if err != nil {
		return err
	}
	digest, err := c.UploadArtifact(ctx, module)
	if err != nil {
		return errors.Wrapf(err, "nodebench: upload for %s", tenant)
	}
	rv := map[string]any{"name": "v1", "artifact": digest, "trust_class": "untrusted",
		"ceiling": map[string]any{"cpu_fuel": 1_000_000_000, "memory_bytes": "8MiB", "wall_time": "5s"}}
	manifest := map[string]any{"tenant": tenant, "service": service, "revisions": []any{rv},
		"routes": []any{map[string]any{"name": "run", "targets": []any{map[string]any{"revision": "v1", "weight": 1}}}}}
	if _, err := c.Deploy(ctx, tenant, service, manifest); err != nil {
		return errors.Wrapf(err, "nodebench: deploy %s/%s", tenant, service)
	}
	return nil
}

// usage reads the caller's tenant usage from GET /v1/admission.
func usage(ctx context.Context, hc *http.Client, url, key string) (live, queued uint64, err error) {
	req, err := http.NewRequestWithContext(ctx, "GET", url+"/v1/admission", nil)
	if err != nil {
		return 0, 0, errors.Wrap(err, "nodebench: admission request")
	}
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := hc.Do(req)
	if err != nil {
		return 0, 0, errors.Wrap(err, "nodebench: admission")
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, 0, errors.Wrap(err, "nodebench: admission body")
	}
	var s struct {
		Usage struct {
			Live   uint64 `json:"live_activations"`
			Queued uint64 `json:"queued"`
		} `json:"usage"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &s) != nil {
		return 0, 0, errors.Newf("nodebench: admission: %d %s", resp.StatusCode, bytes.TrimSpace(body))
	}
	return s.Usage.Live, s.Usage.Queued, nil
}

// waitIdle polls the usage of every key's tenant until nothing is live or
// queued (at most 10 s), so a scenario starts without the last one's
// backlog.
func waitIdle(ctx context.Context, hc *http.Client, url string, keys ...string) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		busy := false
		for _, k := range keys {
			live, queued, err := usage(ctx, hc, url, k)
			if err != nil {
				return err
			}
			busy = busy || live+queued > 0
		}
		if !busy {
			return nil
		}
		if time.Now().After(deadline) {
			return errors.New("nodebench: the node did not drain within 10s")
		}
		<-time.After(10 * time.Millisecond) // bounded poll of the endpoint
	}
}

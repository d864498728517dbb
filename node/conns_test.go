package node

import (
	"testing"

	"github.com/latent-node/latent-node/node/config"
	"github.com/latent-node/latent-node/node/front"
)

func TestConnLimits_fromConfig(t *testing.T) {
	cfg := &config.Config{}
	cfg.Node.MaxConnections, cfg.Node.MaxConnectionsPerAddress = 200, 16
	if l := connLimits(cfg, front.ConnLimits{}); l != (front.ConnLimits{MaxConns: 200, MaxConnsPerAddr: 16}) {
		t.Fatalf("configuration: %+v", l)
	}
	if l := connLimits(cfg, front.ConnLimits{MaxConnsPerAddr: 3}); l != (front.ConnLimits{MaxConns: 200, MaxConnsPerAddr: 3}) {
		t.Fatalf("override: %+v", l)
	}
}

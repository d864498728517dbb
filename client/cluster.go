package client

// The cluster's members as the API lists them: Node, Client.Nodes and
// ReadyNode.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
)

// Node is one member of a node's cluster (GET /v1/cluster/nodes).
type Node struct {
	ID           string `json:"name"` // the node id
	AdvertiseURL string `json:"advertise_url"`
	Version      string `json:"version"`
	Generation   uint64 `json:"generation"`
	CatalogHash  string `json:"catalog_hash"`
	Fresh        bool   `json:"fresh"`
	Ready        bool   `json:"ready"`
}

// Nodes lists the members of the node's cluster (an administrator's key;
// a standalone node answers a *Problem, 404 not-clustered).
func (c *Client) Nodes(ctx context.Context) ([]Node, error) {
	_, body, err := c.do(ctx, http.MethodGet, "/v1/cluster/nodes", "", nil, nil)
	if err != nil {
		return nil, err
	}
	var l struct {
		Nodes []Node `json:"nodes"`
	}
	if err := json.Unmarshal(body, &l); err != nil {
		return nil, fmt.Errorf("client: decode nodes: %w", err)
	}
	return l.Nodes, nil
}

// ReadyNode returns the advertised URL of a ready, fresh member with the
// highest generation, for a client that spreads over a cluster; "" when
// none is.
func ReadyNode(nodes []Node) string {
	best := -1
	for i, n := range nodes {
		if n.Ready && n.Fresh && (best < 0 || n.Generation > nodes[best].Generation) {
			best = i
		}
	}
	if best < 0 {
		return ""
	}
	return nodes[best].AdvertiseURL
}

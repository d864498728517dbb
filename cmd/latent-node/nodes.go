package main

// The nodes command: the members of the node's cluster.

import (
	"context"
	"fmt"
	"io"
)

// nodes prints one line per member of the node's cluster: id, URL, applied
// generation, fresh or stale, ready or not ready.
func nodes(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("nodes", stderr, "nodes [--node URL] [--key KEY]")
	nodeURL, key, caFile := clientFlags(fs)
	if code, ok := parse(fs, args); !ok {
		return code
	}
	if fs.NArg() != 0 {
		fmt.Fprintln(stderr, "latent-node nodes: takes no arguments")
		return 2
	}
	c, ok := newClient("nodes", *nodeURL, *key, *caFile, stderr)
	if !ok {
		return 2
	}
	members, err := c.Nodes(context.Background())
	if err != nil {
		printError(stderr, err)
		return 1
	}
	for _, m := range members {
		fresh, ready := "stale", "not-ready"
		if m.Fresh {
			fresh = "fresh"
		}
		if m.Ready {
			ready = "ready"
		}
		fmt.Fprintf(stdout, "%s\t%s\tgeneration %d\t%s\t%s\n", m.ID, m.AdvertiseURL, m.Generation, fresh, ready)
	}
	return 0
}

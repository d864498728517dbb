// Health and readiness: /healthz and /readyz, outside the ingress pools.

package node

import (
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/latent-node/latent-node/cellpool"
	"github.com/latent-node/latent-node/loadsource"
	"github.com/latent-node/latent-node/node/api"
	"github.com/latent-node/latent-node/refusal"
	"github.com/latent-node/latent-node/vocab"
)

// probes answer /healthz and /readyz. They hold their own bound (slots),
// the load sample and what it measures, the cell pool and its classes,
// and the cluster membership's readiness.
type probes struct {
	slots    chan struct{} // the liveness probe's own bound
	load     *loadsource.State
	loadKind string
	clock    vocab.Clock
	pool     *cellpool.Pool
	classes  []vocab.CellClass // the configured cell classes, sorted
	cluster  *clusterAPI
}

// handleHealthz is liveness with its own small bound: it never waits behind
// activations and refuses at once when its bound is full.
func (p *probes) handleHealthz(w http.ResponseWriter, _ *http.Request) {
	select {
	case p.slots <- struct{}{}:
		defer func() { <-p.slots }()
		w.Header().Set("Content-Type", "text/plain")
		_, _ = io.WriteString(w, "ok\n")
	default:
		api.WriteProblem(w, api.Refusal(refusal.Refusal{Code: refusal.CodeUnavailable, Reason: refusal.ReasonHealthChecksBusy,
			Scope: refusal.ScopeNode, Retryable: true}), 0)
	}
}

// handleReadyz: ready when the catalog is loaded (it is, once New returned)
// and the load sample is fresh. While quarantined cells wait for their
// replacement it still answers 200, with "degraded:" and the usable cells
// of each class short of its parallelism. Latent-Load-Source says what the
// pressure readings measure.
func (p *probes) handleReadyz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Latent-Load-Source", p.loadKind)
	if _, err := p.load.Read(p.clock.Now()); err != nil {
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, "load sample not fresh\n")
		return
	}
	if why, ok := p.cluster.ready(); !ok {
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, why+"\n")
		return
	}
	if p.pool.Degraded() {
		// Still serving, on fewer cells: say which, so an operator sees it
		// while the pool replaces the quarantined ones.
		w.Header().Set("Content-Type", "text/plain")
		var b strings.Builder
		b.WriteString("degraded:")
		stats := p.pool.Stats()
		for _, c := range p.classes {
			if st := stats[c]; st.Usable < st.Parallelism {
				fmt.Fprintf(&b, " %s %d/%d cells usable;", c, st.Usable, st.Parallelism)
			}
		}
		_, _ = io.WriteString(w, strings.TrimSuffix(b.String(), ";")+"\n")
		return
	}
	_, _ = io.WriteString(w, "ready\n")
}

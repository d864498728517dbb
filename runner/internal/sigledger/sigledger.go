// Package sigledger is the runner's ledger of the function signatures its
// runtime holds, charged per tenant against a limit
// (Config.MaxSignaturesPerTenant). It imports vocab only.
package sigledger

import (
	"hash/maphash"
	"strconv"
	"sync"

	"github.com/cockroachdb/errors"

	"github.com/latent-node/latent-node/vocab"
)

// Ledger counts the distinct function signatures the runtime has
// compiled. wazero keeps every one (its type ids) until the runtime closes,
// so deploy and delete cycles of modules with fresh signatures would grow
// the node's memory without bound. Each new signature is charged to the
// tenant whose deploy brought it (first come; shared ones cost nobody
// again), and a deploy over its tenant's budget is refused. The ledger
// stores a 64-bit hash per signature; it never shrinks, like wazero's
// table, and is bounded by the tenants' budgets plus what the catalog
// itself re-inspects.
type Ledger struct {
	seed  maphash.Seed
	limit int

	mu        sync.Mutex
	seen      map[uint64]struct{}
	perTenant map[vocab.TenantID]int // "" for inspections outside a deploy
}

// New is a ledger charging each tenant at most limit new signatures.
func New(limit int) *Ledger {
	return &Ledger{seed: maphash.MakeSeed(), limit: limit, seen: map[uint64]struct{}{},
		perTenant: map[vocab.TenantID]int{}}
}

// Charge records sigs for tenant. With enforce, a module that would bring
// the tenant's new signatures over the limit is refused and nothing is
// recorded; without (re-inspection at start-up, a cluster applying a
// release admitted elsewhere) it is always recorded, as the runtime will
// hold them.
func (l *Ledger) Charge(tenant vocab.TenantID, enforce bool, sigs []string) error {
	hashes := make([]uint64, len(sigs))
	for i, s := range sigs {
		hashes[i] = maphash.String(l.seed, s)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	fresh := 0
	for _, h := range hashes {
		if _, ok := l.seen[h]; !ok {
			fresh++
		}
	}
	if fresh == 0 {
		return nil
	}
	if used := l.perTenant[tenant]; enforce && used+fresh > l.limit {
		return errors.WithHint(errors.Newf("runner: the module declares %d function signatures new to this node; "+
			"the tenant's deploys brought %d already and node.max_signatures_per_tenant is %s "+
			"(the node keeps every signature it compiled until it restarts)",
			fresh, used, strconv.Itoa(l.limit)),
			"reuse the signatures of modules deployed before (rebuild with the same toolchain), or ask the operator to restart the node")
	}
	for _, h := range hashes {
		l.seen[h] = struct{}{}
	}
	l.perTenant[tenant] += fresh
	return nil
}

// Total is the number of distinct signatures recorded.
func (l *Ledger) Total() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.seen)
}

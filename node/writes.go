package node

import (
	"net/http"
	"sync"
	"time"

	"github.com/latent-node/latent-node/admission"
	"github.com/latent-node/latent-node/catalog"
	"github.com/latent-node/latent-node/node/api"
)

// How many uploads and deploys one tenant may have in flight at once.
// Inspection runs compile_concurrency modules at a time for the whole node;
// with one deploy per tenant in flight, tenants take turns at it instead of
// one tenant's queue of deploys delaying everyone else's. Uploads only
// write a file, but bounding them keeps one tenant from filling the disk
// with temporary files before any quota counts them.
const (
	MaxTenantUploads = 2
	MaxTenantDeploys = 1
)

// writeRetryAfter is the Retry-After of a write refused for its bound.
const writeRetryAfter = time.Second

// tenantWrites counts each tenant's writes of one kind in flight, at most
// max. Its keys are configured tenants (callers are authenticated first), so
// it is bounded by the configuration.
type tenantWrites struct {
	max      int
	mu       sync.Mutex
	inFlight map[catalog.TenantID]int
}

// begin takes a slot for tenant; false when the tenant has max in flight.
// end gives it back.
func (tw *tenantWrites) begin(tenant catalog.TenantID) bool {
	tw.mu.Lock()
	defer tw.mu.Unlock()
	if tw.inFlight == nil {
		tw.inFlight = map[catalog.TenantID]int{}
	}
	if tw.inFlight[tenant] >= tw.max {
		return false
	}
	tw.inFlight[tenant]++
	return true
}

func (tw *tenantWrites) end(tenant catalog.TenantID) {
	tw.mu.Lock()
	defer tw.mu.Unlock()
	if tw.inFlight[tenant]--; tw.inFlight[tenant] <= 0 {
		delete(tw.inFlight, tenant)
	}
}

// writesBusy is the refusal of an upload or deploy over its bound:
// retryable, the tenant's own concurrency.
func writesBusy() api.Problem {
	return api.Refusal(http.StatusTooManyRequests, admission.CodeResourceExhausted, "capacity-exhausted",
		admission.ScopeTenant, "catalog-writes", true)
}

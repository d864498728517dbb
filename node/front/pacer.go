// The refusal pacer: how long each principal's refusals are held before
// they are answered.

package front

import (
	"sync"
	"time"
)

// Defaults of the refusal pacer.
const (
	// DefaultRefusalRate is how many refusals per second one principal gets
	// answered at once; beyond it, refusals are held.
	DefaultRefusalRate = 100
	// DefaultRefusalBurst is how many refusals a principal may receive at
	// once before the rate applies.
	DefaultRefusalBurst = 20
	// MaxRefusalHold bounds how long one refusal is held.
	MaxRefusalHold = time.Second
)

// RefusalPacer makes refusals cost the refused. A client that ignores
// Retry-After and retries at once would otherwise turn the node's CPU into
// refusals (authentication, admission, a problem body each) at tens of
// thousands a second, taking it from every other tenant. Each principal's
// refusals are paced to a rate (a virtual schedule: each refusal is due
// 1/rate after the previous one, after a burst); a refusal that comes early
// is held until it is due (at most MaxRefusalHold) before it is answered,
// so a retrying client waits instead of spinning, and its connections, not
// the node's CPU, carry the backlog (connections are bounded per address).
//
// Its keys are authenticated principals of the configuration, so it is
// bounded by the configuration.
type RefusalPacer struct {
	interval time.Duration // 1/rate
	burst    time.Duration // (burst − 1) × interval: how far behind the schedule may run

	mu  sync.Mutex
	due map[string]time.Time // the time the next refusal of each principal is due
}

// NewRefusalPacer paces each principal's refusals to rate a second after
// a burst of burst.
func NewRefusalPacer(rate, burst int) *RefusalPacer {
	iv := time.Second / time.Duration(rate)
	return &RefusalPacer{interval: iv, burst: time.Duration(max(burst, 1)-1) * iv, due: map[string]time.Time{}}
}

// Hold returns how long to hold a refusal of principal at now before
// answering it (0: answer at once) and books it.
func (p *RefusalPacer) Hold(principal string, now time.Time) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	due := p.due[principal]
	if earliest := now.Add(-p.burst); due.Before(earliest) {
		due = earliest // idle for a while: a full burst is available again
	}
	wait := due.Sub(now)
	if wait > MaxRefusalHold {
		// Far behind schedule: hold the longest and do not book further
		// ahead, so the backlog of one principal stays bounded.
		return MaxRefusalHold
	}
	p.due[principal] = due.Add(p.interval)
	return max(wait, 0)
}

package cellpool

// Pool and its Config: the cells of each class, leasing (TryLease, Lease),
// taking cells back or quarantining them, Stats and Close.

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/latent-node/latent-node/vocab"
)

// Sentinels of the pool. Compare with errors.Is; returned errors wrap them
// with the class and cell concerned.
var (
	// ErrInvalidConfig: New was given an unusable Config. The message lists
	// every problem.
	ErrInvalidConfig = errors.New("cellpool: invalid configuration")
	// ErrUnknownClass: the cell class is not configured in this pool.
	ErrUnknownClass = errors.New("cellpool: cell class not configured")
	// ErrNoCell: every usable cell of the class is leased right now. It is
	// transient: a release makes a cell available again. The scheduler
	// decides whether to wait.
	ErrNoCell = errors.New("cellpool: no idle cell")
	// ErrDepleted: every cell of the class is quarantined. Not ErrNoCell:
	// while Run replaces cells it lasts about one Config.ReplaceInterval per
	// cell; without Run the class never serves again.
	ErrDepleted = errors.New("cellpool: every cell of the class is quarantined")
	// ErrClosed: the pool was closed.
	ErrClosed = errors.New("cellpool: pool closed")
	// ErrLeaseInvalid: the lease was not issued by a pool (a zero value or nil).
	ErrLeaseInvalid = errors.New("cellpool: lease not issued by a pool")
	// ErrLeaseReleased: the lease was already released (or reclaimed as
	// leaked). The second Release changes nothing.
	ErrLeaseReleased = errors.New("cellpool: lease already released")
	// ErrQuarantined: Release was asked to reuse the cell but quarantined it
	// because its state is uncertain; the wrapped cause says why. The cell
	// is out of service either way; the lease is consumed.
	ErrQuarantined = errors.New("cellpool: cell quarantined")
)

// Bounds of ClassConfig.
const (
	// PageSize is the WebAssembly page size, vocab.WasmPageBytes;
	// MemoryBytes is a multiple of it.
	PageSize = vocab.WasmPageBytes
	// MaxMemoryBytes is the largest linear memory of a 32-bit wasm module,
	// vocab.MaxWasm32MemoryBytes (65536 pages, 4 GiB).
	MaxMemoryBytes = vocab.MaxWasm32MemoryBytes
	// MaxParallelism bounds the cells of one class (a guard against typos:
	// each cell reserves MemoryBytes of address space up front).
	MaxParallelism = 1 << 14
)

// DefaultReplaceInterval is the default of Config.ReplaceInterval.
const DefaultReplaceInterval = 100 * time.Millisecond

// Config configures a Pool.
type Config struct {
	// Classes maps each offered cell class to its configuration. At least one
	// class; every key a valid vocab.CellClass.
	Classes map[vocab.CellClass]ClassConfig
	// ReplaceInterval is the least time between two replacements of
	// quarantined cells of one class by Run, and between two attempts after
	// a replacement failed (default DefaultReplaceInterval; not negative).
	ReplaceInterval time.Duration
	// Clock times Run's pauses (default: the real clock).
	Clock Clock
}

// Clock is what Run waits with. Tests inject a fake one.
type Clock interface {
	// After returns a channel that receives once d has passed.
	After(d time.Duration) <-chan time.Time
}

type realClock struct{}

func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// ClassConfig configures the cells of one class.
type ClassConfig struct {
	// Parallelism is the fixed number of cells of the class, 1..MaxParallelism.
	// All of them are created by New.
	Parallelism int
	// MemoryBytes is the class's maximum linear memory in bytes: a positive
	// multiple of PageSize (64 KiB), at most MaxMemoryBytes (4 GiB). Each cell
	// reserves this much address space (not physical memory) up front.
	MemoryBytes uint64
}

// ConfigError lists every problem of a Config. Each problem's Field is a
// vocab.FieldPath in the Go terms of Config (`Classes["tiny"].MemoryBytes`);
// a caller that reads the configuration from a file maps the paths onto its
// own keys.
type ConfigError struct {
	Problems []vocab.FieldError
}

func (e *ConfigError) Error() string {
	return vocab.JoinFieldErrors("cellpool: invalid configuration", e.Problems)
}

// Is makes errors.Is(err, ErrInvalidConfig) hold.
func (e *ConfigError) Is(target error) bool { return target == ErrInvalidConfig }

// Validate returns a *ConfigError listing every problem of c, or nil. It
// changes nothing; New calls it. These are the cell pool's rules: a cell
// class's parallelism is 1 to MaxParallelism, its memory a positive
// multiple of the Wasm page size, at most MaxMemoryBytes.
func (c Config) Validate() error {
	var problems []vocab.FieldError
	classes := vocab.FieldPath("Classes")
	if len(c.Classes) == 0 {
		problems = append(problems, classes.Error("no cell class configured"))
	}
	if c.ReplaceInterval < 0 {
		problems = append(problems, vocab.FieldPath("ReplaceInterval").Error("must not be negative"))
	}
	for class, cc := range c.Classes {
		f := classes.Key(class.String())
		if !class.Valid() {
			problems = append(problems, f.Error("not a cell class"))
			continue
		}
		if cc.Parallelism <= 0 || cc.Parallelism > MaxParallelism {
			problems = append(problems, f.Field("Parallelism").Error("must be from 1 to "+strconv.Itoa(MaxParallelism)))
		}
		switch {
		case cc.MemoryBytes == 0:
			problems = append(problems, f.Field("MemoryBytes").Error("must be positive"))
		case cc.MemoryBytes%PageSize != 0:
			problems = append(problems, f.Field("MemoryBytes").Error("must be a multiple of 64KiB (the WebAssembly page size)"))
		case cc.MemoryBytes > MaxMemoryBytes:
			problems = append(problems, f.Field("MemoryBytes").Error("must be at most 4GiB (the wasm32 limit)"))
		}
	}
	if len(problems) == 0 {
		return nil
	}
	// Map order is random; keep messages stable.
	slices.SortFunc(problems, func(a, b vocab.FieldError) int { return strings.Compare(a.String(), b.String()) })
	return &ConfigError{Problems: problems}
}

// Pool owns a fixed number of cells per class, created by New; Run replaces
// the quarantined ones. New starts no goroutines; a leaked lease is
// reclaimed by the runtime's finalizer goroutine. All methods are safe for
// concurrent use.
type Pool struct {
	classes  [int(vocab.CellXLarge) + 1]*classPool // indexed by class
	reserve  func(size uint64) (region, error)
	interval time.Duration
	clock    Clock
	wake     chan struct{} // capacity 1: a quarantine or Close happened
	closed   atomic.Bool
	running  atomic.Bool // Run is running
	driving  atomic.Bool // Run is replacing cells: depletion is not final
	onIdle   func()      // test hook: Run waits for a wake-up
}

// classPool is the cells of one class. free is both the idle list and the
// counting semaphore: a cell is idle iff it is in the channel.
type classPool struct {
	class   vocab.CellClass
	cfg     ClassConfig
	free    chan *cell    // idle cells, capacity Parallelism
	wake    chan struct{} // the pool's
	driving *atomic.Bool  // the pool's

	mu struct {
		sync.Mutex
		cells       []*cell // by index; a quarantined cell stays until replaced
		vacant      []int   // indices of quarantined cells not yet replaced
		gone        chan struct{}
		goneClosed  bool
		leased      int
		quarantined int // out of service, not yet replaced
		replaced    int
		failures    int // replacements that failed to reserve memory
		retired     int // unmapped by Close
		leaked      int
		closed      bool
	}
}

// cell is one execution cell: its identity and its reserved linear memory.
// Immutable; owned by exactly one of the free channel, a lease, or nobody
// (quarantined or retired, its region unmapped).
type cell struct {
	class  vocab.CellClass
	index  int
	region region
}

// New creates every cell of every configured class, reserving each cell's
// linear memory (address space only). It starts no goroutines. On error
// nothing stays reserved.
func New(cfg Config) (*Pool, error) {
	return newPool(cfg, reserve)
}

func newPool(cfg Config, reserveFn func(size uint64) (region, error)) (*Pool, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	p := &Pool{reserve: reserveFn, interval: cfg.ReplaceInterval, clock: cfg.Clock, wake: make(chan struct{}, 1)}
	if p.interval == 0 {
		p.interval = DefaultReplaceInterval
	}
	if p.clock == nil {
		p.clock = realClock{}
	}
	for _, class := range vocab.CellClasses {
		cc, ok := cfg.Classes[class]
		if !ok {
			continue
		}
		cp := &classPool{class: class, cfg: cc, free: make(chan *cell, cc.Parallelism), wake: p.wake, driving: &p.driving}
		cp.mu.gone = make(chan struct{})
		p.classes[class] = cp
		for i := 0; i < cc.Parallelism; i++ {
			r, err := reserveFn(cc.MemoryBytes)
			if err != nil {
				_ = p.Close()
				return nil, errors.Wrapf(err, "cellpool: reserve %d bytes for %s cell %d", cc.MemoryBytes, class, i)
			}
			c := &cell{class: class, index: i, region: r}
			cp.mu.cells = append(cp.mu.cells, c)
			cp.free <- c
		}
	}
	return p, nil
}

func (p *Pool) classPool(class vocab.CellClass) (*classPool, error) {
	if class.Valid() {
		if cp := p.classes[class]; cp != nil {
			return cp, nil
		}
	}
	return nil, errors.Wrapf(ErrUnknownClass, "cellpool: %s", class)
}

// TryLease leases an idle cell of class without waiting. It returns
// ErrNoCell when every usable cell is leased, ErrDepleted when none is
// usable, ErrClosed after Close and ErrUnknownClass for a class the pool
// does not have.
func (p *Pool) TryLease(class vocab.CellClass) (*Lease, error) {
	cp, err := p.classPool(class)
	if err != nil {
		return nil, err
	}
	select {
	case c := <-cp.free:
		return cp.lease(c), nil
	default:
	}
	if err := cp.unavailable(); err != nil {
		return nil, err
	}
	return nil, errors.Wrapf(ErrNoCell, "cellpool: %s", class)
}

// Lease leases an idle cell of class, waiting until one is released or
// replaced, ctx is done (the context's error, wrapped), the class is depleted
// while Run is not running (ErrDepleted) or the pool is closed (ErrClosed).
// While Run runs, a depleted class is waited for: Run replaces its cells.
// Waiters are not served in FIFO order: the scheduler owns fairness and
// normally uses TryLease.
func (p *Pool) Lease(ctx context.Context, class vocab.CellClass) (*Lease, error) {
	cp, err := p.classPool(class)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, errors.Wrapf(err, "cellpool: lease %s", class)
	}
	select {
	case c := <-cp.free:
		return cp.lease(c), nil
	default:
	}
	for {
		cp.mu.Lock()
		gone := cp.mu.gone
		cp.mu.Unlock()
		select {
		case c := <-cp.free:
			return cp.lease(c), nil
		case <-gone:
			if err := cp.unavailable(); err != nil {
				return nil, err
			}
			// A replacement ended the depletion that closed gone: wait again.
		case <-ctx.Done():
			return nil, errors.Wrapf(ctx.Err(), "cellpool: lease %s", class)
		}
	}
}

// unavailable returns ErrClosed or ErrDepleted if the class can no longer
// serve, else nil.
func (cp *classPool) unavailable() error {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	switch {
	case cp.mu.closed:
		return errors.Wrapf(ErrClosed, "cellpool: %s", cp.class)
	case cp.usableLocked() == 0:
		return errors.Wrapf(ErrDepleted, "cellpool: %s", cp.class)
	}
	return nil
}

func (cp *classPool) usableLocked() int {
	return cp.cfg.Parallelism - cp.mu.quarantined - cp.mu.retired
}

func (cp *classPool) lease(c *cell) *Lease {
	cp.mu.Lock()
	cp.mu.leased++
	cp.mu.Unlock()
	l := &Lease{cp: cp, cell: c}
	l.track()
	return l
}

// settle takes back a leased cell: into the free channel, or out of service
// (quarantined, or retired after Close) with its region unmapped.
func (cp *classPool) settle(c *cell, quarantine, leaked bool) error {
	cp.mu.Lock()
	cp.mu.leased--
	if leaked {
		cp.mu.leaked++
	}
	unmap := true
	switch {
	case quarantine:
		cp.mu.quarantined++
		cp.mu.vacant = append(cp.mu.vacant, c.index)
		if cp.usableLocked() == 0 && !cp.driving.Load() {
			cp.closeGoneLocked()
		}
		select {
		case cp.wake <- struct{}{}:
		default: // a wake-up is pending already
		}
	case cp.mu.closed:
		cp.mu.retired++
	default:
		cp.free <- c // never blocks: capacity Parallelism
		unmap = false
	}
	cp.mu.Unlock()
	if !unmap {
		return nil
	}
	if err := c.region.release(); err != nil {
		return errors.Wrapf(err, "cellpool: unmap %s cell %d", c.class, c.index)
	}
	return nil
}

func (cp *classPool) closeGoneLocked() {
	if !cp.mu.goneClosed {
		cp.mu.goneClosed = true
		close(cp.mu.gone)
	}
}

// Capacity returns the number of usable cells of class: leased or idle, not
// quarantined or retired. It is 0 for a class the pool does not have.
func (p *Pool) Capacity(class vocab.CellClass) int {
	cp, err := p.classPool(class)
	if err != nil {
		return 0
	}
	cp.mu.Lock()
	defer cp.mu.Unlock()
	return cp.usableLocked()
}

// ClassStats is a snapshot of one class. Parallelism = Usable + Quarantined
// + Retired; Leased <= Usable. Cells quarantined since New = Quarantined +
// Replaced.
type ClassStats struct {
	// Parallelism is the configured number of cells.
	Parallelism int
	// Usable is the number of cells in service (idle or leased).
	Usable int
	// Leased is the number of cells currently leased.
	Leased int
	// Quarantined is the number of cells out of service because their state
	// was uncertain (or the holder asked, or the lease leaked) and not yet
	// replaced.
	Quarantined int
	// Replaced counts quarantined cells Run replaced with fresh ones.
	Replaced int
	// ReplaceFailures counts replacements that could not reserve memory
	// (each retried one ReplaceInterval later).
	ReplaceFailures int
	// Retired is the number of cells unmapped by Close.
	Retired int
	// LeakedLeases counts leases reclaimed by the safety net (dropped
	// without Release): each is a bug in the holder.
	LeakedLeases int
}

// Degraded reports whether some class has fewer usable cells than its
// configured Parallelism (cells quarantined and not yet replaced, or the
// pool closed). For readiness checks.
func (p *Pool) Degraded() bool {
	for _, cp := range p.classes {
		if cp == nil {
			continue
		}
		cp.mu.Lock()
		degraded := cp.usableLocked() < cp.cfg.Parallelism
		cp.mu.Unlock()
		if degraded {
			return true
		}
	}
	return false
}

// Stats returns a snapshot per configured class.
func (p *Pool) Stats() map[vocab.CellClass]ClassStats {
	out := make(map[vocab.CellClass]ClassStats)
	for _, cp := range p.classes {
		if cp == nil {
			continue
		}
		cp.mu.Lock()
		out[cp.class] = ClassStats{
			Parallelism:     cp.cfg.Parallelism,
			Usable:          cp.usableLocked(),
			Leased:          cp.mu.leased,
			Quarantined:     cp.mu.quarantined,
			Replaced:        cp.mu.replaced,
			ReplaceFailures: cp.mu.failures,
			Retired:         cp.mu.retired,
			LeakedLeases:    cp.mu.leaked,
		}
		cp.mu.Unlock()
	}
	return out
}

// Close takes the pool out of service: idle cells are unmapped now, leased
// cells when their lease is released (or reclaimed as leaked), whatever the
// disposition; outstanding leases stay valid until then. Later leases fail
// with ErrClosed and waiting Lease calls return it; Run returns. Close never
// blocks and is idempotent; it returns only unmapping errors.
func (p *Pool) Close() error {
	p.closed.Store(true)
	defer func() {
		select {
		case p.wake <- struct{}{}:
		default:
		}
	}()
	var errs error
	for _, cp := range p.classes {
		if cp == nil {
			continue
		}
		var idle []*cell
		cp.mu.Lock()
		if !cp.mu.closed {
			cp.mu.closed = true
		drain:
			for {
				select {
				case c := <-cp.free:
					idle = append(idle, c)
				default:
					break drain
				}
			}
			cp.mu.retired += len(idle)
			cp.closeGoneLocked()
		}
		cp.mu.Unlock()
		for _, c := range idle {
			if err := c.region.release(); err != nil {
				errs = errors.CombineErrors(errs, errors.Wrapf(err, "cellpool: unmap %s cell %d", c.class, c.index))
			}
		}
	}
	return errs
}

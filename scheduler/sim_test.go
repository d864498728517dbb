package scheduler

import (
	"container/heap"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/latent-node/latent-node/vocab"
)

// This file is a deterministic discrete-event simulation of a scheduler with
// p cells on a fake clock (APF's queueset tests are the model): workloads of
// closed-loop clients (a fixed number of activations outstanding) and
// open-loop Poisson arrivals, per-item service times and fuel, an admission
// stand-in that enforces each queue class's MaxQueued and calls
// YieldSlotTo when full, a tick that expires and adjusts. It drives the Core
// or, as the negative control, the FIFO scheduler below.

// simSched is what the simulation drives: Core, or fifoSched.
type simSched interface {
	Enqueue(now time.Time, it *Item) error
	Next(now time.Time, cell vocab.CellClass) (*Item, bool)
	Done(now time.Time, it *Item, fuelUsed uint64, execTime time.Duration) error
	Expire(now time.Time) []*Item
	YieldSlotTo(now time.Time, queue int, tenant vocab.TenantID, principal string) (*Item, bool)
	Adjust(now time.Time) bool
}

// fifoSched is one FIFO over everything with p cells and no fair share: the
// negative control.
type fifoSched struct {
	p, running int
	maxWait    time.Duration
	q          []*Item
}

func (f *fifoSched) Enqueue(now time.Time, it *Item) error {
	it.EnqueuedAt = now
	f.q = append(f.q, it)
	return nil
}

func (f *fifoSched) Next(time.Time, vocab.CellClass) (*Item, bool) {
	if f.running >= f.p || len(f.q) == 0 {
		return nil, false
	}
	it := f.q[0]
	f.q = f.q[1:]
	f.running++
	return it, true
}

func (f *fifoSched) Done(time.Time, *Item, uint64, time.Duration) error {
	f.running--
	return nil
}

func (f *fifoSched) Expire(now time.Time) []*Item {
	var out []*Item
	for len(f.q) > 0 && now.Sub(f.q[0].EnqueuedAt) >= f.maxWait {
		out = append(out, f.q[0])
		f.q = f.q[1:]
	}
	return out
}

func (f *fifoSched) YieldSlotTo(time.Time, int, vocab.TenantID, string) (*Item, bool) {
	return nil, false
}
func (f *fifoSched) Adjust(time.Time) bool { return false }

var simEpoch = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

const simCell = vocab.CellStandard

// workload is one tenant's offered load.
type workload struct {
	tenant     vocab.TenantID
	principals int // round-robin among them; default 1
	queue      int
	closed     int     // closed loop: activations kept outstanding
	rate       float64 // open loop: Poisson arrivals per second
	exec       time.Duration
	jitter     float64 // service time uniform in exec·[1−jitter, 1+jitter]
}

// fuelPerSecond converts service time to fuel: 1 ms of guest CPU = 10⁶ fuel.
const fuelPerSecond = 1e9

type simJob struct {
	item    Item
	load    int
	exec    time.Duration
	fuel    uint64
	arrived time.Duration
}

type event struct {
	at   time.Duration
	seq  uint64
	kind uint8 // evArrive, evDone, evTick
	load int
	job  *simJob
}

const (
	evArrive = iota
	evDone
	evTick
)

type eventHeap []event

func (h eventHeap) Len() int { return len(h) }
func (h eventHeap) Less(i, j int) bool {
	return h[i].at < h[j].at || (h[i].at == h[j].at && h[i].seq < h[j].seq)
}
func (h eventHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *eventHeap) Push(x any)   { *h = append(*h, x.(event)) }
func (h *eventHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

// simSpec configures a run.
type simSpec struct {
	sched    simSched
	limits   []int // MaxQueued per queue class (the admission stand-in)
	loads    []workload
	warmup   time.Duration
	duration time.Duration // measured, after warmup
	window   time.Duration // for per-window figures; 0: 1s
	tick     time.Duration // 0: 10ms
	retry    time.Duration // closed-loop back-off after a refusal; 0: 1ms
	seed     uint64
	// slowdown multiplies the service time of an item dispatched at t with
	// running items in service, itself included (host contention).
	slowdown func(t time.Duration, running int) float64
	// onAdjust observes every tick (after Adjust).
	onTick func(t time.Duration)
}

// simResult holds per-load measurements over the measured interval.
type simResult struct {
	cpu       []time.Duration   // execution time completed
	done      []int             // completions
	arrived   []int             // arrivals
	offered   []time.Duration   // execution time of arrivals
	refused   []int             // arrivals refused (queue full, no fair share)
	evicted   []int             // victims of YieldSlotTo
	expired   []int             // waited MaxWait
	waits     [][]time.Duration // queue waits of dispatches
	windowCPU [][]time.Duration // [window][load]
	span      time.Duration
}

type simulation struct {
	simSpec
	rngs   []*rand.Rand // per load, so a load's arrivals do not depend on the others
	now    time.Duration
	seq    uint64
	events eventHeap
	queued []int
	next   []int // per load: the next principal
	run    int   // items in service
	res    simResult
}

func runSim(spec simSpec) simResult {
	if spec.window == 0 {
		spec.window = time.Second
	}
	if spec.tick == 0 {
		spec.tick = 10 * time.Millisecond
	}
	if spec.retry == 0 {
		spec.retry = time.Millisecond
	}
	s := &simulation{simSpec: spec, queued: make([]int, len(spec.limits)), next: make([]int, len(spec.loads))}
	n := len(spec.loads)
	for i := range n {
		s.rngs = append(s.rngs, rand.New(rand.NewPCG(spec.seed, uint64(i))))
	}
	s.res = simResult{cpu: make([]time.Duration, n), done: make([]int, n), arrived: make([]int, n), offered: make([]time.Duration, n),
		refused: make([]int, n), evicted: make([]int, n), expired: make([]int, n), waits: make([][]time.Duration, n),
		span: spec.duration}
	nw := int(spec.duration / spec.window)
	s.res.windowCPU = make([][]time.Duration, nw)
	for i := range s.res.windowCPU {
		s.res.windowCPU[i] = make([]time.Duration, n)
	}
	for i, l := range spec.loads {
		for range l.closed {
			s.push(event{at: 0, kind: evArrive, load: i})
		}
		if l.rate > 0 {
			s.push(event{at: s.interarrival(i, l.rate), kind: evArrive, load: i})
		}
	}
	s.push(event{at: spec.tick, kind: evTick})
	end := spec.warmup + spec.duration
	for len(s.events) > 0 {
		e := heap.Pop(&s.events).(event)
		if e.at > end {
			break
		}
		s.now = e.at
		switch e.kind {
		case evArrive:
			s.arrive(e.load)
		case evDone:
			s.complete(e.job)
		case evTick:
			now := s.t()
			for _, it := range s.sched.Expire(now) {
				j := it.Payload.(*simJob)
				s.queued[j.item.Queue]--
				s.lost(j, s.res.expired)
			}
			s.sched.Adjust(now)
			if s.onTick != nil {
				s.onTick(s.now)
			}
			s.push(event{at: s.now + s.tick, kind: evTick})
		}
		s.dispatch()
	}
	return s.res
}

func (s *simulation) t() time.Time { return simEpoch.Add(s.now) }

func (s *simulation) push(e event) {
	s.seq++
	e.seq = s.seq
	heap.Push(&s.events, e)
}

func (s *simulation) interarrival(li int, rate float64) time.Duration {
	return time.Duration(s.rngs[li].ExpFloat64() / rate * float64(time.Second))
}

func (s *simulation) measured() bool {
	return s.now >= s.warmup && s.now < s.warmup+s.duration
}

func (s *simulation) arrive(li int) {
	l := &s.loads[li]
	if l.rate > 0 {
		s.push(event{at: s.now + s.interarrival(li, l.rate), kind: evArrive, load: li})
	}
	exec := l.exec
	if l.jitter > 0 {
		exec = time.Duration(float64(exec) * (1 - l.jitter + 2*l.jitter*s.rngs[li].Float64()))
	}
	principals := max(l.principals, 1)
	j := &simJob{load: li, exec: exec, fuel: uint64(exec.Seconds() * fuelPerSecond), arrived: s.now}
	j.item = Item{Tenant: l.tenant, Principal: "p" + string(rune('a'+s.next[li]%principals)), Cell: simCell,
		Queue: l.queue, Payload: j}
	s.next[li]++
	if s.measured() {
		s.res.offered[li] += exec
		s.res.arrived[li]++
	}
	now := s.t()
	if s.queued[l.queue] >= s.limits[l.queue] {
		victim, ok := s.sched.YieldSlotTo(now, l.queue, l.tenant, j.item.Principal)
		if !ok {
			s.lost(j, s.res.refused)
			return
		}
		s.queued[l.queue]--
		s.lost(victim.Payload.(*simJob), s.res.evicted)
	}
	if err := s.sched.Enqueue(now, &j.item); err != nil {
		panic(err)
	}
	s.queued[l.queue]++
}

// lost counts a job that will not run; a closed-loop client retries.
func (s *simulation) lost(j *simJob, counter []int) {
	if s.measured() {
		counter[j.load]++
	}
	if s.loads[j.load].closed > 0 {
		s.push(event{at: s.now + s.retry, kind: evArrive, load: j.load})
	}
}

func (s *simulation) dispatch() {
	now := s.t()
	for {
		it, ok := s.sched.Next(now, simCell)
		if !ok {
			return
		}
		j := it.Payload.(*simJob)
		s.queued[j.item.Queue]--
		if s.measured() {
			s.res.waits[j.load] = append(s.res.waits[j.load], s.now-j.arrived)
		}
		s.run++
		if s.slowdown != nil {
			f := s.slowdown(s.now, s.run)
			j.exec = time.Duration(float64(j.exec) * f)
		}
		s.push(event{at: s.now + j.exec, kind: evDone, job: j})
	}
}

func (s *simulation) complete(j *simJob) {
	if err := s.sched.Done(s.t(), &j.item, j.fuel, j.exec); err != nil {
		panic(err)
	}
	s.run--
	if s.measured() {
		s.res.cpu[j.load] += j.exec
		s.res.done[j.load]++
		s.res.windowCPU[(s.now-s.warmup)/s.window][j.load] += j.exec
	}
	if s.loads[j.load].closed > 0 {
		s.push(event{at: s.now, kind: evArrive, load: j.load})
	}
}

// jain is Jain's fairness index of xs: (Σx)² / (n·Σx²).
func jain(xs []float64) float64 {
	var sum, sq float64
	for _, x := range xs {
		sum += x
		sq += x * x
	}
	if sq == 0 {
		return 1
	}
	return sum * sum / (float64(len(xs)) * sq)
}

// fairAlloc is the max-min fair allocation of capacity among demands
// (water filling, as Kubernetes APF's queueset test oracle).
func fairAlloc(demands []float64, capacity float64) []float64 {
	alloc := make([]float64, len(demands))
	idx := make([]int, len(demands))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int {
		switch {
		case demands[a] < demands[b]:
			return -1
		case demands[a] > demands[b]:
			return 1
		}
		return 0
	})
	left := capacity
	for k, i := range idx {
		share := left / float64(len(idx)-k)
		alloc[i] = math.Min(demands[i], share)
		left -= alloc[i]
	}
	return alloc
}

func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, int(math.Ceil(p*float64(len(s))))-1)]
}

func simConfig(p int, fairness string, limit int) Config {
	return Config{
		CellClasses:  map[vocab.CellClass]CellConfig{simCell: {Parallelism: p}},
		QueueClasses: []QueueConfig{{Name: "default", MinPriority: 0, MaxPriority: 9, MaxQueued: limit}},
		MaxWait:      10 * time.Second, Fairness: fairness,
	}
}

func newSimCore(t testing.TB, cfg Config) *Core {
	t.Helper()
	c, err := NewCore(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// scale shortens simulated time under -short and the race detector (the
// assertions stay).
func scale(d time.Duration) time.Duration {
	if testing.Short() || raceEnabled {
		return d / 2
	}
	return d
}

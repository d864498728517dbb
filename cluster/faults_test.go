package cluster

import (
	"context"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/latent-node/latent-node/internal/testutil/etcdtest"
	"github.com/latent-node/latent-node/vocab"
)

// TestCluster_faults is a property test against the invariants the cluster
// promises, under random deploys, deletes, node restarts, etcd leader kills
// and partitions of single nodes (each node reaches etcd through its own
// pausing proxies): no node ever serves a lower generation than it served
// before, and once the faults stop every node is fresh with the same
// generation and catalog hash. Long: make stress runs it.
func TestCluster_faults(t *testing.T) {
	if testing.Short() {
		t.Skip("long: random faults for about a minute")
	}
	seed := uint64(time.Now().UnixNano())
	if s := strings.TrimSpace(os.Getenv("LATENT_FAULT_SEED")); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	t.Logf("seed %d (LATENT_FAULT_SEED reproduces the sequence of operations)", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	ec := etcdtest.Start(t, 3)

	const nodes = 4
	type slot struct {
		mu      sync.Mutex
		m       *member
		dir     string
		proxies []*etcdtest.Proxy
		// highest is the highest generation the node was seen serving.
		highest atomic.Uint64
	}
	slots := make([]*slot, nodes)
	for i := range slots {
		s := &slot{dir: t.TempDir()}
		var endpoints []string
		for _, u := range ec.ClientURLs() {
			p := etcdtest.StartProxy(t, strings.TrimPrefix(u, "http://"))
			s.proxies = append(s.proxies, p)
			endpoints = append(endpoints, p.URL())
		}
		s.m = startMemberAt(t, endpoints, "n"+strconv.Itoa(i), s.dir)
		slots[i] = s
	}
	endpointsOf := func(s *slot) []string {
		var out []string
		for _, p := range s.proxies {
			out = append(out, p.URL())
		}
		return out
	}
	current := func(s *slot) *member {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.m
	}

	// The monitor samples every node's generation and records a decrease.
	var violations atomic.Int64
	var violation atomic.Value
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, s := range slots {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				gen := uint64(current(s).cat.Pin().Generation())
				if prev := s.highest.Load(); gen < prev {
					violations.Add(1)
					violation.Store(current(s).id + ": generation " + strconv.FormatUint(gen, 10) + " after " + strconv.FormatUint(prev, 10))
				} else {
					s.highest.Store(gen)
				}
				<-time.After(time.Millisecond) // the sampling period
			}
		}()
	}
	defer func() { cancel(); wg.Wait() }()

	waitFor(t, "members fresh", 20*time.Second, func() bool {
		for _, s := range slots {
			if !current(s).c.Status().Fresh {
				return false
			}
		}
		return true
	})
	digests := make([]vocab.Digest, 3)
	for i := range digests {
		digests[i] = upload(t, current(slots[0]), "acme", []byte("fault module "+strconv.Itoa(i)))
	}
	services := []string{"s0", "s1", "s2"}
	var deploys, deletes, refused int
	var restarts, leaderKills, partitions atomic.Int64
	deadline := time.Now().Add(45 * time.Second)

	// The faults come from their own goroutine, while deploys and deletes
	// go on: partitions heal on their own timer, so several may overlap.
	chaosRng := rand.New(rand.NewPCG(seed, 2))
	var chaos sync.WaitGroup
	chaos.Add(1)
	go func() {
		defer chaos.Done()
		var heals sync.WaitGroup
		defer heals.Wait()
		for time.Now().Before(deadline) {
			<-time.After(time.Duration(300+chaosRng.IntN(1200)) * time.Millisecond)
			switch op := chaosRng.IntN(10); {
			case op < 3: // restart a node on its catalog
				s := slots[chaosRng.IntN(nodes)]
				s.mu.Lock()
				old := s.m
				s.mu.Unlock()
				old.stop()
				next := startMemberAt(t, endpointsOf(s), old.id, s.dir)
				s.mu.Lock()
				s.m = next
				s.mu.Unlock()
				restarts.Add(1)
			case op < 5: // kill etcd's leader for a moment
				if l := ec.Leader(); l != nil {
					l.Stop()
					<-time.After(time.Duration(200+chaosRng.IntN(800)) * time.Millisecond)
					l.Restart(t)
					leaderKills.Add(1)
				}
			default: // partition one node from etcd for 0.5 to 3 s
				s := slots[chaosRng.IntN(nodes)]
				for _, p := range s.proxies {
					p.Pause()
				}
				d := time.Duration(500+chaosRng.IntN(2500)) * time.Millisecond
				heals.Add(1)
				go func() {
					defer heals.Done()
					<-time.After(d)
					for _, p := range s.proxies {
						p.Resume()
					}
				}()
				partitions.Add(1)
			}
		}
	}()
	for time.Now().Before(deadline) {
		m := current(slots[rng.IntN(nodes)])
		if rng.IntN(6) == 0 {
			if _, err := m.c.Delete(context.Background(), "acme", vocab.ServiceName(services[rng.IntN(len(services))])); err == nil {
				deletes++
			}
			continue
		}
		i := rng.IntN(len(digests))
		// The deploying node must hold the artifact: upload it there.
		_ = m.cat.Artifacts().Put(context.Background(), "acme", digests[i], strings.NewReader("fault module "+strconv.Itoa(i)))
		if _, err := m.c.Deploy(context.Background(), manifest("acme", services[rng.IntN(len(services))], digests[i], int64(1+rng.IntN(9)))); err != nil {
			refused++
		} else {
			deploys++
		}
	}
	chaos.Wait()
	t.Logf("%d deploys (%d refused while stale or unavailable), %d deletes, %d node restarts, %d leader kills, %d partitions",
		deploys, refused, deletes, restarts.Load(), leaderKills.Load(), partitions.Load())
	waitFor(t, "all nodes fresh with the same generation and catalog hash", 20*time.Second, func() bool {
		s0 := current(slots[0]).c.Status()
		if !s0.Fresh {
			return false
		}
		for _, s := range slots[1:] {
			st := current(s).c.Status()
			if !st.Fresh || st.Generation != s0.Generation || st.CatalogHash != s0.CatalogHash {
				return false
			}
		}
		return true
	})
	if n := violations.Load(); n > 0 {
		t.Fatalf("%d samples of a node serving a lower generation than before, e.g. %v", n, violation.Load())
	}
}

// Package etcdtest runs etcd inside a test process — one member or a
// cluster of several — and a TCP proxy that can cut it off the way a
// network partition does. Tests that import it build etcd's server: keep
// them out of -race builds (make test runs them without the race detector).
package etcdtest

import (
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// Member is one embedded etcd member.
type Member struct {
	cfg *embed.Config
	mu  sync.Mutex
	e   *embed.Etcd
	// ClientURL is the member's client URL ("http://127.0.0.1:port").
	ClientURL string
}

// Cluster is a set of embedded members forming one etcd cluster.
type Cluster struct {
	Members []*Member
}

// Start starts an n-member cluster on loopback ports and stops it when the
// test ends. A single member is ready in well under a second, three in
// about two.
func Start(t testing.TB, n int) *Cluster {
	t.Helper()
	ports := FreePorts(t, 2*n)
	var initial []string
	c := &Cluster{}
	for i := range n {
		cfg := embed.NewConfig()
		cfg.Name = "m" + strconv.Itoa(i)
		cfg.Dir = t.TempDir()
		cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
		client, _ := url.Parse("http://127.0.0.1:" + strconv.Itoa(ports[2*i]))
		peer, _ := url.Parse("http://127.0.0.1:" + strconv.Itoa(ports[2*i+1]))
		cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{*client}, []url.URL{*client}
		cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*peer}, []url.URL{*peer}
		initial = append(initial, cfg.Name+"="+peer.String())
		c.Members = append(c.Members, &Member{cfg: cfg, ClientURL: client.String()})
	}
	for _, m := range c.Members {
		m.cfg.InitialCluster = strings.Join(initial, ",")
		m.cfg.InitialClusterToken = "etcdtest"
	}
	// Members of a new cluster wait for each other: start them together.
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i, m := range c.Members {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = m.start() }()
	}
	wg.Wait()
	t.Cleanup(c.Stop)
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// ClientURLs are the members' client URLs.
func (c *Cluster) ClientURLs() []string {
	var out []string
	for _, m := range c.Members {
		out = append(out, m.ClientURL)
	}
	return out
}

// Stop stops every member (each takes up to several seconds while clients
// keep watches open: close clients first where that matters).
func (c *Cluster) Stop() {
	var wg sync.WaitGroup
	for _, m := range c.Members {
		wg.Add(1)
		go func() { defer wg.Done(); m.Stop() }()
	}
	wg.Wait()
}

// Leader returns the member that leads, or nil.
func (c *Cluster) Leader() *Member {
	for _, m := range c.Members {
		m.mu.Lock()
		e := m.e
		m.mu.Unlock()
		if e != nil && e.Server.Leader() == e.Server.MemberID() {
			return m
		}
	}
	return nil
}

func (m *Member) start() error {
	e, err := embed.StartEtcd(m.cfg)
	if err != nil {
		return err
	}
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(30 * time.Second):
		e.Close()
		return errTimeout
	}
	m.mu.Lock()
	m.e = e
	m.mu.Unlock()
	return nil
}

// Restart starts a stopped member again on its data.
func (m *Member) Restart(t testing.TB) {
	t.Helper()
	if err := m.start(); err != nil {
		t.Fatal(err)
	}
}

// Stop stops the member (a no-op when it is stopped).
func (m *Member) Stop() {
	m.mu.Lock()
	e := m.e
	m.e = nil
	m.mu.Unlock()
	if e != nil {
		e.Close()
	}
}

type timeoutError struct{}

func (timeoutError) Error() string { return "etcdtest: member not ready within 30s" }

var errTimeout = timeoutError{}

// FreePorts returns n loopback ports free at the moment of the call.
func FreePorts(t testing.TB, n int) []int {
	t.Helper()
	var out []int
	var lns []net.Listener
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, ln)
		out = append(out, ln.Addr().(*net.TCPAddr).Port)
	}
	for _, ln := range lns {
		_ = ln.Close()
	}
	return out
}

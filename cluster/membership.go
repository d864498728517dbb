package cluster

// The node's membership: a lease, the member record under it and the
// holder keys of the catalog's artifacts, kept by one loop of Run.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"sync"
	"time"

	"github.com/cockroachdb/errors"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/latent-node/latent-node/catalog"
	"github.com/latent-node/latent-node/vocab"
)

// membership keeps this node a member of the cluster. Its lock is a leaf.
type membership struct {
	cli    *clientv3.Client
	k      keys
	cfg    *Config
	cat    *catalog.Catalog
	log    *slog.Logger
	peers  *peers
	status func() Status // the record publishes the node's status
	// changed tells the loop to write the member record (buffered, one
	// pending).
	changed chan struct{}
	// noRevoke leaves the lease to expire when Run ends, as a crashed
	// node's does (tests).
	noRevoke bool

	mu struct {
		sync.Mutex
		lease     clientv3.LeaseID // 0 while the node has no lease
		published Member           // the member record last written
	}
}

// ensureToken reads the peer token, making it first if the cluster has
// none.
func (m *membership) ensureToken(ctx context.Context) error {
	if m.peers.token() != "" {
		return nil
	}
	var b [32]byte
	_, _ = rand.Read(b[:])
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	key := m.k.secret()
	resp, err := m.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, hex.EncodeToString(b[:]))).Else(clientv3.OpGet(key)).Commit()
	if err != nil {
		return errors.Wrap(err, "cluster: peer token")
	}
	token := hex.EncodeToString(b[:])
	if !resp.Succeeded {
		kvs := resp.Responses[0].GetResponseRange().Kvs
		if len(kvs) != 1 {
			return errors.New("cluster: peer token vanished")
		}
		token = string(kvs[0].Value)
	}
	m.peers.setToken(token, time.Now())
	return nil
}

// run keeps a lease, the member record and the holder keys of the
// catalog's artifacts under it; on a lost lease it starts over.
func (m *membership) run(ctx context.Context) {
	for ctx.Err() == nil {
		if err := m.ensureToken(ctx); err != nil {
			m.log.Debug("cluster: no peer token yet", "err", err)
			if !wait(ctx, retryDelay) {
				return
			}
			continue
		}
		if err := m.leased(ctx); err != nil && ctx.Err() == nil {
			m.log.Warn("cluster: membership lease lost; starting over", "err", err)
		}
		m.mu.Lock()
		m.mu.lease, m.mu.published = 0, Member{}
		m.mu.Unlock()
		if !wait(ctx, retryDelay) {
			return
		}
	}
}

// leased runs one lease: grant, record, holdings, keep-alive, and the
// record again on every change.
func (m *membership) leased(ctx context.Context) error {
	gctx, cancel := context.WithTimeout(ctx, opTimeout)
	lease, err := m.cli.Grant(gctx, int64(max(m.cfg.LeaseTTL/time.Second, 1)))
	cancel()
	if err != nil {
		return errors.Wrap(err, "grant")
	}
	lctx, stop := context.WithCancel(ctx)
	defer stop()
	alive, err := m.cli.KeepAlive(lctx, lease.ID)
	if err != nil {
		return errors.Wrap(err, "keep-alive")
	}
	m.mu.Lock()
	m.mu.lease = lease.ID
	m.mu.Unlock()
	if err := m.publish(ctx); err != nil {
		return err
	}
	for _, d := range m.cat.Pin().Artifacts() {
		if err := m.hold(ctx, d); err != nil {
			return err
		}
	}
	tick := time.NewTicker(m.cfg.LeaseTTL / 3)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			if !m.noRevoke {
				rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
				_, _ = m.cli.Revoke(rctx, lease.ID) // leave at once instead of after the TTL
				cancel()
			}
			return nil
		case _, ok := <-alive:
			if !ok {
				return errors.New("keep-alive ended")
			}
		case <-m.changed:
			if err := m.publish(ctx); err != nil {
				return err
			}
		case <-tick.C:
			if err := m.publish(ctx); err != nil {
				return err
			}
		}
	}
}

// publish writes the member record when it changed.
func (m *membership) publish(ctx context.Context) error {
	st := m.status()
	rec := Member{ID: m.cfg.NodeID, AdvertiseURL: m.cfg.AdvertiseURL, Version: m.cfg.Version,
		Generation: st.Generation, CatalogHash: st.CatalogHash, Fresh: st.Fresh, Ready: st.Ready}
	m.mu.Lock()
	lease, same := m.mu.lease, m.mu.published == rec
	m.mu.Unlock()
	if same || lease == 0 {
		return nil
	}
	data, _ := json.Marshal(rec)
	pctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	if _, err := m.cli.Put(pctx, m.k.node(m.cfg.NodeID), string(data), clientv3.WithLease(lease)); err != nil {
		return errors.Wrap(err, "member record")
	}
	m.mu.Lock()
	m.mu.published = rec
	m.mu.Unlock()
	return nil
}

// current returns the membership lease, waiting up to opTimeout for
// one (after etcd was unreachable for longer than the TTL, the membership
// loop takes a moment to get a new lease).
func (m *membership) current(ctx context.Context) (clientv3.LeaseID, error) {
	deadline := time.Now().Add(opTimeout)
	for {
		m.mu.Lock()
		lease := m.mu.lease
		m.mu.Unlock()
		if lease != 0 {
			return lease, nil
		}
		if !time.Now().Before(deadline) || !wait(ctx, 20*time.Millisecond) {
			return 0, errors.Wrap(ErrUnavailable, "cluster: no membership lease")
		}
	}
}

// hold records under the lease that this node holds artifact d.
func (m *membership) hold(ctx context.Context, d vocab.Digest) error {
	lease, err := m.current(ctx)
	if err != nil {
		return err
	}
	pctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	_, err = m.cli.Put(pctx, m.k.holder(d, m.cfg.NodeID), "", clientv3.WithLease(lease))
	return errors.Wrap(err, "cluster: record holding")
}

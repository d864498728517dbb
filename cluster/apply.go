package cluster

// The apply loop: listing and watching the services in etcd and applying
// their changes to the local catalog.

import (
	"cmp"
	"context"
	"log/slog"

	"github.com/cockroachdb/errors"
	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/latent-node/latent-node/catalog"
	"github.com/latent-node/latent-node/vocab"
)

// applyLoop lists and watches until ctx ends, listing again after any
// failure, a compaction or a kick.
func (c *Cluster) applyLoop(ctx context.Context) {
	for ctx.Err() == nil {
		rev, err := c.relist(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			c.noteFailure(err)
			if !wait(ctx, retryDelay) {
				return
			}
			continue
		}
		err = c.watch(ctx, rev)
		if err != nil && ctx.Err() == nil {
			c.log.Info("cluster: listing again", "reason", err)
			if !wait(ctx, retryDelay) {
				return
			}
		}
	}
}

// noteFailure records and logs an apply failure (once per distinct
// message).
func (c *Cluster) noteFailure(err error) {
	c.mu.Lock()
	prev := c.mu.applyErr
	c.mu.Unlock()
	if prev == nil || prev.Error() != err.Error() {
		level := slog.LevelWarn
		if errors.Is(err, ErrUnavailable) {
			level = slog.LevelInfo
		}
		c.log.Log(context.Background(), level, "cluster: catalog not applied", "err", err)
	}
	c.noteApplied(err)
}

// defaultListPage is Config.ListPage's default.
const defaultListPage = 10_000

func (c *Cluster) listPage() int { return cmp.Or(max(c.cfg.ListPage, 0), defaultListPage) }

// relist reads every service record and the head at one revision, in
// pages of Config.ListPage records (etcd answers a page at a time and each page
// is decoded and dropped before the next is read), fetches the artifacts
// the catalog lacks and replaces the catalog at the head's revision. It
// returns the listing's revision, where the watch starts.
func (c *Cluster) relist(ctx context.Context) (int64, error) {
	lctx, cancel := context.WithTimeout(ctx, opTimeout)
	prefix := c.k.services()
	end := clientv3.GetPrefixRangeEnd(prefix)
	resp, err := c.cli.Txn(lctx).Then(clientv3.OpGet(prefix, clientv3.WithRange(end), clientv3.WithLimit(int64(c.listPage()))), clientv3.OpGet(c.k.head())).Commit()
	cancel()
	if err != nil {
		return 0, errors.Mark(errors.Wrap(err, "cluster: list"), ErrUnavailable)
	}
	rev := resp.Header.Revision
	var headRev int64
	if kvs := resp.Responses[1].GetResponseRange().Kvs; len(kvs) == 1 {
		headRev = kvs[0].ModRevision
	}
	var manifests []vocab.Manifest
	page := resp.Responses[0].GetResponseRange()
	for {
		for _, kv := range page.Kvs {
			t, s, ok := c.k.serviceOf(string(kv.Key))
			if !ok {
				continue
			}
			rec, err := decodeRecord(kv.Value)
			if err != nil || rec.Manifest.Tenant != t || rec.Manifest.Service != s {
				return 0, errors.Newf("cluster: the record of %s/%s does not decode to its service", t, s)
			}
			manifests = append(manifests, rec.Manifest)
		}
		if !page.More || len(page.Kvs) == 0 {
			break
		}
		from := string(page.Kvs[len(page.Kvs)-1].Key) + "\x00"
		// The same revision as the first page: the listing is one state
		// of etcd (a compaction past it fails the read, and the loop lists
		// again).
		pctx, cancel := context.WithTimeout(ctx, opTimeout)
		next, err := c.cli.Get(pctx, from, clientv3.WithRange(end), clientv3.WithRev(rev), clientv3.WithLimit(int64(c.listPage())))
		cancel()
		if err != nil {
			return 0, errors.Mark(errors.Wrap(err, "cluster: list"), ErrUnavailable)
		}
		page = (*etcdserverpb.RangeResponse)(next)
	}
	pin := c.cat.Pin()
	switch gen := vocab.Generation(headRev); {
	case gen < pin.Generation():
		return 0, errors.Wrapf(ErrBehind, "cluster: etcd's head is generation %d, this node serves %d: was etcd restored from an older backup? the node keeps its catalog and refuses the history",
			gen, pin.Generation())
	}
	for _, m := range manifests {
		if err := c.art.ensure(ctx, m); err != nil {
			return 0, err
		}
	}
	type serviceKey struct {
		t vocab.TenantID
		s vocab.ServiceName
	}
	listed := make([]serviceKey, len(manifests))
	for i, m := range manifests {
		listed[i] = serviceKey{m.Tenant, m.Service}
	}
	before := c.cat.Pin()
	// manifests is not read after this call, and Replace drops its own
	// hold once they are prepared: a large listing is not kept twice.
	if err := c.cat.Replace(ctx, vocab.Generation(headRev), manifests); err != nil {
		return 0, errors.Wrap(err, "cluster: replace the catalog")
	}
	if c.cfg.OnApply != nil {
		for _, svc := range before.AllServices() {
			c.cfg.OnApply(svc.Tenant, svc.Service)
		}
		for _, k := range listed {
			c.cfg.OnApply(k.t, k.s)
		}
	}
	c.mu.Lock()
	c.mu.synced = true
	c.mu.Unlock()
	c.noteApplied(nil)
	return rev, nil
}

// watch applies the changes to the services from rev on, one revision at a
// time, until the watch ends (compaction, an error, a kick) or ctx does.
func (c *Cluster) watch(ctx context.Context, rev int64) error {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	ch := c.cli.Watch(wctx, c.k.services(), clientv3.WithPrefix(), clientv3.WithRev(rev))
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-c.kick:
			return errors.New("catalog behind the cluster's head")
		case resp, ok := <-ch:
			if !ok {
				return errors.New("watch closed")
			}
			if resp.CompactRevision != 0 {
				return errors.Newf("history compacted at %d", resp.CompactRevision)
			}
			if err := resp.Err(); err != nil {
				if errors.Is(err, rpctypes.ErrCompacted) {
					return errors.Wrap(err, "history compacted")
				}
				return errors.Wrap(err, "watch")
			}
			if err := c.applyEvents(ctx, resp.Events); err != nil {
				c.noteFailure(err)
				return err
			}
		}
	}
}

// applyEvents applies events, grouped by revision (one deploy or delete
// each), skipping those the catalog already has.
func (c *Cluster) applyEvents(ctx context.Context, events []*clientv3.Event) error {
	for len(events) > 0 {
		rev := events[0].Kv.ModRevision
		n := 1
		for n < len(events) && events[n].Kv.ModRevision == rev {
			n++
		}
		group := events[:n]
		events = events[n:]
		if vocab.Generation(rev) <= c.cat.Pin().Generation() {
			continue
		}
		var changes []catalog.Change
		for _, ev := range group {
			t, s, ok := c.k.serviceOf(string(ev.Kv.Key))
			if !ok {
				continue
			}
			ch := catalog.Change{Tenant: t, Service: s}
			if ev.Type == mvccpb.PUT {
				rec, err := decodeRecord(ev.Kv.Value)
				if err != nil || rec.Manifest.Tenant != t || rec.Manifest.Service != s {
					return errors.Newf("cluster: the record of %s/%s does not decode to its service", t, s)
				}
				if err := c.art.ensure(ctx, rec.Manifest); err != nil {
					return err
				}
				ch.Manifest = &rec.Manifest
			}
			changes = append(changes, ch)
		}
		if err := c.cat.Apply(ctx, vocab.Generation(rev), changes); err != nil {
			return errors.Wrapf(err, "cluster: apply generation %d", rev)
		}
		if c.cfg.OnApply != nil {
			for _, ch := range changes {
				c.cfg.OnApply(ch.Tenant, ch.Service)
			}
		}
		c.noteApplied(nil)
	}
	return nil
}

package cluster

// The cluster's artifacts: who holds which (holder keys under each
// member's lease), replication to min(Replication, ready members) nodes
// before a release is published, the pending-release announcements that
// let a peer take ownership of an artifact it replicates, and fetching
// from a holder what the local catalog lacks.

import (
	"context"
	"io"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/cockroachdb/errors"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/latent-node/latent-node/catalog"
	"github.com/latent-node/latent-node/vocab"
)

// artifacts replicates and fetches the artifacts of releases. It holds no
// state of its own beyond its collaborators.
type artifacts struct {
	cli     *clientv3.Client
	k       keys
	cfg     *Config
	cat     *catalog.Catalog
	log     *slog.Logger
	peers   *peers
	member  *membership
	members func(ctx context.Context) ([]Member, error)
}

// ensure fetches every artifact of m the catalog lacks for its
// tenant from a holder.
func (a *artifacts) ensure(ctx context.Context, m vocab.Manifest) error {
	var done []vocab.Digest
	for _, r := range m.Revisions {
		if slices.Contains(done, r.Artifact) {
			continue
		}
		done = append(done, r.Artifact)
		if a.cat.Artifacts().Has(m.Tenant, r.Artifact) {
			continue
		}
		if err := a.fetch(ctx, m.Tenant, r.Artifact); err != nil {
			return err
		}
	}
	return nil
}

// fetch stores artifact d for tenant from one of its holders, trying them
// in random order: the catalog verifies the digest, so a holder answering
// other bytes is skipped. It then records this node as a holder too.
func (a *artifacts) fetch(ctx context.Context, tenant vocab.TenantID, d vocab.Digest) error {
	if _, err := vocab.ParseDigest(string(d)); err != nil {
		return errors.Wrap(err, "cluster: fetch")
	}
	hctx, cancel := context.WithTimeout(ctx, opTimeout)
	resp, err := a.cli.Get(hctx, a.k.holders(d), clientv3.WithPrefix(), clientv3.WithKeysOnly())
	cancel()
	if err != nil {
		return errors.Mark(errors.Wrap(err, "cluster: artifact holders"), ErrUnavailable)
	}
	members, err := a.members(ctx)
	if err != nil {
		return err
	}
	urls := map[string]string{}
	for _, m := range members {
		urls[m.ID] = m.AdvertiseURL
	}
	var holders []string
	for _, kv := range resp.Kvs {
		id := strings.TrimPrefix(string(kv.Key), a.k.holders(d))
		if id != a.cfg.NodeID && urls[id] != "" {
			holders = append(holders, id)
		}
	}
	rand.Shuffle(len(holders), func(i, j int) { holders[i], holders[j] = holders[j], holders[i] })
	var errs error
	for _, id := range holders {
		// The catalog bounds the size and verifies the digest while
		// storing. The release was admitted where it was deployed: the
		// tenant's upload quota here does not refuse it (its uploads here
		// wait instead).
		err := a.peers.fetch(ctx, urls[id], d, func(r io.Reader) error { return a.cat.Artifacts().PutRelease(ctx, tenant, d, r) })
		if err == nil {
			if herr := a.member.hold(ctx, d); herr != nil {
				a.log.Info("cluster: artifact fetched but its holding not recorded", "digest", string(d), "err", herr)
			}
			return nil
		}
		a.log.Warn("cluster: artifact from a peer refused", "digest", string(d), "peer", id, "err", err)
		errs = errors.CombineErrors(errs, errors.Wrapf(err, "from %s", id))
	}
	if errs == nil {
		errs = errors.New("no member holds it")
	}
	return errors.Mark(errors.Wrapf(errs, "cluster: fetch artifact %s", d), ErrUnavailable)
}

// replicate makes sure each artifact of m is held by min(Replication,
// ready members) nodes, this one first, by asking ready members that do
// not hold it to fetch it. Before it asks, it announces the pending
// release's artifact for m's tenant in etcd (announce); the keys it wrote
// are appended to announced for the caller to withdraw once the deploy
// ends.
func (a *artifacts) replicate(ctx context.Context, m vocab.Manifest, deployID string, announced *[]string) error {
	members, err := a.members(ctx)
	if err != nil {
		return err
	}
	var ready []Member
	for _, mem := range members {
		if mem.Ready && mem.ID != a.cfg.NodeID {
			ready = append(ready, mem)
		}
	}
	need := min(a.cfg.Replication, len(ready)+1)
	var done []vocab.Digest
	for _, r := range m.Revisions {
		d := r.Artifact
		if slices.Contains(done, d) {
			continue
		}
		done = append(done, d)
		hctx, cancel := context.WithTimeout(ctx, opTimeout)
		resp, err := a.cli.Get(hctx, a.k.holders(d), clientv3.WithPrefix(), clientv3.WithKeysOnly())
		cancel()
		if err != nil {
			return errors.Mark(errors.Wrap(err, "cluster: artifact holders"), ErrUnavailable)
		}
		held := map[string]bool{}
		for _, kv := range resp.Kvs {
			held[strings.TrimPrefix(string(kv.Key), a.k.holders(d))] = true
		}
		if !held[a.cfg.NodeID] { // a holding is written once, under the lease
			if err := a.member.hold(ctx, d); err != nil {
				return err
			}
		}
		count := 0
		for _, mem := range ready {
			if held[mem.ID] {
				count++
			}
		}
		count++ // this node
		var errs error
		for _, mem := range ready {
			if count >= need {
				break
			}
			if held[mem.ID] {
				continue
			}
			if !slices.Contains(*announced, a.k.pendings(m.Tenant, d)+deployID) {
				key, err := a.announce(ctx, m.Tenant, d, deployID)
				if err != nil {
					return err
				}
				*announced = append(*announced, key)
			}
			if err := a.peers.askReplicate(ctx, mem, m.Tenant, d); err != nil {
				errs = errors.CombineErrors(errs, errors.Wrapf(err, "%s", mem.ID))
				continue
			}
			count++
		}
		if count < need {
			return errors.Mark(errors.Wrapf(errs, "cluster: artifact %s is held by %d of the %d nodes required", d, count, need),
				ErrUnavailable)
		}
	}
	return nil
}

// serve is Replicate: a peer's request to hold d for tenant.
func (a *artifacts) serve(ctx context.Context, tenant vocab.TenantID, d vocab.Digest) error {
	if _, err := vocab.ParseDigest(string(d)); err != nil {
		return errors.Wrap(err, "cluster: replicate")
	}
	if a.cat.Artifacts().Has(tenant, d) {
		return a.member.hold(ctx, d)
	}
	gctx, cancel := context.WithTimeout(ctx, opTimeout)
	resp, err := a.cli.Get(gctx, a.k.pendings(tenant, d), clientv3.WithPrefix(), clientv3.WithCountOnly())
	cancel()
	if err != nil {
		return errors.Mark(errors.Wrap(err, "cluster: read pending releases"), ErrUnavailable)
	}
	if resp.Count == 0 {
		return errors.Wrapf(ErrNotPending, "cluster: replicate %s for %s", d, tenant)
	}
	return a.fetch(ctx, tenant, d)
}

// announce writes, under the membership lease, that the deploy deployID of a release
// of tenant naming d is under way on this node (Replicate's rule), and
// returns the key.
func (a *artifacts) announce(ctx context.Context, tenant vocab.TenantID, d vocab.Digest, deployID string) (string, error) {
	lease, err := a.member.current(ctx)
	if err != nil {
		return "", err
	}
	key := a.k.pendings(tenant, d) + deployID
	pctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	if _, err := a.cli.Put(pctx, key, "", clientv3.WithLease(lease)); err != nil {
		return "", errors.Mark(errors.Wrap(err, "cluster: announce a pending release"), ErrUnavailable)
	}
	return key, nil
}

// withdraw removes a deploy's announcements (what is left ends with the
// lease).
func (a *artifacts) withdraw(ctx context.Context, announced []string) {
	for _, key := range announced {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), opTimeout)
		if _, err := a.cli.Delete(dctx, key); err != nil {
			a.log.Info("cluster: pending release announcement left to its lease", "key", key, "err", err)
		}
		cancel()
	}
}

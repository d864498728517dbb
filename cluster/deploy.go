package cluster

// Deploys and deletes through the cluster: the compare-and-swap commit in
// etcd, the wait for the members to apply it, and Replicate.

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"time"

	"github.com/cockroachdb/errors"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/latent-node/latent-node/catalog"
	"github.com/latent-node/latent-node/vocab"
)

// maxAttempts bounds Deploy's and Delete's compare-and-swap retries.
const maxAttempts = 5

// Result is a deploy or delete through the cluster.
type Result struct {
	// Deployment is the release as published (zero for a delete).
	Deployment vocab.Deployment
	// Generation is the etcd revision of the change.
	Generation vocab.Generation
	// Applied counts the ready members (this node included) whose catalog
	// reached Generation before the answer; Members counts the ready
	// members.
	Applied, Members int
	// ApplyTime is the time from the commit until the last of the Applied
	// members had applied it.
	ApplyTime time.Duration
}

// Deploy publishes m through the cluster: checked and inspected against
// this node's catalog, its artifacts replicated, committed in one
// transaction, applied here, and waited for on the other ready members
// (OthersWait). The catalog's errors come back as they are (field
// problems, quotas); ErrUnavailable when etcd or a stale catalog stops it,
// ErrCommitUnknown when the outcome could not be read back.
//
// A new service is counted against its tenant's quota on this node's view;
// the commit holds only if no service of the tenant was created or deleted
// since that view (the tenant's census key), else the node catches up and
// checks again — so nodes deploying new services of one tenant at once
// cannot pass its max_services_per_tenant together.
func (c *Cluster) Deploy(ctx context.Context, m vocab.Manifest) (Result, error) {
	if !c.Status().Fresh {
		return Result{}, errors.WithHint(errors.Wrap(ErrUnavailable, "cluster: this node's catalog is not known to be current"),
			"deploys resume once the node reaches etcd again")
	}
	replicated := false
	// The pending-release keys this deploy writes (replicate), each
	// ending in an id unique to the deploy.
	var announced []string
	defer func() { c.art.withdraw(ctx, announced) }()
	deployID := c.cfg.NodeID + "." + strconv.FormatUint(c.deploys.Add(1), 10)
	for attempt := 1; ; attempt++ {
		view := c.cat.Pin().Generation() // what Check counts is at least this
		dep, err := c.cat.Check(ctx, m)
		if err != nil {
			return Result{}, err
		}
		if !replicated {
			if err := c.art.replicate(ctx, m, deployID, &announced); err != nil {
				return Result{}, err
			}
			replicated = true
		}
		data, err := json.Marshal(record{Release: dep.Release, Manifest: m})
		if err != nil {
			return Result{}, errors.Wrap(err, "cluster: encode record")
		}
		hd, _ := json.Marshal(head{Tenant: m.Tenant, Service: m.Service, Release: dep.Release})
		if c.beforeCommit != nil {
			c.beforeCommit()
		}
		gen, err := c.commit(ctx, m.Tenant, view, c.k.service(m.Tenant, m.Service), dep.Release,
			clientv3.OpPut(c.k.service(m.Tenant, m.Service), string(data)), clientv3.OpPut(c.k.head(), string(hd)))
		if recount := (*recountError)(nil); errors.As(err, &recount) {
			if attempt >= maxAttempts {
				return Result{}, errors.Wrapf(ErrConflict, "cluster: %s's services changed on each of %d attempts", m.Tenant, maxAttempts)
			}
			wctx, cancel := context.WithTimeout(ctx, applyWait)
			ok := c.waitApplied(wctx, recount.census)
			cancel()
			if !ok {
				return Result{}, errors.Wrapf(ErrUnavailable, "cluster: catching up to generation %d to count %s's services", recount.census, m.Tenant)
			}
			continue
		}
		if err != nil {
			return Result{}, err
		}
		dep.Generation = gen
		res := c.settle(ctx, gen)
		res.Deployment = dep
		return res, nil
	}
}

// recountError is a commit of a new service refused because the tenant's
// services changed after the view its quota was checked on: census is
// the generation of that change.
type recountError struct{ census vocab.Generation }

func (e *recountError) Error() string {
	return "cluster: the tenant's services changed at generation " + strconv.FormatInt(int64(e.census), 10) + " after the quota check"
}

// Delete removes the service through the cluster; catalog.ErrServiceNotFound
// when etcd has no such service.
func (c *Cluster) Delete(ctx context.Context, tenant vocab.TenantID, service vocab.ServiceName) (Result, error) {
	if !c.Status().Fresh {
		return Result{}, errors.WithHint(errors.Wrap(ErrUnavailable, "cluster: this node's catalog is not known to be current"),
			"deletes resume once the node reaches etcd again")
	}
	key := c.k.service(tenant, service)
	hd, _ := json.Marshal(head{Tenant: tenant, Service: service})
	gen, err := c.commit(ctx, tenant, 0, key, "", clientv3.OpDelete(key), clientv3.OpPut(c.k.head(), string(hd)))
	if err != nil {
		return Result{}, err
	}
	return c.settle(ctx, gen), nil
}

// commit runs ops in a transaction that compares key's modification
// revision with the one read just before, retrying on a concurrent
// change. release is what key must hold after the commit ("" for a
// delete): a key already in that state is not written again (a retried
// deploy makes no second generation), and an ambiguous commit is resolved
// by reading key.
//
// A commit that creates or deletes the service also writes its tenant's
// census key; one that creates it holds only if the census did not change
// after view, the generation the tenant's quota was checked on
// (recountError otherwise).
func (c *Cluster) commit(ctx context.Context, tenant vocab.TenantID, view vocab.Generation, key string, release vocab.ReleaseID,
	ops ...clientv3.Op) (vocab.Generation, error) {
	census := c.k.census(tenant)
	for range maxAttempts {
		rev, landed, err := c.state(ctx, key, release)
		if err != nil {
			return 0, err
		}
		if landed {
			if release == "" {
				return 0, catalog.ErrServiceNotFound
			}
			return vocab.Generation(rev), nil
		}
		creates := release != "" && rev == 0
		cmps, then := []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(key), "=", rev)}, ops
		if creates || release == "" {
			then = append(slices.Clone(ops), clientv3.OpPut(census, ""))
		}
		if creates {
			cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(census), "<", int64(view)+1))
		}
		tctx, cancel := context.WithTimeout(ctx, opTimeout)
		resp, err := c.cli.Txn(tctx).If(cmps...).Then(then...).Else(clientv3.OpGet(census)).Commit()
		cancel()
		if err != nil {
			return c.resolve(ctx, key, release, err)
		}
		if resp.Succeeded {
			return vocab.Generation(resp.Header.Revision), nil
		}
		if kvs := resp.Responses[0].GetResponseRange().GetKvs(); creates && len(kvs) == 1 && kvs[0].ModRevision > int64(view) {
			return 0, &recountError{census: vocab.Generation(kvs[0].ModRevision)}
		}
	}
	return 0, errors.Wrapf(ErrConflict, "cluster: %s changed on each of %d attempts", key, maxAttempts)
}

// state reads key: its modification revision (0 when absent) and whether
// it already is in the state release describes (absent for "").
func (c *Cluster) state(ctx context.Context, key string, release vocab.ReleaseID) (int64, bool, error) {
	gctx, cancel := context.WithTimeout(ctx, opTimeout)
	resp, err := c.cli.Get(gctx, key)
	cancel()
	if err != nil {
		return 0, false, errors.Mark(errors.Wrap(err, "cluster: read the service"), ErrUnavailable)
	}
	if len(resp.Kvs) == 0 {
		return 0, release == "", nil
	}
	kv := resp.Kvs[0]
	rec, err := decodeRecord(kv.Value)
	if err != nil {
		return 0, false, err
	}
	return kv.ModRevision, release != "" && rec.Release == release, nil
}

// resolve reads key again after a commit whose answer was lost: the
// release id says whether it landed.
func (c *Cluster) resolve(ctx context.Context, key string, release vocab.ReleaseID, cause error) (vocab.Generation, error) {
	deadline := time.Now().Add(opTimeout)
	for time.Now().Before(deadline) {
		rev, landed, err := c.state(ctx, key, release)
		if err == nil {
			if landed && release != "" {
				return vocab.Generation(rev), nil
			}
			if !landed {
				return 0, errors.Mark(errors.Wrap(cause, "cluster: commit"), ErrUnavailable)
			}
			// A delete that landed: the generation is the head's revision.
			if hrev, herr := c.headRevision(ctx); herr == nil {
				return vocab.Generation(hrev), nil
			}
		}
		if !wait(ctx, retryDelay) {
			break
		}
	}
	return 0, errors.WithHint(errors.Wrap(errors.Mark(cause, ErrCommitUnknown), "cluster: commit"),
		"deploying or deleting again is safe: a change that landed is not made twice")
}

func (c *Cluster) headRevision(ctx context.Context) (int64, error) {
	gctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	resp, err := c.cli.Get(gctx, c.k.head())
	if err != nil || len(resp.Kvs) != 1 {
		return 0, errors.New("cluster: no head")
	}
	return resp.Kvs[0].ModRevision, nil
}

// settle waits until this node applied gen (applyWait), then asks every
// other ready member, in parallel, to answer once it applied gen too
// (OthersWait), and counts them. The members' own records follow
// asynchronously; asking them directly keeps etcd writes off the answer's
// path.
func (c *Cluster) settle(ctx context.Context, gen vocab.Generation) (res Result) {
	committed := time.Now()
	defer func() { res.ApplyTime = time.Since(committed) }()
	wctx, cancel := context.WithTimeout(ctx, applyWait)
	local := c.waitApplied(wctx, gen)
	cancel()
	res.Generation = gen
	members, err := c.Members(ctx)
	if err != nil {
		if local {
			res.Applied, res.Members = 1, 1
		}
		return res
	}
	var others []Member
	for _, m := range members {
		if m.Ready && m.ID != c.cfg.NodeID {
			others = append(others, m)
		}
	}
	res.Members = len(others) + 1
	if local {
		res.Applied = 1
	}
	octx, cancel := context.WithTimeout(ctx, c.cfg.OthersWait)
	defer cancel()
	applied := make(chan bool, len(others))
	for _, m := range others {
		go func() { applied <- c.peers.askApplied(octx, m, gen) }()
	}
	for range others {
		if <-applied {
			res.Applied++
		}
	}
	return res
}

// WaitApplied waits until this node's catalog reached gen or ctx ends, and
// reports which: a peer's question before it answers a deploy.
func (c *Cluster) WaitApplied(ctx context.Context, gen vocab.Generation) bool {
	return c.waitApplied(ctx, gen)
}

// Replicate stores artifact d for tenant, fetched from a holder unless the
// catalog has it, and records this node as a holder: a peer's request
// before it publishes a release naming d.
//
// The rule: a tenant that owns d here needs nothing new (the holding is
// recorded). Otherwise d is fetched, and the tenant made its owner here,
// only while etcd holds an announcement that a deploy of a release of that
// tenant naming d is under way (written by the deploying node, under its
// membership lease, after its catalog checked that the tenant owns d;
// withdrawn when the deploy ends): ErrNotPending otherwise. The peer
// token alone therefore grants no ownership; writing the announcement
// needs write access to etcd, which every member has anyway.
func (c *Cluster) Replicate(ctx context.Context, tenant vocab.TenantID, d vocab.Digest) error {
	return c.art.serve(ctx, tenant, d)
}

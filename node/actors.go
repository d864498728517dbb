package node

// This file lists the node's actors: the loops a node needs for its whole
// life besides serving HTTP. serve runs them in its oklog/run group; tests
// and embedders run them with Go. Nobody picks a subset by hand: a missing
// actor degrades the node silently (without the front yield, for one,
// guests never give their processors to the network front).

import (
	"context"
	"sync"
	"time"

	"github.com/cockroachdb/errors"
)

// Actor is one long-running part of the node. Run works until ctx ends and
// then returns nil; an error means the node cannot go on.
type Actor struct {
	Name string
	Run  func(ctx context.Context) error
}

// RejectionLogInterval is how often the aggregated refusal line is written.
const RejectionLogInterval = 10 * time.Second

// Actors lists every actor of the node, in a fixed order; the cluster actor
// only when the node has a [cluster] section. Run each for the node's
// lifetime and Close the node after they stopped.
func (n *Node) Actors() []Actor {
	as := []Actor{
		{Name: "scheduler", Run: n.sched.Run},
		{Name: "load-sampler", Run: n.sampler.Run},
		{Name: "cells", Run: n.pool.Run},
		{Name: "front-yield", Run: n.yield.Run},
		{Name: "artifact-collection", Run: func(ctx context.Context) error {
			return n.collectArtifacts(ctx, CollectInterval(n.cfg))
		}},
		{Name: "rejection-log", Run: func(ctx context.Context) error {
			return n.rejections.Run(ctx, n.log, RejectionLogInterval)
		}},
		{Name: "warm-sweep", Run: n.run.SweepWarm},
		{Name: "history", Run: n.views.RunHistory},
	}
	if n.cluster != nil {
		as = append(as, Actor{Name: "cluster", Run: n.cluster.Run})
	}
	return as
}

// Go runs each actor on a goroutine of its own until ctx ends and returns a
// function that waits for them all and reports their errors. It is for
// tests and embedders; serve uses an oklog/run group, which also stops the
// other actors when one fails.
func Go(ctx context.Context, actors []Actor) (wait func() error) {
	var wg sync.WaitGroup
	errs := make([]error, len(actors))
	for i, a := range actors {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := a.Run(ctx); err != nil {
				errs[i] = errors.Wrapf(err, "actor %s", a.Name)
			}
		}()
	}
	return func() error {
		wg.Wait()
		return errors.Join(errs...)
	}
}

package main

// The latent runner's side of the benchmark: a catalog, admission and the
// runner, with cells from a cellpool or wazero's default allocator.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"os"
	"runtime"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/latent-node/latent-node/admission"
	"github.com/latent-node/latent-node/catalog"
	"github.com/latent-node/latent-node/cellpool"
	"github.com/latent-node/latent-node/internal/testutil/admissiontest"
	"github.com/latent-node/latent-node/loadsource"
	"github.com/latent-node/latent-node/runner"
	"github.com/latent-node/latent-node/vocab"
)

// cellSource leases the runner.Cell of an activation.
type cellSource interface {
	name() string
	lease(ctx context.Context, class vocab.CellClass) (runner.Cell, error)
	release(c runner.Cell, quarantine bool) error
}

// poolCells leases cells from a cellpool.Pool: pooled linear memory,
// reserved once per cell and reset at release.
type poolCells struct{ p *cellpool.Pool }

func (poolCells) name() string { return "cellpool" }

func (s poolCells) lease(ctx context.Context, class vocab.CellClass) (runner.Cell, error) {
	l, err := s.p.Lease(ctx, class)
	if err != nil {
		return nil, errors.Wrap(err, "runnerbench: lease cell")
	}
	return l, nil
}

func (poolCells) release(c runner.Cell, quarantine bool) error {
	d := cellpool.Reuse
	if quarantine {
		d = cellpool.Quarantine
	}
	return errors.Wrap(c.(*cellpool.Lease).Release(d), "runnerbench: release cell")
}

// heapCells leases a cell that leaves ctx unchanged: wazero allocates linear
// memory itself, on the Go heap, once per instantiation.
type heapCells struct{}

type defaultCell struct{}

func (defaultCell) WithMemory(ctx context.Context, _ uint64) context.Context { return ctx }

func (defaultCell) AbandonMemory() {}

var (
	_ runner.Cell = defaultCell{}
	_ runner.Cell = (*cellpool.Lease)(nil)
)

func (heapCells) name() string { return "default-allocator" }

func (heapCells) lease(context.Context, vocab.CellClass) (runner.Cell, error) {
	return defaultCell{}, nil
}

func (heapCells) release(runner.Cell, bool) error { return nil }

// latentEnv is the path an activation takes in the node: a catalog whose
// inspector is the Runner (modules are instrumented and compiled at deploy),
// the admission ledger, and the Runner.
type latentEnv struct {
	r    *runner.Runner
	cat  *catalog.Catalog
	prov *admission.LocalQuotaProvider
	load *loadsource.State
	pool *cellpool.Pool
	dir  string
	seq  atomic.Uint64
}

// cellMemoryBytes is the pool's memory per cell: the manifests' memory
// ceiling, so every grant fits a cell.
const cellMemoryBytes = 64 << 20

func nodeArch() string {
	switch runtime.GOARCH {
	case "amd64":
		return "x86_64"
	case "arm64":
		return "aarch64"
	}
	return runtime.GOARCH
}

// newLatentEnv deploys each guest as service <name> with one route "run".
func newLatentEnv(ctx context.Context, guests map[string][]byte) (*latentEnv, error) {
	r, err := runner.New(ctx, runner.Config{})
	if err != nil {
		return nil, err
	}
	e := &latentEnv{r: r, load: loadsource.NewState(time.Hour)}
	if e.dir, err = os.MkdirTemp("", "runnerbench-"); err != nil {
		_ = r.Close(ctx)
		return nil, errors.Wrap(err, "runnerbench: temp dir")
	}
	if e.pool, err = cellpool.New(cellpool.Config{Classes: map[vocab.CellClass]cellpool.ClassConfig{
		vocab.CellStandard: {Parallelism: 8, MemoryBytes: cellMemoryBytes}}}); err != nil {
		e.close(ctx)
		return nil, errors.Wrap(err, "runnerbench: cell pool")
	}
	if err := e.init(ctx, guests); err != nil {
		e.close(ctx)
		return nil, err
	}
	return e, nil
}

func (e *latentEnv) init(ctx context.Context, guests map[string][]byte) error {
	var err error
	if e.cat, err = catalog.Open(ctx, catalog.Config{Dir: e.dir, Inspector: e.r}); err != nil {
		return errors.Wrap(err, "runnerbench: open catalog")
	}
	policy := admissiontest.Policy(admissiontest.Spec{})
	policy.BudgetCeiling.WallTime = time.Hour
	policy.Placement.Architecture = nodeArch()
	if e.prov, err = admission.NewLocalQuotaProvider(policy, admission.Options{Clock: vocab.WallClock, Load: e.load}); err != nil {
		return errors.Wrap(err, "runnerbench: admission")
	}
	if err := e.publishLoad(); err != nil {
		return err
	}
	for name, wasm := range guests {
		if err := e.deploy(ctx, name, wasm, deployment{}); err != nil {
			return err
		}
	}
	return nil
}

// deployment is how a service runs its module: the revision's instance
// mode and guest ABI ("": fresh, stdio) and the route's function ("":
// _start).
type deployment struct {
	instance, abi string
	function      vocab.FunctionName
}

// deploy deploys wasm as service with one revision v1 and one route "run".
// A snapshot revision is initialised here (the catalog's SnapshotPreparer).
func (e *latentEnv) deploy(ctx context.Context, service string, wasm []byte, how deployment) error {
	ceiling := vocab.ManifestCeiling{CPUFuel: 1 << 40, MemoryBytes: cellMemoryBytes, WallTime: vocab.Duration(10 * time.Minute)}
	d := vocab.DigestOf(sha256.Sum256(wasm))
	if err := e.cat.Artifacts().Put(ctx, "acme", d, bytes.NewReader(wasm)); err != nil {
		return errors.Wrapf(err, "runnerbench: put %s", service)
	}
	m := vocab.Manifest{Tenant: "acme", Service: vocab.ServiceName(service),
		Revisions: []vocab.ManifestRevision{{Name: "v1", Artifact: d, TrustClass: "untrusted", Ceiling: &ceiling,
			Instance: how.instance, ABI: how.abi}},
		Routes: []vocab.ManifestRoute{{Name: "run", Function: how.function,
			Targets: []vocab.ManifestTarget{{Revision: "v1", Weight: 1}}}}}
	if _, err := e.cat.Deploy(ctx, m); err != nil {
		return errors.Wrapf(err, "runnerbench: deploy %s", service)
	}
	return nil
}

// publishLoad keeps admission's load observation fresh (an idle node).
func (e *latentEnv) publishLoad() error {
	err := e.load.Publish(loadsource.Sample{CPU: 0, Memory: 0, TakenAt: time.Now()})
	return errors.Wrap(err, "runnerbench: publish load")
}

func (e *latentEnv) close(ctx context.Context) {
	if e.r != nil {
		_ = e.r.Close(ctx)
	}
	if e.pool != nil {
		_ = e.pool.Close()
	}
	_ = os.RemoveAll(e.dir)
}

// permit resolves service's route in a fresh pin, admits an activation and
// returns its admission permit.
func (e *latentEnv) permit(service string) (*admission.Permit, error) {
	pin := e.cat.Pin()
	rev, err := pin.Resolve(vocab.Target{Tenant: "acme", Service: vocab.ServiceName(service), Route: "run"}, "")
	if err != nil {
		return nil, errors.Wrapf(err, "runnerbench: resolve %s", service)
	}
	id := "bench-" + strconv.FormatUint(e.seq.Add(1), 10)
	p, err := e.prov.WithPolicySource(pin).Admit(&admission.Request{ActivationID: id, Revision: rev,
		Principal: admission.Principal{Subject: "alice", Kind: admission.KindUser, Tenant: "acme"}})
	if err != nil {
		return nil, errors.Wrapf(err, "runnerbench: admit %s", service)
	}
	return p, nil
}

// activate is one whole latent activation: resolve and admit, lease a cell
// from cells, start execution, run (a fresh revision: instantiate, _start,
// classify, close), release the cell and the permit.
func (e *latentEnv) activate(ctx context.Context, cells cellSource, service string, input []byte) (runner.Outcome, error) {
	return e.activateWith(ctx, cells, service, runner.Input{Body: input})
}

// activateWith is activate with the whole input (a WAGI revision's CGI
// environment), through Runner.RunWith as the node calls it.
func (e *latentEnv) activateWith(ctx context.Context, cells cellSource, service string, in runner.Input) (runner.Outcome, error) {
	p, err := e.permit(service)
	if err != nil {
		return runner.Outcome{}, err
	}
	if err := p.EnsureSchedulable(); err != nil {
		_ = p.Release()
		return runner.Outcome{}, errors.Wrap(err, "runnerbench: schedulable")
	}
	cell, err := cells.lease(ctx, p.Obligations().CellClass)
	if err != nil {
		_ = p.Release()
		return runner.Outcome{}, err
	}
	x, err := p.StartExecution()
	if err != nil {
		_ = cells.release(cell, false)
		return runner.Outcome{}, errors.Wrap(err, "runnerbench: start execution")
	}
	out := e.r.RunWith(ctx, x, cell, in)
	err = cells.release(cell, out.Quarantine)
	if rerr := x.Release(); rerr != nil {
		err = errors.CombineErrors(err, errors.Wrap(rerr, "runnerbench: release permit"))
	}
	return out, errors.CombineErrors(checkOutcome(service, out), err)
}

// runOnly is an activation without admission: lease a cell, Run on x (a
// reused permit: Run does not consume it), release the cell.
func (e *latentEnv) runOnly(ctx context.Context, cells cellSource, x *admission.ExecutionPermit, service string, input []byte) (runner.Outcome, error) {
	cell, err := cells.lease(ctx, x.Obligations().CellClass)
	if err != nil {
		return runner.Outcome{}, err
	}
	out := e.r.Run(ctx, x, cell, input)
	err = cells.release(cell, out.Quarantine)
	return out, errors.CombineErrors(checkOutcome(service, out), err)
}

func checkOutcome(service string, out runner.Outcome) error {
	if out.Kind != runner.Success || out.Quarantine {
		return errors.Newf("runnerbench: %s: outcome %s (quarantine %t): %v", service, out.Kind, out.Quarantine, out.Err)
	}
	return nil
}

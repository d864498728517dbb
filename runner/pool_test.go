package runner

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/latent-node/latent-node/admission"
	"github.com/latent-node/latent-node/cellpool"
	"github.com/latent-node/latent-node/internal/testutil"
	"github.com/latent-node/latent-node/internal/testwasm"
	"github.com/latent-node/latent-node/vocab"
)

var _ Cell = (*cellpool.Lease)(nil)

// TestRun_pooledCells_hammer runs 2×parallelism goroutines of activations
// through a cellpool (pooled linear memory) under -race: every outcome is
// the expected one, every cell comes back usable, nothing leaks.
func TestRun_pooledCells_hammer(t *testing.T) {
	e := newEnv(t)
	big := ceiling(1<<40, 16<<20, 10*time.Second)
	e.deploy("echo", testwasm.Bytes(t, "echo"), big)
	e.deploy("compute", testwasm.Bytes(t, "compute"), big)
	e.deploy("grow", testwasm.Bytes(t, "grow"), ceiling(1<<40, 8*vocab.WasmPageBytes, 10*time.Second))
	e.deploy("trap", testwasm.Bytes(t, "trap_oob"), big)
	const parallelism = 3
	pool, err := cellpool.New(cellpool.Config{Classes: map[vocab.CellClass]cellpool.ClassConfig{
		vocab.CellStandard: {Parallelism: parallelism, MemoryBytes: 16 << 20}}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = pool.Close() }()
	rounds := 40
	if testing.Short() {
		rounds = 15
	}
	cases := []struct {
		service, input, stdout string
		kind                   Kind
	}{
		{"echo", "ping", "ping", Success},
		{"compute", "1000", "2926642762503582672\n", Success},
		{"grow", "", "", MemoryExhausted}, // no stack left to print with
		{"trap", "", "", Trap},
	}
	err = testutil.Hammer(2*parallelism, rounds, func(g, i int) error {
		tc := cases[(g+i)%len(cases)]
		if tc.service == "echo" { // unique, so crossed stdio would show
			tc.input = "ping " + strconv.Itoa(g) + "/" + strconv.Itoa(i)
			tc.stdout = tc.input
		}
		lease, err := pool.Lease(context.Background(), vocab.CellStandard)
		if err != nil {
			return err
		}
		x := e.permit(tc.service, admission.BudgetRequest{})
		out := e.r.Run(context.Background(), x, lease, []byte(tc.input))
		disp := cellpool.Reuse
		if out.Quarantine {
			disp = cellpool.Quarantine
		}
		err = errors.CombineErrors(errors.Wrapf(lease.Release(disp), "%s: release", tc.service), x.Release())
		if out.Kind != tc.kind || (tc.stdout != "" && string(out.Stdout) != tc.stdout) {
			err = errors.CombineErrors(err, errors.Newf("%s: want %s %q, have %s %q (%v)",
				tc.service, tc.kind, tc.stdout, out.Kind, out.Stdout, out.Err))
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	st := pool.Stats()[vocab.CellStandard]
	if st.Usable != parallelism || st.Quarantined != 0 || st.LeakedLeases != 0 {
		t.Fatalf("pool after the hammer: %+v", st)
	}
	if s := e.prov.Snapshot(); s.Node.Usage != (admission.Usage{}) {
		t.Fatalf("permits not returned: %+v", s.Node.Usage)
	}
}

package admission

import (
	"context"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/latent-node/latent-node/catalog"
	"github.com/latent-node/latent-node/internal/testutil"
	"github.com/latent-node/latent-node/loadsource"
	"github.com/latent-node/latent-node/refusal"
	"github.com/latent-node/latent-node/vocab"
)

func TestPolicy_Validate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(p *Policy)
		fields []string
	}{
		{"valid", func(p *Policy) {}, nil},
		{"zero ceilings", func(p *Policy) { p.BudgetCeiling = vocab.Budget{} },
			[]string{"BudgetCeiling.CPUFuel", "BudgetCeiling.MemoryBytes", "BudgetCeiling.WallTime"}},
		{"later-phase ceiling", func(p *Policy) { p.BudgetCeiling.Accelerators = 1 }, []string{"BudgetCeiling"}},
		{"no queue classes", func(p *Policy) { p.QueueClasses = nil }, []string{"QueueClasses", "QueueClasses"}},
		{"overlapping queue classes", func(p *Policy) { p.QueueClasses[1].MinPriority = 4 },
			[]string{"QueueClasses[1].MinPriority"}},
		{"gap in priorities", func(p *Policy) { p.QueueClasses[1].MinPriority = 6 }, []string{"QueueClasses"}},
		{"empty range", func(p *Policy) { p.QueueClasses[0].MinPriority = 5 },
			[]string{"QueueClasses[0].MinPriority", "QueueClasses"}},
		{"duplicate queue class", func(p *Policy) { p.QueueClasses[1].Name = "batch" }, []string{"QueueClasses[1].Name"}},
		{"huge priority", func(p *Policy) { p.Limits.MaxPriority = 5000 }, []string{"Limits.MaxPriority"}},
		{"no cell classes", func(p *Policy) { p.CellClasses = nil },
			[]string{"CellClasses", `TrustClasses["trusted"].CellClasses`, `TrustClasses["trusted"].CellClasses`,
				`TrustClasses["trusted"].CellClasses`, `TrustClasses["trusted"].CellClasses`, `TrustClasses["untrusted"].CellClasses`,
				`TrustClasses["untrusted"].CellClasses`, `TrustClasses["untrusted"].CellClasses`,
				`Tenants["acme"].CellClasses`, `Tenants["acme"].CellClasses`, `Tenants["acme"].CellClasses`,
				`Tenants["beta"].CellClasses`, `Tenants["beta"].CellClasses`, `Tenants["beta"].CellClasses`, `Tenants["beta"].CellClasses`}},
		{"bad cell class", func(p *Policy) {
			p.CellClasses[vocab.CellTiny] = CellClassPolicy{}
		}, []string{`CellClasses["tiny"].MemoryBytes`, `CellClasses["tiny"].Parallelism`, `CellClasses["tiny"].Threading`}},
		{"unknown trust class of a tenant", func(p *Policy) {
			t := p.Tenants["acme"]
			t.TrustClasses = []vocab.TrustClass{"secret"}
			p.Tenants["acme"] = t
		}, []string{`Tenants["acme"].TrustClasses`}},
		{"unconfigured cell of a tenant", func(p *Policy) {
			t := p.Tenants["acme"]
			t.CellClasses = append(t.CellClasses, vocab.CellLarge)
			p.Tenants["acme"] = t
		}, []string{`Tenants["acme"].CellClasses`}},
		{"no tenants", func(p *Policy) { p.Tenants = nil }, []string{"Tenants"}},
		{"bad subject", func(p *Policy) {
			t := p.Tenants["acme"]
			t.Subjects = []string{"a b"}
			t.Kinds = []PrincipalKind{9}
			p.Tenants["acme"] = t
		}, []string{`Tenants["acme"].Subjects`, `Tenants["acme"].Kinds`}},
		{"thresholds", func(p *Policy) { p.Overload = OverloadPolicy{CPUThreshold: 1.5} },
			[]string{"Overload.CPUThreshold", "Overload.MemoryThreshold", "Overload.MaxObservationAge"}},
		{"negative deadline settings", func(p *Policy) {
			p.Deadline = DeadlinePolicy{EstimatedServiceTime: -1, MinimumExecutionTime: -1, SafetyMargin: -1}
		}, []string{"Deadline.EstimatedServiceTime", "Deadline.MinimumExecutionTime", "Deadline.SafetyMargin"}},
		{"metadata", func(p *Policy) {
			p.Metadata = MetadataPolicy{MaxIdentifierBytes: 0, MaxEntries: -1, MaxBytes: -1}
		},
			[]string{"Metadata.MaxIdentifierBytes", "Metadata.MaxEntries", "Metadata.MaxBytes"}},
		{"placement", func(p *Policy) { p.Placement.Zone = "" }, []string{"Placement.Zone"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := testPolicy()
			tc.mutate(&p)
			err := p.Validate()
			if tc.fields == nil {
				if err != nil {
					t.Fatalf("want valid, have %v", err)
				}
				return
			}
			var pe *PolicyError
			if !errors.As(err, &pe) || !errors.Is(err, ErrInvalidPolicy) {
				t.Fatalf("want a PolicyError, have %v", err)
			}
			var have []string
			for _, p := range pe.Problems {
				have = append(have, p.Field)
				if _, ok := vocab.FieldPath(p.Field).Steps(); !ok {
					t.Errorf("%q is not a field path", p.Field)
				}
			}
			if !slices.Equal(have, tc.fields) {
				t.Fatalf("want %q, have %q (%v)", tc.fields, have, err)
			}
			if _, err := NewLocalQuotaProvider(p, Options{Clock: testutil.NewClock(time.Time{}), Load: loadsource.NewState(time.Second)}); err == nil {
				t.Fatal("NewLocalQuotaProvider accepted an invalid policy")
			}
		})
	}
	if _, err := NewLocalQuotaProvider(testPolicy(), Options{}); err == nil {
		t.Fatal("NewLocalQuotaProvider accepted missing options")
	}
}

// TestLedger_limitBoundaries sets each scope's fuel and memory limit to
// exactly k grants (and one unit less) and checks the boundary admission.
// images grants 1e8 fuel and 32MiB.
func TestLedger_limitBoundaries(t *testing.T) {
	const fuel, mem = 100_000_000, 32 * mib
	type setter func(p *Policy, v uint64)
	tenant := func(f func(l *Limits, v uint64)) setter {
		return func(p *Policy, v uint64) {
			tp := p.Tenants["acme"]
			f(&tp.Limits.Limits, v)
			p.Tenants["acme"] = tp
		}
	}
	trust := func(f func(l *Limits, v uint64)) setter {
		return func(p *Policy, v uint64) {
			tc := p.TrustClasses["untrusted"]
			f(&tc.Limits, v)
			p.TrustClasses["untrusted"] = tc
		}
	}
	node := func(f func(l *Limits, v uint64)) setter {
		return func(p *Policy, v uint64) { f(&p.Limits.Limits, v) }
	}
	fuelOf := func(l *Limits, v uint64) { l.MaxReservedFuel = v }
	memOf := func(l *Limits, v uint64) { l.MaxReservedMemory = v }
	liveOf := func(l *Limits, v uint64) { l.MaxLiveActivations = v }
	queuedOf := func(l *Limits, v uint64) { l.MaxQueued = v }
	tests := []struct {
		name string
		set  setter
		unit uint64
		rej  *Rejection
	}{
		{"node fuel", node(fuelOf), fuel, rejCapacity[scopeNode][dimFuel]},
		{"node memory", node(memOf), mem, rejCapacity[scopeNode][dimMemory]},
		{"node live", node(liveOf), 1, rejCapacity[scopeNode][dimLive]},
		{"node queued", node(queuedOf), 1, rejCapacity[scopeNode][dimQueued]},
		{"tenant fuel", tenant(fuelOf), fuel, rejCapacity[scopeTenant][dimFuel]},
		{"tenant memory", tenant(memOf), mem, rejCapacity[scopeTenant][dimMemory]},
		{"tenant live", tenant(liveOf), 1, rejCapacity[scopeTenant][dimLive]},
		{"tenant queued", tenant(queuedOf), 1, rejCapacity[scopeTenant][dimQueued]},
		{"trust fuel", trust(fuelOf), fuel, rejCapacity[scopeTrust][dimFuel]},
		{"trust memory", trust(memOf), mem, rejCapacity[scopeTrust][dimMemory]},
		{"trust live", trust(liveOf), 1, rejCapacity[scopeTrust][dimLive]},
		{"trust queued", trust(queuedOf), 1, rejCapacity[scopeTrust][dimQueued]},
	}
	for _, tc := range tests {
		for _, k := range []uint64{0, 1, 3} {
			for _, delta := range []uint64{0, 1} {
				if k == 0 && delta == 1 {
					continue
				}
				t.Run(tc.name+"/"+strconv.FormatUint(k, 10)+"-"+strconv.FormatUint(delta, 10), func(t *testing.T) {
					p := testPolicy()
					tc.set(&p, k*tc.unit-delta)
					h := newHarness(t, p)
					// k activations fit exactly at limit k·unit; at k·unit−1 only k−1 do.
					fit := k
					if delta == 1 {
						fit = k - 1
					}
					var permits []*Permit
					for i := uint64(0); i < fit; i++ {
						prio := uint32(5 * (i % 2)) // spread over both queue classes
						req := h.request("a"+strconv.FormatUint(i, 10), "acme", "images")
						req.Priority = prio
						pm, err := h.admit(req)
						if err != nil {
							t.Fatalf("activation %d of %d refused: %v", i+1, fit, err)
						}
						permits = append(permits, pm)
					}
					_, err := h.admit(h.request("over", "acme", "images"))
					if err != tc.rej {
						t.Fatalf("want %v, have %v", tc.rej, err)
					}
					for _, pm := range permits {
						if err := pm.Release(); err != nil {
							t.Fatal(err)
						}
					}
					if s := formatSnapshot(h.prov.Snapshot()); s != "empty" {
						t.Fatalf("residue after release:\n%s", s)
					}
				})
			}
		}
	}
}

func TestRejection_sanitizedAndRetryable(t *testing.T) {
	retryable := map[refusal.Reason]bool{
		refusal.ReasonCapacityExhausted: true, refusal.ReasonNodeOverloaded: true, refusal.ReasonQueueDeadlineInfeasible: true,
		refusal.ReasonLoadSampleMissing: true, refusal.ReasonLoadSampleMalformed: true, refusal.ReasonLoadSampleOutOfOrder: true,
		refusal.ReasonLoadSampleFuture: true, refusal.ReasonLoadSampleStale: true, refusal.ReasonLoadSourceUnavailable: true,
	}
	all := []*Rejection{rejPrincipal, rejServiceIdentity, rejPriorityNode, rejPriorityTenant, rejTrustClass, rejCellClass,
		rejActivationID, rejSubject, rejTargetName, rejGeneratedID, rejMetadataEntries, rejMetadataBytes, rejMetadataKey,
		rejRevision, rejPlacement, rejThreading, rejFeatures, rejNoCell, rejInfeasible, rejPayloadNode, rejPayloadTenant,
		rejOverloadCPU, rejOverloadMemory, rejDeadline, rejDuplicate, rejZeroFuel, rejZeroMemory, rejZeroWall,
		rejMemoryBelowMin, rejNetworkDimension, rejStorageDimension, rejAccelDimension, rejDeadlineInQueue,
		rejUnavailableOther}
	for _, r := range rejUnavailable {
		all = append(all, r)
	}
	for _, s := range rejCapacity {
		all = append(all, s[:]...)
	}
	all = append(all, rejArithmetic)
	for _, r := range all {
		if r.Retryable != retryable[r.Reason] {
			t.Errorf("%v: retryable=%v, want %v", r, r.Retryable, retryable[r.Reason])
		}
		if !errors.Is(r, &Rejection{Code: r.Code}) || !errors.Is(errors.Wrap(r, "context"), &Rejection{Code: r.Code, Reason: r.Reason}) {
			t.Errorf("%v does not match its sentinels through errors.Is", r)
		}
		if errors.Is(r, &Rejection{Code: refusal.Code(200)}) {
			t.Errorf("%v matches a foreign code", r)
		}
	}
	if !errors.Is(rejCapacity[scopeTenant][dimFuel], ErrCapacityExhausted) || errors.Is(rejPayloadNode, ErrCapacityExhausted) {
		t.Error("reason sentinels do not discriminate")
	}

	// Drive real rejections with distinctive identities and check no message
	// echoes them.
	h := newHarness(t, testPolicy())
	secrets := []string{"acme", "alice", "images", "mallory", "SECRETVALUE", "0.95", "beta", "bob"}
	reqs := []func() *Request{
		func() *Request { r := h.request("a", "acme", "images"); r.Principal.Subject = "mallory"; return r },
		func() *Request { r := h.request("a", "acme", "images"); r.Principal.Tenant = "beta"; return r },
		func() *Request {
			r := h.request("a", "acme", "images")
			r.Attributes = []vocab.Attribute{{Key: "k", Value: strings.Repeat("SECRETVALUE", 20)}}
			return r
		},
		func() *Request { r := h.request("a", "acme", "images"); r.PayloadBytes = 1 << 30; return r },
		func() *Request { r := h.request("a", "acme", "trusted"); return r },
		func() *Request { r := h.request("a", "acme", "huge"); return r },
	}
	h.setLoad(0.95, 0.1)
	reqs = append(reqs, func() *Request { return h.request("b", "acme", "images") })
	for _, mk := range reqs {
		_, err := h.admit(mk())
		if err == nil {
			t.Fatal("expected a rejection")
		}
		for _, s := range secrets {
			if strings.Contains(err.Error(), s) {
				t.Errorf("rejection %q echoes %q", err, s)
			}
		}
	}
}

func TestPermit_ownership(t *testing.T) {
	h := newHarness(t, testPolicy())
	var zero Permit
	if _, err := zero.StartExecution(); !errors.Is(err, ErrPermitInvalid) {
		t.Fatalf("zero permit started: %v", err)
	}
	if err := zero.Release(); !errors.Is(err, ErrPermitInvalid) {
		t.Fatalf("zero permit released: %v", err)
	}
	if err := zero.EnsureSchedulable(); !errors.Is(err, ErrPermitInvalid) {
		t.Fatalf("zero permit schedulable: %v", err)
	}
	var zeroExec ExecutionPermit
	if err := zeroExec.Release(); !errors.Is(err, ErrPermitInvalid) {
		t.Fatalf("zero execution permit released: %v", err)
	}

	// A stale permit (same id, earlier reservation) never releases a newer
	// reservation of that id.
	first, err := h.admit(h.request("dup", "acme", "images"))
	if err != nil {
		t.Fatal(err)
	}
	stale := &Permit{permitCore: first.permitCore} // what a copy would hold
	if err := first.Release(); err != nil {
		t.Fatal(err)
	}
	second, err := h.admit(h.request("dup", "acme", "images"))
	if err != nil {
		t.Fatal(err)
	}
	if err := stale.Release(); !errors.Is(err, ErrPermitUsed) {
		t.Fatalf("a stale permit released: %v", err)
	}
	if _, err := stale.StartExecution(); !errors.Is(err, ErrPermitUsed) {
		t.Fatalf("a stale permit started: %v", err)
	}
	if s := h.prov.Snapshot(); s.Node.Usage.LiveActivations != 1 {
		t.Fatalf("the stale permit touched the new reservation: %+v", s.Node.Usage)
	}
	if n, s := h.prov.NodeSnapshot(), h.prov.Snapshot(); n != s.Node {
		t.Fatalf("NodeSnapshot %+v, Snapshot's node %+v", n, s.Node)
	}
	exec, err := second.StartExecution()
	if err != nil {
		t.Fatal(err)
	}
	if err := second.EnsureSchedulable(); !errors.Is(err, ErrPermitUsed) {
		t.Fatalf("a consumed permit is schedulable: %v", err)
	}
	o := exec.Obligations()
	if exec.ID() != "dup" || o.CellClass != vocab.CellSmall || o.Subject != "alice" ||
		exec.Budget().CPUFuel != 100_000_000 || !exec.AdmittedAt().Equal(second.AdmittedAt()) || o.Function != "_start" {
		t.Fatalf("execution permit lost obligations: %+v %+v", o, exec.Budget())
	}
	if err := exec.Release(); err != nil {
		t.Fatal(err)
	}
	if err := exec.Release(); !errors.Is(err, ErrPermitUsed) {
		t.Fatalf("double release: %v", err)
	}
	if s := formatSnapshot(h.prov.Snapshot()); s != "empty" {
		t.Fatalf("residue:\n%s", s)
	}
}

// TestPermit_leakSafetyNet drops permits without releasing them and checks
// that the garbage collector's safety net returns their reservations and
// counts them.
func TestPermit_leakSafetyNet(t *testing.T) {
	h := newHarness(t, testPolicy())
	func() {
		if _, err := h.admit(h.request("leak-queued", "acme", "images")); err != nil {
			t.Fatal(err)
		}
		p, err := h.admit(h.request("leak-exec", "acme", "images"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.StartExecution(); err != nil {
			t.Fatal(err)
		}
		kept, err := h.admit(h.request("kept", "acme", "images"))
		if err != nil {
			t.Fatal(err)
		}
		if err := kept.Release(); err != nil {
			t.Fatal(err)
		}
	}()
	for i := 0; i < 200 && h.prov.LeakedPermits() < 2; i++ {
		runtime.GC()
		runtime.Gosched()
	}
	if n := h.prov.LeakedPermits(); n != 2 {
		t.Fatalf("want 2 leaked permits reclaimed, have %d", n)
	}
	if s := formatSnapshot(h.prov.Snapshot()); s != "empty" {
		t.Fatalf("leaked reservations not returned:\n%s", s)
	}
}

// TestPermit_cannotBeForged builds programs outside the package that try to
// mint or fill a permit; each must fail to compile. A control program that
// only uses the public API must compile, so the failures are the forging.
func TestPermit_cannotBeForged(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go tool not on PATH")
	}
	tests := []struct {
		dir     string
		compile bool
		want    string
	}{
		{"control", true, ""},
		{"forge_fields", false, "unknown field"},
		{"forge_core", false, "unexported field a"},
		{"forge_assign", false, "a.budget undefined"},
	}
	for _, tc := range tests {
		t.Run(tc.dir, func(t *testing.T) {
			// The same -race as this binary: the programs' dependencies
			// (the module's packages and cockroachdb/errors' tree) are
			// then already compiled in the cache, not compiled again
			// (half a minute on two cores with a cold cache).
			args := []string{"build", "-o", filepath.Join(t.TempDir(), "out")}
			if raceEnabled {
				args = append(args, "-race")
			}
			cmd := exec.Command(goBin, append(args, "./testdata/forge/"+tc.dir)...)
			out, err := cmd.CombinedOutput()
			if tc.compile {
				if err != nil {
					t.Fatalf("control program does not compile:\n%s", out)
				}
				return
			}
			if err == nil {
				t.Fatal("a program outside admission forged a permit")
			}
			if !strings.Contains(string(out), tc.want) {
				t.Fatalf("failed for another reason than forging (want %q):\n%s", tc.want, out)
			}
		})
	}
}

// TestAdmit_resamplesTimeUnderLock: the deadline is bound from the first
// clock sample, and the ledger check uses a later one, so time spent before
// the lock counts against the deadline.
func TestAdmit_resamplesTimeUnderLock(t *testing.T) {
	h := newHarness(t, testPolicy())
	// Control: with a still clock a 10ms deadline is feasible (3ms required).
	req := h.request("control", "acme", "images")
	req.Deadline = h.clock.Now().Add(10 * time.Millisecond)
	if _, err := h.admit(req); err != nil {
		t.Fatalf("control: %v", err)
	}
	// Now 8ms pass between admission's first clock sample and the ledger
	// check: only 2ms remain, less than the 3ms required. Judging by the
	// first sample would admit.
	req = h.request("slow", "acme", "images")
	req.Deadline = h.clock.Now().Add(10 * time.Millisecond)
	h.clock.SetStep(8 * time.Millisecond)
	if _, err := h.admit(req); !errors.Is(err, ErrQueueDeadlineInfeasible) {
		t.Fatalf("want the resampled clock to refuse, have %v", err)
	}
}

// TestController_sharedLedger: controllers derived from different pins share
// one ledger; an old pin keeps admitting the exact old policy and a new pin
// refuses the old generation.
func TestController_sharedLedger(t *testing.T) {
	h := newHarnessOwnCatalog(t, testPolicy())
	oldPin := h.cat.Pin()
	oldRev, err := oldPin.Resolve(vocab.Target{Tenant: "acme", Service: "images", Route: "run"}, "")
	if err != nil {
		t.Fatal(err)
	}
	// Redeploy images with a lower fuel ceiling.
	_, m, _ := h.cat.Manifest("acme", "images")
	m.Revisions[0].Ceiling.CPUFuel = 42
	if _, err := h.cat.Deploy(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	newPin := h.cat.Pin()
	req := &Request{ActivationID: "old", Revision: oldRev, Principal: Principal{Subject: "alice", Kind: KindUser, Tenant: "acme"}}
	oldPermit, err := h.prov.WithPolicySource(oldPin).Admit(req)
	if err != nil || oldPermit.Budget().CPUFuel != 100_000_000 {
		t.Fatalf("old pin: %v %+v", err, oldPermit)
	}
	req.ActivationID = "new"
	if _, err := h.prov.WithPolicySource(newPin).Admit(req); !errors.Is(err, ErrRevisionNotAvailable) {
		t.Fatalf("new pin accepted the old generation: %v", err)
	}
	newReq := h.request("new", "acme", "images")
	newPermit, err := h.prov.WithPolicySource(newPin).Admit(newReq)
	if err != nil || newPermit.Budget().CPUFuel != 42 {
		t.Fatalf("new pin: %v", err)
	}
	if u := h.prov.Snapshot().Node.Usage; u.LiveActivations != 2 || u.ReservedFuel != 100_000_042 {
		t.Fatalf("controllers do not share the ledger: %+v", u)
	}
	if ts, ok := h.prov.TenantSnapshot("acme"); !ok || ts.Usage.LiveActivations != 2 {
		t.Fatalf("tenant snapshot: %+v %v", ts, ok)
	}
	if _, ok := h.prov.TenantSnapshot("nobody"); ok {
		t.Fatal("snapshot of an unknown tenant")
	}
	_ = oldPermit.Release()
	_ = newPermit.Release()
}

func TestArithmetic(t *testing.T) {
	if d, ok := queueWait(10, 3, time.Millisecond); !ok || d != 3*time.Millisecond {
		t.Fatalf("queueWait: %v %v", d, ok)
	}
	if _, ok := queueWait(1<<62, 1, time.Hour); ok {
		t.Fatal("queueWait overflowed silently")
	}
	if d, ok := queueWait(5, 10, time.Hour); !ok || d != 0 {
		t.Fatalf("queueWait below parallelism: %v", d)
	}
	if _, ok := addDurations(maxDuration, 1); ok {
		t.Fatal("addDurations overflowed silently")
	}
	if _, ok := addDurations(-1); ok {
		t.Fatal("addDurations accepted a negative duration")
	}
	if d, ok := addDurations(1, 2, 3); !ok || d != 6 {
		t.Fatalf("addDurations: %v", d)
	}
}

// TestLedger_hammer admits, starts and releases from many goroutines under
// -race and checks that the ledger ends empty and never exceeded a limit.
func TestLedger_hammer(t *testing.T) {
	p := testPolicy()
	p.Deadline = DeadlinePolicy{} // the hammer tests limits, not feasibility
	h := newHarness(t, p)
	workers, rounds := 8, 400
	if testing.Short() {
		rounds = 150
	}
	pin := h.cat.Pin()
	targets := []struct {
		tenant  vocab.TenantID
		svc     vocab.ServiceName
		subject string
	}{{"acme", "images", "alice"}, {"acme", "big", "alice"}, {"beta", "images", "bob"}, {"beta", "pool", "bob"}}
	revs := make([]catalog.ResolvedRevision, len(targets))
	for i, tg := range targets {
		r, err := pin.Resolve(vocab.Target{Tenant: tg.tenant, Service: tg.svc, Route: "run"}, "")
		if err != nil {
			t.Fatal(err)
		}
		revs[i] = r
	}
	var admitted, refused atomic.Int64
	err := testutil.Hammer(workers, rounds, func(w, i int) error {
		c := h.prov.WithPolicySource(pin)
		k := (w + i) % len(targets)
		req := &Request{ActivationID: "w" + strconv.Itoa(w) + "-" + strconv.Itoa(i%3), Revision: revs[k],
			Priority: uint32(i % 7 % 6), Principal: Principal{Subject: targets[k].subject, Kind: KindUser, Tenant: targets[k].tenant}}
		pm, err := c.Admit(req)
		if err != nil {
			var rej *Rejection
			if !errors.As(err, &rej) || rej.Code != refusal.CodeResourceExhausted && rej.Code != refusal.CodeAlreadyExists {
				return errors.Wrap(err, "unexpected refusal")
			}
			refused.Add(1)
			return nil
		}
		admitted.Add(1)
		s := h.prov.Snapshot()
		if s.Node.Usage.LiveActivations > p.Limits.MaxLiveActivations || s.Node.Usage.Queued > p.Limits.MaxQueued {
			t.Errorf("node limits exceeded: %+v", s.Node.Usage)
		}
		if i%2 == 0 {
			e, err := pm.StartExecution()
			if err != nil {
				return errors.Wrap(err, "start")
			}
			runtime.Gosched()
			return errors.Wrap(e.Release(), "release")
		}
		return errors.Wrap(pm.Release(), "release")
	})
	if err != nil {
		t.Fatal(err)
	}
	if s := formatSnapshot(h.prov.Snapshot()); s != "empty" {
		t.Fatalf("residue after the hammer:\n%s", s)
	}
	if admitted.Load() == 0 || refused.Load() == 0 {
		t.Fatalf("the hammer did not contend: %d admitted, %d refused", admitted.Load(), refused.Load())
	}
	t.Logf("%d admitted, %d refused", admitted.Load(), refused.Load())
}

func TestAdmit_identifierBounds(t *testing.T) {
	h := newHarness(t, testPolicy())
	tests := []struct {
		name   string
		mutate func(r *Request)
		want   *Rejection
	}{
		{"over-long revision id", func(r *Request) { r.Revision.Revision += vocab.RevisionID(strings.Repeat("0", 40)) }, rejGeneratedID},
		{"over-long release id", func(r *Request) { r.Revision.Release += vocab.ReleaseID(strings.Repeat("0", 40)) }, rejGeneratedID},
		{"forged revision id within bounds", func(r *Request) { r.Revision.Revision = "rev1-forged" }, rejRevision},
		{"over-long route", func(r *Request) { r.Revision.Route = vocab.RouteName(strings.Repeat("r", 65)) }, rejTargetName},
		{"control in function", func(r *Request) { r.Revision.Function = "_st\x00art" }, rejTargetName},
		{"bad metadata key", func(r *Request) { r.Attributes = []vocab.Attribute{{Key: "a b", Value: "v"}} }, rejMetadataKey},
		{"metadata bytes", func(r *Request) {
			r.Attributes = []vocab.Attribute{{Key: "k", Value: strings.Repeat("v", 128)}}
		}, rejMetadataBytes},
		{"metadata bytes at the bound", func(r *Request) {
			r.Attributes = []vocab.Attribute{{Key: "k", Value: strings.Repeat("v", 127)}}
		}, nil},
		{"storage dimension", func(r *Request) { r.Budget.StorageBytes = 1 }, rejStorageDimension},
		{"accelerator dimension", func(r *Request) { r.Budget.Accelerators = 1 }, rejAccelDimension},
		{"unknown principal kind", func(r *Request) { r.Principal.Kind = 7 }, rejPrincipal},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req := h.request("a", "acme", "images")
			tc.mutate(req)
			p, err := h.admit(req)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("want admitted, have %v", err)
				}
				_ = p.Release()
				return
			}
			if err != tc.want {
				t.Fatalf("want %v, have %v", tc.want, err)
			}
		})
	}
}

// TestObligations_random: the revision's random source reaches the
// obligations; a revision without one gets the secure default.
func TestObligations_random(t *testing.T) {
	h := newHarness(t, testPolicy())
	for _, tc := range []struct {
		service vocab.ServiceName
		want    vocab.Randomness
	}{
		{"images", vocab.RandomSecure},
		{"replay", vocab.RandomDeterministic},
	} {
		t.Run(string(tc.service), func(t *testing.T) {
			p, err := h.admit(h.request("random-"+string(tc.service), "acme", tc.service))
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = p.Release() }()
			if have := p.Obligations().Random; have != tc.want {
				t.Fatalf("obligations carry random source %s, want %s", have, tc.want)
			}
		})
	}
}

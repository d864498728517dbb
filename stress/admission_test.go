package stress

import (
	"bytes"
	"context"
	"crypto/sha256"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/latent-node/latent-node/admission"
	"github.com/latent-node/latent-node/catalog"
	"github.com/latent-node/latent-node/internal/testutil"
	"github.com/latent-node/latent-node/internal/testutil/admissiontest"
	"github.com/latent-node/latent-node/internal/testutil/catalogtest"
	"github.com/latent-node/latent-node/loadsource"
	"github.com/latent-node/latent-node/vocab"
)

// The isolated admission regression: rejections must leave nothing behind.
// In a child process with a fixed deadline, submit many distinct rejected service targets and complete
// 100 reservations, then check that the process's threads, descriptors,
// sockets and children are unchanged and every tenant counter is empty.
// TestAdmissionIsolated1k runs in `make test`; the 100k variant needs the
// stress tag (`make stress`).

const childEnv = "LATENT_STRESS_ADMISSION_TARGETS"

func TestAdmissionIsolated1k(t *testing.T) { runIsolated(t, 1_000, time.Minute) }

// runIsolated re-executes this test binary as the child, kills it at the
// deadline and reaps it either way.
func runIsolated(t *testing.T, targets int, deadline time.Duration) {
	if runtime.GOOS != "linux" {
		t.Skip("the isolated regression reads /proc")
	}
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestAdmissionChild$", "-test.v", "-test.count=1")
	// One P: the runtime needs no more threads than it started during the
	// warm-up, so a new thread can only come from the code under test.
	cmd.Env = append(os.Environ(), childEnv+"="+strconv.Itoa(targets), "GOMAXPROCS=1")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run() // Run waits: the child is reaped on success, failure and kill
	if ctx.Err() != nil {
		t.Fatalf("child exceeded its %s deadline and was killed:\n%s", deadline, out.String())
	}
	if err != nil || !strings.Contains(out.String(), "ISOLATED-OK") {
		t.Fatalf("child failed (%v):\n%s", err, out.String())
	}
	for _, line := range strings.Split(out.String(), "\n") {
		if strings.Contains(line, "isolated:") {
			t.Log(strings.TrimSpace(line))
		}
	}
}

// TestAdmissionChild is the child half; it does nothing unless started by runIsolated.
func TestAdmissionChild(t *testing.T) {
	n, err := strconv.Atoi(os.Getenv(childEnv))
	if err != nil {
		t.Skip("runs only as the child of TestAdmissionIsolated*")
	}
	h := newAdmissionHarness(t)
	// Warm up with the same load: the Go runtime starts its GC worker threads
	// now, not during the measurement.
	h.cycle(t, 0, n, 100)
	runtime.GC()
	before := processCounts(t)
	for i := 1; i < 5; i++ { // until the runtime's own threads settle
		h.cycle(t, -i, n, 100)
		runtime.GC()
		if again := processCounts(t); again == before {
			break
		} else {
			before = again
		}
	}
	h.cycle(t, 1, n, 100)
	runtime.GC()
	after := processCounts(t)
	if before != after {
		t.Fatalf("process resources changed: before %+v, after %+v", before, after)
	}
	snap := h.prov.Snapshot()
	for _, s := range append([]admission.ScopeSnapshot{snap.Node}, append(snap.Tenants, snap.TrustClasses...)...) {
		if s.Usage != (admission.Usage{}) {
			t.Fatalf("scope %s retained %+v", s.Name, s.Usage)
		}
	}
	if len(snap.Tenants) != 1 {
		t.Fatalf("tenant counters grew: %d", len(snap.Tenants))
	}
	t.Logf("isolated: %d rejected targets, 100 completed reservations, counts %+v", n, after)
	t.Log("ISOLATED-OK")
}

type counts struct{ Goroutines, Threads, FDs, Sockets, Children int }

func processCounts(t *testing.T) counts {
	c := counts{Goroutines: runtime.NumGoroutine()}
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "Threads:"); ok {
			c.Threads, _ = strconv.Atoi(strings.TrimSpace(v))
		}
	}
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	for _, fd := range fds {
		c.FDs++
		if target, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name())); err == nil && strings.HasPrefix(target, "socket:") {
			c.Sockets++
		}
	}
	tasks, _ := filepath.Glob("/proc/self/task/*/children")
	for _, f := range tasks {
		data, _ := os.ReadFile(f)
		c.Children += len(strings.Fields(string(data)))
	}
	return c
}

type admissionHarness struct {
	clock *testutil.Clock
	cat   *catalog.Catalog
	prov  *admission.LocalQuotaProvider
}

func newAdmissionHarness(t *testing.T) *admissionHarness {
	h := &admissionHarness{clock: testutil.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))}
	cat, err := catalog.Open(context.Background(), catalog.Config{Dir: t.TempDir(), Inspector: catalogtest.Inspector{}})
	if err != nil {
		t.Fatal(err)
	}
	d := vocab.DigestOf(sha256.Sum256([]byte("m")))
	if err := cat.Artifacts().Put(context.Background(), "acme", d, strings.NewReader("m")); err != nil {
		t.Fatal(err)
	}
	_, err = cat.Deploy(context.Background(), vocab.Manifest{Tenant: "acme", Service: "images",
		Revisions: []vocab.ManifestRevision{{Name: "v1", Artifact: d, TrustClass: "untrusted",
			Ceiling: &vocab.ManifestCeiling{CPUFuel: 1000, MemoryBytes: 1 << 20, WallTime: vocab.Duration(time.Second)}}},
		Routes: []vocab.ManifestRoute{{Name: "run", Targets: []vocab.ManifestTarget{{Revision: "v1", Weight: 1}}}}})
	if err != nil {
		t.Fatal(err)
	}
	h.cat = cat
	load := loadsource.NewState(time.Hour)
	if err := load.Publish(loadsource.Sample{CPU: 0.1, Memory: 0.1, TakenAt: h.clock.Now()}); err != nil {
		t.Fatal(err)
	}
	// One tenant, acme, whose user alice may run on four tiny cells; load
	// above 0.9 is overload.
	policy := admissiontest.Policy(admissiontest.Spec{Cell: vocab.CellTiny, Parallelism: 4,
		Limits:          admission.Limits{MaxLiveActivations: 16, MaxQueued: 16, MaxReservedFuel: 1 << 40, MaxReservedMemory: 1 << 40},
		MaxPayloadBytes: 1 << 20})
	policy.Overload.CPUThreshold, policy.Overload.MemoryThreshold = 0.9, 0.9
	h.prov, err = admission.NewLocalQuotaProvider(policy, admission.Options{Clock: h.clock, Load: load})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// cycle submits n requests for distinct services that do not exist (each
// refused as revision-not-available) and completes k reservations.
func (h *admissionHarness) cycle(t *testing.T, round, n, k int) {
	pin := h.cat.Pin()
	c := h.prov.WithPolicySource(pin)
	good, err := pin.Resolve(vocab.Target{Tenant: "acme", Service: "images", Route: "run"}, "")
	if err != nil {
		t.Fatal(err)
	}
	prefix := "r" + strconv.Itoa(round) + "-"
	for i := 0; i < n; i++ {
		svc := vocab.ServiceName(prefix + "svc-" + strconv.Itoa(i))
		if _, err := pin.Resolve(vocab.Target{Tenant: "acme", Service: svc, Route: "run"}, ""); !errors.Is(err, catalog.ErrRevisionNotAvailable) {
			t.Fatalf("resolve of an unknown service: %v", err)
		}
		forged := good
		forged.Service = svc
		req := &admission.Request{ActivationID: prefix + "rej-" + strconv.Itoa(i), Revision: forged,
			Principal: admission.Principal{Subject: "alice", Kind: admission.KindUser, Tenant: "acme"}}
		if _, err := c.Admit(req); !errors.Is(err, admission.ErrRevisionNotAvailable) {
			t.Fatalf("want revision-not-available, have %v", err)
		}
	}
	for i := 0; i < k; i++ {
		req := &admission.Request{ActivationID: prefix + "ok-" + strconv.Itoa(i), Revision: good,
			Principal: admission.Principal{Subject: "alice", Kind: admission.KindUser, Tenant: "acme"}}
		p, err := c.Admit(req)
		if err != nil {
			t.Fatal(err)
		}
		e, err := p.StartExecution()
		if err != nil {
			t.Fatal(err)
		}
		if err := e.Release(); err != nil {
			t.Fatal(err)
		}
	}
}

package admission

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/latent-node/latent-node/vocab"
)

// TestLedger_golden runs the datadriven scripts in testdata/*.txt, each on a
// harness of its own. Every directive is one command with key=value
// arguments (a value may be a Go-quoted string), a "----" line, and the
// expected output; "#" lines are comments. Commands:
//
//	admit id=<id> [svc=images] [tenant=acme] [subject=alice] [kind=user|service]
//	      [principal-tenant=acme] [service-identity=<s>] [prio=N] [payload=N]
//	      [fuel=N] [mem=BYTES] [wall=DUR] [deadline=DUR] [attrs=N] [claims=N]
//	      [forge]
//	start id=<id> [tenant=acme]     consume the admission permit
//	release id=<id> [tenant=acme]   release the permit (execution permit once started)
//	ensure id=<id> [tenant=acme]    EnsureSchedulable
//	advance d=DUR        move the clock
//	load cpu=F mem=F     publish a load sample taken now
//	delay cell=C d=DUR   set the scheduler's observed queue delay
//	snapshot             the non-zero counters of every scope
//
// Every admit prints the grant or the rejection; the harness's catalog
// deploys the services of testServices (one route "run" each). Permits are
// named by tenant and id, as activation ids are per tenant. To regenerate
// the expected outputs:
//
//	go test ./admission -run TestLedger_golden -rewrite
func TestLedger_golden(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.txt")
	if len(files) == 0 {
		t.Fatal("no golden scripts")
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			st := &scriptState{h: newHarness(t, testPolicy()), adm: map[string]*Permit{},
				exec: map[string]*ExecutionPermit{}}
			datadriven.RunTest(t, file, func(t *testing.T, d *datadriven.TestData) string {
				return st.run(t, d)
			})
		})
	}
}

type scriptState struct {
	h    *harness
	adm  map[string]*Permit
	exec map[string]*ExecutionPermit
}

func (st *scriptState) run(t *testing.T, d *datadriven.TestData) string {
	line := d.Pos + ": " + d.Cmd
	args := map[string]string{}
	for _, a := range d.CmdArgs {
		v := strings.Join(a.Vals, ",")
		if strings.HasPrefix(v, `"`) {
			u, err := strconv.Unquote(v)
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			v = u
		}
		args[a.Key] = v
	}
	num := func(k string) uint64 {
		n, err := strconv.ParseUint(args[k], 10, 64)
		if err != nil {
			t.Fatalf("%s: %s=%q: %v", line, k, args[k], err)
		}
		return n
	}
	dur := func(k string) time.Duration {
		d, err := time.ParseDuration(args[k])
		if err != nil {
			t.Fatalf("%s: %s=%q: %v", line, k, args[k], err)
		}
		return d
	}
	h := st.h
	name := permitName(args)
	switch d.Cmd {
	case "admit":
		return st.admit(t, args, num, dur)
	case "start":
		a := st.adm[name]
		e, err := a.StartExecution()
		if err != nil {
			return "error: " + err.Error()
		}
		st.exec[name] = e
		return "ok"
	case "release":
		var err error
		if e, ok := st.exec[name]; ok {
			err = e.Release()
		} else {
			err = st.adm[name].Release()
		}
		if err != nil {
			return "error: " + err.Error()
		}
		return "ok"
	case "ensure":
		if err := st.adm[name].EnsureSchedulable(); err != nil {
			return "error: " + err.Error()
		}
		return "ok"
	case "advance":
		h.clock.Advance(dur("d"))
		return "ok"
	case "load":
		cpu, _ := strconv.ParseFloat(args["cpu"], 64)
		mem, _ := strconv.ParseFloat(args["mem"], 64)
		h.setLoad(cpu, mem)
		return "ok"
	case "delay":
		c, err := vocab.ParseCellClass(args["cell"])
		if err != nil {
			t.Fatal(err)
		}
		h.delay[c] = dur("d")
		return "ok"
	case "snapshot":
		return formatSnapshot(h.prov.Snapshot())
	}
	t.Fatalf("%s: unknown command %q", line, d.Cmd)
	return ""
}

// permitName names a script's permit by its tenant (default acme) and id.
func permitName(args map[string]string) string {
	tenant, ok := args["tenant"]
	if !ok {
		tenant = "acme"
	}
	return tenant + "/" + args["id"]
}

func (st *scriptState) admit(t *testing.T, args map[string]string, num func(string) uint64, dur func(string) time.Duration) string {
	h := st.h
	get := func(k, def string) string {
		if v, ok := args[k]; ok {
			return v
		}
		return def
	}
	req := h.request(args["id"], vocab.TenantID(get("tenant", "acme")), vocab.ServiceName(get("svc", "images")))
	req.Principal.Subject = get("subject", "alice")
	req.Principal.Tenant = vocab.TenantID(get("principal-tenant", string(req.Revision.Tenant)))
	if get("kind", "user") == "service" {
		req.Principal.Kind = KindService
	}
	req.Principal.ServiceIdentity = args["service-identity"]
	if _, ok := args["prio"]; ok {
		req.Priority = uint32(num("prio"))
	}
	if _, ok := args["payload"]; ok {
		req.PayloadBytes = num("payload")
	}
	if _, ok := args["fuel"]; ok {
		req.Budget.CPUFuel, req.Budget.HasCPUFuel = num("fuel"), true
	}
	if _, ok := args["mem"]; ok {
		req.Budget.MemoryBytes, req.Budget.HasMemoryBytes = num("mem"), true
	}
	if _, ok := args["wall"]; ok {
		req.Budget.WallTime, req.Budget.HasWallTime = dur("wall"), true
	}
	if _, ok := args["network"]; ok {
		req.Budget.NetworkEgressBytes = num("network")
	}
	if _, ok := args["deadline"]; ok {
		req.Deadline = h.clock.Now().Add(dur("deadline"))
	}
	if _, ok := args["attrs"]; ok {
		for i := uint64(0); i < num("attrs"); i++ {
			req.Attributes = append(req.Attributes, vocab.Attribute{Key: "k" + strconv.FormatUint(i, 10), Value: strings.Repeat("v", 20)})
		}
	}
	if _, ok := args["claims"]; ok {
		for i := uint64(0); i < num("claims"); i++ {
			req.Principal.Claims = append(req.Principal.Claims, vocab.Attribute{Key: "c" + strconv.FormatUint(i, 10), Value: "x"})
		}
	}
	if _, ok := args["forge"]; ok {
		req.Revision.Attributes = []vocab.Attribute{{Key: "trust_class", Value: "trusted"}}
		req.Revision.Generation++
	}
	now := h.clock.Now()
	p, err := h.admit(req)
	if err != nil {
		return "error: " + err.Error()
	}
	st.adm[permitName(args)] = p
	delete(st.exec, permitName(args))
	b, o := p.Budget(), p.Obligations()
	return fmt.Sprintf("ok cell=%s queue=%s trust=%s fuel=%d mem=%s wall=%s deadline=+%s",
		o.CellClass, o.QueueClass, o.TrustClass, b.CPUFuel, vocab.ByteSize(b.MemoryBytes), b.WallTime, p.Deadline().Sub(now))
}

func formatSnapshot(s QuotaSnapshot) string {
	var b strings.Builder
	scope := func(kind string, sc ScopeSnapshot) {
		u := sc.Usage
		if u == (Usage{}) {
			return
		}
		fmt.Fprintf(&b, "%s %s: live=%d queued=%d fuel=%d mem=%s\n", kind, sc.Name, u.LiveActivations, u.Queued,
			u.ReservedFuel, vocab.ByteSize(u.ReservedMemory))
	}
	scope("node", s.Node)
	for _, t := range s.Tenants {
		scope("tenant", t)
	}
	for _, t := range s.TrustClasses {
		scope("trust", t)
	}
	for _, q := range s.QueueClasses {
		if q.Queued != 0 {
			fmt.Fprintf(&b, "queue %s: queued=%d\n", q.Name, q.Queued)
		}
	}
	for _, c := range s.CellClasses {
		if c.Live != 0 {
			fmt.Fprintf(&b, "cell %s: live=%d\n", c.Name, c.Live)
		}
	}
	if b.Len() == 0 {
		return "empty"
	}
	return strings.TrimRight(b.String(), "\n")
}

package scheduler

import (
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/latent-node/latent-node/vocab"
)

// TestGolden runs the datadriven scripts in testdata/*.txt against the
// core, each file on a core of its own: every directive is a command with
// key=value arguments, a "----" line and the output it must produce; "#"
// lines are comments. After a change in behaviour, inspect and regenerate
// the expected outputs with
//
//	go test ./scheduler -run TestGolden -rewrite
//
// Commands (times are relative to the script's epoch and every command sees
// the current time):
//
//	init parallelism=N [lower-class-after=K] [fairness=fuel|round-robin] [max-wait=D]
//	     [target=D] queue=name:min-max:max_queued:reserved ...
//	enqueue ids=a,b,… tenant=T principal=P queue=Q
//	next [n=N]          dispatch up to N items (default: until the core says no)
//	done id=… fuel=N [exec=D]
//	abort id=… | requeue id=… | remove id=…
//	yield queue=Q tenant=T principal=P
//	advance by=D        time passes
//	expire | adjust
//	lose-cell           a cell is quarantined (prints the state)
//	state               lanes, flows and capacity
func TestGolden(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.txt"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no testdata: %v", err)
	}
	for _, path := range files {
		t.Run(filepath.Base(path), func(t *testing.T) {
			g := &goldenScript{}
			datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
				have, err := g.run(t, d)
				if err != nil {
					return "error: " + err.Error()
				}
				return have
			})
		})
	}
}

// goldenScript runs one file's commands against one core.
type goldenScript struct {
	c     *Core
	now   time.Time
	items map[string]*Item
}

func (g *goldenScript) run(t *testing.T, d *datadriven.TestData) (string, error) {
	cmd := d.Pos + ": " + d.Cmd
	args := map[string][]string{}
	for _, a := range d.CmdArgs {
		args[a.Key] = append(args[a.Key], strings.Join(a.Vals, ","))
	}
	arg := func(k, def string) string {
		if v, ok := args[k]; ok {
			return v[0]
		}
		return def
	}
	num := func(k string, def int) int {
		n, err := strconv.Atoi(arg(k, strconv.Itoa(def)))
		if err != nil {
			t.Fatalf("%s: %s: %v", cmd, k, err)
		}
		return n
	}
	dur := func(k, def string) time.Duration {
		d, err := time.ParseDuration(arg(k, def))
		if err != nil {
			t.Fatalf("%s: %s: %v", cmd, k, err)
		}
		return d
	}
	item := func() *Item {
		it, ok := g.items[arg("id", "")]
		if !ok {
			t.Fatalf("%s: unknown id", cmd)
		}
		return it
	}
	switch d.Cmd {
	case "init":
		cfg := Config{CellClasses: map[vocab.CellClass]CellConfig{simCell: {Parallelism: num("parallelism", 1),
			TargetServiceTime: dur("target", "0s")}},
			MaxWait: dur("max-wait", "10s"), LowerClassAfter: num("lower-class-after", 0), Fairness: arg("fairness", "")}
		for _, q := range args["queue"] {
			p := strings.Split(q, ":")
			lo, hi, _ := strings.Cut(p[1], "-")
			mq, _ := strconv.Atoi(p[2])
			rc, _ := strconv.Atoi(p[3])
			l, _ := strconv.Atoi(lo)
			h, _ := strconv.Atoi(hi)
			cfg.QueueClasses = append(cfg.QueueClasses, QueueConfig{Name: p[0], MinPriority: uint32(l), MaxPriority: uint32(h),
				MaxQueued: mq, ReservedCells: rc})
		}
		c, err := NewCore(cfg)
		if err != nil {
			return "", err
		}
		g.c, g.now, g.items = c, simEpoch, map[string]*Item{}
		return "ok", nil
	case "enqueue":
		for _, id := range strings.Split(arg("ids", ""), ",") {
			it := &Item{Tenant: vocab.TenantID(arg("tenant", "t")), Principal: arg("principal", "p"), Cell: simCell,
				Queue: num("queue", 0), Payload: id}
			if err := g.c.Enqueue(g.now, it); err != nil {
				return "", err
			}
			g.items[id] = it
		}
		return "ok", nil
	case "next":
		var out []string
		for n := num("n", 1<<30); n > 0; n-- {
			it, ok := g.c.Next(g.now, simCell)
			if !ok {
				break
			}
			out = append(out, it.Payload.(string)+" cost="+strconv.FormatInt(it.Cost, 10)+
				" wait="+g.now.Sub(it.EnqueuedAt).String())
		}
		if len(out) == 0 {
			return "none", nil
		}
		return strings.Join(out, "\n"), nil
	case "done":
		return "ok", g.c.Done(g.now, item(), uint64(num("fuel", 1)), dur("exec", "1ms"))
	case "abort":
		return "ok", g.c.Abort(item())
	case "requeue":
		return "ok", g.c.Requeue(item())
	case "remove":
		return strconv.FormatBool(g.c.Remove(item())), nil
	case "yield":
		v, ok := g.c.YieldSlotTo(g.now, num("queue", 0), vocab.TenantID(arg("tenant", "")), arg("principal", ""))
		if !ok {
			return "none", nil
		}
		return "victim " + v.Payload.(string), nil
	case "advance":
		g.now = g.now.Add(dur("by", "0s"))
		return "now=" + g.now.Sub(simEpoch).String(), nil
	case "expire":
		var out []string
		for _, it := range g.c.Expire(g.now) {
			out = append(out, it.Payload.(string))
		}
		if len(out) == 0 {
			return "none", nil
		}
		return "expired " + strings.Join(out, " "), nil
	case "adjust":
		g.c.Adjust(g.now)
		cs := g.c.cells[simCell]
		return "window=" + strconv.Itoa(cs.window) + " changes=" + strconv.FormatUint(cs.changes, 10), nil
	case "lose-cell":
		g.c.LoseCell(simCell)
		return g.state(), nil
	case "state":
		return g.state(), nil
	}
	t.Fatalf("%s: unknown command %q", cmd, d.Cmd)
	return "", nil
}

// state prints the core: capacity, then each lane (by rank) with its
// tenants and principals, sorted by name.
func (g *goldenScript) state() string {
	cs := g.c.cells[simCell]
	var b strings.Builder
	b.WriteString("cells: usable=" + strconv.Itoa(cs.usable) + " window=" + strconv.Itoa(cs.window) +
		" running=" + strconv.Itoa(cs.running) + " shared=" + strconv.Itoa(cs.sharedInUse()) + " waiting=" + strconv.Itoa(cs.waiting))
	for _, l := range cs.lanes {
		b.WriteString("\nlane " + g.c.cfg.QueueClasses[l.queue].Name + ": waiting=" + strconv.Itoa(l.waiting) +
			" running=" + strconv.Itoa(l.running) + " skipped=" + strconv.Itoa(l.skipped) +
			" vtime=" + strconv.FormatInt(l.vstart, 10))
		for _, tn := range slices.Sorted(maps.Keys(l.byName)) {
			tf := l.byName[tn]
			b.WriteString("\n  tenant " + tn + ": served=" + strconv.FormatInt(tf.served, 10) +
				" waiting=" + strconv.Itoa(tf.waiting) + " running=" + strconv.Itoa(tf.running))
			for _, pn := range slices.Sorted(maps.Keys(tf.byName)) {
				pf := tf.byName[pn]
				var fifo []string
				for it := pf.fifo.head; it != nil; it = it.links[fifoLinks].next {
					fifo = append(fifo, it.Payload.(string))
				}
				b.WriteString("\n    principal " + pn + ": served=" + strconv.FormatInt(pf.served, 10) +
					" running=" + strconv.Itoa(pf.running) + " fifo=[" + strings.Join(fifo, " ") + "]")
			}
		}
	}
	return b.String()
}

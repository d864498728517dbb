package scheduler

import (
	"flag"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/latent-node/latent-node/catalog"
)

// Datadriven tests of the core (CockroachDB's admission testdata style):
// each file in testdata/ is a script of commands, each followed by "----"
// and the output it must produce, then a blank line. After a change in
// behaviour, inspect and regenerate the expected outputs with
//
//	go test ./scheduler -run TestGolden -rewrite
//
// Commands (arguments are key=value; times are relative to the script's
// epoch and every command sees the current time):
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

var rewrite = flag.Bool("rewrite", false, "rewrite the expected outputs of the datadriven tests in testdata/")

type goldenCase struct {
	cmd, want string
}

func parseGolden(t *testing.T, path string) []goldenCase {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var cases []goldenCase
	lines := strings.Split(string(data), "\n")
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
			continue
		}
		c := goldenCase{cmd: line}
		if i+1 >= len(lines) || lines[i+1] != "----" {
			t.Fatalf("%s:%d: command without ----", path, i+1)
		}
		i += 2
		var want []string
		for ; i < len(lines) && lines[i] != ""; i++ {
			want = append(want, lines[i])
		}
		c.want = strings.Join(want, "\n")
		cases = append(cases, c)
	}
	return cases
}

// goldenScript runs one file's commands against one core.
type goldenScript struct {
	t     *testing.T
	c     *Core
	now   time.Time
	items map[string]*Item
}

func (g *goldenScript) run(cmd string) (string, error) {
	fields := strings.Fields(cmd)
	args := map[string][]string{}
	for _, f := range fields[1:] {
		k, v, _ := strings.Cut(f, "=")
		args[k] = append(args[k], v)
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
			g.t.Fatalf("%s: %s: %v", cmd, k, err)
		}
		return n
	}
	dur := func(k, def string) time.Duration {
		d, err := time.ParseDuration(arg(k, def))
		if err != nil {
			g.t.Fatalf("%s: %s: %v", cmd, k, err)
		}
		return d
	}
	item := func() *Item {
		it, ok := g.items[arg("id", "")]
		if !ok {
			g.t.Fatalf("%s: unknown id", cmd)
		}
		return it
	}
	switch fields[0] {
	case "init":
		cfg := Config{CellClasses: map[catalog.CellClass]CellConfig{simCell: {Parallelism: num("parallelism", 1),
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
			it := &Item{Tenant: catalog.TenantID(arg("tenant", "t")), Principal: arg("principal", "p"), Cell: simCell,
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
		v, ok := g.c.YieldSlotTo(g.now, num("queue", 0), catalog.TenantID(arg("tenant", "")), arg("principal", ""))
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
	return "", errors.Newf("unknown command %q", fields[0])
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

func TestGolden(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.txt"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no testdata: %v", err)
	}
	for _, path := range files {
		t.Run(filepath.Base(path), func(t *testing.T) {
			g := &goldenScript{t: t}
			cases := parseGolden(t, path)
			var out strings.Builder
			data, _ := os.ReadFile(path)
			// Keep the file's comments: rebuild it from its own lines.
			lines := strings.Split(string(data), "\n")
			ci := 0
			for i := 0; i < len(lines); i++ {
				line := lines[i]
				if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
					out.WriteString(line + "\n")
					continue
				}
				c := cases[ci]
				ci++
				have, err := g.run(c.cmd)
				if err != nil {
					have = "error: " + err.Error()
				}
				if !*rewrite && have != c.want {
					t.Errorf("%s:%d: %s\nhave:\n%s\nwant:\n%s", path, i+1, c.cmd, have, c.want)
				}
				out.WriteString(c.cmd + "\n----\n" + have + "\n")
				for i += 2; i < len(lines) && lines[i] != ""; i++ {
				}
				i-- // the blank line is written by the loop
			}
			if *rewrite {
				if err := os.WriteFile(path, []byte(strings.TrimRight(out.String(), "\n")+"\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

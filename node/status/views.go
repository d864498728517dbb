package status

// The views: the status page's data (GET /ui/data, /ui/history), GET
// /v1/admission and GET /v1/admin/admission. They need the admin role from
// an Authorization header, like every other admin route, except the
// tenant's admission view: the key is never taken from the URL, where it
// would end up in logs and history. The page itself (page.go) asks for the
// key and sends the header on its own requests.

import (
	"cmp"
	"context"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/latent-node/latent-node/admission"
	"github.com/latent-node/latent-node/catalog"
	"github.com/latent-node/latent-node/cellpool"
	"github.com/latent-node/latent-node/loadsource"
	"github.com/latent-node/latent-node/node/api"
	"github.com/latent-node/latent-node/node/auth"
	"github.com/latent-node/latent-node/node/front"
	"github.com/latent-node/latent-node/node/history"
	"github.com/latent-node/latent-node/refusal"
	"github.com/latent-node/latent-node/runner"
	"github.com/latent-node/latent-node/scheduler"
	"github.com/latent-node/latent-node/vocab"
)

// Scheduler is what the views read of the scheduler.
type Scheduler interface{ Stats() scheduler.DriverStats }

// Config is what the views read: every field is required.
type Config struct {
	Admission     *admission.LocalQuotaProvider
	Data, Control *front.IngressPool
	Runner        *runner.Runner
	Cells         *cellpool.Pool
	Scheduler     Scheduler
	Catalog       *catalog.Catalog
	Load          *loadsource.State
	LoadKind      string // the load source's name ([load] source)
	Clock         vocab.Clock
	Log           *slog.Logger
	// History is the recent past the page plots (the access log feeds it).
	History *history.History
	// Refusals gathers the refusal counter alone (the page polls every two
	// seconds per open tab; gathering the node's whole registry would copy
	// every per-route series).
	Refusals prometheus.Gatherer
}

// Views serve the status page and the admission views from what Config
// names.
type Views struct{ c Config }

// New returns the views of c.
func New(c Config) *Views { return &Views{c: c} }

// Data is the answer of GET /ui/data: the admin admission snapshot, the
// same document GET /v1/admin/admission answers, and the page's tables as
// text, all read at one moment.
type Data struct {
	Admission AdminAdmission `json:"admission"`
	Tables    []Table        `json:"tables"`
}

// AdminAdmission is the answer of GET /v1/admin/admission.
type AdminAdmission struct {
	admission.QuotaSnapshot
	Ingress   map[string]front.IngressUsage `json:"ingress"`
	Instances Instances                     `json:"instances"`
}

// Table is one table of the page: its header and its rows, already
// formatted.
type Table struct {
	Name  string     `json:"name"` // the table element's id on the page
	Title string     `json:"title"`
	Head  []string   `json:"head"`
	Rows  [][]string `json:"rows"`
}

// rejectionsMetric is the counter family the refusal table sums.
const rejectionsMetric = "latent_rejections_total"

func (v *Views) adminAdmission() AdminAdmission {
	return AdminAdmission{QuotaSnapshot: v.c.Admission.Snapshot(), Ingress: front.PoolsUsage(v.c.Data, v.c.Control, "", true),
		Instances: instances(v.c.Runner)}
}

// Snapshot reads every component once and lays the page's tables out.
func (v *Views) Snapshot() Data {
	adm := v.adminAdmission()
	d := Data{Admission: adm}
	u := func(v uint64) string { return strconv.FormatUint(v, 10) }
	i := strconv.Itoa

	// Cells by class: the pool's states, the scheduler's window and queue,
	// admission's live reservations.
	pool := v.c.Cells.Stats()
	sched := v.c.Scheduler.Stats()
	live := map[string]uint64{}
	for _, c := range adm.CellClasses {
		live[c.Name] = c.Live
	}
	cells := Table{Name: "cells", Title: "Cells by class",
		Head: []string{"class", "cells", "busy", "idle", "quarantined", "window", "running", "waiting", "admitted live"}}
	for _, cs := range sched.Cells {
		ps := pool[cs.Class]
		name := cs.Class.String()
		cells.Rows = append(cells.Rows, []string{name, i(ps.Parallelism), i(ps.Leased), i(ps.Usable - ps.Leased),
			i(ps.Quarantined), i(cs.Window), i(cs.Running), i(cs.Waiting), u(live[name])})
	}

	queues := Table{Name: "queues", Title: "Queues by class", Head: []string{"queue class", "queued", "max queued"}}
	for _, q := range adm.QueueClasses {
		queues.Rows = append(queues.Rows, []string{q.Name, u(q.Queued), u(q.MaxQueued)})
	}

	// Tenants: admission use and limits, ingress requests held, services.
	data, ctl := adm.Ingress[front.PoolData], adm.Ingress[front.PoolControl]
	tenants := Table{Name: "tenants", Title: "Tenants",
		Head: []string{"tenant", "live", "queued", "max live", "max queued", "data requests", "control requests", "services",
			"snapshot bytes"}}
	for _, t := range adm.Tenants {
		id := vocab.TenantID(t.Name)
		tenants.Rows = append(tenants.Rows, []string{t.Name, u(t.Usage.LiveActivations), u(t.Usage.Queued),
			u(t.Limits.MaxLiveActivations), u(t.Limits.MaxQueued), i(data.Tenants[id]), i(ctl.Tenants[id]),
			i(v.c.Catalog.ServiceCount(id)), Bytes(adm.Instances.Tenants[t.Name])})
	}
	in := adm.Instances
	warm := Table{Name: "instances", Title: "Warm instances",
		Head: []string{"snapshot bytes", "snapshots", "idle", "restored", "recreated", "reused", "created", "recycled"},
		Rows: [][]string{{Bytes(in.SnapshotBytes), u(in.Snapshots), i(in.Idle), u(in.Restored), u(in.Recreated), u(in.Reused),
			u(in.Created), u(in.Recycled)}}}
	nd := adm.Node
	node := Table{Name: "node", Title: "Node", Head: []string{"scope", "live", "queued", "max live", "max queued"},
		Rows: [][]string{{nd.Name, u(nd.Usage.LiveActivations), u(nd.Usage.Queued), u(nd.Limits.MaxLiveActivations),
			u(nd.Limits.MaxQueued)}}}

	ingress := Table{Name: "ingress", Title: "Ingress pools",
		Head: []string{"pool", "requests", "max requests", "bytes", "max bytes"}}
	for _, name := range []string{front.PoolData, front.PoolControl} {
		p := adm.Ingress[name]
		ingress.Rows = append(ingress.Rows, []string{name, i(p.Slots), i(p.MaxSlots), Bytes(p.Bytes), Bytes(p.MaxBytes)})
	}

	ls := v.c.Load.Snapshot(v.c.Clock.Now())
	state := "fresh"
	if ls.Reason != "" {
		state = ls.Reason
	}
	pressure := Table{Name: "pressure", Title: "Pressure", Head: []string{"source", "cpu", "memory", "sample age ms", "state"},
		Rows: [][]string{{v.c.LoadKind, strconv.FormatFloat(ls.Last.CPU, 'f', 3, 64),
			strconv.FormatFloat(ls.Last.Memory, 'f', 3, 64), strconv.FormatInt(ls.Age.Milliseconds(), 10), state}}}

	d.Tables = []Table{cells, queues, tenants, node, ingress, pressure, warm, v.refusals()}
	return d
}

// refusals sums the refusal counter by code and reason since the node
// started.
func (v *Views) refusals() Table {
	t := Table{Name: "refusals", Title: "Refusals since start", Head: []string{"code", "reason", "count"}}
	fams, err := v.c.Refusals.Gather()
	if err != nil {
		// A collector failed; the refusal counter is still read when present.
		v.c.Log.Warn("status page: gathering metrics", "err", err)
	}
	sums := map[[2]string]float64{}
	for _, f := range fams {
		if f.GetName() != rejectionsMetric {
			continue
		}
		for _, m := range f.GetMetric() {
			var k [2]string
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "code":
					k[0] = l.GetValue()
				case "reason":
					k[1] = l.GetValue()
				}
			}
			sums[k] += m.GetCounter().GetValue()
		}
	}
	for _, k := range slices.SortedFunc(maps.Keys(sums), func(a, b [2]string) int {
		return cmp.Or(cmp.Compare(a[0], b[0]), cmp.Compare(a[1], b[1]))
	}) {
		t.Rows = append(t.Rows, []string{k[0], k[1], strconv.FormatFloat(sums[k], 'f', 0, 64)})
	}
	return t
}

// HandleUIData answers the page's data (GET /ui/data).
func (v *Views) HandleUIData(w http.ResponseWriter, _ *http.Request, _ *auth.Principal) {
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	api.WriteJSON(w, http.StatusOK, v.Snapshot())
}

// HandleHistory answers the page's plots (GET /ui/history[?since=T]):
// the points kept, oldest first, or only those after T (Unix ms).
func (v *Views) HandleHistory(w http.ResponseWriter, r *http.Request, _ *auth.Principal) {
	points := v.c.History.Points()
	if since, err := strconv.ParseInt(r.URL.Query().Get("since"), 10, 64); err == nil {
		i, _ := slices.BinarySearchFunc(points, since+1, func(p history.Point, t int64) int { return cmp.Compare(p.T, t) })
		points = points[i:]
	}
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	api.WriteJSON(w, http.StatusOK, struct {
		IntervalMs int64           `json:"interval_ms"`
		Points     []history.Point `json:"points"`
	}{v.c.History.Interval().Milliseconds(), points})
}

// RunHistory closes a point of the history every interval, with the
// gauges read now, until ctx ends (an actor of the node).
func (v *Views) RunHistory(ctx context.Context) error {
	return v.c.History.Run(ctx, v.Gauges)
}

// History is the views' history, which the access log feeds.
func (v *Views) History() *history.History { return v.c.History }

// Gauges reads what a point of the history shows of the node now.
func (v *Views) Gauges() history.Gauges {
	nd := v.c.Admission.NodeSnapshot() // every 5 s: not every tenant under admission's lock
	in := v.c.Runner.WarmStats()
	pools := front.PoolsUsage(v.c.Data, v.c.Control, "", false)
	ls := v.c.Load.Snapshot(v.c.Clock.Now())
	return history.Gauges{MemoryAdmitted: nd.Usage.ReservedMemory, MemoryLimit: nd.Limits.MaxReservedMemory,
		Live: nd.Usage.LiveActivations, Queued: nd.Usage.Queued, WarmIdle: in.Idle,
		DataSlots: pools[front.PoolData].Slots, DataBytes: pools[front.PoolData].Bytes, ControlSlots: pools[front.PoolControl].Slots,
		PressureCPU: ls.Last.CPU, PressureMemory: ls.Last.Memory}
}

// HandleAdmission is GET /v1/admission: the caller's tenant's admission
// view and ingress use.
func (v *Views) HandleAdmission(w http.ResponseWriter, _ *http.Request, p *auth.Principal) {
	s, ok := v.c.Admission.TenantSnapshot(p.Tenant)
	if !ok {
		api.WriteProblem(w, api.Refusal(refusal.Refusal{Code: refusal.CodePermissionDenied,
			Reason: refusal.ReasonPrincipalNotAuthorized, Scope: refusal.ScopePrincipal}), 0)
		return
	}
	api.WriteJSON(w, http.StatusOK, struct {
		admission.TenantView
		Ingress map[string]front.IngressUsage `json:"ingress"`
	}{s, front.PoolsUsage(v.c.Data, v.c.Control, p.Tenant, false)})
}

// HandleAdminAdmission is GET /v1/admin/admission: the node's.
func (v *Views) HandleAdminAdmission(w http.ResponseWriter, _ *http.Request, _ *auth.Principal) {
	api.WriteJSON(w, http.StatusOK, v.adminAdmission())
}

// Bytes is n in IEC units as the page shows it: "0 B", "512 B", "1 KiB",
// "12.5 MiB", "1 GiB" (one decimal below 100 of a unit, none above).
func Bytes(n uint64) string {
	const units = "KMGTPE"
	if n < 1024 {
		return strconv.FormatUint(n, 10) + " B"
	}
	f, i := float64(n)/1024, 0
	for f >= 1024 && i < len(units)-1 {
		f /= 1024
		i++
	}
	prec := 1
	if f >= 100 || f == float64(int64(f)) {
		prec = 0
	}
	return strconv.FormatFloat(f, 'f', prec, 64) + " " + units[i:i+1] + "iB"
}

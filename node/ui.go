package node

import (
	"bytes"
	"cmp"
	"crypto/rand"
	_ "embed"
	"encoding/base64"
	"html/template"
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
	"github.com/latent-node/latent-node/refusal"
	"github.com/latent-node/latent-node/runner"
	"github.com/latent-node/latent-node/scheduler"
	"github.com/latent-node/latent-node/vocab"
)

// The status page: GET /ui is an HTML page for administrators, GET /ui/data
// the JSON it polls every two seconds to refresh its tables in place. Both
// need the admin role from an Authorization header, like every other admin
// route: the key is never taken from the URL, where it would end up in logs
// and history. A browser reaches the page through something that adds the
// header (a local proxy, a browser extension); curl reads it as it is.
//
// The page has no external assets: inline CSS and script carry a nonce of
// the answer, and the Content-Security-Policy allows nothing else. Every
// value goes through html/template (server side) or textContent (script
// side), so tenant names, which operators choose, are never markup.

// statusViews serve the status page and the admission views (GET
// /v1/admission, GET /v1/admin/admission): read-only views of admission,
// the ingress pools, the cells, the scheduler, the catalog, the load
// sample, the warm instances and the refusal counters.
type statusViews struct {
	prov              *admission.LocalQuotaProvider
	dataPool, ctlPool *front.IngressPool
	run               *runner.Runner
	pool              *cellpool.Pool
	sched             *scheduler.Scheduler[*invocation, runner.Outcome]
	cat               *catalog.Catalog
	load              *loadsource.State
	loadKind          string
	clock             vocab.Clock
	log               *slog.Logger
	refusals          prometheus.Gatherer // the refusal counter alone (uiRefusals)
}

// ingressUsage returns both pools' use: all of it (node snapshot), or
// tenant's share only.
func (v *statusViews) ingressUsage(tenant vocab.TenantID, all bool) map[string]front.IngressUsage {
	return ingressUsage(v.dataPool, v.ctlPool, tenant, all)
}

// uiData is the answer of GET /ui/data: the admin admission snapshot, the
// same document GET /v1/admin/admission answers, and the page's tables as
// text, all read at one moment.
type uiData struct {
	Admission adminAdmission `json:"admission"`
	Tables    []uiTable      `json:"tables"`
}

// adminAdmission is the answer of GET /v1/admin/admission.
type adminAdmission struct {
	admission.QuotaSnapshot
	Ingress   map[string]front.IngressUsage `json:"ingress"`
	Instances instancesView                 `json:"instances"`
}

// uiTable is one table of the page: its header and its rows, already
// formatted.
type uiTable struct {
	Name  string     `json:"name"` // the table element's id on the page
	Title string     `json:"title"`
	Head  []string   `json:"head"`
	Rows  [][]string `json:"rows"`
}

// rejectionsMetric is the counter family the refusal table sums.
const rejectionsMetric = "latent_rejections_total"

// uiSnapshot reads every component once and lays the tables out.
func (v *statusViews) uiSnapshot() uiData {
	adm := adminAdmission{QuotaSnapshot: v.prov.Snapshot(), Ingress: v.ingressUsage("", true), Instances: v.instances()}
	d := uiData{Admission: adm}
	u := func(v uint64) string { return strconv.FormatUint(v, 10) }
	i := strconv.Itoa

	// Cells by class: the pool's states, the scheduler's window and queue,
	// admission's live reservations.
	pool := v.pool.Stats()
	sched := v.sched.Stats()
	live := map[string]uint64{}
	for _, c := range adm.CellClasses {
		live[c.Name] = c.Live
	}
	cells := uiTable{Name: "cells", Title: "Cells by class",
		Head: []string{"class", "cells", "busy", "idle", "quarantined", "window", "running", "waiting", "admitted live"}}
	for _, cs := range sched.Cells {
		ps := pool[cs.Class]
		name := cs.Class.String()
		cells.Rows = append(cells.Rows, []string{name, i(ps.Parallelism), i(ps.Leased), i(ps.Usable - ps.Leased),
			i(ps.Quarantined), i(cs.Window), i(cs.Running), i(cs.Waiting), u(live[name])})
	}

	queues := uiTable{Name: "queues", Title: "Queues by class", Head: []string{"queue class", "queued", "max queued"}}
	for _, q := range adm.QueueClasses {
		queues.Rows = append(queues.Rows, []string{q.Name, u(q.Queued), u(q.MaxQueued)})
	}

	// Tenants: admission use and limits, ingress requests held, services.
	data, ctl := adm.Ingress[front.PoolData], adm.Ingress[front.PoolControl]
	tenants := uiTable{Name: "tenants", Title: "Tenants",
		Head: []string{"tenant", "live", "queued", "max live", "max queued", "data requests", "control requests", "services",
			"snapshot bytes"}}
	for _, t := range adm.Tenants {
		id := vocab.TenantID(t.Name)
		tenants.Rows = append(tenants.Rows, []string{t.Name, u(t.Usage.LiveActivations), u(t.Usage.Queued),
			u(t.Limits.MaxLiveActivations), u(t.Limits.MaxQueued), i(data.Tenants[id]), i(ctl.Tenants[id]),
			i(v.cat.ServiceCount(id)), u(adm.Instances.Tenants[t.Name])})
	}
	in := adm.Instances
	instances := uiTable{Name: "instances", Title: "Warm instances",
		Head: []string{"snapshot bytes", "snapshots", "idle", "restored", "recreated", "reused", "created", "recycled"},
		Rows: [][]string{{u(in.SnapshotBytes), u(in.Snapshots), i(in.Idle), u(in.Restored), u(in.Recreated), u(in.Reused),
			u(in.Created), u(in.Recycled)}}}
	nd := adm.Node
	node := uiTable{Name: "node", Title: "Node", Head: []string{"scope", "live", "queued", "max live", "max queued"},
		Rows: [][]string{{nd.Name, u(nd.Usage.LiveActivations), u(nd.Usage.Queued), u(nd.Limits.MaxLiveActivations),
			u(nd.Limits.MaxQueued)}}}

	ingress := uiTable{Name: "ingress", Title: "Ingress pools",
		Head: []string{"pool", "requests", "max requests", "bytes", "max bytes"}}
	for _, name := range []string{front.PoolData, front.PoolControl} {
		p := adm.Ingress[name]
		ingress.Rows = append(ingress.Rows, []string{name, i(p.Slots), i(p.MaxSlots), u(p.Bytes), u(p.MaxBytes)})
	}

	ls := v.load.Snapshot(v.clock.Now())
	state := "fresh"
	if ls.Reason != "" {
		state = ls.Reason
	}
	pressure := uiTable{Name: "pressure", Title: "Pressure", Head: []string{"source", "cpu", "memory", "sample age ms", "state"},
		Rows: [][]string{{v.loadKind, strconv.FormatFloat(ls.Last.CPU, 'f', 3, 64),
			strconv.FormatFloat(ls.Last.Memory, 'f', 3, 64), strconv.FormatInt(ls.Age.Milliseconds(), 10), state}}}

	d.Tables = []uiTable{cells, queues, tenants, node, ingress, pressure, instances, v.uiRefusals()}
	return d
}

// uiRefusals sums the refusal counter by code and reason since the node
// started.
func (v *statusViews) uiRefusals() uiTable {
	t := uiTable{Name: "refusals", Title: "Refusals since start", Head: []string{"code", "reason", "count"}}
	fams, err := v.refusals.Gather()
	if err != nil {
		// A collector failed; the refusal counter is still read when present.
		v.log.Warn("status page: gathering metrics", "err", err)
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

// handleUIData answers the page's data.
func (v *statusViews) handleUIData(w http.ResponseWriter, _ *http.Request, _ *auth.Principal) {
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	writeJSON(w, http.StatusOK, v.uiSnapshot())
}

// handleUI answers the status page.
func (v *statusViews) handleUI(w http.ResponseWriter, _ *http.Request, _ *auth.Principal) {
	var raw [18]byte
	_, _ = rand.Read(raw[:]) // crypto/rand.Read never fails
	nonce := base64.RawURLEncoding.EncodeToString(raw[:])
	var body bytes.Buffer
	if err := uiPage.Execute(&body, struct {
		Nonce  string
		Tables []uiTable
	}{nonce, v.uiSnapshot().Tables}); err != nil {
		v.log.Error("status page: rendering", "err", err)
		writeAnswer(w, problemAnswer(internalProblem(), 0))
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Security-Policy", uiCSP(nonce))
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	h.Set("Referrer-Policy", "no-referrer")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body.Bytes())
}

// handleAdmission is GET /v1/admission: the caller's tenant's admission
// view and ingress use.
func (v *statusViews) handleAdmission(w http.ResponseWriter, r *http.Request, p *auth.Principal) {
	s, ok := v.prov.TenantSnapshot(p.Tenant)
	if !ok {
		api.WriteProblem(w, forbidden(refusal.ReasonPrincipalNotAuthorized), 0)
		return
	}
	writeJSON(w, http.StatusOK, struct {
		admission.TenantView
		Ingress map[string]front.IngressUsage `json:"ingress"`
	}{s, v.ingressUsage(p.Tenant, false)})
}

// handleAdminAdmission is GET /v1/admin/admission: the node's.
func (v *statusViews) handleAdminAdmission(w http.ResponseWriter, _ *http.Request, _ *auth.Principal) {
	writeJSON(w, http.StatusOK, adminAdmission{QuotaSnapshot: v.prov.Snapshot(), Ingress: v.ingressUsage("", true),
		Instances: v.instances()})
}

// uiCSP is the page's policy: its own origin for the data it fetches, the
// inline style and script of this answer only, nothing else.
func uiCSP(nonce string) string {
	return "default-src 'self'; script-src 'nonce-" + nonce + "'; style-src 'nonce-" + nonce + "'; " +
		"img-src 'none'; object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
}

// uiPage is the status page. The script replaces each table body with the
// rows of /ui/data, through textContent only.
var uiPage = template.Must(template.New("ui").Parse(uiHTML))

// uiHTML is the page's template: an html/template with the answer's
// nonce and the tables.
//
//go:embed ui.html
var uiHTML string

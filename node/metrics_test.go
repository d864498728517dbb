package node

import (
	"encoding/json"
	"os"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/latent-node/latent-node/node/activation"
	"github.com/latent-node/latent-node/node/front"
	"github.com/latent-node/latent-node/runner"
	"github.com/latent-node/latent-node/vocab"
)

var descRE = regexp.MustCompile(`fqName: "([^"]+)".*variableLabels: \{([^}]*)\}`)

// describedMetrics maps every metric name the node registers to its label
// names (sorted, comma-joined).
func describedMetrics(t *testing.T, m *metrics) map[string]string {
	t.Helper()
	ch := make(chan *prometheus.Desc, 1024)
	for _, c := range m.all {
		c.Describe(ch)
	}
	close(ch)
	out := map[string]string{}
	for d := range ch {
		sm := descRE.FindStringSubmatch(d.String())
		if sm == nil {
			t.Fatalf("unreadable desc %s", d)
		}
		labels := strings.Split(sm[2], ",")
		slices.Sort(labels)
		out[sm[1]] = strings.Join(labels, ",")
	}
	return out
}

func TestMetrics_namesAndLabels(t *testing.T) {
	n, _ := bareNode(t)
	got := describedMetrics(t, n.metrics)
	want := map[string]string{
		"latent_activations_total":              "outcome,revision,route,service,tenant",
		"latent_fuel_consumed_total":            "revision,route,service,tenant",
		"latent_rejections_total":               "code,dimension,reason,scope",
		"latent_http_request_duration_seconds":  "code,route_kind",
		"latent_activation_memory_peak_bytes":   "cell_class",
		"latent_log_lines_dropped_total":        "tenant",
		"latent_build_info":                     "commit,date,go_version,version",
		"latent_load_pressure_ratio":            "resource",
		"latent_queue_wait_seconds":             "cell_class,queue_class",
		"latent_execution_seconds":              "cell_class,queue_class",
		"latent_load_sample_age_seconds":        "",
		"latent_compiled_bytes":                 "",
		"latent_cells":                          "cell_class,state",
		"latent_refusals_held_total":            "",
		"latent_http_connections_refused_total": "",
		"latent_go_heap_live_bytes":             "",
		"latent_scheduler_pauses_total":         "",
	}
	for name, labels := range want {
		if l, ok := got[name]; !ok || l != labels {
			t.Errorf("%s: labels %q (registered %v), want %q", name, l, ok, labels)
		}
	}
	// Renamed: the 0..1 gauge carries _ratio.
	if _, ok := got["latent_load_pressure"]; ok {
		t.Error("latent_load_pressure is still registered")
	}
	// Units and kinds in the name: counters end in _total, no
	// milliseconds or unitless durations.
	for name := range got {
		if !strings.HasPrefix(name, "latent_") {
			continue
		}
		if strings.Contains(name, "_ms") || strings.Contains(name, "millis") || strings.HasSuffix(name, "_duration") {
			t.Errorf("%s: durations are _seconds", name)
		}
	}
}

// TestMetrics_goHeapLive: after a collection the live-heap gauge holds at
// least what this test keeps reachable.
func TestMetrics_goHeapLive(t *testing.T) {
	n, _ := bareNode(t)
	keep := make([]byte, 8<<20)
	runtime.GC()
	got := -1.0
	for _, c := range n.metrics.all {
		ch := make(chan *prometheus.Desc, 64)
		c.Describe(ch)
		close(ch)
		for d := range ch {
			if strings.Contains(d.String(), `fqName: "latent_go_heap_live_bytes"`) {
				mc := make(chan prometheus.Metric, 1)
				c.Collect(mc)
				var m dto.Metric
				if err := (<-mc).Write(&m); err != nil {
					t.Fatal(err)
				}
				got = m.GetGauge().GetValue()
			}
		}
	}
	if got < float64(len(keep)) {
		t.Fatalf("latent_go_heap_live_bytes = %.0f, want ≥ %d", got, len(keep))
	}
	runtime.KeepAlive(keep)
}

func TestMetrics_revisionSeriesBounded(t *testing.T) {
	n, _ := bareNode(t)
	m := n.metrics
	rev := func(service, revision string, fuel uint64) *activation.Record {
		return &activation.Record{Target: vocab.Target{Tenant: "demo", Service: vocab.ServiceName(service), Route: "run"},
			Revision: vocab.RevisionID(revision), Executed: true, Outcome: runner.Success, FuelUsed: fuel}
	}
	for _, r := range []*activation.Record{rev("a", "r1", 5), rev("a", "r2", 5), rev("b", "r1", 5)} {
		m.observe(r)
	}
	if got := seriesCount(m.activations); got != 3 {
		t.Fatalf("%d activation series, want 3", got)
	}
	// A release with r2 only replaces r1 of a.
	m.keepRevisions("demo", "a", []vocab.RevisionRef{{Name: "v2", ID: "r2"}})
	if got := seriesCount(m.activations); got != 2 {
		t.Fatalf("%d activation series after the release, want 2", got)
	}
	if got := counterValue(m.fuel.WithLabelValues("demo", "b", "run", "r1")); got != 5 {
		t.Fatalf("service b lost its fuel series: %v", got)
	}
	// Deleting b drops its series (and only its).
	m.keepRevisions("demo", "b", nil)
	if got := seriesCount(m.activations); got != 1 {
		t.Fatalf("%d activation series after the delete, want 1", got)
	}
	if got := seriesCount(m.fuel); got != 1 {
		t.Fatalf("%d fuel series after the delete, want 1", got)
	}
	if len(m.tenants["demo"].services) != 1 || m.tenants["demo"].used != 2 { // the cache shrinks with them
		t.Fatalf("%d cached services, %d series used, want 1 and 2", len(m.tenants["demo"].services), m.tenants["demo"].used)
	}
	// A new observation of a dropped revision counts from zero again.
	m.observe(rev("b", "r1", 7))
	if got := counterValue(m.fuel.WithLabelValues("demo", "b", "run", "r1")); got != 7 {
		t.Fatalf("fuel of b/r1 after its delete and a new activation: %v, want 7", got)
	}
}

// TestMetrics_seriesBudget: a tenant's per-route series stop at its
// budget, later label sets count in its overflow series and counter, a
// removal gives the budget back, another tenant keeps its own budget, and a
// revision no longer deployed gets no series again.
func TestMetrics_seriesBudget(t *testing.T) {
	n, _ := bareNode(t)
	m := n.metrics
	m.budget = 5
	gone := vocab.RevisionID("old")
	m.deployed = func(_ vocab.Target, rev vocab.RevisionID) bool { return rev != gone }
	obs := func(tenant, service, route string, rev vocab.RevisionID, kind runner.Kind) {
		m.observe(&activation.Record{Target: vocab.Target{Tenant: vocab.TenantID(tenant), Service: vocab.ServiceName(service),
			Route: vocab.RouteName(route)}, Revision: rev, Executed: true, Outcome: kind, FuelUsed: 3})
	}
	other := func(tenant string, kind runner.Kind) float64 {
		return counterValue(m.activations.WithLabelValues(tenant, otherLabel, otherLabel, otherLabel, kind.String()))
	}
	obs("acme", "s", "a", "r1", runner.Success)       // 2 series
	obs("acme", "s", "a", "r1", runner.Trap)          // 3
	obs("acme", "s", "b", "r1", runner.Success)       // 5: the budget
	obs("acme", "s", "c", "r1", runner.Success)       // over: _other
	obs("acme", "s", "a", "r1", runner.DeclaredError) // a new outcome, over: _other
	obs("acme", "s", "a", "r1", runner.Success)       // its own series
	obs("demo", "s", "c", "r1", runner.Success)       // another tenant's budget
	if have := counterValue(m.activations.WithLabelValues("acme", "s", "a", "r1", runner.Success.String())); have != 2 {
		t.Errorf("acme s/a/r1 success = %v, want 2", have)
	}
	if have, want := other("acme", runner.Success)+other("acme", runner.DeclaredError), 2.0; have != want {
		t.Errorf("acme _other = %v, want %v", have, want)
	}
	if have := counterValue(m.overflowed.WithLabelValues("acme")); have != 2 {
		t.Errorf("overflow counter %v, want 2", have)
	}
	if have := counterValue(m.fuel.WithLabelValues("acme", otherLabel, otherLabel, otherLabel)); have != 6 {
		t.Errorf("acme _other fuel %v, want 6", have)
	}
	if have := counterValue(m.activations.WithLabelValues("demo", "s", "c", "r1", runner.Success.String())); have != 1 {
		t.Errorf("demo's own series %v, want 1", have)
	}
	// Deleting the service gives the budget back: c gets its own series.
	m.keepRevisions("acme", "s", nil)
	if m.tenants["acme"].used != 0 {
		t.Fatalf("acme uses %d series after the delete, want 0", m.tenants["acme"].used)
	}
	obs("acme", "s", "c", "r1", runner.Success)
	if have := counterValue(m.activations.WithLabelValues("acme", "s", "c", "r1", runner.Success.String())); have != 1 {
		t.Errorf("acme s/c/r1 after the delete = %v, want 1", have)
	}
	// An activation of a revision the catalog no longer has ends after the
	// release replaced it: no series of its own comes back.
	before := seriesCount(m.activations)
	obs("acme", "s", "c", gone, runner.Success)
	if have := seriesCount(m.activations); have != before {
		t.Errorf("%d activation series after a removed revision's activation, want %d", have, before)
	}
	if have := counterValue(m.overflowed.WithLabelValues("acme")); have != 3 {
		t.Errorf("overflow counter %v, want 3", have)
	}
}

var metricRE = regexp.MustCompile(`\blatent_[a-z0-9_]+`)

// TestDashboard_parses checks the Grafana dashboard is valid JSON and
// every metric it queries is registered.
func TestDashboard_parses(t *testing.T) {
	data, err := os.ReadFile("../deploy/grafana/latent-node.json")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatal(err)
	}
	n, _ := bareNode(t)
	known := describedMetrics(t, n.metrics)
	exists := func(name string) bool {
		if _, ok := known[name]; ok {
			return true
		}
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if _, ok := known[strings.TrimSuffix(name, suffix)]; ok && strings.HasSuffix(name, suffix) {
				return true
			}
		}
		return false
	}
	if exists("latent_no_such_metric") { // negative control
		t.Fatal("exists accepts anything")
	}
	queried := 0
	for _, p := range d.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			for _, name := range metricRE.FindAllString(tg.Expr, -1) {
				queried++
				if !exists(name) {
					t.Errorf("panel %q queries %s, which the node does not register", p.Title, name)
				}
			}
		}
	}
	if queried < 10 {
		t.Fatalf("only %d metric references in the dashboard", queried)
	}
}

// TestMetrics_observedFromRecord: an invocation's series carry what its
// answer's headers say (both are read from its record): its revision's
// activation and fuel counters, and the execution histogram of its cell
// class and of the queue class its priority admitted it to.
func TestMetrics_observedFromRecord(t *testing.T) {
	sn := startServed(t)
	m := sn.n.metrics
	for _, prio := range []string{"0", "9"} {
		a := sn.do(t, "POST", "/v1/invoke/demo/hello/greet", sn.admin, strings.NewReader("x"),
			map[string]string{"Latent-Priority": prio})
		if a.status != 200 {
			t.Fatalf("priority %s: status %d %s", prio, a.status, a.body)
		}
		p, _ := strconv.ParseUint(prio, 10, 32)
		queue := sn.n.cfg.QueueClasses[queueIndex(sn.n.cfg, uint32(p))].Name
		var h dto.Metric
		if err := m.execution.WithLabelValues(a.header.Get("Latent-Cell-Class"), queue).(prometheus.Metric).Write(&h); err != nil {
			t.Fatal(err)
		}
		if n := h.GetHistogram().GetSampleCount(); n != 1 {
			t.Errorf("priority %s: latent_execution_seconds{queue_class=%q} counts %d, want 1", prio, queue, n)
		}
	}
	// Both invocations resolved the one revision of the demo route.
	rev := sn.do(t, "POST", "/v1/invoke/demo/hello/greet", sn.admin, strings.NewReader("x"), nil)
	labels := []string{"demo", "hello", "greet", rev.header.Get("Latent-Revision")}
	if have := counterValue(m.activations.WithLabelValues(append(labels, "success")...)); have != 3 {
		t.Errorf("latent_activations_total = %v, want 3", have)
	}
	fuel, _ := strconv.ParseFloat(rev.header.Get("Latent-Fuel-Used"), 64)
	if have := counterValue(m.fuel.WithLabelValues(labels...)); fuel == 0 || have != 3*fuel {
		t.Errorf("latent_fuel_consumed_total = %v, want 3 × %v", have, fuel)
	}
}

// TestMetrics_seriesOwnTheirNames: the series keep copies of the names,
// never the request's path they were cut from (a long path suffix would
// otherwise live as long as the series, up to the tenant's budget of
// them): a new series, a new outcome of a series made by an earlier
// request, and the tenant's overflow series.
func TestMetrics_seriesOwnTheirNames(t *testing.T) {
	n, _ := bareNode(t)
	m := n.metrics
	m.budget = 3 // one fuel series and two outcomes: the third route overflows
	var paths []string
	observe := func(route string, kind runner.Kind) {
		t.Helper()
		path := "/v1/invoke/demo/svc/" + route + "/" + strings.Repeat("x", 64<<10)
		target, _, _, ok := front.InvokePath(path)
		if !ok {
			t.Fatal("not an invocation path")
		}
		paths = append(paths, path)
		m.observe(&activation.Record{Target: target, Revision: "r1", Executed: true, Outcome: kind})
	}
	observe("run", runner.Success) // a new series
	observe("run", runner.Trap)    // a new outcome of it
	observe("other", runner.Success)
	within := func(s string) bool {
		p := uintptr(unsafe.Pointer(unsafe.StringData(s)))
		for _, path := range paths {
			if start := uintptr(unsafe.Pointer(unsafe.StringData(path))); p >= start && p < start+uintptr(len(path)) {
				return true
			}
		}
		return false
	}
	for tenant, ts := range m.tenants {
		if within(tenant) || within(ts.name) {
			t.Errorf("the tenant cache's key %q shares a request's path", tenant)
		}
		for service, svc := range ts.services {
			if within(service) {
				t.Errorf("the service cache's key %q shares a request's path", service)
			}
			for k := range svc {
				if within(k.tenant) || within(k.service) || within(k.route) {
					t.Errorf("series key %+v shares a request's path", k)
				}
			}
		}
	}
	r := prometheus.NewRegistry()
	r.MustRegister(m.activations, m.fuel, m.overflowed)
	fams, err := r.Gather()
	if err != nil {
		t.Fatal(err)
	}
	labels := 0
	for _, f := range fams {
		for _, s := range f.GetMetric() {
			for _, l := range s.GetLabel() {
				labels++
				if within(l.GetValue()) {
					t.Errorf("%s{%s=%q} shares a request's path", f.GetName(), l.GetName(), l.GetValue())
				}
			}
		}
	}
	if labels == 0 {
		t.Fatal("gathered no labels")
	}
	if have := counterValue(m.activations.WithLabelValues("demo", "svc", "run", "r1", "trap")); have != 1 {
		t.Fatalf("the second outcome was counted %v times", have)
	}
	if have := counterValue(m.activations.WithLabelValues("demo", otherLabel, otherLabel, otherLabel, "success")); have != 1 {
		t.Fatalf("the overflow was counted %v times", have)
	}
}

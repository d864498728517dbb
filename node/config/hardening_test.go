package config

import (
	"reflect"
	"slices"
	"testing"
	"time"
	"unsafe"
)

// TestParse_hardening decodes the deploy limits, the catalog quotas and the
// connection and compile bounds: defaults when absent, values when given,
// and a problem naming the key for each value out of range.
func TestParse_hardening(t *testing.T) {
	cfg, err := Parse([]byte(doc(nil, "")))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.DeployLimits != DefaultDeployLimits || cfg.Catalog != DefaultCatalogLimits {
		t.Errorf("defaults: have %+v, %+v", cfg.DeployLimits, cfg.Catalog)
	}
	if cfg.Node.MaxConnections != 0 || cfg.Node.MaxConnectionsPerAddress != 256 || cfg.Node.CompileConcurrency != 1 {
		t.Errorf("node defaults: have %+v", cfg.Node)
	}

	set := `
[deploy_limits]
module_bytes = "4MiB"
functions = 10
function_locals = 20
total_locals = 30
function_body_bytes = 4096
code_bytes = "1MiB"
nesting_depth = 64
data_bytes = "2MiB"
imports = 5
exports = 6
tables = 1
table_elements = 1000
globals = 7
types = 9
type_params = 99
loop_local_work = 8000

[catalog]
max_services = 100
max_services_per_tenant = 10
max_artifacts_per_tenant = 11
max_artifact_bytes_per_tenant = "64MiB"
max_deployed_bytes_per_tenant = "32MiB"
artifact_grace = "5m"
`
	node := base[0].text + "max_connections = 300\nmax_connections_per_address = 40\ncompile_concurrency = 2\n"
	cfg, err = Parse([]byte(doc(map[string]string{"node": node}, set)))
	if err != nil {
		t.Fatal(err)
	}
	want := DeployLimits{ModuleBytes: 4 << 20, Functions: 10, FunctionLocals: 20, TotalLocals: 30, FunctionBodyBytes: 4096,
		CodeBytes: 1 << 20, NestingDepth: 64, DataBytes: 2 << 20, Imports: 5, Exports: 6, Tables: 1, TableElements: 1000, Globals: 7,
		Types: 9, TypeParams: 99, LoopLocalWork: 8000}
	if cfg.DeployLimits != want {
		t.Errorf("deploy limits: have %+v, want %+v", cfg.DeployLimits, want)
	}
	wantCat := CatalogLimits{MaxServices: 100, MaxServicesPerTenant: 10, MaxArtifactsPerTenant: 11,
		MaxArtifactBytesPerTenant: 64 << 20, MaxDeployedBytesPerTenant: 32 << 20, ArtifactGrace: 5 * time.Minute}
	if cfg.Catalog != wantCat {
		t.Errorf("catalog: have %+v, want %+v", cfg.Catalog, wantCat)
	}
	if n := cfg.Node; n.MaxConnections != 300 || n.MaxConnectionsPerAddress != 40 || n.CompileConcurrency != 2 {
		t.Errorf("node: have %+v", n)
	}
	if def, err := Parse([]byte(doc(nil, ""))); err != nil || def.Node.MaxMetricSeriesPerTenant != DefaultMaxMetricSeriesPerTenant {
		t.Errorf("max_metric_series_per_tenant default: %v", err)
	}
	if c, err := Parse([]byte(doc(map[string]string{"node": base[0].text + "max_metric_series_per_tenant = 8\n"}, ""))); err != nil ||
		c.Node.MaxMetricSeriesPerTenant != 8 {
		t.Errorf("max_metric_series_per_tenant = 8: %v", err)
	}

	tests := []struct {
		name  string
		node  string
		extra string
		want  []string
	}{
		{name: "zero limit", extra: "[deploy_limits]\nfunctions = 0\n", want: []string{"deploy_limits.functions"}},
		{name: "unknown limit", extra: "[deploy_limits]\nfunction = 5\n", want: []string{"deploy_limits.function"}},
		{name: "module over 2GiB", extra: "[deploy_limits]\nmodule_bytes = \"3GiB\"\n", want: []string{"deploy_limits.module_bytes"}},
		{name: "per tenant above node", extra: "[catalog]\nmax_services = 5\nmax_services_per_tenant = 6\n",
			want: []string{"catalog.max_services_per_tenant"}},
		{name: "zero grace", extra: "[catalog]\nartifact_grace = \"0s\"\n", want: []string{"catalog.artifact_grace"}},
		{name: "zero quota", extra: "[catalog]\nmax_artifacts_per_tenant = 0\n", want: []string{"catalog.max_artifacts_per_tenant"}},
		{name: "compile concurrency", node: "compile_concurrency = 0\n", want: []string{"node.compile_concurrency"}},
		{name: "no signatures", node: "max_signatures_per_tenant = 0\n", want: []string{"node.max_signatures_per_tenant"}},
		{name: "too many signatures", node: "max_signatures_per_tenant = 10000001\n", want: []string{"node.max_signatures_per_tenant"}},
		{name: "no metric series", node: "max_metric_series_per_tenant = 0\n", want: []string{"node.max_metric_series_per_tenant"}},
		{name: "too many metric series", node: "max_metric_series_per_tenant = 1000001\n",
			want: []string{"node.max_metric_series_per_tenant"}},
		{name: "per-address connections", node: "max_connections_per_address = 0\n", want: []string{"node.max_connections_per_address"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(doc(map[string]string{"node": base[0].text + tt.node}, tt.extra)))
			if have := keysOfProblems(err); !slices.Equal(have, tt.want) {
				t.Errorf("have %q, want %q", have, tt.want)
			}
		})
	}
}

// TestDeployLimitKeys_everyField fails when the runner gains a deploy limit
// that [deploy_limits] cannot set.
func TestDeployLimitKeys_everyField(t *testing.T) {
	var l DeployLimits
	v := reflect.ValueOf(&l).Elem()
	covered := map[uintptr]bool{}
	for _, k := range deployLimitKeys(&l) {
		covered[uintptr(unsafe.Pointer(k.dst))] = true
	}
	for i := range v.NumField() {
		if !covered[v.Field(i).Addr().Pointer()] {
			t.Errorf("runner.Limits.%s has no [deploy_limits] key", v.Type().Field(i).Name)
		}
	}
}

func TestSizing(t *testing.T) {
	cfg, err := Parse([]byte(doc(nil, "")))
	if err != nil {
		t.Fatal(err)
	}
	cells := 0
	for _, cc := range cfg.CellClasses {
		cells += cc.Parallelism
	}
	tests := []struct {
		name      string
		cpus, max int
		guests    int
	}{
		{"one CPU", 1, 0, 1},
		{"more CPUs than cells", cells + 8, 0, cells},
		{"configured bound", 1, 3, min(3, cells)},
		{"no CPU reported", 0, 0, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := *cfg
			c.Node.MaxRunningGuests = tt.max
			g := c.Sizing(tt.cpus)
			if g.Guests != tt.guests || g.Cells != cells {
				t.Fatalf("have %+v, want %d guests of %d cells", g, tt.guests, cells)
			}
		})
	}
}

// TestParse_ingress decodes the ingress pools: defaults when absent, values
// when given, per-tenant and per-principal byte budgets lowered to the
// bounds above them when left out, and a problem naming the key for each
// value out of range, at every boundary. The base document's
// node.limits.max_payload_bytes is 8MiB and deploy_limits.module_bytes its
// default, 16MiB: the largest data request models 8MiB+4KiB, the largest
// control request 16MiB+4KiB.
func TestParse_ingress(t *testing.T) {
	cfg, err := Parse([]byte(doc(nil, "")))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Ingress != DefaultIngress {
		t.Fatalf("defaults: have %+v", cfg.Ingress)
	}
	const dataLargest, controlLargest = 8<<20 + IngressOverheadBytes, 16<<20 + IngressOverheadBytes
	dc := DefaultIngress.Control
	decoded := []struct {
		name, extra string
		want        Ingress
	}{
		{"every key", `[ingress.data]
slots = 10
bytes = "64MiB"
per_tenant = 5
per_principal = 2
bytes_per_tenant = "32MiB"
bytes_per_principal = "16MiB"
[ingress.control]
slots = 16
`, Ingress{Data: IngressPool{Slots: 10, Bytes: 64 << 20, PerTenant: 5, PerPrincipal: 2, BytesPerTenant: 32 << 20, BytesPerPrincipal: 16 << 20},
			Control: IngressPool{Slots: 16, Bytes: dc.Bytes, PerTenant: dc.PerTenant, PerPrincipal: dc.PerPrincipal,
				BytesPerTenant: dc.BytesPerTenant, BytesPerPrincipal: dc.BytesPerPrincipal}}},
		{"budgets left out follow a smaller bytes", "[ingress.data]\nbytes = \"20MiB\"\n",
			Ingress{Data: IngressPool{Slots: 4096, Bytes: 20 << 20, PerTenant: 2048, PerPrincipal: 1024, BytesPerTenant: 20 << 20, BytesPerPrincipal: 20 << 20},
				Control: dc}},
		{"principal budget left out follows a smaller tenant budget", "[ingress.control]\nbytes_per_tenant = \"100MiB\"\n",
			Ingress{Data: DefaultIngress.Data, Control: IngressPool{Slots: 32, Bytes: 512 << 20, PerTenant: 8, PerPrincipal: 4,
				BytesPerTenant: 100 << 20, BytesPerPrincipal: 100 << 20}}},
		{"budgets at the largest request", "[ingress.data]\nbytes = 8392704\nbytes_per_tenant = 8392704\nbytes_per_principal = 8392704\n",
			Ingress{Data: IngressPool{Slots: 4096, Bytes: dataLargest, PerTenant: 2048, PerPrincipal: 1024, BytesPerTenant: dataLargest, BytesPerPrincipal: dataLargest},
				Control: dc}},
		{"bytes above a given budget", "[ingress.data]\nbytes_per_tenant = \"2GiB\"\nbytes = \"2GiB\"\n",
			Ingress{Data: IngressPool{Slots: 4096, Bytes: 2 << 30, PerTenant: 2048, PerPrincipal: 1024, BytesPerTenant: 2 << 30, BytesPerPrincipal: 256 << 20},
				Control: dc}},
	}
	for _, tt := range decoded {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Parse([]byte(doc(nil, tt.extra)))
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Ingress != tt.want {
				t.Fatalf("have %+v, want %+v", cfg.Ingress, tt.want)
			}
		})
	}
	refused := []struct {
		name, extra string
		want        []string
	}{
		{"zero slots", "[ingress.data]\nslots = 0\n", []string{"ingress.data.slots"}},
		{"tiny bytes", "[ingress.control]\nbytes = 1024\n", []string{"ingress.control.bytes"}},
		{"per tenant over slots", "[ingress.data]\nslots = 4\nper_tenant = 5\nper_principal = 1\n", []string{"ingress.data.per_tenant"}},
		{"per principal over per tenant", "[ingress.data]\nper_tenant = 4\nper_principal = 5\n", []string{"ingress.data.per_principal"}},
		{"unknown pool", "[ingress.admin]\nslots = 1\n", []string{"ingress.admin"}},
		{"unknown key", "[ingress.data]\nbytes_per_principle = 1\n", []string{"ingress.data.bytes_per_principle"}},
		{"budget not a size", "[ingress.control]\nbytes_per_tenant = \"lots\"\n", []string{"ingress.control.bytes_per_tenant"}},
		{"negative budget", "[ingress.data]\nbytes_per_principal = -1\n", []string{"ingress.data.bytes_per_principal"}},
		{"bytes one short of the largest data request", "[ingress.data]\nbytes = 8392703\n", []string{"ingress.data.bytes"}},
		{"bytes one short of the largest control request", "[ingress.control]\nbytes = 16781311\n", []string{"ingress.control.bytes"}},
		{"tenant budget one over bytes", "[ingress.data]\nbytes = \"64MiB\"\nbytes_per_tenant = 67108865\n", []string{"ingress.data.bytes_per_tenant"}},
		{"tenant budget one short of the largest request", "[ingress.data]\nbytes_per_tenant = 8392703\n", []string{"ingress.data.bytes_per_tenant"}},
		{"principal budget one over the tenant budget", "[ingress.control]\nbytes_per_tenant = \"64MiB\"\nbytes_per_principal = 67108865\n",
			[]string{"ingress.control.bytes_per_principal"}},
		{"principal budget one short of the largest request", "[ingress.control]\nbytes_per_principal = 16781311\n",
			[]string{"ingress.control.bytes_per_principal"}},
		{"a larger payload cap needs larger budgets", "[ingress.data]\nbytes_per_principal = \"8MiB\"\n", []string{"ingress.data.bytes_per_principal"}},
		{"a larger module cap needs larger budgets", "[deploy_limits]\nmodule_bytes = \"200MiB\"\n", []string{"ingress.control.bytes_per_principal"}},
		{"bad module cap is reported once", "[deploy_limits]\nmodule_bytes = \"3GiB\"\n", []string{"deploy_limits.module_bytes"}},
		{"each pool reports its own", "[ingress.data]\nbytes_per_tenant = 1\n[ingress.control]\nbytes_per_principal = 1\n",
			[]string{"ingress.control.bytes_per_principal", "ingress.data.bytes_per_tenant"}},
	}
	for _, tt := range refused {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(doc(nil, tt.extra)))
			if have := keysOfProblems(err); !slices.Equal(have, tt.want) {
				t.Errorf("have %q, want %q (%v)", have, tt.want, err)
			}
		})
	}
}

// TestParse_tracing decodes [tracing]: off with defaults when absent, the
// values when given, and a problem naming the key for each bad value.
func TestParse_tracing(t *testing.T) {
	cfg, err := Parse([]byte(doc(nil, "")))
	if err != nil {
		t.Fatal(err)
	}
	want := Tracing{SampleRatio: 1, ServiceName: "latent-node", Timeout: 10 * time.Second, BatchTimeout: 5 * time.Second}
	if cfg.Tracing != want {
		t.Errorf("defaults: have %+v, want %+v", cfg.Tracing, want)
	}
	cfg, err = Parse([]byte(doc(nil, "[tracing]\nenabled = true\nendpoint = \"http://127.0.0.1:4318/v1/traces\"\n"+
		"sample_ratio = 0.25\nrespect_remote_sampled = true\nservice_name = \"edge\"\ntimeout = \"2s\"\nbatch_timeout = \"100ms\"\n")))
	if err != nil {
		t.Fatal(err)
	}
	want = Tracing{Enabled: true, Endpoint: "http://127.0.0.1:4318/v1/traces", SampleRatio: 0.25, RespectRemoteSampled: true, ServiceName: "edge",
		Timeout: 2 * time.Second, BatchTimeout: 100 * time.Millisecond}
	if cfg.Tracing != want {
		t.Errorf("values: have %+v, want %+v", cfg.Tracing, want)
	}
	for _, tc := range []struct{ name, table, key string }{
		{"endpoint missing", "enabled = true", "tracing.endpoint"},
		{"endpoint not http", "enabled = true\nendpoint = \"grpc://x:4317\"", "tracing.endpoint"},
		{"endpoint without host", "enabled = true\nendpoint = \"http:///v1/traces\"", "tracing.endpoint"},
		{"enabled not a boolean", "enabled = \"yes\"", "tracing.enabled"},
		{"ratio above 1", "sample_ratio = 1.5", "tracing.sample_ratio"},
		{"ratio nan", "sample_ratio = nan", "tracing.sample_ratio"},
		{"respect remote sampled not a boolean", "respect_remote_sampled = 1", "tracing.respect_remote_sampled"},
		{"empty service name", "service_name = \"\"", "tracing.service_name"},
		{"zero timeout", "timeout = \"0s\"", "tracing.timeout"},
		{"zero batch timeout", "batch_timeout = \"0s\"", "tracing.batch_timeout"},
		{"unknown key", "endpont = \"http://x\"", "tracing.endpont"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(doc(nil, "[tracing]\n"+tc.table+"\n")))
			if got := keysOfProblems(err); !slices.Equal(got, []string{tc.key}) {
				t.Errorf("problems at %q, want [%s] (err: %v)", got, tc.key, err)
			}
		})
	}
	// Off, the endpoint is not needed (the negative control of the first case).
	if _, err := Parse([]byte(doc(nil, "[tracing]\nenabled = false\n"))); err != nil {
		t.Errorf("disabled without endpoint: %v", err)
	}
}

package config

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/latent-node/latent-node/admission"
	"github.com/latent-node/latent-node/cellpool"
	"github.com/latent-node/latent-node/vocab"
)

// Hashes of three keys, for principals.
const (
	hashA = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	hashB = "sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
	hashC = "sha256:cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc"
)

// base is a valid configuration in named sections; a test replaces sections
// to make one mistake at a time.
var base = []struct{ name, text string }{
	{"node", `
[node]
listen = "127.0.0.1:8080"
data_dir = "/var/lib/latent-node"
architecture = "x86_64"
region = "local"
zone = "local-a"
max_output_bytes = "1MiB"
shutdown_grace = "10s"
`},
	{"budget", `
[node.budget_ceiling]
cpu_fuel = 5_000_000_000
memory_bytes = "512MiB"
wall_time = "30s"
`},
	{"node.limits", `
[node.limits]
max_live_activations = 256
max_queued = 512
max_reserved_fuel = 1_000_000_000_000
max_reserved_memory = "8GiB"
max_payload_bytes = "8MiB"
max_priority = 9
`},
	{"queue_classes", `
[[queue_classes]]
name = "batch"
priorities = [0, 4]
max_queued = 256

[[queue_classes]]
name = "interactive"
priorities = [5, 9]
max_queued = 256
reserved_cells = 1
`},
	{"cell_classes", `
[cell_classes.tiny]
memory = "16MiB"
parallelism = 2
threading = ["single"]
features = ["bulk-memory", "simd"]
target_service_time = "0s"

[cell_classes.small]
memory = 67108864
parallelism = 2
`},
	{"trust_classes", `
[trust_classes.untrusted]
cell_classes = ["tiny", "small"]
[trust_classes.untrusted.limits]
max_live_activations = 128
max_queued = 256
max_reserved_fuel = 500_000_000_000
max_reserved_memory = "4GiB"
`},
	{"tenants", `
[tenants.acme]
trust_classes = ["untrusted"]
cell_classes = ["tiny", "small"]
subjects = ["alice", "thumbnailer"]
kinds = ["user", "service"]
[tenants.acme.limits]
max_live_activations = 64
max_queued = 128
max_reserved_fuel = 200_000_000_000
max_reserved_memory = "2GiB"
max_payload_bytes = "1MiB"
max_priority = 6
`},
	{"principals", `
[[principals]]
subject = "alice"
kind = "user"
tenant = "acme"
roles = ["invoke"]
api_keys = ["` + hashA + `"]

[[principals]]
subject = "thumbnailer"
kind = "service"
tenant = "acme"
service_identity = "thumbnailer"
roles = ["invoke", "deploy"]
api_keys = ["` + hashB + `", "` + hashC + `"]
`},
	{"overload", `
[overload]
cpu_threshold = 0.95
memory_threshold = 0.90
max_observation_age = "2s"
sample_interval = "250ms"
`},
	{"deadline", `
[deadline]
estimated_service_time = "20ms"
minimum_execution_time = "1ms"
safety_margin = "2ms"
`},
	{"metadata", `
[metadata]
maximum_identifier_bytes = 128
maximum_metadata_entries = 32
maximum_metadata_bytes = 4096
`},
	{"scheduler", `
[scheduler]
max_wait = "10s"
lower_class_after = 8
fairness = "fuel"
`},
}

// doc assembles base with sections replaced by set ("" removes a section),
// after extra (top-level keys must precede every table header).
func doc(set map[string]string, extra string) string {
	var b strings.Builder
	b.WriteString(extra)
	for _, s := range base {
		text, ok := set[s.name]
		if !ok {
			text = s.text
		}
		b.WriteString(text)
		b.WriteString("\n")
	}
	return b.String()
}

func keysOfProblems(err error) []string {
	var e *Error
	if !errors.As(err, &e) {
		return []string{"<not a *config.Error: " + err.Error() + ">"}
	}
	keys := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		keys[i] = p.Field
	}
	return keys
}

func TestParse_base(t *testing.T) {
	cfg, err := Parse([]byte(doc(nil, "")))
	if err != nil {
		t.Fatal(err)
	}
	if have := cfg.CellClasses[vocab.CellSmall].MemoryBytes; have != 64<<20 {
		t.Errorf("integer size: have %d", have)
	}
	if have := cfg.CellClasses[vocab.CellSmall].Features; have != DefaultFeatures {
		t.Errorf("default features: have %v", have)
	}
	if have := cfg.CellClasses[vocab.CellSmall].Threading; !slices.Equal(have, []vocab.Threading{vocab.ThreadingSingle}) {
		t.Errorf("default threading: have %v", have)
	}
	if have := cfg.Node.Limits.MaxReservedFuel; have != 1_000_000_000_000 {
		t.Errorf("underscored integer: have %d", have)
	}
	p := cfg.Principals[1]
	if p.Kind != admission.KindService || p.Roles != RoleInvoke|RoleDeploy || len(p.APIKeys) != 2 || p.ServiceIdentity != "thumbnailer" {
		t.Errorf("principal: have %+v", p)
	}
}

// TestParse_rules makes one mistake at a time and expects exactly the key
// paths of the problems it causes.
func TestParse_rules(t *testing.T) {
	tests := []struct {
		name  string
		set   map[string]string
		extra string
		opts  []Option
		want  []string
	}{
		// Strict decoding.
		{name: "unknown top-level key", extra: "bogus = 1\n", want: []string{"bogus"}},
		{name: "unknown table", extra: "[frobnicate]\nx = 1\n", want: []string{"frobnicate"}},
		{name: "unknown nested key", set: map[string]string{"tenants": strings.Replace(base[6].text, "max_queued = 128", "max_queued = 128\nmax_queuedd = 1", 1)},
			want: []string{"tenants.acme.limits.max_queuedd"}},
		{name: "unknown key in an array table", set: map[string]string{"principals": base[7].text + "colour = \"blue\"\n"},
			want: []string{"principals[1].colour"}},
		{name: "trust-class limits have no payload ceiling", set: map[string]string{"trust_classes": strings.Replace(base[5].text, "max_queued = 256", "max_queued = 256\nmax_payload_bytes = 5\nmax_priority = 1", 1)},
			want: []string{"trust_classes.untrusted.limits.max_payload_bytes", "trust_classes.untrusted.limits.max_priority"}},
		{name: "integer as string", set: map[string]string{"node.limits": strings.Replace(base[2].text, "max_queued = 512", `max_queued = "512"`, 1)},
			want: []string{"node.limits.max_queued"}},
		{name: "negative integer", set: map[string]string{"node.limits": strings.Replace(base[2].text, "max_queued = 512", `max_queued = -1`, 1)},
			want: []string{"node.limits.max_queued"}},
		{name: "float for an integer", set: map[string]string{"node.limits": strings.Replace(base[2].text, "max_queued = 512", `max_queued = 1.5`, 1)},
			want: []string{"node.limits.max_queued"}},
		{name: "bad size string", set: map[string]string{"node.limits": strings.Replace(base[2].text, `"8GiB"`, `"8 GiB"`, 1)},
			want: []string{"node.limits.max_reserved_memory"}},
		{name: "size of the wrong type", set: map[string]string{"node.limits": strings.Replace(base[2].text, `"8GiB"`, `true`, 1)},
			want: []string{"node.limits.max_reserved_memory"}},
		{name: "negative size", set: map[string]string{"node.limits": strings.Replace(base[2].text, `"8GiB"`, `-5`, 1)},
			want: []string{"node.limits.max_reserved_memory"}},
		{name: "overflowing size", set: map[string]string{"node.limits": strings.Replace(base[2].text, `"8GiB"`, `"99999999TiB"`, 1)},
			want: []string{"node.limits.max_reserved_memory"}},
		{name: "duration without unit", set: map[string]string{"budget": strings.Replace(base[1].text, `"30s"`, `"30"`, 1)},
			want: []string{"node.budget_ceiling.wall_time"}},
		{name: "duration as integer", set: map[string]string{"budget": strings.Replace(base[1].text, `"30s"`, `30`, 1)},
			want: []string{"node.budget_ceiling.wall_time"}},
		{name: "queue_classes not an array of tables", set: map[string]string{"queue_classes": ""}, extra: "queue_classes = 5\n",
			want: []string{"queue_classes"}},
		{name: "principal not a table", set: map[string]string{"principals": ""}, extra: "principals = [5]\n",
			want: []string{"principals[0]"}},
		{name: "syntax error", extra: "x = \n", want: []string{""}},
		{name: "duplicate key", set: map[string]string{"scheduler": base[11].text + "max_wait = \"1s\"\n"}, want: []string{""}},

		// Required keys.
		{name: "missing node table", set: map[string]string{"node": "", "budget": "", "node.limits": ""}, want: []string{"node"}},
		{name: "missing node limits", set: map[string]string{"node.limits": ""}, want: []string{"node.limits"}},
		{name: "missing node limit", set: map[string]string{"node.limits": strings.Replace(base[2].text, "max_queued = 512\n", "", 1)},
			want: []string{"node.limits.max_queued"}},
		{name: "missing node payload ceiling", set: map[string]string{"node.limits": strings.Replace(base[2].text, "max_payload_bytes = \"8MiB\"\n", "", 1)},
			want: []string{"node.limits.max_payload_bytes"}},
		{name: "missing tenant limit", set: map[string]string{"tenants": strings.Replace(base[6].text, "max_priority = 6\n", "", 1)},
			want: []string{"tenants.acme.limits.max_priority"}},
		{name: "missing tenant limits table", set: map[string]string{"tenants": strings.Split(base[6].text, "[tenants.acme.limits]")[0]},
			want: []string{"tenants.acme.limits"}},
		{name: "missing trust-class limit", set: map[string]string{"trust_classes": strings.Replace(base[5].text, "max_reserved_memory = \"4GiB\"\n", "", 1)},
			want: []string{"trust_classes.untrusted.limits.max_reserved_memory"}},
		{name: "missing budget ceiling key", set: map[string]string{"budget": strings.Replace(base[1].text, "wall_time = \"30s\"\n", "", 1)},
			want: []string{"node.budget_ceiling.wall_time"}},
		{name: "missing budget ceiling", set: map[string]string{"budget": ""}, want: []string{"node.budget_ceiling"}},
		{name: "missing data_dir", set: map[string]string{"node": strings.Replace(base[0].text, "data_dir = \"/var/lib/latent-node\"\n", "", 1)},
			want: []string{"node.data_dir"}},
		{name: "data_dir supplied by the caller", set: map[string]string{"node": strings.Replace(base[0].text, "data_dir = \"/var/lib/latent-node\"\n", "", 1)},
			opts: []Option{WithDataDir("/tmp/demo")}, want: nil},
		{name: "missing queue max_queued", set: map[string]string{"queue_classes": strings.Replace(base[3].text, "max_queued = 256\n", "", 1)},
			want: []string{"queue_classes[0].max_queued"}},
		{name: "missing queue name", set: map[string]string{"queue_classes": strings.Replace(base[3].text, "name = \"batch\"\n", "", 1)},
			want: []string{"queue_classes[0].name"}},
		{name: "missing cell memory", set: map[string]string{"cell_classes": strings.Replace(base[4].text, "memory = 67108864\n", "", 1)},
			want: []string{"cell_classes.small.memory"}},
		{name: "missing tenant allowlist", set: map[string]string{"tenants": strings.Replace(base[6].text, "subjects = [\"alice\", \"thumbnailer\"]\n", "", 1)},
			want: []string{"tenants.acme.subjects"}},
		{name: "missing trust-class cell classes", set: map[string]string{"trust_classes": strings.Replace(base[5].text, "cell_classes = [\"tiny\", \"small\"]\n", "", 1)},
			want: []string{"trust_classes.untrusted.cell_classes"}},
		{name: "optional tables may be omitted", set: map[string]string{"overload": "", "deadline": "", "metadata": "", "scheduler": ""}, want: nil},

		// Node.
		{name: "listen without port", set: map[string]string{"node": strings.Replace(base[0].text, `"127.0.0.1:8080"`, `"localhost"`, 1)},
			want: []string{"node.listen"}},
		{name: "listen port out of range", set: map[string]string{"node": strings.Replace(base[0].text, `"127.0.0.1:8080"`, `":99999"`, 1)},
			want: []string{"node.listen"}},
		{name: "listen port by name", set: map[string]string{"node": strings.Replace(base[0].text, `"127.0.0.1:8080"`, `"127.0.0.1:http"`, 1)},
			want: []string{"node.listen"}},
		{name: "listen host with a space", set: map[string]string{"node": strings.Replace(base[0].text, `"127.0.0.1:8080"`, `"my host:80"`, 1)},
			want: []string{"node.listen"}},
		{name: "listen on every interface, free port", set: map[string]string{"node": strings.Replace(base[0].text, `"127.0.0.1:8080"`, `":0"`, 1)}},
		{name: "listen on a host name and IPv6", set: map[string]string{"node": strings.Replace(base[0].text, `listen = "127.0.0.1:8080"`, `listen = "[::1]:8080"`, 1)}},
		{name: "max_output_bytes zero", set: map[string]string{"node": strings.Replace(base[0].text, `"1MiB"`, `0`, 1)},
			want: []string{"node.max_output_bytes"}},
		{name: "max_output_bytes too large", set: map[string]string{"node": strings.Replace(base[0].text, `"1MiB"`, `"2GiB"`, 1)},
			want: []string{"node.max_output_bytes"}},
		{name: "shutdown_grace negative", set: map[string]string{"node": strings.Replace(base[0].text, `"10s"`, `"-1s"`, 1)},
			want: []string{"node.shutdown_grace"}},
		{name: "shutdown_grace zero", set: map[string]string{"node": strings.Replace(base[0].text, `"10s"`, `"0s"`, 1)}},
		{name: "empty architecture", set: map[string]string{"node": strings.Replace(base[0].text, `"x86_64"`, `""`, 1)},
			want: []string{"node.architecture"}},
		{name: "wall_time zero", set: map[string]string{"budget": strings.Replace(base[1].text, `"30s"`, `"0s"`, 1)},
			want: []string{"node.budget_ceiling.wall_time"}},
		{name: "wall_time negative", set: map[string]string{"budget": strings.Replace(base[1].text, `"30s"`, `"-30s"`, 1)},
			want: []string{"node.budget_ceiling.wall_time"}},
		{name: "cpu_fuel zero", set: map[string]string{"budget": strings.Replace(base[1].text, `5_000_000_000`, `0`, 1)},
			want: []string{"node.budget_ceiling.cpu_fuel"}},
		{name: "memory_bytes zero", set: map[string]string{"budget": strings.Replace(base[1].text, `"512MiB"`, `0`, 1)},
			want: []string{"node.budget_ceiling.memory_bytes"}},
		{name: "node max_priority too large", set: map[string]string{"node.limits": strings.Replace(base[2].text, `max_priority = 9`, `max_priority = 1001`, 1)},
			want: []string{"node.limits.max_priority"}},

		// Queue classes.
		{name: "no queue classes", set: map[string]string{"queue_classes": ""}, want: []string{"queue_classes", "queue_classes"}},
		{name: "overlapping queue classes", set: map[string]string{"queue_classes": strings.Replace(base[3].text, "[5, 9]", "[4, 9]", 1)},
			want: []string{"queue_classes[1].priorities"}},
		{name: "gap in queue classes", set: map[string]string{"queue_classes": strings.Replace(base[3].text, "[5, 9]", "[6, 9]", 1)},
			want: []string{"queue_classes"}},
		{name: "queue classes not reaching max_priority", set: map[string]string{"queue_classes": strings.Replace(base[3].text, "[5, 9]", "[5, 8]", 1)},
			want: []string{"queue_classes"}},
		{name: "empty queue range", set: map[string]string{"queue_classes": strings.Replace(base[3].text, "[5, 9]", "[9, 5]", 1)},
			want: []string{"queue_classes", "queue_classes[1].priorities"}},
		{name: "priorities not a pair", set: map[string]string{"queue_classes": strings.Replace(base[3].text, "[5, 9]", "[5]", 1)},
			want: []string{"queue_classes[1].priorities"}},
		{name: "priority not an integer", set: map[string]string{"queue_classes": strings.Replace(base[3].text, "[5, 9]", `["5", 9]`, 1)},
			want: []string{"queue_classes[1].priorities[0]"}},
		{name: "negative priority", set: map[string]string{"queue_classes": strings.Replace(base[3].text, "[0, 4]", `[-1, 4]`, 1)},
			want: []string{"queue_classes[0].priorities[0]"}},
		{name: "missing priorities", set: map[string]string{"queue_classes": strings.Replace(base[3].text, "priorities = [0, 4]\n", "", 1)},
			want: []string{"queue_classes[0].priorities"}},
		{name: "duplicate queue name", set: map[string]string{"queue_classes": strings.Replace(base[3].text, `"interactive"`, `"batch"`, 1)},
			want: []string{"queue_classes[1].name"}},
		{name: "invalid queue name", set: map[string]string{"queue_classes": strings.Replace(base[3].text, `"interactive"`, `"inter active"`, 1)},
			want: []string{"queue_classes[1].name"}},
		{name: "reserved cells exceed a class", set: map[string]string{"queue_classes": strings.Replace(base[3].text, "reserved_cells = 1", "reserved_cells = 3", 1)},
			want: []string{"cell_classes.small.parallelism", "cell_classes.tiny.parallelism"}},
		{name: "reserved cells leave nothing shared", set: map[string]string{"queue_classes": strings.Replace(base[3].text, "reserved_cells = 1", "reserved_cells = 2", 1)},
			want: []string{"cell_classes.small.parallelism", "cell_classes.tiny.parallelism"}},
		{name: "every class reserves all cells", set: map[string]string{"queue_classes": strings.Replace(
			strings.Replace(base[3].text, "reserved_cells = 1", "reserved_cells = 1", 1), "max_queued = 256\n\n", "max_queued = 256\nreserved_cells = 1\n\n", 1)}},

		// Cell classes.
		{name: "unknown cell class", extra: "[cell_classes.huge]\nmemory = \"1GiB\"\nparallelism = 1\n", want: []string{"cell_classes.huge"}},
		{name: "cell memory not whole pages", set: map[string]string{"cell_classes": strings.Replace(base[4].text, `"16MiB"`, `"1000KiB"`, 1)},
			want: []string{"cell_classes.tiny.memory"}},
		{name: "cell memory zero", set: map[string]string{"cell_classes": strings.Replace(base[4].text, `"16MiB"`, `0`, 1)},
			want: []string{"cell_classes.tiny.memory"}},
		{name: "cell memory above 4GiB", set: map[string]string{"cell_classes": strings.Replace(base[4].text, `"16MiB"`, `"8GiB"`, 1)},
			want: []string{"cell_classes.tiny.memory"}},
		{name: "parallelism zero", set: map[string]string{"cell_classes": strings.Replace(base[4].text, `parallelism = 2`, `parallelism = 0`, 1)},
			want: []string{"cell_classes.tiny.parallelism"}},
		{name: "parallelism too large", set: map[string]string{"cell_classes": strings.Replace(base[4].text, `parallelism = 2`, `parallelism = 20000`, 1)},
			want: []string{"cell_classes.tiny.parallelism"}},
		{name: "unknown threading", set: map[string]string{"cell_classes": strings.Replace(base[4].text, `["single"]`, `["single", "multi"]`, 1)},
			want: []string{"cell_classes.tiny.threading[1]"}},
		{name: "no threading", set: map[string]string{"cell_classes": strings.Replace(base[4].text, `["single"]`, `[]`, 1)},
			want: []string{"cell_classes.tiny.threading"}},
		{name: "unknown feature", set: map[string]string{"cell_classes": strings.Replace(base[4].text, `"simd"]`, `"gc"]`, 1)},
			want: []string{"cell_classes.tiny.features[1]"}},
		{name: "negative target_service_time", set: map[string]string{"cell_classes": strings.Replace(base[4].text, `"0s"`, `"-1ms"`, 1)},
			want: []string{"cell_classes.tiny.target_service_time"}},
		{name: "cell class not a table", set: map[string]string{"cell_classes": "[cell_classes]\ntiny = 5\n[cell_classes.small]\nmemory = \"64MiB\"\nparallelism = 2\n"},
			want: []string{"cell_classes.tiny"}},
		{name: "table of the wrong type", set: map[string]string{"node": base[0].text + "limits = 5\n", "node.limits": ""},
			want: []string{"node.limits"}},
		{name: "no cell classes", set: map[string]string{"cell_classes": ""},
			want: []string{"cell_classes", "tenants.acme.cell_classes", "tenants.acme.cell_classes", "trust_classes.untrusted.cell_classes", "trust_classes.untrusted.cell_classes"}},

		// Trust classes and tenants.
		{name: "trust class names an unconfigured cell class", set: map[string]string{"trust_classes": strings.Replace(base[5].text, `["tiny", "small"]`, `["tiny", "large"]`, 1)},
			want: []string{"trust_classes.untrusted.cell_classes"}},
		{name: "trust class names an unknown cell class", set: map[string]string{"trust_classes": strings.Replace(base[5].text, `["tiny", "small"]`, `["tiny", "huge"]`, 1)},
			want: []string{"trust_classes.untrusted.cell_classes[1]"}},
		{name: "trust class name needing quotes", set: map[string]string{
			"trust_classes": strings.ReplaceAll(strings.Replace(base[5].text, `["tiny", "small"]`, `["tiny", "large"]`, 1), "trust_classes.untrusted", `trust_classes."un.trusted"`),
			"tenants":       strings.Replace(base[6].text, `["untrusted"]`, `["un.trusted"]`, 1)},
			want: []string{`trust_classes."un.trusted".cell_classes`}},
		{name: "invalid trust class name", extra: "[trust_classes.\"a b\"]\ncell_classes = []\n[trust_classes.\"a b\".limits]\nmax_live_activations = 0\nmax_queued = 0\nmax_reserved_fuel = 0\nmax_reserved_memory = 0\n",
			want: []string{"trust_classes"}},
		{name: "tenant names an unknown trust class", set: map[string]string{"tenants": strings.Replace(base[6].text, `["untrusted"]`, `["untrusted", "trusted"]`, 1)},
			want: []string{"tenants.acme.trust_classes"}},
		{name: "tenant names an unconfigured cell class", set: map[string]string{"tenants": strings.Replace(base[6].text, `["tiny", "small"]`, `["tiny", "standard"]`, 1)},
			want: []string{"tenants.acme.cell_classes"}},
		{name: "tenant kind unknown", set: map[string]string{"tenants": strings.Replace(base[6].text, `["user", "service"]`, `["user", "robot"]`, 1)},
			want: []string{"tenants.acme.kinds[1]"}},
		{name: "tenant subject invalid", set: map[string]string{"tenants": strings.Replace(base[6].text, `"alice", "thumbnailer"`, `"alice", "thumbnailer", "bad subject"`, 1)},
			want: []string{"tenants.acme.subjects"}},
		{name: "tenant name not a path segment", extra: "[tenants.\"a/b\"]\ntrust_classes = []\ncell_classes = []\nsubjects = []\nkinds = []\n[tenants.\"a/b\".limits]\nmax_live_activations = 0\nmax_queued = 0\nmax_reserved_fuel = 0\nmax_reserved_memory = 0\nmax_payload_bytes = 0\nmax_priority = 0\n",
			want: []string{"tenants"}},
		{name: "tenant max_priority too large", set: map[string]string{"tenants": strings.Replace(base[6].text, "max_priority = 6", "max_priority = 5000", 1)},
			want: []string{"tenants.acme.limits.max_priority"}},
		{name: "no tenants", set: map[string]string{"tenants": ""}, want: []string{"principals[0].tenant", "principals[1].tenant", "tenants"}},
		{name: "xlarge without trust-class permission", extra: "[cell_classes.xlarge]\nmemory = \"4GiB\"\nparallelism = 2\n",
			set:  map[string]string{"tenants": strings.Replace(base[6].text, `["tiny", "small"]`, `["tiny", "small", "xlarge"]`, 1)},
			want: []string{"tenants.acme.cell_classes"}},
		{name: "xlarge with both permissions", extra: "[cell_classes.xlarge]\nmemory = \"4GiB\"\nparallelism = 2\n",
			set: map[string]string{
				"tenants":       strings.Replace(base[6].text, `["tiny", "small"]`, `["tiny", "small", "xlarge"]`, 1),
				"trust_classes": strings.Replace(base[5].text, `["tiny", "small"]`, `["tiny", "small", "xlarge"]`, 1)}},
		{name: "identifiers longer than the metadata bound", set: map[string]string{"metadata": strings.Replace(base[10].text, "= 128", "= 4", 1)},
			want: []string{"principals[0].subject", "principals[1].service_identity", "principals[1].subject"}},
		{name: "tenant name longer than the metadata bound", set: map[string]string{"metadata": strings.Replace(base[10].text, "= 128", "= 3", 1),
			"principals": strings.ReplaceAll(strings.ReplaceAll(base[7].text, `"alice"`, `"al"`), `"thumbnailer"`, `"th"`),
			"tenants":    strings.ReplaceAll(strings.ReplaceAll(base[6].text, `"alice"`, `"al"`), `"thumbnailer"`, `"th"`)},
			want: []string{"tenants.acme"}},

		// Principals.
		{name: "no principals", set: map[string]string{"principals": ""}, want: []string{"principals"}},
		{name: "principal of an unknown tenant", set: map[string]string{"principals": strings.Replace(base[7].text, `tenant = "acme"`, `tenant = "globex"`, 1)},
			want: []string{"principals[0].tenant"}},
		{name: "principal kind unknown", set: map[string]string{"principals": strings.Replace(base[7].text, `kind = "user"`, `kind = "robot"`, 1)},
			want: []string{"principals[0].kind"}},
		{name: "principal kind missing", set: map[string]string{"principals": strings.Replace(base[7].text, "kind = \"user\"\n", "", 1)},
			want: []string{"principals[0].kind"}},
		{name: "principal subject missing", set: map[string]string{"principals": strings.Replace(base[7].text, "subject = \"alice\"\n", "", 1)},
			want: []string{"principals[0].subject"}},
		{name: "service without identity", set: map[string]string{"principals": strings.Replace(base[7].text, "service_identity = \"thumbnailer\"\n", "", 1)},
			want: []string{"principals[1].service_identity"}},
		{name: "user with identity", set: map[string]string{"principals": strings.Replace(base[7].text, "kind = \"user\"\n", "kind = \"user\"\nservice_identity = \"x\"\n", 1)},
			want: []string{"principals[0].service_identity"}},
		{name: "unknown role", set: map[string]string{"principals": strings.Replace(base[7].text, `["invoke"]`, `["invoke", "root"]`, 1)},
			want: []string{"principals[0].roles[1]"}},
		{name: "no roles", set: map[string]string{"principals": strings.Replace(base[7].text, `["invoke"]`, `[]`, 1)},
			want: []string{"principals[0].roles"}},
		{name: "no api keys", set: map[string]string{"principals": strings.Replace(base[7].text, `["`+hashA+`"]`, `[]`, 1)},
			want: []string{"principals[0].api_keys"}},
		{name: "api key hash in upper case", set: map[string]string{"principals": strings.Replace(base[7].text, hashA, strings.ToUpper(hashA), 1)},
			want: []string{"principals[0].api_keys[0]"}},
		{name: "api key hash too short", set: map[string]string{"principals": strings.Replace(base[7].text, hashA, hashA[:60], 1)},
			want: []string{"principals[0].api_keys[0]"}},
		{name: "raw api key instead of its hash", set: map[string]string{"principals": strings.Replace(base[7].text, hashA, "lk_abcdef", 1)},
			want: []string{"principals[0].api_keys[0]"}},
		{name: "key hash shared by two principals", set: map[string]string{"principals": strings.Replace(base[7].text, hashC, hashA, 1)},
			want: []string{"principals[1].api_keys[1]"}},
		{name: "key hash listed twice", set: map[string]string{"principals": strings.Replace(base[7].text, hashC, hashB, 1)},
			want: []string{"principals[1].api_keys[1]"}},
		{name: "two entries for one subject", set: map[string]string{"principals": strings.Replace(base[7].text, `subject = "thumbnailer"`, `subject = "alice"`, 1)},
			want: []string{"principals[1].subject"}},

		// Overload, deadline, metadata, scheduler.
		{name: "cpu threshold zero", set: map[string]string{"overload": strings.Replace(base[8].text, "0.95", "0", 1)}, want: []string{"overload.cpu_threshold"}},
		{name: "cpu threshold above one", set: map[string]string{"overload": strings.Replace(base[8].text, "0.95", "1.5", 1)}, want: []string{"overload.cpu_threshold"}},
		{name: "cpu threshold nan", set: map[string]string{"overload": strings.Replace(base[8].text, "0.95", "nan", 1)}, want: []string{"overload.cpu_threshold"}},
		{name: "cpu threshold one as integer", set: map[string]string{"overload": strings.Replace(base[8].text, "0.95", "1", 1)}},
		{name: "memory threshold negative", set: map[string]string{"overload": strings.Replace(base[8].text, "0.90", "-0.1", 1)}, want: []string{"overload.memory_threshold"}},
		{name: "threshold as string", set: map[string]string{"overload": strings.Replace(base[8].text, "0.90", `"0.9"`, 1)}, want: []string{"overload.memory_threshold"}},
		{name: "max observation age zero", set: map[string]string{"overload": strings.Replace(base[8].text, `"2s"`, `"0s"`, 1)}, want: []string{"overload.max_observation_age"}},
		{name: "sample interval zero", set: map[string]string{"overload": strings.Replace(base[8].text, `"250ms"`, `"0s"`, 1)}, want: []string{"overload.sample_interval"}},
		{name: "sample interval not below max age", set: map[string]string{"overload": strings.Replace(base[8].text, `"250ms"`, `"2s"`, 1)}, want: []string{"overload.sample_interval"}},
		{name: "negative safety margin", set: map[string]string{"deadline": strings.Replace(base[9].text, `"2ms"`, `"-2ms"`, 1)}, want: []string{"deadline.safety_margin"}},
		{name: "identifier bound zero", set: map[string]string{"metadata": strings.Replace(base[10].text, "= 128", "= 0", 1)}, want: []string{"metadata.maximum_identifier_bytes"}},
		{name: "identifier bound above the catalog's", set: map[string]string{"metadata": strings.Replace(base[10].text, "= 128", "= 129", 1)}, want: []string{"metadata.maximum_identifier_bytes"}},
		{name: "max_wait zero", set: map[string]string{"scheduler": strings.Replace(base[11].text, `"10s"`, `"0s"`, 1)}, want: []string{"scheduler.max_wait"}},
		{name: "lower_class_after zero", set: map[string]string{"scheduler": strings.Replace(base[11].text, "= 8", "= 0", 1)}, want: []string{"scheduler.lower_class_after"}},
		{name: "unknown fairness", set: map[string]string{"scheduler": strings.Replace(base[11].text, `"fuel"`, `"lottery"`, 1)}, want: []string{"scheduler.fairness"}},
		{name: "round-robin fairness", set: map[string]string{"scheduler": strings.Replace(base[11].text, `"fuel"`, `"round-robin"`, 1)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Parse([]byte(doc(tc.set, tc.extra)), tc.opts...)
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("want a valid configuration, have:\n%v", err)
				}
				if err := cfg.Validate(); err != nil {
					t.Fatalf("Validate after Parse: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("want problems at %q, have a valid configuration", tc.want)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("errors.Is(err, ErrInvalid) is false")
			}
			if have := keysOfProblems(err); !slices.Equal(have, tc.want) {
				t.Fatalf("want problems at %q, have %q:\n%v", tc.want, have, err)
			}
		})
	}
}

func TestParse_messages(t *testing.T) {
	tests := []struct {
		name, extra string
		raw         string // the whole document, instead of base
		set         map[string]string
		want        string // one line of the listing
	}{
		{name: "suggestion", set: map[string]string{"tenants": strings.Replace(base[6].text, "max_queued = 128", "max_queuedd = 128", 1)},
			want: "tenants.acme.limits.max_queuedd: unknown key (did you mean max_queued?)"},
		{name: "no silent zero", set: map[string]string{"tenants": strings.Replace(base[6].text, "max_queued = 128", "max_queuedd = 128", 1)},
			want: "tenants.acme.limits.max_queued: missing required key: every limits table names all of its fields (0 grants no capacity)"},
		{name: "quoted unknown key", extra: "\"we\\u0001ird key\" = 1\n",
			want: `"we\u0001ird key": unknown key`},
		{name: "raw key", set: map[string]string{"principals": strings.Replace(base[7].text, hashA, "lk_secret", 1)},
			want: `principals[0].api_keys[0]: is an API key, not its hash: store only the "sha256:" hash that "latent-node keygen" prints, and rotate this key`},
		{name: "syntax error position", raw: "a = 1\nx = \n",
			want: "invalid TOML at line 2, column 5: unexpected character U+000A at start of value"},
		{name: "wrong type", set: map[string]string{"node.limits": strings.Replace(base[2].text, "max_queued = 512", `max_queued = "512"`, 1)},
			want: "node.limits.max_queued: must be an integer, not a string"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			data := doc(tc.set, tc.extra)
			if tc.raw != "" {
				data = tc.raw
			}
			_, err := Parse([]byte(data))
			if err == nil {
				t.Fatal("want an error")
			}
			if !slices.Contains(strings.Split(err.Error(), "\n"), tc.want) {
				t.Fatalf("want the line\n%s\nhave\n%v", tc.want, err)
			}
			if strings.Contains(err.Error(), "lk_secret") {
				t.Fatalf("the listing echoes an API key:\n%v", err)
			}
		})
	}
}

func TestParse_design(t *testing.T) {
	cfg, err := Load("testdata/design.toml")
	if err != nil {
		t.Fatalf("the example configuration must be valid:\n%v", err)
	}
	n := cfg.Node
	if n.Listen != "127.0.0.1:8080" || n.DataDir != "/var/lib/latent-node" || n.Architecture != "x86_64" ||
		n.Region != "local" || n.Zone != "local-a" || n.MaxOutputBytes != 1<<20 || n.ShutdownGrace != 10*time.Second {
		t.Errorf("node: %+v", n)
	}
	if want := (vocab.Budget{CPUFuel: 5_000_000_000, MemoryBytes: 512 << 20, WallTime: 30 * time.Second}); n.BudgetCeiling != want {
		t.Errorf("budget ceiling: have %+v", n.BudgetCeiling)
	}
	wantLimits := admission.TenantLimits{Limits: admission.Limits{MaxLiveActivations: 256, MaxQueued: 512,
		MaxReservedFuel: 1_000_000_000_000, MaxReservedMemory: 8 << 30}, MaxPayloadBytes: 8 << 20, MaxPriority: 9}
	if n.Limits != wantLimits {
		t.Errorf("node limits: have %+v", n.Limits)
	}
	if q := cfg.QueueClasses[0]; q != (QueueClass{Name: "interactive", MinPriority: 5, MaxPriority: 9, MaxQueued: 256, ReservedCells: 1}) {
		t.Errorf("queue class: have %+v", q)
	}
	tiny := cfg.CellClasses[vocab.CellTiny]
	if tiny.MemoryBytes != 16<<20 || tiny.Parallelism != 2 || tiny.Features != DefaultFeatures || tiny.TargetServiceTime != 0 {
		t.Errorf("tiny: have %+v", tiny)
	}
	acme := cfg.Tenants["acme"]
	if !slices.Equal(acme.Subjects, []string{"alice", "thumbnailer"}) ||
		!slices.Equal(acme.Kinds, []admission.PrincipalKind{admission.KindUser, admission.KindService}) ||
		acme.Limits.MaxPriority != 6 || acme.Limits.MaxReservedMemory != 2<<30 {
		t.Errorf("acme: have %+v", acme)
	}
	p := cfg.Principals[0]
	if p.Subject != "thumbnailer" || p.Kind != admission.KindService || p.Tenant != "acme" ||
		p.ServiceIdentity != "thumbnailer" || p.Roles != RoleInvoke|RoleDeploy || len(p.APIKeys) != 1 {
		t.Errorf("principal: have %+v", p)
	}
	if o := cfg.Overload; o != (Overload{CPUThreshold: 0.95, MemoryThreshold: 0.90, MaxObservationAge: 2 * time.Second, SampleInterval: 250 * time.Millisecond}) {
		t.Errorf("overload: have %+v", o)
	}
	if m := cfg.Metadata; m != (admission.MetadataPolicy{MaxIdentifierBytes: 128, MaxEntries: 32, MaxBytes: 4096}) {
		t.Errorf("metadata: have %+v", m)
	}
	if s := cfg.Scheduler; s != (Scheduler{MaxWait: 10 * time.Second, LowerClassAfter: 8, Fairness: FairnessFuel}) {
		t.Errorf("scheduler: have %+v", s)
	}

	pol := cfg.AdmissionPolicy()
	if err := pol.Validate(); err != nil {
		t.Fatalf("admission policy: %v", err)
	}
	if pol.Placement.Zone != "local-a" || len(pol.QueueClasses) != 2 ||
		pol.QueueClasses[0].ReservedCells != 1 || pol.CellClasses[vocab.CellTiny].Parallelism != 2 ||
		pol.TrustClasses["untrusted"].Limits.MaxQueued != 256 || pol.Tenants["acme"].Limits.MaxPriority != 6 ||
		pol.Overload.MaxObservationAge != 2*time.Second || pol.Deadline.SafetyMargin != 2*time.Millisecond {
		t.Errorf("admission policy: %+v", pol)
	}
	// The policy shares no memory with the configuration.
	pol.Tenants["acme"].Subjects[0] = "mallory"
	if cfg.Tenants["acme"].Subjects[0] != "alice" {
		t.Error("AdmissionPolicy aliases the configuration's slices")
	}

	pc := cfg.CellPoolConfig()
	if want := (cellpool.ClassConfig{Parallelism: 2, MemoryBytes: 16 << 20}); pc.Classes[vocab.CellTiny] != want || len(pc.Classes) != 3 {
		t.Errorf("cell pool: have %+v", pc)
	}
	rc := cfg.RunnerConfig(cfg.Node.DataDir)
	if rc.CacheDir != filepath.Join("/var/lib/latent-node", CompileCacheDir) || rc.MaxOutputBytes != 1<<20 {
		t.Errorf("runner: have %+v", rc)
	}
	if rc := cfg.RunnerConfig(""); rc.CacheDir != "" {
		t.Errorf("runner without a data dir: have %+v", rc)
	}
	if have := cfg.SortedCellClasses(); !slices.Equal(have, []vocab.CellClass{vocab.CellTiny, vocab.CellSmall, vocab.CellStandard}) {
		t.Errorf("sorted cell classes: have %v", have)
	}
}

func TestDemo(t *testing.T) {
	cfg, err := Demo(WithDataDir(t.TempDir()), WithDemoKey(hashA))
	if err != nil {
		t.Fatalf("the demo configuration must validate:\n%v", err)
	}
	if cfg.Node.Listen != "127.0.0.1:8080" || cfg.Node.Architecture != HostArchitecture() {
		t.Errorf("node: %+v", cfg.Node)
	}
	want := map[vocab.CellClass]cellpool.ClassConfig{
		vocab.CellTiny: {Parallelism: 2, MemoryBytes: 16 << 20}, vocab.CellSmall: {Parallelism: 2, MemoryBytes: 64 << 20},
		vocab.CellStandard: {Parallelism: 1, MemoryBytes: 256 << 20},
	}
	if have := cfg.CellPoolConfig().Classes; len(have) != len(want) || have[vocab.CellTiny] != want[vocab.CellTiny] ||
		have[vocab.CellSmall] != want[vocab.CellSmall] || have[vocab.CellStandard] != want[vocab.CellStandard] {
		t.Errorf("cells: have %+v", have)
	}
	if len(cfg.Principals) != 1 {
		t.Fatalf("principals: %+v", cfg.Principals)
	}
	p := cfg.Principals[0]
	if p.Subject != "demo" || p.Tenant != "demo" || p.Kind != admission.KindUser ||
		p.Roles != RoleInvoke|RoleDeploy|RoleAdmin || !slices.Equal(p.APIKeys, []string{hashA}) {
		t.Errorf("principal: %+v", p)
	}
	if _, ok := cfg.TrustClasses["untrusted"]; !ok {
		t.Error("no trust class untrusted")
	}
	if names := []string{cfg.QueueClasses[0].Name, cfg.QueueClasses[1].Name}; !slices.Equal(names, []string{"batch", "interactive"}) {
		t.Errorf("queue classes: %v", names)
	}

	cfg, err = Demo(WithDataDir(t.TempDir()), WithDemoKey(hashA), WithListen("127.0.0.1:0"))
	if err != nil || cfg.Node.Listen != "127.0.0.1:0" {
		t.Errorf("WithListen: %v %+v", err, cfg)
	}

	// Without the caller's values, the listing says what is missing.
	_, err = Demo()
	if have, want := keysOfProblems(err), []string{"node.data_dir", "principals[0].api_keys"}; !slices.Equal(have, want) {
		t.Errorf("Demo(): want %q, have %q", want, have)
	}
	_, err = Demo(WithDataDir(t.TempDir()), WithDemoKey("lk_not-a-hash"))
	if have, want := keysOfProblems(err), []string{"principals[0].api_keys[0]"}; !slices.Equal(have, want) {
		t.Errorf("bad demo key: want %q, have %q", want, have)
	}
	// WithDemoKey on a configuration without the demo principal.
	_, err = Parse([]byte(doc(nil, "")), WithDemoKey(hashA))
	if have, want := keysOfProblems(err), []string{"principals"}; !slices.Equal(have, want) {
		t.Errorf("WithDemoKey without a demo principal: want %q, have %q", want, have)
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	t.Run("missing file", func(t *testing.T) {
		path := filepath.Join(dir, "nope.toml")
		_, err := Load(path)
		if err == nil || !strings.Contains(err.Error(), path) || !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("want an error naming %s, have %v", path, err)
		}
	})
	t.Run("huge file", func(t *testing.T) {
		path := filepath.Join(dir, "huge.toml")
		data := []byte(doc(nil, "# "+strings.Repeat("x", MaxFileBytes)+"\n"))
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := Load(path)
		if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "larger than 1 MiB") {
			t.Fatalf("want an error naming %s, have %v", path, err)
		}
		_, err = Parse(data)
		if have := keysOfProblems(err); !slices.Equal(have, []string{""}) {
			t.Fatalf("Parse of a huge document: have %q", have)
		}
	})
	t.Run("not UTF-8", func(t *testing.T) {
		path := filepath.Join(dir, "latin1.toml")
		data := []byte(doc(map[string]string{"tenants": strings.Replace(base[6].text, `"alice"`, "\"alic\xe9\"", 1)}, ""))
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := Load(path)
		var e *Error
		if !errors.As(err, &e) || e.File != path || !strings.Contains(err.Error(), "UTF-8") || !strings.Contains(err.Error(), "line ") {
			t.Fatalf("want a problem about UTF-8 with its line, have %v", err)
		}
	})
	t.Run("not UTF-8 in a comment", func(t *testing.T) {
		_, err := Parse([]byte(doc(nil, "# caf\xe9\n")))
		if err == nil || !strings.Contains(err.Error(), "UTF-8") {
			t.Fatalf("want a problem about UTF-8, have %v", err)
		}
	})
	t.Run("problems name the file", func(t *testing.T) {
		path := filepath.Join(dir, "bad.toml")
		if err := os.WriteFile(path, []byte(doc(nil, "bogus = 1\n")), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := Load(path)
		var e *Error
		if !errors.As(err, &e) || e.File != path || err.Error() != "bogus: unknown key" {
			t.Fatalf("have %#v", err)
		}
	})
	t.Run("valid", func(t *testing.T) {
		path := filepath.Join(dir, "ok.toml")
		if err := os.WriteFile(path, []byte(doc(nil, "")), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := Load(path, WithDataDir(dir)); err != nil {
			t.Fatal(err)
		}
	})
}

func TestValidate_afterChange(t *testing.T) {
	cfg, err := Parse([]byte(doc(nil, "")))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Node.Listen = "nowhere"
	cfg.Principals[0].Kind = 0
	cfg.Principals[0].Roles = 1 << 7
	cfg.Node.MaxOutputBytes = 0
	err = cfg.Validate()
	want := []string{"node.listen", "node.max_output_bytes", "principals[0].kind", "principals[0].roles"}
	if have := keysOfProblems(err); !slices.Equal(have, want) {
		t.Fatalf("want %q, have %q:\n%v", want, have, err)
	}
}

func TestCompareKeys(t *testing.T) {
	keys := []string{"queue_classes[10].name", "queue_classes", "queue_classes[2].name", "node.limits",
		"node.limits.max_queued", "", "queue_classes[2]", "principals[0].api_keys[11]", "principals[0].api_keys[9]",
		"a01", "a1", "a2"}
	slices.SortFunc(keys, compareKeys)
	want := []string{"", "a1", "a01", "a2", "node.limits", "node.limits.max_queued", "principals[0].api_keys[9]",
		"principals[0].api_keys[11]", "queue_classes", "queue_classes[2]", "queue_classes[2].name", "queue_classes[10].name"}
	if !slices.Equal(keys, want) {
		t.Fatalf("want %q\nhave %q", want, keys)
	}
	if compareKeys("a1", "a01") == 0 || compareKeys("a01", "a1") != -compareKeys("a1", "a01") {
		t.Fatal("leading zeros must order deterministically")
	}
}

func TestQuoteKey(t *testing.T) {
	tests := []struct{ in, want string }{
		{"acme", "acme"}, {"a-b_c9", "a-b_c9"}, {"", `""`}, {"a.b", `"a.b"`}, {"a b", `"a b"`},
		{`q"b\`, `"q\"b\\"`}, {"x\x01\x7f", `"x\u0001\u007f"`}, {"é", `"é"`},
	}
	for _, tc := range tests {
		if have := quoteKey(tc.in); have != tc.want {
			t.Errorf("quoteKey(%q): want %s, have %s", tc.in, tc.want, have)
		}
	}
}

func TestMerge(t *testing.T) {
	decoded := []Problem{{Field: "node.limits", Problem: "missing required table"}, {Field: "queue_classes[1].priorities", Problem: "must be [first, last]"}}
	validated := []Problem{
		{Field: "node.limits.max_queued", Problem: "must be positive"},         // below a decode problem: dropped
		{Field: "queue_classes", Problem: "priority 5 maps to no queue class"}, // coverage after a broken range: dropped
		{Field: "node.limits", Problem: "something"},                           // same key: dropped
		{Field: "node.listen", Problem: "bad"}, {Field: "node.listen", Problem: "bad"}, {Field: "node.limitsx", Problem: "kept"},
		{Field: "queue_classes[1].name", Problem: "kept"},
	}
	have := merge(decoded, validated)
	want := []Problem{{Field: "node.limits", Problem: "missing required table"}, {Field: "node.limitsx", Problem: "kept"}, {Field: "node.listen", Problem: "bad"},
		{Field: "queue_classes[1].name", Problem: "kept"}, {Field: "queue_classes[1].priorities", Problem: "must be [first, last]"}}
	if !slices.Equal(have, want) {
		t.Fatalf("want %q\nhave %q", want, have)
	}
}

func TestRoles(t *testing.T) {
	for _, name := range []string{"invoke", "deploy", "admin"} {
		r, err := ParseRole(name)
		if err != nil || r.String() != name {
			t.Errorf("ParseRole(%q) = %v, %v", name, r, err)
		}
	}
	if _, err := ParseRole("Invoke"); err == nil {
		t.Error("roles are case-sensitive")
	}
	all := RoleInvoke | RoleDeploy | RoleAdmin
	if all.String() != "invoke,deploy,admin" || Roles(0).String() != "" {
		t.Errorf("String: %q", all.String())
	}
	if !all.Has(RoleDeploy|RoleAdmin) || RoleInvoke.Has(RoleInvoke|RoleAdmin) || all.Has(0) {
		t.Error("Has")
	}
}

func TestHostArchitecture(t *testing.T) {
	for in, want := range map[string]string{"amd64": "x86_64", "arm64": "aarch64", "386": "x86", "riscv64": "riscv64"} {
		if have := architectureOf(in); have != want {
			t.Errorf("%s: want %s, have %s", in, want, have)
		}
	}
	if HostArchitecture() == "" {
		t.Error("empty host architecture")
	}
}

func TestEditDistance(t *testing.T) {
	if editDistance("max_queuedd", "max_queued") != 1 || editDistance("", "abc") != 3 || editDistance("kitten", "sitting") != 3 {
		t.Fatal("editDistance")
	}
	if suggest(strings.Repeat("x", 65), map[string]bool{"x": true}) != "" {
		t.Fatal("no suggestion for long keys")
	}
	if suggest("zzzzzz", map[string]bool{"max_queued": true}) != "" {
		t.Fatal("no suggestion for distant keys")
	}
}

func TestError(t *testing.T) {
	e := &Error{Problems: []Problem{{Field: "a.b", Problem: "first"}, {Field: "", Problem: "whole document"}}}
	if e.Error() != "a.b: first\nwhole document" {
		t.Fatalf("have %q", e.Error())
	}
	wrapped := errors.Wrap(e, "serve")
	if !errors.Is(wrapped, ErrInvalid) {
		t.Fatal("errors.Is through a wrap")
	}
}

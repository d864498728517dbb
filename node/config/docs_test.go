package config_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/pelletier/go-toml/v2"

	"github.com/latent-node/latent-node/node/config"
	"github.com/latent-node/latent-node/vocab"
)

// The configuration reference, docs/configuration.md, lists every key in a
// table row whose first cell is the key's path in backticks. Paths use the
// decoder's dotted form, with `[]` for an element of an array of tables
// (principals[].subject) and `<name>` for the entry of a table of named
// tables (tenants.<tenant>.limits.max_queued); any text in angle brackets
// stands for any entry.
const configurationDoc = "../../docs/configuration.md"

// TestConfigurationDoc_matchesDecoder fails when the reference and the
// decoder disagree about a key, in either direction.
func TestConfigurationDoc_matchesDecoder(t *testing.T) {
	md, err := os.ReadFile(configurationDoc)
	if err != nil {
		t.Fatal(err)
	}
	documented := docKeys(string(md))
	if len(documented) < 50 {
		t.Fatalf("found only %d key rows in %s; is the table format still `| `key.path` | … |`?", len(documented), configurationDoc)
	}
	known := decoderKeys(t, candidateNames(t, documented))
	if len(known) < 50 {
		t.Fatalf("the probe found only %d keys; the probe, not the doc, is broken", len(known))
	}
	undocumented, unknown := diffKeys(documented, known)
	for _, k := range undocumented {
		t.Errorf("the decoder accepts %s, but %s has no row for it", k, configurationDoc)
	}
	for _, k := range unknown {
		t.Errorf("%s documents %s, but the decoder reports it as an unknown key", configurationDoc, k)
	}
}

// TestDiffKeys_reportsDrift is the negative control: the comparison reports
// a key left out of the doc and a key the decoder does not know.
func TestDiffKeys_reportsDrift(t *testing.T) {
	known := []string{"node.listen", "tenants.<>.limits.max_queued", "principals[].roles"}
	for _, tc := range []struct {
		name                     string
		doc                      []string
		wantUndocumented, wantUn []string
	}{
		{"agree", []string{"node.listen", "tenants.<tenant>.limits.max_queued", "principals[].roles"}, nil, nil},
		{"missing row", []string{"node.listen", "principals[].roles"}, []string{"tenants.<>.limits.max_queued"}, nil},
		{"unknown row", append(slices.Clone(known), "node.listen_address"), nil, []string{"node.listen_address"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			undocumented, unknown := diffKeys(tc.doc, known)
			if !slices.Equal(undocumented, tc.wantUndocumented) || !slices.Equal(unknown, tc.wantUn) {
				t.Errorf("diffKeys = %q, %q; want %q, %q", undocumented, unknown, tc.wantUndocumented, tc.wantUn)
			}
		})
	}
	// On the real doc: a row taken out is reported.
	md, err := os.ReadFile(configurationDoc)
	if err != nil {
		t.Fatal(err)
	}
	var kept []string
	for _, line := range strings.Split(string(md), "\n") {
		if !strings.Contains(line, "`ingress.control.bytes_per_tenant`") {
			kept = append(kept, line)
		}
	}
	probed := decoderKeys(t, candidateNames(t, nil))
	if undocumented, _ := diffKeys(docKeys(strings.Join(kept, "\n")), probed); !slices.Equal(undocumented,
		[]string{"ingress.control.bytes_per_tenant"}) {
		t.Errorf("doc without ingress.control.bytes_per_tenant: undocumented = %q", undocumented)
	}
	// The probe itself: a table row the decoder would refuse is found.
	doc := docKeys("| key | type |\n|---|---|\n| `node.listen` | string |\n| `node.no_such_key` | integer |\n")
	known = decoderKeys(t, candidateNames(t, doc))
	if _, unknown := diffKeys(doc, known); !slices.Equal(unknown, []string{"node.no_such_key"}) {
		t.Errorf("probe: unknown = %q, want [node.no_such_key]", unknown)
	}
}

var (
	keyRow  = regexp.MustCompile("^\\|\\s*`([^`]+)`\\s*\\|")
	keyPath = regexp.MustCompile(`^[a-z_]+((\.[a-z_]+)|(\.<[a-z_-]+>)|(\[\]))*$`)
	entry   = regexp.MustCompile(`<[^>]*>`)
)

// docKeys returns the key paths of md: the first cell, a key path in
// backticks, of every row of a table whose header's first cell is "key".
func docKeys(md string) []string {
	var keys []string
	inTable, keyTable := false, false
	for _, line := range strings.Split(md, "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "|") {
			inTable = false
			continue
		}
		if !inTable { // the header row
			inTable = true
			first, _, _ := strings.Cut(strings.TrimPrefix(line, "|"), "|")
			keyTable = strings.TrimSpace(first) == "key"
			continue
		}
		if m := keyRow.FindStringSubmatch(line); keyTable && m != nil && keyPath.MatchString(m[1]) {
			keys = append(keys, m[1])
		}
	}
	return keys
}

// diffKeys compares documented and known key paths, with any <entry>
// placeholder treated alike, and returns the sorted known paths missing
// from the doc and the documented paths the decoder does not know.
func diffKeys(documented, known []string) (undocumented, unknown []string) {
	doc := map[string]bool{}
	for _, k := range documented {
		doc[entry.ReplaceAllString(k, "<>")] = true
	}
	dec := map[string]bool{}
	for _, k := range known {
		dec[entry.ReplaceAllString(k, "<>")] = true
	}
	for _, k := range known {
		if !doc[entry.ReplaceAllString(k, "<>")] {
			undocumented = append(undocumented, entry.ReplaceAllString(k, "<>"))
		}
	}
	for _, k := range documented {
		if !dec[entry.ReplaceAllString(k, "<>")] {
			unknown = append(unknown, k)
		}
	}
	slices.Sort(undocumented)
	slices.Sort(unknown)
	return slices.Compact(undocumented), slices.Compact(unknown)
}

// candidateNames returns every string literal of the package's production
// files that could be a key (lower-case letters, digits and underscores),
// and the last segment of every documented path. The decoder names its keys
// with literals, so this is a superset of them; decoderKeys asks the
// decoder which of them it knows where.
func candidateNames(t *testing.T, documented []string) []string {
	t.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	name := regexp.MustCompile(`^[a-z][a-z0-9_]*$`)
	set := map[string]bool{}
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(file, func(n ast.Node) bool {
			if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
				if s, err := strconv.Unquote(lit.Value); err == nil && name.MatchString(s) {
					set[s] = true
				}
			}
			return true
		})
	}
	for _, k := range documented {
		seg := k[strings.LastIndexAny(k, ".]")+1:]
		if name.MatchString(seg) {
			set[seg] = true
		}
	}
	if len(set) < 20 {
		t.Fatalf("only %d candidate key names in the package's sources", len(set))
	}
	return slices.Sorted(func(yield func(string) bool) {
		for k := range set {
			if !yield(k) {
				return
			}
		}
	})
}

// A step is one table on the way from the document's root to a table being
// probed.
type step struct {
	name  string
	array bool // an element of an array of tables
	entry bool // an entry of a table of named tables (shown as <>)
}

// notAKey is a name no table knows: a table that does not report it as an
// unknown key is a table of named tables (or not decoded at all).
const notAKey = "zz_not_a_key"

// decoderKeys asks config.Parse which keys it knows. For each table, starting
// at the root, it parses a document that sets every candidate name in that
// table to 0 and reads the problems: a name reported as "unknown key" is
// not a key there; one reported as "must be a table" or "must be an array
// of tables" is a table, probed in turn; any other name is a key. A table
// of named tables (one that does not refuse notAKey) is probed through one
// entry whose name it accepts. The result uses the doc's path syntax, with
// <> for an entry.
func decoderKeys(t *testing.T, candidates []string) []string {
	t.Helper()
	var keys []string
	var probe func(path []step)
	probe = func(path []step) {
		if len(path) > 6 {
			t.Fatalf("probe: tables nested deeper than 6 at %s", showPath(path))
		}
		problems := parseProblems(t, document(path, append(slices.Clone(candidates), notAKey)))
		prefix := decoderPath(path)
		if !reported(problems[prefix+notAKey], "unknown key") {
			for _, name := range append([]string{"entry"}, cellClassNames()...) {
				p := append(slices.Clone(path), step{name: name, entry: true})
				got := parseProblems(t, document(p[:len(p)-1], []string{name}))
				if reported(got[prefix+name], "must be a table") {
					probe(p)
					return
				}
			}
			t.Fatalf("probe: %s neither refuses %s nor takes a named table", showPath(path), notAKey)
		}
		for _, c := range candidates {
			msgs := problems[prefix+c]
			switch {
			case reported(msgs, "unknown key"):
			case reported(msgs, "must be a table"):
				probe(append(slices.Clone(path), step{name: c}))
			case reported(msgs, "must be an array of tables"):
				probe(append(slices.Clone(path), step{name: c, array: true}))
			default:
				keys = append(keys, showPath(append(slices.Clone(path), step{name: c})))
			}
		}
	}
	probe(nil)
	slices.Sort(keys)
	return keys
}

func cellClassNames() []string {
	var names []string
	for _, c := range vocab.CellClasses {
		names = append(names, c.String())
	}
	return names
}

// document returns a TOML document whose table at path sets each name to 0.
func document(path []step, names []string) []byte {
	var m any
	leaf := map[string]any{}
	for _, n := range names {
		leaf[n] = int64(0)
	}
	m = leaf
	for i := len(path) - 1; i >= 0; i-- {
		if path[i].array {
			m = map[string]any{path[i].name: []any{m}}
		} else {
			m = map[string]any{path[i].name: m}
		}
	}
	b, err := toml.Marshal(m)
	if err != nil {
		panic(err)
	}
	return b
}

// parseProblems parses doc and returns its problems by key path, from the
// error's text ("<key>: <message>" per line, what `latent-node check`
// prints).
func parseProblems(t *testing.T, doc []byte) map[string][]string {
	t.Helper()
	_, err := config.Parse(doc)
	if err == nil {
		t.Fatalf("probe: %s parsed without problems", doc)
	}
	out := map[string][]string{}
	for _, line := range strings.Split(err.Error(), "\n") {
		if key, msg, ok := strings.Cut(line, ": "); ok {
			out[key] = append(out[key], msg)
		}
	}
	return out
}

// reported reports whether one of msgs starts with prefix.
func reported(msgs []string, prefix string) bool {
	return slices.ContainsFunc(msgs, func(m string) bool { return strings.HasPrefix(m, prefix) })
}

// decoderPath is the prefix of the decoder's key paths inside the table at
// path ("tenants.entry.limits.", "queue_classes[0].").
func decoderPath(path []step) string {
	var b strings.Builder
	for _, s := range path {
		b.WriteString(s.name)
		if s.array {
			b.WriteString("[0]")
		}
		b.WriteByte('.')
	}
	return b.String()
}

// showPath writes path in the doc's syntax.
func showPath(path []step) string {
	var parts []string
	for _, s := range path {
		switch {
		case s.entry:
			parts = append(parts, "<>")
		case s.array:
			parts = append(parts, s.name+"[]")
		default:
			parts = append(parts, s.name)
		}
	}
	return strings.Join(parts, ".")
}

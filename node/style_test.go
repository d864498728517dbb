package node

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/latent-node/latent-node/internal/testwasm"
	"github.com/latent-node/latent-node/vocab"
)

// The API's JSON style, checked on every body the tests below make the node
// write:
//   - keys are snake_case (^[a-z][a-z0-9_]*$), except the keys of objects
//     that are data (tenant ids, pool names), listed by path in dataKeyed;
//   - no key ends in _ns, _us, _s or _seconds, and a key naming a time
//     (time, duration, delay, wait, age, timeout, latency, interval) ends
//     in _ms;
//   - no string value is a Go duration ("2s");
//   - every element of a list of objects that has an identifier (id,
//     class, tenant, service, pool, key) has a `name`;
//   - every problem+json body has code, reason and scope.

// styleKey is the form of every field name.
var styleKey = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)

// dataKeyed are the paths of objects whose keys are data. A path joins keys
// with ".", "[]" stands for every element of a list and "*" for every key
// of a data-keyed object.
var dataKeyed = []string{
	"ingress",                // pool names
	"ingress.*.tenants",      // tenant ids
	"ingress.*.tenant_bytes", // tenant ids
	"admission.ingress",      // /ui/data: the admin document
	"admission.ingress.*.tenants",
	"admission.ingress.*.tenant_bytes",
	"manifest.revisions[].attributes", // labels the deployer chose
}

// styleIdentifiers are keys that identify a list element: an element with
// one of them must be named by `name`.
var styleIdentifiers = []string{"id", "class", "tenant", "service", "pool", "key"}

// styleTimeWords are key parts that name a time.
var styleTimeWords = []string{"time", "duration", "delay", "wait", "age", "timeout", "latency", "interval"}

// checkStyle returns every departure of body (a JSON document) from the
// API's style; problem says the body is application/problem+json.
func checkStyle(body []byte, problem bool) []string {
	var v any
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return []string{"not JSON: " + err.Error()}
	}
	var out []string
	walkStyle("", v, &out)
	if problem {
		obj, _ := v.(map[string]any)
		for _, k := range []string{"code", "reason", "scope"} {
			if s, _ := obj[k].(string); s == "" {
				out = append(out, "problem without "+k)
			}
		}
	}
	return out
}

func walkStyle(path string, v any, out *[]string) {
	switch v := v.(type) {
	case map[string]any:
		data := slices.Contains(dataKeyed, path)
		for _, k := range sortedKeys(v) {
			child := join(path, k)
			if data {
				child = join(path, "*")
			} else {
				*out = append(*out, keyStyle(child, k)...)
			}
			walkStyle(child, v[k], out)
		}
	case []any:
		for _, e := range v {
			if obj, ok := e.(map[string]any); ok {
				_, named := obj["name"]
				for _, id := range styleIdentifiers {
					if _, ok := obj[id]; ok && !named {
						*out = append(*out, path+"[]: an element identified by "+id+" has no name")
						break
					}
				}
			}
			walkStyle(path+"[]", e, out)
		}
	case string:
		if d, err := time.ParseDuration(v); err == nil && strings.IndexFunc(v, isLetter) >= 0 {
			*out = append(*out, fmt.Sprintf("%s: the string %q is a duration (%v)", path, v, d))
		}
	}
}

func keyStyle(path, k string) []string {
	var out []string
	if !styleKey.MatchString(k) {
		out = append(out, path+": key is not snake_case")
	}
	for _, suffix := range []string{"_ns", "_us", "_s", "_seconds", "_nanos"} {
		if strings.HasSuffix(k, suffix) {
			out = append(out, path+": a duration in another unit than milliseconds")
		}
	}
	if !strings.HasSuffix(k, "_ms") {
		for _, part := range strings.Split(k, "_") {
			if slices.Contains(styleTimeWords, part) {
				out = append(out, path+": a time without _ms")
				break
			}
		}
	}
	return out
}

func isLetter(r rune) bool { return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r == 'µ' }

func join(path, k string) string {
	if path == "" {
		return k
	}
	return path + "." + k
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// TestStyle_checker: the checker accepts a body in the style and rejects
// each kind of departure (the negative control of TestStyle_bodies).
func TestStyle_checker(t *testing.T) {
	for _, tc := range []struct {
		name    string
		body    string
		problem bool
		want    string // a substring of one reported departure; "" for none
	}{
		{"good", `{"name":"acme","limits":{"max_queued":1,"wall_time_ms":1.5},"cell_classes":[{"name":"tiny","live":0}],` +
			`"ingress":{"data":{"tenants":{"Acme-1":2}}},"rows":[["0","12"]]}`, false, ""},
		{"go field name", `{"limits":{"MaxLiveActivations":1}}`, false, "limits.MaxLiveActivations: key is not snake_case"},
		{"camelCase", `{"queueWait":1}`, false, "not snake_case"},
		{"list keyed by class", `{"cell_classes":[{"class":"tiny"}]}`, false, "cell_classes[]: an element identified by class has no name"},
		{"list keyed by id", `{"tables":[{"id":"cells","rows":[]}]}`, false, "identified by id"},
		{"nanoseconds", `{"took_ns":5}`, false, "another unit"},
		{"seconds", `{"age_seconds":5}`, false, "another unit"},
		{"time without unit", `{"wall_time":2000}`, false, "wall_time: a time without _ms"},
		{"duration string", `{"x":{"y":["2s"]}}`, false, `x.y[]: the string "2s" is a duration`},
		{"data keys elsewhere", `{"usage":{"Acme":1}}`, false, "usage.Acme: key is not snake_case"},
		{"problem without scope", `{"type":"t","title":"trap","status":502,"code":"execution-failed","reason":"trap"}`, true,
			"problem without scope"},
		{"problem without code", `{"type":"t","title":"trap","status":502,"outcome":"trap"}`, true, "problem without code"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := checkStyle([]byte(tc.body), tc.problem)
			if tc.want == "" {
				if len(got) != 0 {
					t.Fatalf("departures in a good body: %q", got)
				}
				return
			}
			if !slices.ContainsFunc(got, func(s string) bool { return strings.Contains(s, tc.want) }) {
				t.Fatalf("want a departure %q, got %q", tc.want, got)
			}
		})
	}
}

// styleBody is one answer the style test checks.
type styleBody struct {
	what   string
	status int
	ctype  string
	body   []byte
}

// TestStyle_bodies makes the node write every kind of JSON body of its API
// (each route's success and its typical problems, the problems of executed
// activations that failed) and checks each against the style.
func TestStyle_bodies(t *testing.T) {
	tn := startNode(t)
	var bodies []styleBody
	call := func(what, method, path, key string, body []byte, headers map[string]string, want int) []byte {
		t.Helper()
		resp, data := tn.do(t, method, path, key, body, headers)
		if resp.StatusCode != want {
			t.Fatalf("%s: status %d, want %d: %s", what, resp.StatusCode, want, data)
		}
		bodies = append(bodies, styleBody{what, resp.StatusCode, resp.Header.Get("Content-Type"), data})
		return data
	}
	upload := func(fixture string) string {
		mod := testwasm.Bytes(t, fixture)
		d := vocab.DigestOf(sha256.Sum256(mod))
		call("artifact "+fixture, "PUT", "/v1/artifacts/"+string(d), tn.key, mod, nil, http.StatusCreated)
		return string(d)
	}
	manifest := func(service, digest, abi string, ceiling map[string]any) []byte {
		rev := map[string]any{"name": "v1", "artifact": digest, "trust_class": "untrusted", "ceiling": ceiling,
			"attributes": map[string]string{"Team-Label": "x"}}
		if abi != "" {
			rev["abi"] = abi
		}
		data, _ := json.Marshal(map[string]any{"tenant": "demo", "service": service, "revisions": []any{rev},
			"routes": []any{map[string]any{"name": "run", "targets": []any{map[string]any{"revision": "v1", "weight": 1}}}}})
		return data
	}
	ceiling := func(fuel uint64, wall string) map[string]any {
		return map[string]any{"cpu_fuel": fuel, "memory_bytes": "1MiB", "wall_time": wall}
	}

	// Artifacts and deployments.
	trap := upload("trap_unreachable")
	exit := upload("exit")
	spin := upload("infinite")
	echo := upload("echo")
	call("artifact bad digest", "PUT", "/v1/artifacts/sha256:zz", tn.key, []byte("x"), nil, http.StatusBadRequest)
	call("artifact digest mismatch", "PUT", "/v1/artifacts/"+trap, tn.key, []byte("x"), nil, http.StatusBadRequest)
	call("deploy", "PUT", "/v1/deployments/demo/trap", tn.key, manifest("trap", trap, "", ceiling(10_000_000, "2s")), nil, 200)
	call("deploy wall_time_ms", "PUT", "/v1/deployments/demo/exit", tn.key,
		manifest("exit", exit, "", map[string]any{"cpu_fuel": 10_000_000, "memory_bytes": 1 << 20, "wall_time_ms": 1500}), nil, 200)
	call("deploy", "PUT", "/v1/deployments/demo/spin", tn.key, manifest("spin", spin, "", ceiling(10_000, "2s")), nil, 200)
	call("deploy wagi", "PUT", "/v1/deployments/demo/wagi", tn.key, manifest("wagi", echo, "wagi", ceiling(10_000_000, "2s")), nil, 200)
	both := map[string]any{"cpu_fuel": 1, "memory_bytes": 1, "wall_time": "1s", "wall_time_ms": 1000}
	prob := call("deploy with both wall times", "PUT", "/v1/deployments/demo/both", tn.key, manifest("both", trap, "", both), nil,
		http.StatusUnprocessableEntity)
	if !bytes.Contains(prob, []byte(`"field": "revisions[0].ceiling.wall_time_ms"`)) &&
		!bytes.Contains(prob, []byte(`"field":"revisions[0].ceiling.wall_time_ms"`)) {
		t.Errorf("both wall times: want a field problem naming wall_time_ms, got %s", prob)
	}
	call("deploy invalid", "PUT", "/v1/deployments/demo/bad", tn.key, manifest("bad", trap, "", ceiling(0, "1h")), nil,
		http.StatusUnprocessableEntity)
	call("deploy not JSON", "PUT", "/v1/deployments/demo/bad", tn.key, []byte("{"), nil, http.StatusBadRequest)
	call("deploy other tenant", "PUT", "/v1/deployments/other/x", tn.key, manifest("x", trap, "", ceiling(1, "1s")), nil,
		http.StatusForbidden)
	got := call("get", "GET", "/v1/deployments/demo/exit", tn.key, nil, nil, 200)
	var gd struct {
		Manifest struct {
			Revisions []struct {
				Ceiling map[string]json.Number `json:"ceiling"`
			} `json:"revisions"`
		} `json:"manifest"`
	}
	if err := json.Unmarshal(got, &gd); err != nil || len(gd.Manifest.Revisions) != 1 ||
		gd.Manifest.Revisions[0].Ceiling["wall_time_ms"] != "1500" {
		t.Errorf("get: want the ceiling's wall_time_ms 1500: %v %s", err, got)
	}
	call("get missing", "GET", "/v1/deployments/demo/nothing", tn.key, nil, nil, http.StatusNotFound)
	call("list", "GET", "/v1/deployments/demo", tn.key, nil, nil, 200)

	// Invocations: executed activations that failed, and refusals.
	call("trap", "POST", "/v1/invoke/demo/trap/run", tn.key, nil, nil, http.StatusBadGateway)
	call("declared error", "POST", "/v1/invoke/demo/exit/run", tn.key, []byte("3"), nil, http.StatusBadGateway)
	call("fuel exhausted", "POST", "/v1/invoke/demo/spin/run", tn.key, nil, nil, http.StatusBadGateway)
	call("malformed response", "POST", "/v1/invoke/demo/wagi/run", tn.key, []byte("no header block"), nil,
		http.StatusBadGateway)
	call("invalid header", "POST", "/v1/invoke/demo/trap/run", tn.key, nil, map[string]string{"Latent-Priority": "x"},
		http.StatusBadRequest)
	call("payload too large", "POST", "/v1/invoke/demo/trap/run", tn.key,
		make([]byte, tn.n.cfg.Node.Limits.MaxPayloadBytes+1), nil, http.StatusRequestEntityTooLarge)
	call("route not found", "POST", "/v1/invoke/demo/trap/nope", tn.key, nil, nil, http.StatusNotFound)
	call("other tenant", "POST", "/v1/invoke/other/x/run", tn.key, nil, nil, http.StatusForbidden)

	// Views, and the refusals every route shares.
	view := call("tenant view", "GET", "/v1/admission", tn.key, nil, nil, 200)
	call("admin view", "GET", "/v1/admin/admission", tn.key, nil, nil, 200)
	call("status page data", "GET", "/ui/data", tn.key, nil, nil, 200)
	call("unauthenticated", "GET", "/v1/admission", "", nil, nil, http.StatusUnauthorized)
	call("unknown path", "GET", "/v1/nothing", tn.key, nil, nil, http.StatusNotFound)
	call("method not allowed", "POST", "/v1/admission", tn.key, nil, nil, http.StatusMethodNotAllowed)
	call("delete", "DELETE", "/v1/deployments/demo/trap", tn.key, nil, nil, 200)
	call("delete missing", "DELETE", "/v1/deployments/demo/trap", tn.key, nil, nil, http.StatusNotFound)

	for _, b := range bodies {
		problem := strings.HasPrefix(b.ctype, "application/problem+json")
		if !problem && !strings.HasPrefix(b.ctype, "application/json") {
			t.Errorf("%s: %d answered %q, not JSON", b.what, b.status, b.ctype)
			continue
		}
		if testing.Verbose() {
			t.Logf("%s (%d):\n%s", b.what, b.status, b.body)
		}
		if bad := checkStyle(b.body, problem); len(bad) != 0 {
			t.Errorf("%s (%d): %s\n%s", b.what, b.status, strings.Join(bad, "; "), b.body)
		}
	}

	// The tenant view shows the ceilings that bind the caller.
	var tv struct {
		Limits map[string]any `json:"limits"`
	}
	if err := json.Unmarshal(view, &tv); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"max_live_activations", "max_queued", "max_reserved_fuel", "max_reserved_memory_bytes",
		"max_payload_bytes", "max_priority", "budget_ceiling"} {
		if _, ok := tv.Limits[k]; !ok {
			t.Errorf("tenant view: limits without %s: %s", k, view)
		}
	}
	if bc, _ := tv.Limits["budget_ceiling"].(map[string]any); bc["wall_time_ms"] == nil || bc["cpu_fuel"] == nil {
		t.Errorf("tenant view: budget ceiling without wall_time_ms or cpu_fuel: %s", view)
	}
}

package front

import (
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

// muxInvokePath is the oracle of InvokePath: a ServeMux with the two
// invocation patterns and a catch-all, as the node had them, behind
// CleanPaths.
func muxInvokePath(t *testing.T) func(escaped string) (tenant, service, route string, suffix bool, rest string, ok bool) {
	mux := http.NewServeMux()
	var got struct {
		tenant, service, route, rest string
		suffix, ok                   bool
	}
	invoke := func(_ http.ResponseWriter, r *http.Request) {
		got.tenant, got.service, got.route = r.PathValue("tenant"), r.PathValue("service"), r.PathValue("route")
		got.suffix, got.rest, got.ok = strings.HasSuffix(r.Pattern, "{rest...}"), r.PathValue("rest"), true
	}
	mux.HandleFunc(InvokePattern, invoke)
	mux.HandleFunc(InvokeSuffixPattern, invoke)
	mux.HandleFunc("POST /v1/admin/reload", func(http.ResponseWriter, *http.Request) {})
	mux.HandleFunc("/", func(http.ResponseWriter, *http.Request) {})
	h := CleanPaths(mux, http.NotFoundHandler())
	return func(escaped string) (string, string, string, bool, string, bool) {
		t.Helper()
		got = struct {
			tenant, service, route, rest string
			suffix, ok                   bool
		}{}
		u, err := url.ParseRequestURI(escaped)
		if err != nil {
			t.Fatalf("%q: %v", escaped, err)
		}
		h.ServeHTTP(httptest.NewRecorder(), &http.Request{Method: "POST", URL: u, Host: "node"})
		return got.tenant, got.service, got.route, got.suffix, got.rest, got.ok
	}
}

// TestInvokePath_matchesTheMux: for paths built from segments that stress
// the mux's rules (escaped slashes and literals, invalid escapes, empty and
// trailing segments), InvokePath agrees with a ServeMux holding the
// invocation patterns on every clean path, and matches none the mux would
// not route to them.
func TestInvokePath_matchesTheMux(t *testing.T) {
	oracle := muxInvokePath(t)
	parts := []string{"v1", "invoke", "%69nvoke", "v%31", "a", "b", "c", "%2F", "a%2Fb", "%zz", "%41b", "x%20y", "", "..", ".", "%2E%2E", "rest"}
	rng := rand.New(rand.NewPCG(1, 2))
	checked, matched := 0, 0
	for range 20000 {
		segs := []string{"v1", "invoke"}
		if rng.IntN(4) == 0 {
			segs = segs[:rng.IntN(2)]
		}
		for n := rng.IntN(6); n > 0; n-- {
			segs = append(segs, parts[rng.IntN(len(parts))])
		}
		escaped := "/" + strings.Join(segs, "/")
		if rng.IntN(5) == 0 {
			escaped += "/"
		}
		u, err := url.ParseRequestURI(escaped)
		if err != nil || cleanPath(u.Path) != u.Path {
			continue // CleanPaths answers these before any routing
		}
		checked++
		tenant, service, route, suffix, rest, ok := oracle(escaped)
		target, gotSuffix, gotRest, gotOK := InvokePath(u.EscapedPath())
		if gotOK != ok || string(target.Tenant) != tenant || string(target.Service) != service || string(target.Route) != route ||
			gotSuffix != suffix || gotRest != rest {
			t.Fatalf("%q: InvokePath %v %v %q %v, the mux %q %q %q %v %q %v", escaped, target, gotSuffix, gotRest, gotOK,
				tenant, service, route, suffix, rest, ok)
		}
		if ok {
			matched++
		}
	}
	if checked < 5000 || matched < 1000 || matched == checked {
		t.Fatalf("%d paths checked, %d routed to invoke: the generator misses cases", checked, matched)
	}
}

func FuzzInvokePath(f *testing.F) {
	for _, s := range []string{"/v1/invoke/a/b/c", "/v1/invoke/a/b/c/", "/v1/invoke/a/b/c/d%2Fe", "/v1/invoke/a%2F/b/c", "/v1/%69nvoke/a/b/c"} {
		f.Add(s)
	}
	oracle := muxInvokePath(&testing.T{})
	f.Fuzz(func(t *testing.T, escaped string) {
		u, err := url.ParseRequestURI(escaped)
		if err != nil || u.Path == "" || u.Path[0] != '/' || cleanPath(u.Path) != u.Path || u.RawQuery != "" || u.Host != "" {
			return
		}
		tenant, service, route, suffix, rest, ok := oracle(escaped)
		target, gotSuffix, gotRest, gotOK := InvokePath(u.EscapedPath())
		if gotOK != ok || string(target.Tenant) != tenant || string(target.Service) != service || string(target.Route) != route ||
			gotSuffix != suffix || gotRest != rest {
			t.Fatalf("%q: InvokePath %v %v %q %v, the mux %q %q %q %v %q %v", escaped, target, gotSuffix, gotRest, gotOK,
				tenant, service, route, suffix, rest, ok)
		}
	})
}

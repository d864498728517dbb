package front

import (
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

// muxMatch is what the old routing made of a path: the invocation
// patterns' values, and whether they matched.
type muxMatch struct {
	tenant, service, route, rest string
	suffix, ok                   bool
}

// muxInvokePath is the oracle of InvokePath: a ServeMux with the two
// invocation patterns, a method pattern sharing their prefix and a
// catch-all, as the node had them, behind CleanPaths. path is a parsed
// request URI.
func muxInvokePath() func(path *url.URL) muxMatch {
	mux := http.NewServeMux()
	var got muxMatch
	invoke := func(_ http.ResponseWriter, r *http.Request) {
		got = muxMatch{tenant: r.PathValue("tenant"), service: r.PathValue("service"), route: r.PathValue("route"),
			rest: r.PathValue("rest"), suffix: strings.HasSuffix(r.Pattern, "{rest...}"), ok: true}
	}
	mux.HandleFunc(InvokePattern, invoke)
	mux.HandleFunc(InvokeSuffixPattern, invoke)
	mux.HandleFunc("POST /v1/admin/reload", func(http.ResponseWriter, *http.Request) {})
	mux.HandleFunc("/", func(http.ResponseWriter, *http.Request) {})
	h := CleanPaths(mux, http.NotFoundHandler())
	return func(u *url.URL) muxMatch {
		got = muxMatch{}
		h.ServeHTTP(httptest.NewRecorder(), &http.Request{Method: "POST", URL: u, Host: "node"})
		return got
	}
}

// agreesWithMux fails t unless InvokePath and the oracle make the same of
// u, and reports whether the path was an invocation's.
func agreesWithMux(t *testing.T, oracle func(*url.URL) muxMatch, u *url.URL) bool {
	t.Helper()
	want := oracle(u)
	target, suffix, rest, ok := InvokePath(u.EscapedPath())
	got := muxMatch{tenant: string(target.Tenant), service: string(target.Service), route: string(target.Route),
		rest: rest, suffix: suffix, ok: ok}
	if got != want {
		t.Fatalf("%q: InvokePath %+v, the mux %+v", u.EscapedPath(), got, want)
	}
	return ok
}

// TestInvokePath_matchesTheMux: for paths built from segments that stress
// the mux's rules (escaped slashes and literals, invalid escapes, empty and
// trailing segments), InvokePath agrees with a ServeMux holding the
// invocation patterns on every clean path, and matches none the mux would
// not route to them.
func TestInvokePath_matchesTheMux(t *testing.T) {
	oracle := muxInvokePath()
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
		if agreesWithMux(t, oracle, u) {
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
	oracle := muxInvokePath()
	f.Fuzz(func(t *testing.T, escaped string) {
		u, err := url.ParseRequestURI(escaped)
		if err != nil || u.Path == "" || u.Path[0] != '/' || cleanPath(u.Path) != u.Path || u.RawQuery != "" || u.Host != "" {
			return
		}
		agreesWithMux(t, oracle, u)
	})
}

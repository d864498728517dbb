// Paths: the front answers a path the mux would redirect with 404, since
// the API has no redirects, and matches the invocation routes itself.

package front

import (
	"net/http"
	"net/url"
	"path"
	"strings"

	"github.com/latent-node/latent-node/node/activation"
	"github.com/latent-node/latent-node/vocab"
)

// CleanPaths answers a path the mux would redirect (not absolute, or with
// "." or ".." elements or repeated slashes) with notFound instead: the API
// has no redirects.
func CleanPaths(next, notFound http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p := r.URL.Path; p == "" || p[0] != '/' || cleanPath(p) != p {
			notFound.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// cleanPath is path.Clean keeping a trailing slash (the mux's form).
func cleanPath(p string) string {
	np := path.Clean(p)
	if p[len(p)-1] == '/' && np != "/" {
		np += "/"
	}
	return np
}

// The invocation routes: every method, with or without a path suffix.
const (
	InvokePattern       = "/v1/invoke/{tenant}/{service}/{route}"
	InvokeSuffixPattern = InvokePattern + "/{rest...}"
)

// InvokePath matches an escaped, clean path (CleanPaths passed it) against
// the two invocation patterns exactly as http.ServeMux would: segments are
// unescaped one by one before they are compared or taken as a name, a
// single wildcard takes no empty or "/" segment, and the suffix is the rest
// of the path unescaped as a whole. It returns the target as the path
// names it (not validated), whether a suffix followed the route (a
// trailing slash counts, as it did for the mux) and the suffix; ok is
// false for any other path. The front routes invocations with it ahead of
// the mux, whose wildcard matching costs five allocations a request.
func InvokePath(escaped string) (t vocab.Target, suffix bool, rest string, ok bool) {
	var segs [5]string
	p := escaped
	for i := range segs {
		if len(p) < 2 || p[0] != '/' {
			return vocab.Target{}, false, "", false
		}
		var seg string
		seg, p = firstSegment(p)
		if seg == "/" {
			return vocab.Target{}, false, "", false
		}
		segs[i] = seg
	}
	if segs[0] != "v1" || segs[1] != "invoke" {
		return vocab.Target{}, false, "", false
	}
	t = vocab.Target{Tenant: vocab.TenantID(segs[2]), Service: vocab.ServiceName(segs[3]), Route: vocab.RouteName(segs[4])}
	if p == "" {
		return t, false, "", true
	}
	return t, true, pathUnescape(p[1:]), true
}

// RouteInvocations serves the invocation routes (InvokePattern and
// InvokeSuffixPattern, every method) with invoke, and anything else with
// mux. The target and the suffix go into the request's record, and the
// request's Pattern is set as the mux would have set it.
func RouteInvocations(invoke, mux http.Handler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		t, suffix, rest, ok := InvokePath(r.URL.EscapedPath())
		if !ok {
			mux.ServeHTTP(w, r)
			return
		}
		rec := activation.Of(w)
		rec.Target, rec.PathRest = t, rest
		r.Pattern = InvokePattern
		if suffix {
			r.Pattern = InvokeSuffixPattern
		}
		invoke.ServeHTTP(w, r)
	}
}

// firstSegment splits a path starting with "/" into its first segment,
// unescaped, and the rest (net/http's routing does the same).
func firstSegment(p string) (seg, rest string) {
	if p == "/" {
		return "/", ""
	}
	p = p[1:]
	i := strings.IndexByte(p, '/')
	if i < 0 {
		i = len(p)
	}
	return pathUnescape(p[:i]), p[i:]
}

// pathUnescape is url.PathUnescape, or s itself if it is not a valid
// escaping (net/http's routing does the same).
func pathUnescape(s string) string {
	u, err := url.PathUnescape(s)
	if err != nil {
		return s
	}
	return u
}

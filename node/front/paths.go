// Clean paths: the front answers a path the mux would redirect with 404,
// since the API has no redirects.

package front

import (
	"net/http"
	"path"
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

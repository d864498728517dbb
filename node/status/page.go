package status

// The status page: a static document, its script and its style, embedded
// in the binary and served without credentials (they hold no data), under
// a Content-Security-Policy that allows only this origin's script, style
// and requests. The script asks for an admin API key once, keeps it in
// the tab's sessionStorage and sends it as an Authorization header on its
// own requests for the data (GET /ui/data, /ui/history), which stay
// admin-only. Every value is written with textContent or as SVG text, so
// tenant names, which operators choose, are never markup.

import (
	_ "embed"
	"net/http"

	"github.com/latent-node/latent-node/node/auth"
)

// csp allows this origin's script, style and requests, nothing inline and
// no other origin: every asset is embedded.
const csp = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; " +
	"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

var (
	//go:embed page.html
	pageHTML []byte
	//go:embed app.js
	appJS []byte
	//go:embed app.css
	appCSS []byte
	//go:embed favicon.svg
	favicon []byte
)

// assets are the page's files under /ui/assets/.
var assets = map[string]struct {
	body []byte
	typ  string
}{
	"app.js":      {appJS, "text/javascript; charset=utf-8"},
	"app.css":     {appCSS, "text/css; charset=utf-8"},
	"favicon.svg": {favicon, "image/svg+xml"},
}

// staticHeaders sets what every answer of the page and its assets carries.
func staticHeaders(h http.Header, typ string) {
	h.Set("Content-Type", typ)
	h.Set("Content-Security-Policy", csp)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
}

// HandleUI answers the status page (GET /ui), without credentials.
func (v *Views) HandleUI(w http.ResponseWriter, _ *http.Request) {
	staticHeaders(w.Header(), "text/html; charset=utf-8")
	_, _ = w.Write(pageHTML)
}

// HandleAsset answers the page's script and style (GET
// /ui/assets/{name}), without credentials; any other name is 404.
func (v *Views) HandleAsset(w http.ResponseWriter, r *http.Request) {
	a, ok := assets[r.PathValue("name")]
	if !ok {
		http.NotFound(w, r)
		return
	}
	staticHeaders(w.Header(), a.typ)
	_, _ = w.Write(a.body)
}

// HandleSession answers the page's sign-in check (GET /ui/session) for an
// admin key: {"admin": true} (front.UISession answers the others).
func (v *Views) HandleSession(w http.ResponseWriter, _ *http.Request, _ *auth.Principal) {
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(`{"admin":true}` + "\n"))
}

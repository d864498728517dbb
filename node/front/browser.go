// The browser checks: a client certificate a browser sent for another
// site, and the status page's Host names.

package front

import (
	"bytes"
	"net"
	"net/http"
	"slices"
	"strings"

	"github.com/latent-node/latent-node/node/api"
	"github.com/latent-node/latent-node/node/config"
	"github.com/latent-node/latent-node/refusal"
)

// Browsers: the defences of the routes a browser can reach with
// credentials it sends by itself. A client certificate is such an ambient
// credential: a page on another site can make the browser present it
// (a form POST to /v1/admin/reload, an invocation). And a local proxy or
// extension that adds the Authorization header for the node's address
// makes the status page readable to any site that rebinds a name of its
// own to that address. So:
//
//   - a request authenticated by a client certificate (no Authorization
//     header) that a browser marks as coming from another site
//     (Sec-Fetch-Site other than same-origin or none), or whose Origin is
//     not the node's own (scheme and Host), is refused 403
//     cross-site-request before authentication; requests with an
//     Authorization header (API clients) are not concerned;
//   - /ui and /ui/data answer only under the names of node.ui_hosts or an
//     IP address (a rebound name is neither), else 403 host-not-allowed.

// CrossSite reports a browser request from another site. Sec-Fetch-Site
// "same-site" is refused too: a sibling subdomain is another origin, often
// another party's. A request without either header (not a browser, or an
// old one) is not cross-site.
func CrossSite(r *http.Request) bool {
	switch r.Header.Get("Sec-Fetch-Site") {
	case "", "same-origin", "none": // none: a navigation the user started
	default:
		return true
	}
	origins := r.Header.Values("Origin")
	switch len(origins) {
	case 0:
		return false
	case 1:
	default:
		return true
	}
	scheme := "http://"
	if r.TLS != nil {
		scheme = "https://"
	}
	o := origins[0] // "null" (an opaque origin) is never the node's own
	return len(o) != len(scheme)+len(r.Host) || !strings.EqualFold(o[:len(scheme)], scheme) ||
		!strings.EqualFold(o[len(scheme):], r.Host)
}

// CrossSiteRefusal is the answer to CrossSite.
func CrossSiteRefusal() api.Problem {
	p := api.Refusal(refusal.Refusal{Code: refusal.CodePermissionDenied, Reason: refusal.ReasonCrossSiteRequest,
		Scope: refusal.ScopeRequest, Dimension: refusal.DimOrigin})
	p.Detail = "a request authenticated by a client certificate must come from the node's own origin; " +
		"send an Authorization header instead"
	return p
}

// UIHosts are the names the status page answers under: node.ui_hosts, or
// by default "localhost" and the listen address's host when it is a name.
// Lower case, without a trailing dot.
func UIHosts(cfg *config.Config) []string {
	names := cfg.Node.UIHosts
	if names == nil {
		names = []string{"localhost"}
		if h, _, err := net.SplitHostPort(cfg.Node.Listen); err == nil && h != "" && net.ParseIP(h) == nil {
			names = append(names, h)
		}
	}
	out := make([]string, 0, len(names))
	for _, h := range names {
		out = append(out, strings.ToLower(strings.TrimSuffix(h, ".")))
	}
	return out
}

// HostAllowed reports whether host (a Host header, maybe with a port) is
// an IP address or one of names.
func HostAllowed(host string, names []string) bool {
	h := host
	if hh, _, err := net.SplitHostPort(host); err == nil {
		h = hh
	}
	h = strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
	if net.ParseIP(h) != nil {
		return true // a rebound name is never an address
	}
	return h != "" && slices.Contains(names, strings.ToLower(strings.TrimSuffix(h, ".")))
}

// UIHostOnly serves h only under the status page's names (UIHosts), before
// anything else looks at the request.
func UIHostOnly(names []string, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !HostAllowed(r.Host, names) {
			p := api.Refusal(refusal.Refusal{Code: refusal.CodePermissionDenied, Reason: refusal.ReasonHostNotAllowed,
				Scope: refusal.ScopeRequest, Dimension: refusal.DimHost})
			p.Detail = "the status page answers only under the names of node.ui_hosts or an IP address"
			api.WriteProblem(w, p, 0)
			return
		}
		h(w, r)
	}
}

// UISession serves the status page's sign-in check (GET /ui/session): h
// is the admin-only route answering {"admin": true}; a refusal of the key
// (401, 403) is answered 200 {"admin": false, "problem": …} instead, so
// that a page trying a wrong key logs no failed request in the browser's
// console. It tells nothing a 401 would not.
func UISession(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		rec := &sessionRecorder{ResponseWriter: w}
		h(rec, r)
		if !rec.refused {
			return
		}
		w.Header().Del("WWW-Authenticate")
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte(`{"admin":false,"problem":`))
		_, _ = w.Write(bytes.TrimSpace(rec.body.Bytes()))
		_, _ = w.Write([]byte("}\n"))
	}
}

// sessionRecorder holds back a 401 or 403 answer's body; any other answer
// passes through.
type sessionRecorder struct {
	http.ResponseWriter
	refused, wrote bool
	body           bytes.Buffer
}

func (s *sessionRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

func (s *sessionRecorder) WriteHeader(status int) {
	if s.wrote {
		return
	}
	s.wrote = true
	if status == http.StatusUnauthorized || status == http.StatusForbidden {
		s.refused = true
		return
	}
	s.ResponseWriter.WriteHeader(status)
}

func (s *sessionRecorder) Write(p []byte) (int, error) {
	if !s.wrote {
		s.WriteHeader(http.StatusOK)
	}
	if s.refused {
		if s.body.Len()+len(p) > 4096 {
			return 0, http.ErrContentLength
		}
		return s.body.Write(p)
	}
	return s.ResponseWriter.Write(p)
}

package node

// The invoke route's methods and path suffix, the CGI request of a WAGI
// revision, and the writing of its CGI answer.

import (
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/cockroachdb/errors"

	"github.com/latent-node/latent-node/node/api"
	"github.com/latent-node/latent-node/refusal"
	"github.com/latent-node/latent-node/runner/wagi"
	"github.com/latent-node/latent-node/runner/wasihttp"
	"github.com/latent-node/latent-node/vocab"
)

// The invoke route takes every method and a path suffix
// (/v1/invoke/{tenant}/{service}/{route}/{rest...}). Which of them reach the
// guest depends on the resolved revision's guest ABI: a WAGI revision gets
// them all in its CGI environment; a stdio revision refuses a suffix (404
// unknown-path) and any method but POST (405 method-not-allowed), the
// answers those requests had before the route took them.

// cgiRequest is the CGI request of r, an invoke request of target with the
// path suffix rest (unescaped).
func cgiRequest(r *http.Request, target vocab.Target, rest string) wagi.Request {
	cgi := wagi.Request{Method: r.Method, RawQuery: r.URL.RawQuery, ContentType: r.Header.Get("Content-Type"),
		Protocol: r.Proto, Host: r.Host, TLS: r.TLS != nil, RequestURI: r.RequestURI, Header: r.Header,
		MatchedRoute: "/v1/invoke/" + string(target.Tenant) + "/" + string(target.Service) + "/" + string(target.Route)}
	if hasSuffix(r) {
		cgi.PathInfo = "/" + rest
	}
	return cgi
}

// hasSuffix reports whether r's path went on after the invoke route.
func hasSuffix(r *http.Request) bool { return strings.HasSuffix(r.Pattern, "{rest...}") }

// invocationInput is the job input of an activation of target's revision
// (rest: the path's suffix) with guest ABI abi, or the answer refusing the request: a stdio
// revision's refusal of a method or a suffix it does not take, or a WAGI
// revision's refusal of a request its environment cannot carry.
func invocationInput(r *http.Request, target vocab.Target, rest string, abi vocab.ABI, body []byte) (*invocation, *answer) {
	if r == nil { // not over HTTP: a plain POST
		r = &http.Request{Method: http.MethodPost, URL: &url.URL{}, Header: http.Header{}}
	}
	if abi == vocab.ABIWASIHTTP {
		return &invocation{body: body, http: componentRequest(r, rest, body)}, nil
	}
	if abi != vocab.ABIWAGI {
		switch {
		case hasSuffix(r):
			return nil, refusedEarly(api.Refusal(unknownPath))
		case r.Method != http.MethodPost:
			return nil, refusedEarly(api.Refusal(methodNotAllowed))
		}
		return &invocation{body: body}, nil
	}
	cgi := cgiRequest(r, target, rest)
	cgi.ContentLength = len(body)
	env, err := cgi.Environ()
	switch {
	case errors.Is(err, wagi.ErrEnvironTooLarge):
		return nil, refusedEarly(badRequest(refusal.ReasonEnvironmentTooLarge, refusal.DimHeaders, ""))
	case err != nil:
		return nil, refusedEarly(badRequest(refusal.ReasonInvalidPath, refusal.DimPath, "the path decodes to a NUL byte"))
	}
	return &invocation{body: body, environ: env}, nil
}

// refusedEarly is p as a refusal before execution (the pacer holds it).
func refusedEarly(p api.Problem) *answer { return new(problemAnswer(p, 0)) }

// componentRequest is the wasi-http request of r, an invoke request with
// the path suffix rest (unescaped): the method, the suffix (re-escaped,
// "/" when there is none) and query as path-with-query, the scheme, the
// Host as authority, and every header but the caller's credentials and the
// connection's own, names in lower case and sorted.
func componentRequest(r *http.Request, rest string, body []byte) *wasihttp.Request {
	req := &wasihttp.Request{Method: r.Method, PathWithQuery: (&url.URL{Path: "/" + rest}).EscapedPath(),
		Scheme: "http", Authority: r.Host, Body: body}
	if !hasSuffix(r) {
		req.PathWithQuery = "/"
	}
	if r.URL.RawQuery != "" || r.URL.ForceQuery {
		req.PathWithQuery += "?" + r.URL.RawQuery
	}
	if r.TLS != nil {
		req.Scheme = "https"
	}
	names := make([]string, 0, len(r.Header))
	for name := range r.Header {
		if !componentSkippedHeaders[http.CanonicalHeaderKey(name)] {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	for _, name := range names {
		lower := strings.ToLower(name)
		for _, v := range r.Header[name] {
			req.Header = append(req.Header, [2]string{lower, v})
		}
	}
	return req
}

// componentSkippedHeaders are the request headers a wasi-http guest never
// sees: the caller's credentials, and the headers of the connection to the
// node rather than of the request.
var componentSkippedHeaders = map[string]bool{
	"Authorization": true, "Cookie": true, "Proxy-Authorization": true,
	"Connection": true, "Keep-Alive": true, "Proxy-Connection": true, "Te": true, "Trailer": true,
	"Transfer-Encoding": true, "Upgrade": true, "Http2-Settings": true,
}

// writeCGIAnswer writes an HTTP guest's answer: its status, Content-Type,
// Location and allowed headers, and its body. A wasi-http guest's headers
// are the answer's as they are: when it set no Content-Type, none is
// sniffed.
func writeCGIAnswer(w http.ResponseWriter, a answer) {
	h := w.Header()
	if a.cgi.Raw {
		h["Content-Type"] = nil
	}
	if a.cgi.ContentType != "" {
		h.Set("Content-Type", a.cgi.ContentType)
	}
	if a.cgi.Location != "" {
		h.Set("Location", a.cgi.Location)
	}
	for _, kv := range a.cgi.Header {
		h.Add(kv[0], kv[1])
	}
	h.Set("Content-Length", strconv.Itoa(len(a.body)))
	w.WriteHeader(a.status)
	_, _ = w.Write(a.body)
}

package node

// The invoke route's methods and path suffix, the CGI request of a WAGI
// revision, and the writing of its CGI answer.

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/cockroachdb/errors"

	"github.com/latent-node/latent-node/node/api"
	"github.com/latent-node/latent-node/refusal"
	"github.com/latent-node/latent-node/runner/wagi"
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
	if abi != vocab.ABIWAGI {
		switch {
		case hasSuffix(r):
			p := api.Refusal(unknownPath)
			return nil, &answer{status: p.Status, problem: &p}
		case r.Method != http.MethodPost:
			p := api.Refusal(methodNotAllowed)
			return nil, &answer{status: p.Status, problem: &p}
		}
		return &invocation{body: body}, nil
	}
	cgi := cgiRequest(r, target, rest)
	cgi.ContentLength = len(body)
	env, err := cgi.Environ()
	switch {
	case errors.Is(err, wagi.ErrEnvironTooLarge):
		p := badRequest(refusal.ReasonEnvironmentTooLarge, refusal.DimHeaders, "")
		return nil, &answer{status: p.Status, problem: &p}
	case err != nil:
		p := badRequest(refusal.ReasonInvalidPath, refusal.DimPath, "the path decodes to a NUL byte")
		return nil, &answer{status: p.Status, problem: &p}
	}
	return &invocation{body: body, environ: env}, nil
}

// writeCGIAnswer writes a WAGI guest's answer: its status, Content-Type,
// Location and allowed headers, and its body.
func writeCGIAnswer(w http.ResponseWriter, a answer) {
	h := w.Header()
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

package node

import (
	"context"
	"net/http"
	"strconv"
	"strings"

	"github.com/cockroachdb/errors"

	"github.com/latent-node/latent-node/admission"
	"github.com/latent-node/latent-node/catalog"
	"github.com/latent-node/latent-node/node/api"
	"github.com/latent-node/latent-node/runner"
)

// The invoke route takes every method and a path suffix
// (/v1/invoke/{tenant}/{service}/{route}/{rest...}). Which of them reach the
// guest depends on the resolved revision's guest ABI: a WAGI revision gets
// them all in its CGI environment; a stdio revision refuses a suffix (404
// unknown-path) and any method but POST (405 method-not-allowed), the
// answers those requests had before the route took them.

// httpRequestKey carries an invocation's HTTP request description from
// handleInvoke to invoke.
type httpRequestKey struct{}

// httpRequest is what invoke needs to know about the HTTP request beyond
// its body: the WAGI guest's CGI request, and whether the path had a suffix.
type httpRequest struct {
	cgi    runner.CGIRequest
	suffix bool
}

// withHTTPRequest describes r, an invoke request of target, in ctx.
func withHTTPRequest(ctx context.Context, r *http.Request, target catalog.Target) context.Context {
	hr := &httpRequest{suffix: strings.HasSuffix(r.Pattern, "{rest...}")}
	hr.cgi = runner.CGIRequest{Method: r.Method, RawQuery: r.URL.RawQuery, ContentType: r.Header.Get("Content-Type"),
		Protocol: r.Proto, Host: r.Host, TLS: r.TLS != nil, RequestURI: r.RequestURI, Header: r.Header,
		MatchedRoute: "/v1/invoke/" + string(target.Tenant) + "/" + string(target.Service) + "/" + string(target.Route)}
	if hr.suffix {
		hr.cgi.PathInfo = "/" + r.PathValue("rest")
	}
	return context.WithValue(ctx, httpRequestKey{}, hr)
}

// invocationInput is the job input of an activation of a revision with
// guest ABI abi, or the answer refusing the request: a stdio revision's refusal of a
// method or a suffix it does not take, or a WAGI revision's refusal of a
// request its environment cannot carry.
func invocationInput(ctx context.Context, abi catalog.ABI, body []byte) (*invocation, *answer) {
	hr, _ := ctx.Value(httpRequestKey{}).(*httpRequest)
	if hr == nil {
		hr = &httpRequest{cgi: runner.CGIRequest{Method: http.MethodPost}}
	}
	if abi != catalog.ABIWAGI {
		switch {
		case hr.suffix:
			return nil, &answer{status: http.StatusNotFound, problem: ptr(api.Refusal(http.StatusNotFound,
				admission.CodeInvalidArgument, "unknown-path", admission.ScopeRequest, "path", false))}
		case hr.cgi.Method != http.MethodPost:
			return nil, &answer{status: http.StatusMethodNotAllowed, problem: ptr(api.Refusal(http.StatusMethodNotAllowed,
				admission.CodeInvalidArgument, "method-not-allowed", admission.ScopeRequest, "method", false))}
		}
		return &invocation{body: body}, nil
	}
	hr.cgi.ContentLength = len(body)
	env, err := hr.cgi.Environ()
	switch {
	case errors.Is(err, runner.ErrEnvironTooLarge):
		return nil, &answer{status: http.StatusRequestHeaderFieldsTooLarge, problem: ptr(api.Refusal(
			http.StatusRequestHeaderFieldsTooLarge, admission.CodeInvalidArgument, "environment-too-large",
			admission.ScopeRequest, "headers", false))}
	case err != nil:
		p := badRequest("invalid-path", "path", "the path decodes to a NUL byte")
		return nil, &answer{status: p.Status, problem: &p}
	}
	return &invocation{body: body, environ: env}, nil
}

func ptr[T any](v T) *T { return &v }

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

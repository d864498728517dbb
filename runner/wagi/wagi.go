package wagi

// The WAGI ABI: a request's CGI environment (Request.Environ) and the
// parser of a guest's CGI header block (ParseResponse).

import (
	"bytes"
	"cmp"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/cockroachdb/errors"

	"github.com/latent-node/latent-node/runner/httpabi"
)

// The WAGI ABI (vocab.ABIWAGI): the request reaches the guest as a CGI
// environment (Request.Environ) and the guest's stdout starts with a CGI
// header block (ParseResponse). docs/guest-abi.md, "WAGI ABI", is the
// guest's side of the contract.

// Bounds of the WAGI ABI.
const (
	// MaxHeaderBytes bounds a response's header block, its blank line
	// included.
	MaxHeaderBytes = 8 << 10
	// MaxHeaderLines bounds the header lines of a response.
	MaxHeaderLines = 32
	// MaxEnvironBytes bounds a request's CGI environment (the
	// NUL-terminated "NAME=value" strings together). The node reads at
	// most 64 KiB of request line and headers, so only a request near that
	// limit with many short headers (each costs its "HTTP_" prefix) can
	// exceed it.
	MaxEnvironBytes = 96 << 10
)

// Sentinels of the WAGI ABI.
var (
	// ErrMalformedResponse: a WAGI guest's stdout does not start with a
	// valid CGI header block. The wrapping message says what is wrong and
	// may be shown to the caller.
	ErrMalformedResponse = errors.New("runner: malformed CGI response")
	// ErrEnvironTooLarge: the request's CGI environment is larger than
	// MaxEnvironBytes.
	ErrEnvironTooLarge = errors.New("runner: CGI environment too large")
	// ErrEnvironNUL: a value of the request's CGI environment contains a
	// NUL byte (a percent-encoded %00 in the path), which a WASI string
	// cannot carry.
	ErrEnvironNUL = errors.New("runner: CGI environment value contains NUL")
)

// Request is what a WAGI guest learns about its HTTP request.
type Request struct {
	Method string
	// PathInfo is the decoded path below the matched route: "" without a
	// suffix, otherwise starting with '/'.
	PathInfo string
	// RawQuery is the query without its '?'.
	RawQuery      string
	ContentType   string
	ContentLength int
	Protocol      string // "HTTP/1.1"
	Host          string // the request's Host, with or without a port
	TLS           bool
	// MatchedRoute is the route's own path ("/v1/invoke/acme/web/home").
	MatchedRoute string
	// RequestURI is the path and query as the caller sent them.
	RequestURI string
	Header     http.Header
}

// cgiSkippedHeaders are request headers a guest never sees: credentials,
// hop-by-hop headers and Proxy, which CGI libraries would read back as the
// HTTP_PROXY variable that names an outgoing proxy (httpoxy). The node's own
// Latent-* headers and Proxy-* are skipped by prefix.
var cgiSkippedHeaders = map[string]bool{
	"Authorization": true, "Cookie": true, "Proxy": true, "Connection": true, "Keep-Alive": true,
	"Te": true, "Trailer": true, "Transfer-Encoding": true, "Upgrade": true,
}

// cgiEnvName is the CGI variable of the request header name, "HTTP_" and
// the name in upper case with '-' as '_', or "" when the header is not
// passed: a skipped header (cgiSkippedHeaders, Proxy-*, Latent-*), or a
// name with a byte other than a letter, a digit or '-'. Such names are
// dropped as nginx and Apache drop them: "X_User" would otherwise become
// the same variable as "X-User", and a front proxy that strips only the
// one it sets would let a caller's value through. Letters, digits and '-'
// map to distinct variables up to letter case.
func cgiEnvName(name string) string {
	for i := 0; i < len(name); i++ {
		if c := name[i]; !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
			return ""
		}
	}
	canonical := http.CanonicalHeaderKey(name)
	if name == "" || cgiSkippedHeaders[canonical] || strings.HasPrefix(canonical, "Proxy-") || strings.HasPrefix(canonical, "Latent-") {
		return ""
	}
	return "HTTP_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// Environ returns the CGI environment of c, "NAME=value" each: the CGI
// variables WAGI defines and one HTTP_NAME per request header cgiEnvName
// passes (a header's values joined with ", "), in variable order. Header
// names that differ only in letter case (a server canonicalizes them, a
// hand-made http.Header may not) give one variable, their values joined in
// name order. It fails with ErrEnvironTooLarge or ErrEnvironNUL.
func (c Request) Environ() ([]string, error) {
	host, port := c.Host, ""
	if h, p, err := net.SplitHostPort(c.Host); err == nil {
		host, port = h, p
	}
	scheme := "http"
	if c.TLS {
		scheme = "https"
	}
	if port == "" {
		port = map[bool]string{false: "80", true: "443"}[c.TLS]
	}
	env := []string{
		"REQUEST_METHOD=" + c.Method,
		"PATH_INFO=" + c.PathInfo,
		"QUERY_STRING=" + c.RawQuery,
		"CONTENT_TYPE=" + c.ContentType,
		"CONTENT_LENGTH=" + strconv.Itoa(c.ContentLength),
		"GATEWAY_INTERFACE=CGI/1.1",
		"SERVER_PROTOCOL=" + c.Protocol,
		"SERVER_SOFTWARE=latent-node",
		"SERVER_NAME=" + host,
		"SERVER_PORT=" + port,
		"SCRIPT_NAME=" + c.MatchedRoute,
		"X_MATCHED_ROUTE=" + c.MatchedRoute,
		"X_FULL_URL=" + scheme + "://" + c.Host + c.RequestURI,
	}
	type variable struct{ env, name string }
	vars := make([]variable, 0, len(c.Header))
	for name := range c.Header {
		if v := cgiEnvName(name); v != "" {
			vars = append(vars, variable{v, name})
		}
	}
	slices.SortFunc(vars, func(a, b variable) int {
		return cmp.Or(strings.Compare(a.env, b.env), strings.Compare(a.name, b.name))
	})
	for i, v := range vars {
		value := strings.Join(c.Header[v.name], ", ")
		if i > 0 && vars[i-1].env == v.env {
			env[len(env)-1] += ", " + value
			continue
		}
		env = append(env, v.env+"="+value)
	}
	size := 0
	for _, kv := range env {
		size += len(kv) + 1
		if strings.IndexByte(kv, 0) >= 0 {
			return nil, errors.Wrapf(ErrEnvironNUL, "%s", kv[:strings.IndexByte(kv, '=')])
		}
	}
	if size > MaxEnvironBytes {
		return nil, errors.Wrapf(ErrEnvironTooLarge, "%d bytes (at most %d)", size, MaxEnvironBytes)
	}
	return env, nil
}

// Response is a WAGI guest's parsed answer.
type Response = httpabi.Response

// cgiAllowedHeader says whether a guest may set the response header name
// (canonical form). Everything else is dropped: the node owns framing
// (Content-Length, Transfer-Encoding), its Latent-* headers and
// Server-Timing, and a guest sets no cookies on the node's origin. X-*
// headers pass, except those a reverse proxy in front of the node reads
// from its upstream's answer as instructions (cgiProxyControl) and names
// with '_' (which some proxies read as '-').
func cgiAllowedHeader(name string) bool {
	switch name {
	case "Cache-Control", "Content-Language", "Content-Disposition", "Content-Encoding", "Etag", "Expires",
		"Last-Modified", "Link", "Vary", "Access-Control-Allow-Origin", "Access-Control-Allow-Methods",
		"Access-Control-Allow-Headers", "Access-Control-Expose-Headers", "Access-Control-Max-Age", "Retry-After":
		return true
	}
	return strings.HasPrefix(name, "X-") && !strings.Contains(name, "_") && !cgiProxyControl(name)
}

// cgiProxyControlPrefixes are the X-* response headers (canonical form,
// by prefix) that reverse proxies and caches act on, or that describe the
// client to the next hop: nginx's X-Accel-Redirect (an internal redirect
// to any location, internal ones included), -Expires, -Buffering,
// -Limit-Rate and -Charset; X-Sendfile (Apache mod_xsendfile, lighttpd:
// serve a local file) and lighttpd's X-Sendfile2 and X-Lighttpd-Send-File;
// LiteSpeed's X-Litespeed-Location, -Cache-Control, -Purge, -Tag…; Envoy's
// X-Envoy-* (X-Envoy-Immediate-Health-Check-Fail fails the node's health
// checks); and X-Forwarded-*, X-Real-Ip, X-Original-Url, X-Rewrite-Url.
var cgiProxyControlPrefixes = []string{
	"X-Accel-", "X-Sendfile", "X-Lighttpd-", "X-Litespeed-", "X-Envoy-",
	"X-Forwarded-", "X-Real-Ip", "X-Original-Url", "X-Rewrite-Url",
}

// cgiProxyControl reports whether the canonical header name is one of
// cgiProxyControlPrefixes.
func cgiProxyControl(name string) bool {
	for _, p := range cgiProxyControlPrefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// ParseResponse splits a WAGI guest's stdout into its header block and
// its body. The block is lines "Name: value" ended by LF or CRLF, then an
// empty line; at most MaxHeaderBytes and MaxHeaderLines. It must set
// at least one of Content-Type, Location and Status (RFC 3875, 6.2), and a
// non-empty body needs Content-Type (6.3.1). Status is "NNN" or "NNN
// reason", NNN from 200 to 599 (an informational 1xx cannot be a final
// answer); Location without Status answers 302. Each of the three may
// appear once. A well-formed header outside the allow-list is dropped, not
// refused (CGI programs commonly write Server or Content-Length). Any other
// deviation wraps ErrMalformedResponse with what is wrong.
func ParseResponse(out []byte) (Response, error) {
	var r Response
	rest := out
	seen := map[string]bool{}
	for lines := 0; ; lines++ {
		consumed := len(out) - len(rest)
		nl := bytes.IndexByte(rest, '\n')
		if nl < 0 || consumed+nl+1 > MaxHeaderBytes {
			if len(out) >= MaxHeaderBytes {
				return Response{}, errors.Wrapf(ErrMalformedResponse, "no empty line ends the header block within %d bytes", MaxHeaderBytes)
			}
			return Response{}, errors.Wrap(ErrMalformedResponse, "no empty line ends the header block")
		}
		line := rest[:nl]
		rest = rest[nl+1:]
		line = bytes.TrimSuffix(line, []byte{'\r'})
		if len(line) == 0 {
			break
		}
		if lines == MaxHeaderLines {
			return Response{}, errors.Wrapf(ErrMalformedResponse, "more than %d header lines", MaxHeaderLines)
		}
		if lines == 0 && bytes.HasPrefix(line, []byte("HTTP/")) {
			// A non-parsed-header status line: some servers take it, CGI
			// and WAGI do not.
			return Response{}, errors.Wrap(ErrMalformedResponse, `the output starts with an HTTP status line; write "Status: NNN" instead`)
		}
		colon := bytes.IndexByte(line, ':')
		if colon <= 0 || !validHeaderName(line[:colon]) {
			return Response{}, errors.Wrapf(ErrMalformedResponse, "header line %d is not \"Name: value\"", lines+1)
		}
		name := http.CanonicalHeaderKey(string(line[:colon]))
		value := strings.Trim(string(line[colon+1:]), " \t")
		if !validHeaderValue(value) {
			return Response{}, errors.Wrapf(ErrMalformedResponse, "header %s has a control character in its value", name)
		}
		switch name {
		case "Status", "Content-Type", "Location":
			if seen[name] {
				return Response{}, errors.Wrapf(ErrMalformedResponse, "header %s appears twice", name)
			}
			seen[name] = true
		}
		switch name {
		case "Status":
			code, _, _ := strings.Cut(value, " ")
			n, err := strconv.Atoi(code)
			if err != nil || len(code) != 3 || n < 200 || n > 599 {
				return Response{}, errors.Wrap(ErrMalformedResponse, "Status is not a status code from 200 to 599")
			}
			r.Status = n
		case "Content-Type":
			if value == "" {
				return Response{}, errors.Wrap(ErrMalformedResponse, "Content-Type is empty")
			}
			r.ContentType = value
		case "Location":
			if value == "" {
				return Response{}, errors.Wrap(ErrMalformedResponse, "Location is empty")
			}
			r.Location = value
		default:
			if cgiAllowedHeader(name) {
				r.Header = append(r.Header, [2]string{name, value})
			}
		}
	}
	r.Body = rest
	switch {
	case !seen["Status"] && !seen["Content-Type"] && !seen["Location"]:
		return Response{}, errors.Wrap(ErrMalformedResponse, "the header block sets none of Content-Type, Location and Status")
	case len(r.Body) > 0 && r.ContentType == "":
		return Response{}, errors.Wrap(ErrMalformedResponse, "a body without Content-Type")
	case r.Status == 0 && r.Location != "":
		r.Status = http.StatusFound
	case r.Status == 0:
		r.Status = http.StatusOK
	}
	if len(r.Body) > 0 && (r.Status == http.StatusNoContent || r.Status == http.StatusNotModified) {
		return Response{}, errors.Wrapf(ErrMalformedResponse, "status %d does not allow a body", r.Status)
	}
	return r, nil
}

// MalformedDetail is what a ParseResponse error says is wrong, without
// the sentinel's text: what the caller may be shown.
func MalformedDetail(err error) string {
	return strings.TrimSuffix(err.Error(), ": "+ErrMalformedResponse.Error())
}

// validHeaderName: a non-empty token (RFC 9110, 5.6.2).
func validHeaderName(b []byte) bool {
	for _, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return len(b) > 0
}

// validHeaderValue: no control characters but horizontal tab.
func validHeaderValue(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}

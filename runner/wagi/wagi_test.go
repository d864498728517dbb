package wagi

import (
	"bytes"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/errors"
)

func TestParseCGIResponse(t *testing.T) {
	long := "X-Long: " + strings.Repeat("a", MaxHeaderBytes) + "\n\n"
	many := strings.Repeat("X-A: 1\n", MaxHeaderLines)
	tests := []struct {
		name, out string
		status    int
		ctype     string
		location  string
		header    [][2]string
		body      string
		bad       string // part of the detail when malformed
	}{
		{name: "LF", out: "Content-Type: text/plain\n\nhi", status: 200, ctype: "text/plain", body: "hi"},
		{name: "CRLF", out: "Content-Type: text/plain\r\nStatus: 404 Not Found\r\n\r\nno", status: 404, ctype: "text/plain", body: "no"},
		{name: "mixed line ends", out: "Status: 204\r\n\n", status: 204},
		{name: "body keeps its bytes", out: "content-type:text/html\n\n\n\r\nx\n", status: 200, ctype: "text/html", body: "\n\r\nx\n"},
		{name: "status only", out: "Status: 500\n\n", status: 500},
		{name: "status with reason", out: "Status: 418 I'm a teapot\nContent-Type: a/b\n\n", status: 418, ctype: "a/b"},
		{name: "location is 302", out: "Location: https://example.com/x\n\n", status: 302, location: "https://example.com/x"},
		{name: "location with status", out: "Location: /there\nStatus: 303\n\n", status: 303, location: "/there"},
		{name: "allowed headers kept in order", out: "Content-Type: a/b\nX-One: 1\nCache-Control: no-store\nx-one: 2\nETag: \"v1\"\n\n",
			status: 200, ctype: "a/b", header: [][2]string{{"X-One", "1"}, {"Cache-Control", "no-store"}, {"X-One", "2"}, {"Etag", `"v1"`}}},
		{name: "disallowed headers dropped", out: "Content-Type: a/b\nServer: x\nContent-Length: 99\nSet-Cookie: s=1\n" +
			"Latent-Outcome: trap\nX-Forwarded-For: 1.2.3.4\nTransfer-Encoding: chunked\n\n", status: 200, ctype: "a/b"},
		{name: "proxy-control headers dropped", out: "Content-Type: a/b\nX-Accel-Redirect: /internal/secret\nx-accel-expires: 0\n" +
			"X-Accel-Buffering: no\nX-Accel-Limit-Rate: 1\nX-Accel-Charset: utf-8\nX-Sendfile: /etc/passwd\nX-Sendfile2: /etc/passwd 0-\n" +
			"X-Lighttpd-Send-File: /etc/passwd\nX-LiteSpeed-Location: /x\nX-LiteSpeed-Purge: *\nX-Envoy-Immediate-Health-Check-Fail: true\n" +
			"X-Real-IP: 1.2.3.4\nX-Original-URL: /admin\nX-Rewrite-URL: /admin\nX-Accel_Redirect: /x\nX-Custom: kept\n\n",
			status: 200, ctype: "a/b", header: [][2]string{{"X-Custom", "kept"}}},
		{name: "exactly 32 lines", out: "Content-Type: a/b\n" + strings.Repeat("X-A: 1\n", MaxHeaderLines-1) + "\n", status: 200,
			ctype: "a/b", header: slices.Repeat([][2]string{{"X-A", "1"}}, MaxHeaderLines-1)},

		{name: "empty output", out: "", bad: "no empty line ends the header block"},
		{name: "no blank line", out: "Content-Type: text/plain\nhello", bad: "no empty line"},
		{name: "no header block at all", out: "hello world\n", bad: "not \"Name: value\""},
		{name: "status line", out: "HTTP/1.0 200 status\r\nContent-type: text/html\r\n\r\nhi", bad: "HTTP status line"},
		{name: "oversize block", out: long, bad: "within 8192 bytes"},
		{name: "too many lines", out: "Content-Type: a/b\n" + many + "\n", bad: "more than 32 header lines"},
		{name: "no CGI field", out: "X-A: 1\n\n", bad: "none of Content-Type, Location and Status"},
		{name: "body without content type", out: "Status: 200\n\nbody", bad: "a body without Content-Type"},
		{name: "status not a number", out: "Status: OK\n\n", bad: "Status is not"},
		{name: "status too low", out: "Status: 100\n\n", bad: "Status is not"},
		{name: "status too high", out: "Status: 600\n\n", bad: "Status is not"},
		{name: "status four digits", out: "Status: 2000\n\n", bad: "Status is not"},
		{name: "status sign", out: "Status: +20\n\n", bad: "Status is not"},
		{name: "status twice", out: "Status: 200\nStatus: 404\n\n", bad: "Status appears twice"},
		{name: "content type twice", out: "Content-Type: a/b\ncontent-type: c/d\n\n", bad: "Content-Type appears twice"},
		{name: "empty content type", out: "Content-Type:\n\n", bad: "Content-Type is empty"},
		{name: "empty location", out: "Location: \n\n", bad: "Location is empty"},
		{name: "bad name", out: "Content Type: a/b\n\n", bad: "header line 1"},
		{name: "no colon", out: "Status 200\n\n", bad: "header line 1"},
		{name: "folded line", out: "Content-Type: a/b\n  continued\n\n", bad: "header line 2"},
		{name: "control in value", out: "Content-Type: a/b\x01\n\n", bad: "control character"},
		{name: "bare CR in value", out: "X-A: a\rb\nStatus: 200\n\n", bad: "control character"},
		{name: "204 with body", out: "Status: 204\nContent-Type: a/b\n\nx", bad: "does not allow a body"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := ParseResponse([]byte(tt.out))
			if tt.bad != "" {
				if !errors.Is(err, ErrMalformedResponse) || !strings.Contains(MalformedDetail(err), tt.bad) {
					t.Fatalf("err %v, want ErrMalformedResponse with %q", err, tt.bad)
				}
				if strings.Contains(MalformedDetail(err), "runner:") {
					t.Fatalf("detail %q carries the sentinel", MalformedDetail(err))
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if r.Status != tt.status || r.ContentType != tt.ctype || r.Location != tt.location || string(r.Body) != tt.body ||
				!slices.Equal(r.Header, tt.header) {
				t.Fatalf("got %+v", r)
			}
		})
	}
}

// FuzzParseCGIHeaders: the parser never panics, and what it accepts keeps
// its bounds and invariants.
func FuzzParseCGIHeaders(f *testing.F) {
	for _, s := range []string{"Content-Type: text/plain\n\nhi", "Status: 404\r\n\r\n", "Location: /x\n\n", "X: 1\n\n",
		"Status: 204\n\nx", "\n\n", "Content-Type: a\nStatus: 200 OK\nX-A: b\n\nbody"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, out []byte) {
		r, err := ParseResponse(out)
		if err != nil {
			if !errors.Is(err, ErrMalformedResponse) {
				t.Fatalf("error %v is not ErrMalformedResponse", err)
			}
			return
		}
		if r.Status < 200 || r.Status > 599 {
			t.Fatalf("status %d", r.Status)
		}
		head := len(out) - len(r.Body)
		if head > MaxHeaderBytes || !bytes.Equal(out[head:], r.Body) {
			t.Fatalf("header block of %d bytes", head)
		}
		if len(r.Body) > 0 && r.ContentType == "" {
			t.Fatal("a body without Content-Type accepted")
		}
		if len(r.Header) > MaxHeaderLines {
			t.Fatalf("%d headers", len(r.Header))
		}
		for _, h := range r.Header {
			if !cgiAllowedHeader(h[0]) || !validHeaderValue(h[1]) {
				t.Fatalf("header %q passed", h)
			}
		}
	})
}

func TestCGIRequest_Environ(t *testing.T) {
	req := Request{Method: "GET", PathInfo: "/a b/c", RawQuery: "x=1&y=%20", ContentType: "text/plain", ContentLength: 5,
		Protocol: "HTTP/1.1", Host: "node.example:8443", TLS: true, MatchedRoute: "/v1/invoke/acme/web/home",
		RequestURI: "/v1/invoke/acme/web/home/a%20b/c?x=1&y=%20",
		Header: http.Header{"Accept": {"text/html", "*/*"}, "X-Trace-Id": {"t1"}, "Authorization": {"Bearer s"},
			"Cookie": {"c=1"}, "Connection": {"close"}, "Keep-Alive": {"1"}, "Proxy-Authorization": {"p"},
			"Proxy-Foo": {"p"}, "Te": {"trailers"}, "Trailer": {"x"}, "Transfer-Encoding": {"chunked"}, "Upgrade": {"h2c"},
			"Latent-Budget-Fuel": {"9"}, "Content-Type": {"text/plain"}}}
	env, err := req.Environ()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"REQUEST_METHOD=GET", "PATH_INFO=/a b/c", "QUERY_STRING=x=1&y=%20", "CONTENT_TYPE=text/plain",
		"CONTENT_LENGTH=5", "GATEWAY_INTERFACE=CGI/1.1", "SERVER_PROTOCOL=HTTP/1.1", "SERVER_SOFTWARE=latent-node",
		"SERVER_NAME=node.example", "SERVER_PORT=8443", "SCRIPT_NAME=/v1/invoke/acme/web/home",
		"X_MATCHED_ROUTE=/v1/invoke/acme/web/home", "X_FULL_URL=https://node.example:8443/v1/invoke/acme/web/home/a%20b/c?x=1&y=%20",
		"HTTP_ACCEPT=text/html, */*", "HTTP_CONTENT_TYPE=text/plain", "HTTP_X_TRACE_ID=t1"}
	if !slices.Equal(env, want) {
		t.Fatalf("environ\n%q\nwant\n%q", env, want)
	}

	t.Run("header names", func(t *testing.T) {
		tests := []struct {
			name   string
			header http.Header
			want   []string // the HTTP_ variables, in order
		}{
			{"Proxy is not HTTP_PROXY", http.Header{"Proxy": {"http://evil:8080"}, "X-Custom": {"a"}}, []string{"HTTP_X_CUSTOM=a"}},
			{"lower-case proxy", http.Header{"proxy": {"http://evil:8080"}}, nil},
			{"underscore dropped, hyphen kept", http.Header{"X-User": {"proxy"}, "X_User": {"caller"}}, []string{"HTTP_X_USER=proxy"}},
			{"underscore alone dropped", http.Header{"X_User": {"caller"}}, nil},
			{"other token bytes dropped", http.Header{"X.User": {"a"}, "X~User": {"b"}, "X-Ok1": {"c"}}, []string{"HTTP_X_OK1=c"}},
			{"letter case merges", http.Header{"x-user": {"b"}, "X-User": {"a"}}, []string{"HTTP_X_USER=a, b"}},
			{"credentials", http.Header{"authorization": {"x"}, "COOKIE": {"x"}, "latent-peer-token": {"x"}, "Proxy-Authorization": {"x"}}, nil},
			{"variable order", http.Header{"X-Ab": {"1"}, "X-A-B": {"2"}, "X-A": {"3"}},
				[]string{"HTTP_X_A=3", "HTTP_X_AB=1", "HTTP_X_A_B=2"}},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				env, err := Request{Header: tt.header}.Environ()
				if err != nil {
					t.Fatal(err)
				}
				var have []string
				for _, kv := range env {
					if strings.HasPrefix(kv, "HTTP_") {
						have = append(have, kv)
					}
				}
				if !slices.Equal(have, tt.want) {
					t.Fatalf("have %q, want %q", have, tt.want)
				}
			})
		}
	})
	t.Run("default ports", func(t *testing.T) {
		for _, tls := range []bool{false, true} {
			env, err := Request{Host: "h", TLS: tls}.Environ()
			port := map[bool]string{false: "SERVER_PORT=80", true: "SERVER_PORT=443"}[tls]
			if err != nil || !slices.Contains(env, port) || !slices.Contains(env, "SERVER_NAME=h") {
				t.Fatalf("tls %v: %q %v", tls, env, err)
			}
		}
	})
	t.Run("NUL", func(t *testing.T) {
		if _, err := (Request{PathInfo: "/a\x00b"}).Environ(); !errors.Is(err, ErrEnvironNUL) {
			t.Fatalf("err %v", err)
		}
	})
	t.Run("too large", func(t *testing.T) {
		h := http.Header{}
		for i := range 2000 {
			h.Set("X-H"+strconv.Itoa(i), strings.Repeat("v", 50))
		}
		if _, err := (Request{Header: h}).Environ(); !errors.Is(err, ErrEnvironTooLarge) {
			t.Fatalf("err %v", err)
		}
	})
}

// FuzzCGIEnviron: whatever the request, the environment a WAGI guest
// receives has unique variable names of [A-Z0-9_]+, no NUL, no HTTP_PROXY
// and no credentials or Latent-* headers, and stays within
// MaxEnvironBytes.
func FuzzCGIEnviron(f *testing.F) {
	f.Add("GET", "/a", "q=1", "h:80", "Proxy", "http://x", "X_User", "b", "X-User", "a")
	f.Add("POST", "", "", "h", "x-foo", "1", "X-Foo", "2", "Authorization", "Bearer k")
	f.Add("PUT", "/\x00", "", "[::1]:8", "Latent-Peer-Token", "t", "Cookie", "c", "proxy", "p")
	f.Fuzz(func(t *testing.T, method, path, query, host, n1, v1, n2, v2, n3, v3 string) {
		h := http.Header{}
		for _, kv := range [][2]string{{n1, v1}, {n2, v2}, {n3, v3}} {
			h[kv[0]] = append(h[kv[0]], kv[1])
		}
		env, err := Request{Method: method, PathInfo: path, RawQuery: query, Host: host, Header: h}.Environ()
		if err != nil {
			if !errors.Is(err, ErrEnvironNUL) && !errors.Is(err, ErrEnvironTooLarge) {
				t.Fatalf("error %v", err)
			}
			return
		}
		seen, size := map[string]bool{}, 0
		for _, kv := range env {
			size += len(kv) + 1
			name, _, ok := strings.Cut(kv, "=")
			if !ok || name == "" || strings.Trim(name, "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_") != "" {
				t.Fatalf("variable %q", kv)
			}
			if seen[name] {
				t.Fatalf("%s twice in %q", name, env)
			}
			seen[name] = true
			if strings.IndexByte(kv, 0) >= 0 {
				t.Fatalf("NUL in %q", kv)
			}
			switch {
			case name == "HTTP_PROXY", name == "HTTP_AUTHORIZATION", name == "HTTP_COOKIE",
				strings.HasPrefix(name, "HTTP_LATENT_"), strings.HasPrefix(name, "HTTP_PROXY_"):
				t.Fatalf("%s passed", name)
			}
		}
		if size > MaxEnvironBytes {
			t.Fatalf("%d bytes", size)
		}
	})
}

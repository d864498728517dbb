package runner

import (
	"bytes"
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/latent-node/latent-node/admission"
	"github.com/latent-node/latent-node/internal/testwasm"
	"github.com/latent-node/latent-node/runner/wagi"
	"github.com/latent-node/latent-node/vocab"
)

// TestRun_wagi: a WAGI revision's guest reads the CGI environment after
// the two LATENT_ variables, and its stdout becomes the parsed answer; the
// same guest as a stdio revision sees neither.
func TestRun_wagi(t *testing.T) {
	e := newEnv(t)
	c := ceiling(1<<30, 1<<20, 10*time.Second)
	e.deployRevision("cgienv", testwasm.Bytes(t, "cgienv"), vocab.ManifestRevision{Ceiling: &c, ABI: "wagi"})
	e.deployRevision("cgienv-stdio", testwasm.Bytes(t, "cgienv"), vocab.ManifestRevision{Ceiling: &c})
	e.deployRevision("echo", testwasm.Bytes(t, "echo"), vocab.ManifestRevision{Ceiling: &c, ABI: "wagi"})

	req := wagi.Request{Method: "PUT", PathInfo: "/p", RawQuery: "q=1", ContentType: "text/plain", ContentLength: 4,
		Protocol: "HTTP/1.1", Host: "localhost:8080", MatchedRoute: "/v1/invoke/acme/cgienv/run",
		RequestURI: "/v1/invoke/acme/cgienv/run/p?q=1", Header: http.Header{"Accept": {"*/*"}, "Authorization": {"Bearer s"}}}
	environ, err := req.Environ()
	if err != nil {
		t.Fatal(err)
	}
	out := e.runWith("cgienv", Input{Body: []byte("body"), Environ: environ})
	if out.Kind != Success || out.Response == nil {
		t.Fatalf("%s %v %q", out.Kind, out.Err, out.Stdout)
	}
	r := out.Response
	if r.Status != 201 || r.ContentType != "text/plain" || !slices.Equal(r.Header, [][2]string{{"X-Guest", "cgienv"}}) {
		t.Fatalf("response %+v", r)
	}
	lines := strings.Split(strings.TrimSuffix(string(r.Body), "body"), "\n")
	lines = lines[:len(lines)-1]
	if len(lines) != 2+len(environ) || !strings.HasPrefix(lines[0], "LATENT_ACTIVATION_ID=") ||
		!strings.HasPrefix(lines[1], "LATENT_REVISION=rev1-") || !slices.Equal(lines[2:], environ) {
		t.Fatalf("guest environment %q, want the LATENT_ pair then %q", lines, environ)
	}
	for _, v := range []string{"REQUEST_METHOD=PUT", "PATH_INFO=/p", "QUERY_STRING=q=1", "CONTENT_TYPE=text/plain",
		"CONTENT_LENGTH=4", "GATEWAY_INTERFACE=CGI/1.1", "SERVER_PROTOCOL=HTTP/1.1", "SERVER_NAME=localhost",
		"SERVER_PORT=8080", "X_MATCHED_ROUTE=/v1/invoke/acme/cgienv/run",
		"X_FULL_URL=http://localhost:8080/v1/invoke/acme/cgienv/run/p?q=1", "HTTP_ACCEPT=*/*"} {
		if !slices.Contains(lines, v) {
			t.Errorf("the guest did not see %s", v)
		}
	}
	if slices.ContainsFunc(lines, func(l string) bool { return strings.HasPrefix(l, "HTTP_AUTHORIZATION") }) {
		t.Error("the guest saw the caller's credentials")
	}
	if !strings.HasSuffix(string(r.Body), "body") {
		t.Errorf("stdin not echoed: %q", r.Body)
	}

	// The environment is charged by size: the same run with a larger
	// environment costs more fuel.
	big := append(slices.Clone(environ), "HTTP_X_PAD="+strings.Repeat("p", 4096))
	if more := e.runWith("cgienv", Input{Body: []byte("body"), Environ: big}); more.Kind != Success ||
		more.FuelUsed < out.FuelUsed+4096>>ioShift {
		t.Errorf("fuel %d with 4 KiB more environment, %d without", more.FuelUsed, out.FuelUsed)
	}

	// A stdio revision neither sees the environment nor has its output parsed.
	plain := e.runWith("cgienv-stdio", Input{Body: []byte("body"), Environ: environ})
	if plain.Kind != Success || plain.Response != nil || bytes.Contains(plain.Stdout, []byte("REQUEST_METHOD")) {
		t.Fatalf("stdio revision: %s %+v %q", plain.Kind, plain.Response, plain.Stdout)
	}

	// Malformed output is a guest outcome with a reason, never a fault.
	for _, tt := range []struct{ in, bad string }{
		{"just text", "no empty line"},
		{"Status: 700\n\n", "Status is not"},
	} {
		out := e.runWith("echo", Input{Body: []byte(tt.in)})
		if out.Kind != MalformedResponse || !strings.Contains(out.Malformed, tt.bad) || out.Quarantine || out.Response != nil {
			t.Errorf("%q: %s %q", tt.in, out.Kind, out.Malformed)
		}
	}
	if out := e.runWith("echo", Input{Body: []byte("Location: /x\n\n")}); out.Kind != Success || out.Response.Status != 302 {
		t.Errorf("redirect: %s %+v", out.Kind, out.Response)
	}
}

// runWith runs service with in, like env.run.
func (e *env) runWith(name string, in Input) Outcome {
	e.t.Helper()
	x := e.permit(name, admission.BudgetRequest{})
	defer func() { _ = x.Release() }()
	return e.r.RunWith(context.Background(), x, plainCell{}, in)
}

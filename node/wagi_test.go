package node

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/latent-node/latent-node/client"
	"github.com/latent-node/latent-node/internal/testwasm"
	"github.com/latent-node/latent-node/refusal"
)

// deployGuest deploys the fixture as demo/service, route "run", with abi
// ("" leaves the default).
func (tn *testNode) deployGuest(t *testing.T, service, fixture, abi string) {
	t.Helper()
	ctx := context.Background()
	digest, err := tn.c.UploadArtifact(ctx, testwasm.Bytes(t, fixture))
	if err != nil {
		t.Fatal(err)
	}
	rev := map[string]any{"name": "v1", "artifact": digest, "trust_class": "untrusted",
		"ceiling": map[string]any{"cpu_fuel": 10_000_000, "memory_bytes": "1MiB", "wall_time": "2s"}}
	if abi != "" {
		rev["abi"] = abi
	}
	manifest := map[string]any{"tenant": "demo", "service": service, "revisions": []any{rev},
		"routes": []any{map[string]any{"name": "run", "targets": []any{map[string]any{"revision": "v1", "weight": 1}}}}}
	if _, err := tn.c.Deploy(ctx, "demo", service, manifest); err != nil {
		t.Fatal(err)
	}
}

// TestInvoke_wagi: a WAGI revision gets any method, the path suffix, the
// query and the request headers, and its Status, Content-Type and allowed
// headers make the HTTP answer; a malformed header block is a 502
// malformed-response; a stdio revision still refuses GET and suffixes.
func TestInvoke_wagi(t *testing.T) {
	tn := startNode(t)
	tn.deployGuest(t, "cgi", "cgienv", "wagi")
	tn.deployGuest(t, "cgi-stdio", "cgienv", "")
	tn.deployGuest(t, "echo", "echo", "wagi")

	for _, tc := range []struct {
		method, path, pathInfo string
	}{
		{"GET", "/v1/invoke/demo/cgi/run/a/b%20c?x=1&y=two", "/a/b c"},
		{"DELETE", "/v1/invoke/demo/cgi/run?x=1&y=two", ""},
		{"POST", "/v1/invoke/demo/cgi/run/?x=1&y=two", "/"},
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			resp, body := tn.do(t, tc.method, tc.path, tn.key, []byte("in"), map[string]string{"X-Trace": "t1",
				"Content-Type": "text/x-test", "Cookie": "secret=1"})
			if resp.StatusCode != 201 || resp.Header.Get("Content-Type") != "text/plain" ||
				resp.Header.Get("X-Guest") != "cgienv" || resp.Header.Get("Server") == "dropped" ||
				resp.Header.Get("Latent-Outcome") != "success" {
				t.Fatalf("%d %v\n%s", resp.StatusCode, resp.Header, body)
			}
			env := strings.Split(string(body), "\n")
			for _, want := range []string{"REQUEST_METHOD=" + tc.method, "PATH_INFO=" + tc.pathInfo, "QUERY_STRING=x=1&y=two",
				"CONTENT_TYPE=text/x-test", "CONTENT_LENGTH=2", "HTTP_X_TRACE=t1", "X_MATCHED_ROUTE=/v1/invoke/demo/cgi/run",
				"GATEWAY_INTERFACE=CGI/1.1", "SERVER_PROTOCOL=HTTP/1.1"} {
				if !containsLine(env, want) {
					t.Errorf("the guest did not see %s:\n%s", want, body)
				}
			}
			for _, secret := range []string{"HTTP_AUTHORIZATION", "HTTP_COOKIE"} {
				if strings.Contains(string(body), secret) {
					t.Errorf("the guest saw %s", secret)
				}
			}
			if !strings.HasSuffix(string(body), "in") {
				t.Errorf("stdin missing: %q", body)
			}
		})
	}

	// A guest's Location without Status redirects with 302.
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	req, _ := http.NewRequest("POST", tn.srv.URL+"/v1/invoke/demo/echo/run", strings.NewReader("Location: /elsewhere\n\n"))
	req.Header.Set("Authorization", "Bearer "+tn.key)
	resp, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != 302 || resp.Header.Get("Location") != "/elsewhere" {
		t.Fatalf("redirect: %d %v", resp.StatusCode, resp.Header)
	}

	// Malformed output: 502, the problem says what is wrong.
	resp, body := tn.do(t, "POST", "/v1/invoke/demo/echo/run", tn.key, []byte("Status: 99\n\n"), nil)
	var p client.Problem
	_ = json.Unmarshal(body, &p)
	if resp.StatusCode != 502 || p.Outcome != "malformed-response" || !strings.Contains(p.Detail, "Status") {
		t.Fatalf("malformed: %d %s", resp.StatusCode, body)
	}

	// The stdio revision of the same guest: GET is 405, a suffix 404, POST
	// runs it as today (octet-stream, no header parsing).
	for _, tc := range []struct {
		method, path string
		status       int
		reason       string
	}{
		{"GET", "/v1/invoke/demo/cgi-stdio/run", 405, refusal.ReasonMethodNotAllowed.String()},
		{"PUT", "/v1/invoke/demo/cgi-stdio/run", 405, refusal.ReasonMethodNotAllowed.String()},
		{"POST", "/v1/invoke/demo/cgi-stdio/run/x", 404, refusal.ReasonUnknownPath.String()},
		{"POST", "/v1/invoke/demo/cgi-stdio/run/", 404, refusal.ReasonUnknownPath.String()},
		{"GET", "/v1/invoke/demo/hello/greet", 405, refusal.ReasonMethodNotAllowed.String()},
	} {
		resp, body := tn.do(t, tc.method, tc.path, tn.key, nil, nil)
		var p client.Problem
		_ = json.Unmarshal(body, &p)
		if resp.StatusCode != tc.status || p.Reason != tc.reason {
			t.Errorf("%s %s: %d %s", tc.method, tc.path, resp.StatusCode, body)
		}
	}
	resp, body = tn.do(t, "POST", "/v1/invoke/demo/cgi-stdio/run", tn.key, nil, nil)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/octet-stream" ||
		!strings.HasPrefix(string(body), "Content-Type: text/plain\n") || strings.Contains(string(body), "REQUEST_METHOD") {
		t.Fatalf("stdio POST: %d %v %q", resp.StatusCode, resp.Header, body)
	}
}

func containsLine(lines []string, want string) bool {
	for _, l := range lines {
		if l == want {
			return true
		}
	}
	return false
}

package e2e

// Browsers and proxies, the guest's side: what a WAGI guest learns from a
// request's headers, which of its answer's headers reach a proxy in front
// of the node, what its monotonic clock tells it, and whose client
// certificate authenticates as whom.

import (
	"context"
	"crypto/tls"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/latent-node/latent-node/internal/testcert"
	"github.com/latent-node/latent-node/internal/testwasm"
)

// deployGuest uploads guest and activates acme/service with one route
// "run" to revision "v1" of ABI abi ("wagi" or "stdio").
func (n *node) deployGuest(t *testing.T, service, guest, abi string) {
	t.Helper()
	ctx := context.Background()
	c := n.client(t, "alice")
	digest, err := c.UploadArtifact(ctx, testwasm.Bytes(t, guest))
	if err != nil {
		t.Fatal(err)
	}
	manifest := map[string]any{"tenant": "acme", "service": service, "revisions": []any{map[string]any{"name": "v1",
		"artifact": digest, "trust_class": "untrusted", "abi": abi,
		"ceiling": map[string]any{"cpu_fuel": 1_000_000_000, "memory_bytes": "8MiB", "wall_time": "5s"}}},
		"routes": []any{map[string]any{"name": "run", "targets": []any{map[string]any{"revision": "v1", "weight": 1}}}}}
	if _, err := c.Deploy(ctx, "acme", service, manifest); err != nil {
		t.Fatalf("deploy acme/%s: %v", service, err)
	}
}

// TestSecurityWAGI: one node, a WAGI guest printing its environment
// (cgienv), a WAGI guest answering its input as its CGI answer (echo) and
// a guest printing its monotonic clock (clocks).
func TestSecurityWAGI(t *testing.T) {
	n, _ := startNode(t, nil, calm)
	n.deployGuest(t, "env", "cgienv", "wagi")
	n.deployGuest(t, "answer", "echo", "wagi")
	n.deployGuest(t, "clocks", "clocks", "stdio")

	// On 611fe67: the body held HTTP_PROXY=http://evil.example:3128 and
	// two lines HTTP_X_USER=from-proxy and HTTP_X_USER=from-caller: behind
	// a proxy that strips or sets only X-User, the caller's X_User reached
	// the guest as the same variable.
	t.Run("request headers", func(t *testing.T) {
		r := n.do(t, "GET", "/v1/invoke/acme/env/run", "alice", nil, map[string]string{
			"Proxy": "http://evil.example:3128", "X-User": "from-proxy", "X_User": "from-caller", "X-Custom": "kept"})
		if r.status != http.StatusCreated {
			t.Fatalf("status %d: %s", r.status, r.body)
		}
		var users []string
		for _, line := range strings.Split(string(r.body), "\n") {
			if v, ok := strings.CutPrefix(line, "HTTP_X_USER="); ok {
				users = append(users, v)
			}
			if strings.HasPrefix(line, "HTTP_PROXY=") {
				t.Errorf("the guest saw %s", line)
			}
		}
		if len(users) != 1 || users[0] != "from-proxy" {
			t.Errorf("HTTP_X_USER %q, want only the hyphenated header's value", users)
		}
		// The control: an ordinary header still reaches the guest.
		if !strings.Contains(string(r.body), "\nHTTP_X_CUSTOM=kept\n") {
			t.Errorf("HTTP_X_CUSTOM missing: %s", r.body)
		}
	})

	// On 611fe67: the node's answer carried X-Accel-Redirect:
	// /internal/secret and X-Sendfile: /etc/passwd, which nginx or Apache
	// in front would have acted on.
	t.Run("answer headers", func(t *testing.T) {
		answer := "Content-Type: text/plain\nX-Accel-Redirect: /internal/secret\nX-Accel-Buffering: no\n" +
			"X-Sendfile: /etc/passwd\nX-LiteSpeed-Location: /internal/secret\nX-Custom: kept\n\nbody"
		r := n.do(t, "POST", "/v1/invoke/acme/answer/run", "alice", strings.NewReader(answer), nil)
		if r.status != http.StatusOK || string(r.body) != "body" {
			t.Fatalf("status %d: %s", r.status, r.body)
		}
		for _, name := range []string{"X-Accel-Redirect", "X-Accel-Buffering", "X-Sendfile", "X-Litespeed-Location"} {
			if v := r.header.Values(name); len(v) > 0 {
				t.Errorf("the answer carries %s: %q", name, v)
			}
		}
		// The control: an ordinary X- header still passes.
		if v := r.header.Get("X-Custom"); v != "kept" {
			t.Errorf("X-Custom %q, want kept", v)
		}
	})

	// On 611fe67: invoke -v printed the guest's header value raw, with
	// its C1 CSI (U+009B, which terminals may take as ESC [) and a
	// right-to-left override. The guest's stderr tail and the problem's
	// detail go through the same escaping (TestPrintVerbose_guestText).
	t.Run("invoke -v escapes guest text", func(t *testing.T) {
		answer := "Content-Type: text/plain\nX-Note: \u009b2J\u202eevil\nX-Custom: kept\n\nbody"
		code, out, errOut := cliEnv(t, nil, "invoke", "--node", n.url, "--key", n.keys["alice"], "-v", "-d", answer, "acme/answer/run")
		if code != 0 || out != "body" {
			t.Fatalf("exit %d, stdout %q, stderr %s", code, out, errOut)
		}
		if strings.Contains(errOut, "\u009b") || strings.Contains(errOut, "\u202e") ||
			!strings.Contains(errOut, `< X-Note: \u009b2J\u202eevil`+"\n") {
			t.Errorf("stderr %q, want the header's controls escaped", errOut)
		}
		// The control: ordinary text is printed as it is.
		if !strings.Contains(errOut, "< X-Custom: kept\n") {
			t.Errorf("stderr %q lacks X-Custom", errOut)
		}
	})

	// On 611fe67: "clocks" printed the node's uptime in nanoseconds and a
	// resolution of 1 ns ("79143620 1" on a node started 80 ms before).
	t.Run("monotonic clock", func(t *testing.T) {
		for range 3 {
			r := n.invoke(t, "alice", "acme/clocks/run", "", nil)
			var now, res int64
			if _, err := fmt.Sscanf(string(r.body), "%d %d\n", &now, &res); r.status != http.StatusOK || err != nil {
				t.Fatalf("status %d %q: %v", r.status, r.body, err)
			}
			// The activation's own clock: 1 ms at its start, and a guest
			// that reads it at once is far below any node's uptime.
			if now < int64(time.Millisecond) || now > int64(100*time.Millisecond) || res != int64(time.Microsecond) {
				t.Fatalf("monotonic clock %d ns, resolution %d ns; want 1 ms plus the activation's time so far, 1000 ns", now, res)
			}
		}
	})
}

// mtlsNode starts the harness configuration over TLS from ca, with
// client_ca_file = ca and a principal "ci" of acme (roles invoke and
// deploy, also in acme's subjects) authenticated by a client certificate
// of subject "CN=ci,O=acme", and returns its https URL.
func mtlsNode(t *testing.T, ca *testcert.CA) string {
	t.Helper()
	dir := t.TempDir()
	cert, key := ca.Issue(t, testcert.Spec{}).Write(t, dir, "node")
	caFile := filepath.Join(dir, "clients.pem")
	testcert.WriteFile(t, caFile, ca.PEM)
	_, h := principalKeys(t)
	p := defaults(t)
	p.Hashes = h
	c := harnessConfig(p)
	c.Tenants[0].Subjects = append(c.Tenants[0].Subjects, "ci")
	c.Extra = fmt.Sprintf("[node.tls]\ncert_file = %q\nkey_file = %q\nclient_ca_file = %q\n\n"+
		"[[principals]]\nsubject = \"ci\"\nkind = \"user\"\ntenant = \"acme\"\nroles = [\"invoke\", \"deploy\"]\n"+
		"client_certificate_subjects = [\"CN=ci,O=acme\"]\n", cert, key, caFile)
	path := filepath.Join(dir, "node.toml")
	if err := os.WriteFile(path, []byte(c.TOML()), 0o600); err != nil {
		t.Fatal(err)
	}
	proc := start(t, calm, "serve", "--config", path, "--listen", "127.0.0.1:0")
	line := proc.stderr.wait(t, 30*time.Second, func(s string) bool { return strings.Contains(s, `"msg":"serving"`) })
	var rec struct {
		Listen string `json:"listen"`
	}
	if err := json.Unmarshal([]byte(line), &rec); err != nil || rec.Listen == "" {
		t.Fatalf("serving line %q: %v", line, err)
	}
	return "https://" + rec.Listen
}

// subject is a certificate subject of the given RDNs, in order, each one
// attribute "CN=…" or "O=…".
func subject(rdns ...string) pkix.Name {
	types := map[string]asn1.ObjectIdentifier{"CN": {2, 5, 4, 3}, "O": {2, 5, 4, 10}}
	var n pkix.Name
	for _, rdn := range rdns {
		typ, value, _ := strings.Cut(rdn, "=")
		n.ExtraNames = append(n.ExtraNames, pkix.AttributeTypeAndValue{Type: types[typ], Value: value})
	}
	return n
}

// TestSecurityWAGI_clientCertificateSubject: a client certificate
// authenticates as the principal listing its whole subject, not one whose
// subject Go's pkix.Name.String (last CN only) happens to render.
func TestSecurityWAGI_clientCertificateSubject(t *testing.T) {
	ca := testcert.NewCA(t, "latent-node test CA")
	url := mtlsNode(t, ca)
	get := func(t *testing.T, leaf *testcert.Leaf) int {
		t.Helper()
		hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
			RootCAs: ca.Pool(), Certificates: []tls.Certificate{leaf.TLS(t)}}}}
		defer hc.CloseIdleConnections()
		resp, err := hc.Get(url + "/v1/deployments/acme")
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	for _, tc := range []struct {
		name    string
		subject pkix.Name
		want    int
	}{
		// The control: the genuine certificate, its RDNs O=acme then CN=ci.
		{"the listed subject", subject("O=acme", "CN=ci"), http.StatusOK},
		// On 611fe67: 200. pkix.Name keeps the last CN, and its String is
		// "CN=ci,O=acme".
		{"another CN before", subject("CN=mallory", "CN=ci", "O=acme"), http.StatusUnauthorized},
		{"another CN between", subject("O=acme", "CN=mallory", "CN=ci"), http.StatusUnauthorized},
		{"the common name alone", subject("CN=ci"), http.StatusUnauthorized},
	} {
		t.Run(tc.name, func(t *testing.T) {
			leaf := ca.Issue(t, testcert.Spec{Subject: tc.subject, Client: true, Serial: 3})
			if have := get(t, leaf); have != tc.want {
				t.Fatalf("GET /v1/deployments/acme: %d, want %d", have, tc.want)
			}
		})
	}
}

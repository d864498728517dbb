package e2e

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/latent-node/latent-node/client"
	"github.com/latent-node/latent-node/internal/testcert"
	"github.com/latent-node/latent-node/internal/testwasm"
)

// startTLS starts the binary with the harness configuration and
// [node.tls] serving leaf, written as node.crt and node.key in dir, and
// returns the process, dir and the address from its serving line.
func startTLS(t *testing.T, leaf *testcert.Leaf) (p *proc, dir, listen string) {
	t.Helper()
	dir = t.TempDir()
	cert, key := leaf.Write(t, dir, "node")
	path := dataDirConfig(t, t.TempDir(), "[node.tls]\ncert_file = \""+cert+"\"\nkey_file = \""+key+"\"\n")
	p = start(t, calm, "serve", "--config", path, "--listen", "127.0.0.1:0")
	line := p.stderr.wait(t, 30*time.Second, func(s string) bool { return strings.Contains(s, `"msg":"serving"`) })
	var rec struct {
		Listen string `json:"listen"`
	}
	if err := json.Unmarshal([]byte(line), &rec); err != nil || rec.Listen == "" {
		t.Fatalf("serving line %q: %v", line, err)
	}
	return p, dir, rec.Listen
}

// serveTLS starts the binary with the harness configuration and
// [node.tls] serving leaf, waits until /readyz answers over https (without
// verifying the certificate: some tests serve bad ones on purpose) and
// returns the https URL.
func serveTLS(t *testing.T, leaf *testcert.Leaf) string {
	t.Helper()
	_, _, listen := startTLS(t, leaf)
	url := "https://" + listen
	hc := &http.Client{Timeout: time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	for i := 0; i < 1000; i++ {
		resp, err := hc.Get(url + "/readyz")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return url
			}
		}
		<-time.After(10 * time.Millisecond) // bounded poll of the endpoint
	}
	t.Fatalf("%s/readyz never answered 200", url)
	return ""
}

// cliEnv runs the binary to its end with env added and returns its exit
// code, stdout and stderr.
func cliEnv(t *testing.T, env []string, args ...string) (int, string, string) {
	t.Helper()
	code, out, errs := cliWith(t, nil, env, args...)
	return code, string(out), errs
}

// TestTLS_cli serves the API over TLS from a private CA: the CLI with
// --ca-file (or LATENT_CA_FILE) deploys and invokes the hello guest over
// https; without the CA, and against an expired or a wrong-host
// certificate, the CLI refuses the node with a message that says why.
func TestTLS_cli(t *testing.T) {
	keys, _ := principalKeys(t)
	ca := testcert.NewCA(t, "latent-node test CA")
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	testcert.WriteFile(t, caFile, ca.PEM)

	url := serveTLS(t, ca.Issue(t, testcert.Spec{}))
	c, err := client.New(url, keys["alice"], client.WithCAFile(caFile))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	digest, err := c.UploadArtifact(ctx, testwasm.Bytes(t, "hello"))
	if err != nil {
		t.Fatal(err)
	}
	manifest := map[string]any{"tenant": "acme", "service": "hello", "revisions": []any{map[string]any{"name": "v1",
		"artifact": digest, "trust_class": "untrusted",
		"ceiling": map[string]any{"cpu_fuel": 1_000_000_000, "memory_bytes": "8MiB", "wall_time": "5s"}}},
		"routes": []any{map[string]any{"name": "greet", "targets": []any{map[string]any{"revision": "v1", "weight": 1}}}}}
	if _, err := c.Deploy(ctx, "acme", "hello", manifest); err != nil {
		t.Fatal(err)
	}

	past := time.Now().Add(-72 * time.Hour)
	expired := serveTLS(t, ca.Issue(t, testcert.Spec{NotBefore: past, NotAfter: past.Add(24 * time.Hour)}))
	wrongHost := serveTLS(t, ca.Issue(t, testcert.Spec{DNSNames: []string{"node.other.example"}}))
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(url, "https://"))
	invoke := []string{"invoke", "--key", keys["alice"], "-d", "ada"}
	for _, tc := range []struct {
		name      string
		env, args []string
		code      int
		want      string // in stdout when code is 0, else in stderr
	}{
		{"--ca-file", nil, []string{"--node", url, "--ca-file", caFile}, 0, "hello, ada"},
		{"LATENT_CA_FILE", []string{"LATENT_CA_FILE=" + caFile}, []string{"--node", url}, 0, "hello, ada"},
		{"localhost is a name of the certificate", nil, []string{"--node", "https://localhost:" + port, "--ca-file", caFile}, 0, "hello, ada"},
		{"without the CA", nil, []string{"--node", url}, 1, "not signed by a trusted CA: pass --ca-file"},
		{"expired certificate", nil, []string{"--node", expired, "--ca-file", caFile}, 1, "certificate has expired or is not yet valid"},
		{"wrong host", nil, []string{"--node", wrongHost, "--ca-file", caFile}, 1,
			`is not valid for "127.0.0.1" (it names node.other.example)`},
		{"plain http to the TLS port", nil, []string{"--node", "http" + strings.TrimPrefix(url, "https"), "--ca-file", caFile}, 1,
			"HTTP request to an HTTPS server"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append(append(append([]string{}, invoke[:1]...), tc.args...), invoke[1:]...)
			args = append(args, "acme/hello/greet")
			code, out, errOut := cliEnv(t, append([]string{"LATENT_CA_FILE="}, tc.env...), args...)
			got := errOut
			if tc.code == 0 {
				got = out
			}
			if code != tc.code || !strings.Contains(got, tc.want) {
				t.Fatalf("exit %d, want %d with %q\nstdout: %s\nstderr: %s", code, tc.code, tc.want, out, errOut)
			}
		})
	}
}

// TestTLS_check reports unreadable [node.tls] files under their keys.
func TestTLS_check(t *testing.T) {
	ca := testcert.NewCA(t, "latent-node test CA")
	dir := t.TempDir()
	cert, key := ca.Issue(t, testcert.Spec{}).Write(t, dir, "node")
	for _, tc := range []struct {
		name, tls string
		code      int
		want      string
	}{
		{"valid", "cert_file = \"" + cert + "\"\nkey_file = \"" + key + "\"\n", 0, ": ok"},
		{"missing key", "cert_file = \"" + cert + "\"\nkey_file = \"" + filepath.Join(dir, "none.key") + "\"\n", 2, "node.tls.key_file: cannot be read"},
		{"certificate alone", "cert_file = \"" + cert + "\"\n", 2, "node.tls: cert_file and key_file go together"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := dataDirConfig(t, t.TempDir(), "[node.tls]\n"+tc.tls)
			code, out, errOut := cliEnv(t, nil, "check", "--config", path)
			if code != tc.code || !strings.Contains(out+errOut, tc.want) {
				t.Fatalf("exit %d, want %d with %q\nstdout: %s\nstderr: %s", code, tc.code, tc.want, out, errOut)
			}
		})
	}
}

package config

import (
	"crypto/x509/pkix"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/latent-node/latent-node/internal/testcert"
)

// TestParse_nodeTLS checks [node.tls] and client_certificate_subjects: the
// files are read at check time and every mistake is a problem under its
// key; a complete table parses (the negative control).
func TestParse_nodeTLS(t *testing.T) {
	dir := t.TempDir()
	ca := testcert.NewCA(t, "node CA")
	cert, key := ca.Issue(t, testcert.Spec{}).Write(t, dir, "server")
	_, otherKey := ca.Issue(t, testcert.Spec{Serial: 3}).Write(t, dir, "other")
	caFile := filepath.Join(dir, "ca.pem")
	testcert.WriteFile(t, caFile, ca.PEM)
	garbage := filepath.Join(dir, "garbage.pem")
	testcert.WriteFile(t, garbage, []byte("not pem"))
	missing := filepath.Join(dir, "missing.pem")
	q := func(s string) string { return `"` + s + `"` }
	tlsTable := func(lines ...string) string { return "\n[node.tls]\n" + strings.Join(lines, "\n") + "\n" }
	certPrincipal := func(subjects, keys string) string {
		return `
[[principals]]
subject = "alice"
kind = "user"
tenant = "acme"
roles = ["invoke"]
` + keys + `
client_certificate_subjects = ` + subjects + "\n"
	}
	apiKey := `api_keys = ["` + hashA + `"]`
	for _, tc := range []struct {
		name       string
		principals string // replaces the base's principals ("": the base's)
		tls        string
		want       []string // problem keys; nil: parses
	}{
		{"no table: plain HTTP", "", "", nil},
		{"certificate and key", "", tlsTable("cert_file = "+q(cert), "key_file = "+q(key)), nil},
		{"certificate principal without api_keys", certPrincipal(`["CN=ci,O=acme"]`, ""),
			tlsTable("cert_file = "+q(cert), "key_file = "+q(key), "client_ca_file = "+q(caFile)), nil},
		{"certificate without key", "", tlsTable("cert_file = " + q(cert)), []string{"node.tls"}},
		{"a device, not a file", "", tlsTable("cert_file = "+q("/dev/zero"), "key_file = "+q(key)), []string{"node.tls.cert_file"}},
		{"a directory", "", tlsTable("cert_file = "+q(cert), "key_file = "+q(dir)), []string{"node.tls.key_file"}},
		{"missing key file", "", tlsTable("cert_file = "+q(cert), "key_file = "+q(missing)), []string{"node.tls.key_file"}},
		{"missing certificate file", "", tlsTable("cert_file = "+q(missing), "key_file = "+q(key)), []string{"node.tls.cert_file"}},
		{"key of another certificate", "", tlsTable("cert_file = "+q(cert), "key_file = "+q(otherKey)), []string{"node.tls.cert_file"}},
		{"client CA file without a certificate", "",
			tlsTable("cert_file = "+q(cert), "key_file = "+q(key), "client_ca_file = "+q(garbage)), []string{"node.tls.client_ca_file"}},
		{"client CA file missing", "",
			tlsTable("cert_file = "+q(cert), "key_file = "+q(key), "client_ca_file = "+q(missing)), []string{"node.tls.client_ca_file"}},
		{"client CA without TLS", "", tlsTable("client_ca_file = " + q(caFile)), []string{"node.tls.client_ca_file"}},
		{"subjects without client CA", certPrincipal(`["CN=ci"]`, apiKey),
			tlsTable("cert_file = "+q(cert), "key_file = "+q(key)), []string{"principals[0].client_certificate_subjects"}},
		{"malformed subject", certPrincipal(`["ci", " CN=ci", "subject=CN=ci"]`, apiKey),
			tlsTable("cert_file = "+q(cert), "key_file = "+q(key), "client_ca_file = "+q(caFile)),
			[]string{"principals[0].client_certificate_subjects[0]", "principals[0].client_certificate_subjects[1]",
				"principals[0].client_certificate_subjects[2]"}},
		{"subject listed twice", certPrincipal(`["CN=ci", "CN=ci"]`, apiKey),
			tlsTable("cert_file = "+q(cert), "key_file = "+q(key), "client_ca_file = "+q(caFile)),
			[]string{"principals[0].client_certificate_subjects[1]"}},
		{"subject of two principals", certPrincipal(`["CN=ci"]`, apiKey) + strings.Replace(certPrincipal(`["CN=ci"]`, ""), "alice", "bob", 1),
			tlsTable("cert_file = "+q(cert), "key_file = "+q(key), "client_ca_file = "+q(caFile)),
			[]string{"principals[1].client_certificate_subjects[0]"}},
		{"neither key nor subject", certPrincipal(`[]`, ""), "", []string{"principals[0].api_keys"}},
		{"issuers", certPrincipal(`["CN=ci"]`, apiKey) + `client_certificate_issuers = ["CN=Acme CA,O=acme"]` + "\n",
			tlsTable("cert_file = "+q(cert), "key_file = "+q(key), "client_ca_file = "+q(caFile)), nil},
		{"malformed issuer", certPrincipal(`["CN=ci"]`, apiKey) + `client_certificate_issuers = ["Acme CA"]` + "\n",
			tlsTable("cert_file = "+q(cert), "key_file = "+q(key), "client_ca_file = "+q(caFile)),
			[]string{"principals[0].client_certificate_issuers[0]"}},
		{"issuers without subjects", certPrincipal(`[]`, apiKey) + `client_certificate_issuers = ["CN=Acme CA"]` + "\n",
			tlsTable("cert_file = "+q(cert), "key_file = "+q(key), "client_ca_file = "+q(caFile)),
			[]string{"principals[0].client_certificate_issuers"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			set := map[string]string{}
			if tc.principals != "" {
				set["principals"] = tc.principals
			}
			cfg, err := Parse([]byte(doc(set, "") + tc.tls))
			if tc.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				if tc.tls != "" && !cfg.Node.TLS.Enabled() {
					t.Fatalf("node.tls not decoded: %+v", cfg.Node.TLS)
				}
				return
			}
			if err == nil {
				t.Fatalf("parsed; want problems at %v", tc.want)
			}
			if got := keysOfProblems(err); !slices.Equal(got, tc.want) {
				t.Fatalf("problems at %v, want %v:\n%v", got, tc.want, err)
			}
		})
	}
}

// TestSubjectForm pins the rule that a configured subject is compared with
// pkix.Name.String (RFC 2253 order: the most specific attribute first).
func TestSubjectForm(t *testing.T) {
	n := pkix.Name{CommonName: "ci", Organization: []string{"acme"}}
	if got := n.String(); got != "CN=ci,O=acme" || !validSubject(got) {
		t.Fatalf("pkix.Name.String() = %q", got)
	}
}

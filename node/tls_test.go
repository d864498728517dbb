package node

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/latent-node/latent-node/admission"
	"github.com/latent-node/latent-node/internal/testcert"
	"github.com/latent-node/latent-node/node/auth"
	"github.com/latent-node/latent-node/node/config"
	"github.com/latent-node/latent-node/node/front"
)

// tlsNode is the demo node served over TLS by its own Server() on a wrapped
// loopback listener, as serve does with [node.tls]. With client CAs, the
// principal "ci" (invoke only) authenticates by the client certificate
// subject "CN=ci,O=acme".
type tlsNode struct {
	n    *Node
	st   *front.ServerTLS
	addr string
	key  string // the demo principal's API key
	// idle receives a value whenever the connection bound counts an idle
	// connection.
	idle chan struct{}
}

const ciSubject = "CN=ci,O=acme"

func startTLSNode(t *testing.T, files config.NodeTLS) *tlsNode {
	t.Helper()
	key, hash, err := auth.Generate()
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Demo(config.WithDataDir(t.TempDir()), config.WithDemoKey(hash))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Node.TLS = files
	if files.ClientCAFile != "" {
		cfg.Principals = append(cfg.Principals, config.Principal{Subject: "ci", Kind: admission.KindUser, Tenant: "demo",
			Roles: config.RoleInvoke, ClientCertificateSubjects: []string{ciSubject}})
		tn := cfg.Tenants["demo"]
		tn.Subjects = append(tn.Subjects, "ci")
		cfg.Tenants["demo"] = tn
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	cfg.Overload.SampleInterval = 10 * time.Millisecond
	n, err := New(context.Background(), cfg, Options{LoadSource: calmSource{}, Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.DeployDemo(context.Background()); err != nil {
		t.Fatal(err)
	}
	st, err := front.NewServerTLS(cfg.Node.TLS)
	if err != nil {
		t.Fatal(err)
	}
	tn := &tlsNode{n: n, st: st, key: key, idle: make(chan struct{}, 64)}
	n.conns.OnChange(func() {
		if n.conns.Stats().Idle > 0 {
			select {
			case tn.idle <- struct{}{}:
			default:
			}
		}
	})
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tn.addr = raw.Addr().String()
	srv := n.Server()
	srv.TLSConfig = st.Config()
	ln := tls.NewListener(n.WrapListener(raw), st.Config())
	ctx, cancel := context.WithCancel(context.Background())
	wait := Go(ctx, append(n.Actors(), Actor{Name: "https", Run: func(context.Context) error { return srv.Serve(ln) }}))
	t.Cleanup(func() {
		_ = srv.Close()
		cancel()
		_ = wait()
		n.Close(context.Background())
	})
	// Ready once the first load sample arrived: before it, invocations are
	// refused 503 (the node fails closed). No certificate is needed here,
	// and no connection is kept (the connection-bound test counts idle
	// ones).
	probe := &http.Client{Transport: &http.Transport{DisableKeepAlives: true,
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // a readiness probe of a test server
	for range 500 {
		if resp, err := probe.Get("https://" + tn.addr + "/readyz"); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		<-time.After(2 * time.Millisecond) // bounded poll of the endpoint
	}
	for len(tn.idle) > 0 {
		<-tn.idle
	}
	return tn
}

// tlsFiles writes a server certificate of spec signed by ca (and, when
// clientCA is set, that CA as client_ca_file) into a new directory.
func tlsFiles(t *testing.T, ca *testcert.CA, spec testcert.Spec, clientCA *testcert.CA) config.NodeTLS {
	t.Helper()
	dir := t.TempDir()
	var f config.NodeTLS
	f.CertFile, f.KeyFile = ca.Issue(t, spec).Write(t, dir, "server")
	if clientCA != nil {
		f.ClientCAFile = filepath.Join(dir, "clients.pem")
		testcert.WriteFile(t, f.ClientCAFile, clientCA.PEM)
	}
	return f
}

// httpsClient trusts roots and presents certs[0] when given, even when the
// server's list of acceptable CAs does not name its issuer.
func httpsClient(roots *x509.CertPool, certs ...tls.Certificate) *http.Client {
	cfg := &tls.Config{RootCAs: roots}
	if len(certs) > 0 {
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &certs[0], nil }
	}
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg}}
}

// greet invokes the demo route and returns the status.
func (tn *tlsNode) greet(t *testing.T, c *http.Client, key string) (int, error) {
	t.Helper()
	req, _ := http.NewRequest("POST", "https://"+tn.addr+"/v1/invoke/demo/hello/greet", strings.NewReader("ada"))
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode, nil
}

func TestServerTLS_handshake(t *testing.T) {
	ca := testcert.NewCA(t, "node CA")
	past := time.Now().Add(-48 * time.Hour)
	for _, tc := range []struct {
		name   string
		spec   testcert.Spec
		client *tls.Config
		want   func(error) bool // nil: the request succeeds
	}{
		{"valid certificate accepted", testcert.Spec{}, &tls.Config{}, nil},
		{"TLS 1.1 refused", testcert.Spec{}, &tls.Config{MaxVersion: tls.VersionTLS11}, func(err error) bool {
			return err != nil
		}},
		{"expired certificate refused by the client", testcert.Spec{NotBefore: past, NotAfter: past.Add(time.Hour)}, &tls.Config{},
			func(err error) bool {
				var e x509.CertificateInvalidError
				return errors.As(err, &e) && e.Reason == x509.Expired
			}},
		{"wrong host refused by the client", testcert.Spec{DNSNames: []string{"other.example"}}, &tls.Config{},
			func(err error) bool {
				var e x509.HostnameError
				return errors.As(err, &e)
			}},
		{"unknown CA refused by the client", testcert.Spec{}, &tls.Config{RootCAs: x509.NewCertPool()},
			func(err error) bool {
				var e x509.UnknownAuthorityError
				return errors.As(err, &e)
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tn := startTLSNode(t, tlsFiles(t, ca, tc.spec, nil))
			cc := tc.client.Clone()
			if cc.RootCAs == nil {
				cc.RootCAs = ca.Pool()
			}
			c := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: cc}}
			status, err := tn.greet(t, c, tn.key)
			if tc.want == nil {
				if err != nil || status != http.StatusOK {
					t.Fatalf("status %d, err %v; want 200", status, err)
				}
				return
			}
			if err == nil || !tc.want(err) {
				t.Fatalf("status %d, err %v; want the handshake refused", status, err)
			}
		})
	}
}

func TestServerTLS_clientCertificate(t *testing.T) {
	ca, clients, other := testcert.NewCA(t, "node CA"), testcert.NewCA(t, "client CA"), testcert.NewCA(t, "other CA")
	tn := startTLSNode(t, tlsFiles(t, ca, testcert.Spec{}, clients))
	ci := clients.Issue(t, testcert.Spec{Client: true, Subject: pkix.Name{CommonName: "ci", Organization: []string{"acme"}}}).TLS(t)
	stranger := clients.Issue(t, testcert.Spec{Client: true, Subject: pkix.Name{CommonName: "stranger", Organization: []string{"acme"}}}).TLS(t)
	forged := other.Issue(t, testcert.Spec{Client: true, Subject: pkix.Name{CommonName: "ci", Organization: []string{"acme"}}}).TLS(t)
	for _, tc := range []struct {
		name   string
		certs  []tls.Certificate
		key    string
		status int // 0: the handshake fails
	}{
		{"listed certificate authenticates its principal", []tls.Certificate{ci}, "", http.StatusOK},
		{"certificate no principal lists is 401", []tls.Certificate{stranger}, "", http.StatusUnauthorized},
		{"certificate of another CA is refused", []tls.Certificate{forged}, "", 0},
		{"no certificate and no key is 401", nil, "", http.StatusUnauthorized},
		{"API key without a certificate still works", nil, tn.key, http.StatusOK},
		{"an Authorization header takes precedence over the certificate", []tls.Certificate{ci}, "lk_unknown", http.StatusUnauthorized},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, err := tn.greet(t, httpsClient(ca.Pool(), tc.certs...), tc.key)
			if tc.status == 0 {
				if err == nil {
					t.Fatalf("status %d; want the handshake refused", status)
				}
				return
			}
			if err != nil || status != tc.status {
				t.Fatalf("status %d, err %v; want %d", status, err, tc.status)
			}
		})
	}
	t.Run("the certificate principal holds only its roles", func(t *testing.T) {
		resp, err := httpsClient(ca.Pool(), ci).Get("https://" + tn.addr + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Fatalf("GET /metrics as ci: %d; want 403 (invoke only)", resp.StatusCode)
		}
	})
}

// TestServerTLS_connectionBound checks that the connection bound sees the
// state of TLS connections: after a request, the kept-alive connection is
// counted idle (and so can be shed first), not as never used.
func TestServerTLS_connectionBound(t *testing.T) {
	ca := testcert.NewCA(t, "node CA")
	tn := startTLSNode(t, tlsFiles(t, ca, testcert.Spec{}, nil))
	if status, err := tn.greet(t, httpsClient(ca.Pool()), tn.key); err != nil || status != 200 {
		t.Fatalf("status %d, err %v", status, err)
	}
	select {
	case <-tn.idle:
	case <-time.After(10 * time.Second):
		t.Fatalf("the TLS connection was never counted idle: %+v", tn.n.ConnStats())
	}
}

func TestServerTLS_reload(t *testing.T) {
	ca := testcert.NewCA(t, "node CA")
	files := tlsFiles(t, ca, testcert.Spec{Serial: 1}, nil)
	tn := startTLSNode(t, files)
	serial := func() int64 {
		t.Helper()
		conn, err := tls.Dial("tcp", tn.addr, &tls.Config{RootCAs: ca.Pool(), ServerName: "localhost"})
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0].SerialNumber.Int64()
	}
	if s := serial(); s != 1 {
		t.Fatalf("serial %d before reload; want 1", s)
	}
	// A certificate written but not reloaded is not served.
	ca.Issue(t, testcert.Spec{Serial: 2}).Write(t, filepath.Dir(files.CertFile), "server")
	if s := serial(); s != 1 {
		t.Fatalf("serial %d before Reload; want 1", s)
	}
	if err := tn.st.Reload(); err != nil {
		t.Fatal(err)
	}
	if s := serial(); s != 2 {
		t.Fatalf("serial %d after Reload; want 2", s)
	}
	for _, tc := range []struct {
		name       string
		cert, key  []byte
		wantSubstr string
	}{
		{"key file not PEM", nil, []byte("garbage"), "node.tls.cert_file/key_file"},
		{"key of another certificate", ca.Issue(t, testcert.Spec{Serial: 3}).CertPEM, ca.Issue(t, testcert.Spec{Serial: 4}).KeyPEM,
			"node.tls.cert_file/key_file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.cert != nil {
				testcert.WriteFile(t, files.CertFile, tc.cert)
			}
			testcert.WriteFile(t, files.KeyFile, tc.key)
			err := tn.st.Reload()
			if err == nil || !strings.Contains(err.Error(), tc.wantSubstr) {
				t.Fatalf("Reload: %v; want an error naming %s", err, tc.wantSubstr)
			}
			if s := serial(); s != 2 {
				t.Fatalf("serial %d after a failed Reload; want 2 (the old certificate)", s)
			}
		})
	}
}

func TestNewServerTLS_needsBothFiles(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files config.NodeTLS
	}{
		{"nothing", config.NodeTLS{}},
		{"certificate only", config.NodeTLS{CertFile: "x.crt"}},
		{"missing files", config.NodeTLS{CertFile: "/nonexistent/x.crt", KeyFile: "/nonexistent/x.key"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := front.NewServerTLS(tc.files); err == nil {
				t.Fatal("NewServerTLS succeeded")
			}
		})
	}
}

// TestServerTLS_reloadClientCAs: after Reload, client certificates verify
// against the new client CAs only.
func TestServerTLS_reloadClientCAs(t *testing.T) {
	ca, oldCA, newCA := testcert.NewCA(t, "node CA"), testcert.NewCA(t, "old client CA"), testcert.NewCA(t, "new client CA")
	files := tlsFiles(t, ca, testcert.Spec{}, oldCA)
	tn := startTLSNode(t, files)
	subject := pkix.Name{CommonName: "ci", Organization: []string{"acme"}}
	byOld := oldCA.Issue(t, testcert.Spec{Client: true, Subject: subject}).TLS(t)
	byNew := newCA.Issue(t, testcert.Spec{Client: true, Subject: subject}).TLS(t)
	for _, step := range []struct {
		name        string
		old, new    bool // whether each certificate is accepted
		reloadToNew bool
	}{
		{"before reload", true, false, false},
		{"after reload", false, true, true},
	} {
		t.Run(step.name, func(t *testing.T) {
			if step.reloadToNew {
				testcert.WriteFile(t, files.ClientCAFile, newCA.PEM)
				if err := tn.st.Reload(); err != nil {
					t.Fatal(err)
				}
			}
			for _, c := range []struct {
				cert tls.Certificate
				ok   bool
			}{{byOld, step.old}, {byNew, step.new}} {
				status, err := tn.greet(t, httpsClient(ca.Pool(), c.cert), "")
				if c.ok != (err == nil && status == http.StatusOK) {
					t.Fatalf("certificate of %s: status %d, err %v; want accepted %v", c.cert.Leaf.Issuer, status, err, c.ok)
				}
			}
		})
	}
}

// BenchmarkServerTLS_healthz measures GET /healthz over TLS on a new
// connection each time (a full ECDSA P-256 handshake) and on a kept-alive
// one.
func BenchmarkServerTLS_healthz(b *testing.B) {
	ca := testcert.NewCA(b, "node CA")
	dir := b.TempDir()
	var files config.NodeTLS
	files.CertFile, files.KeyFile = ca.Issue(b, testcert.Spec{}).Write(b, dir, "server")
	st, err := front.NewServerTLS(files)
	if err != nil {
		b.Fatal(err)
	}
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("ok")) })}
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(tls.NewListener(raw, st.Config())) }()
	defer func() { _ = srv.Close(); <-done }()
	url := "https://" + raw.Addr().String() + "/healthz"
	for _, bc := range []struct {
		name      string
		keepAlive bool
	}{{"new connection", false}, {"kept alive", true}} {
		b.Run(bc.name, func(b *testing.B) {
			c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool()},
				DisableKeepAlives: !bc.keepAlive}}
			for b.Loop() {
				resp, err := c.Get(url)
				if err != nil {
					b.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
			}
		})
	}
}

package client

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTLS_caFile trusts a node's private CA with WithCAFile or
// WithTLSConfig; without either the system's roots refuse the certificate
// (the negative control).
func TestTLS_caFile(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{}`))
	}))
	defer srv.Close()
	dir := t.TempDir()
	caFile := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	for _, tc := range []struct {
		name    string
		opts    []Option
		trusted bool
	}{
		{"system roots refuse a private CA", nil, false},
		{"WithCAFile", []Option{WithCAFile(caFile)}, true},
		{"WithTLSConfig", []Option{WithTLSConfig(&tls.Config{RootCAs: pool})}, true},
		{"WithCAFile over WithHTTPClient", []Option{WithHTTPClient(&http.Client{Transport: &http.Transport{}}), WithCAFile(caFile)}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := New(srv.URL, "lk_x", tc.opts...)
			if err != nil {
				t.Fatal(err)
			}
			_, err = c.Admission(context.Background())
			var unknown x509.UnknownAuthorityError
			switch {
			case tc.trusted && err != nil:
				t.Fatalf("Admission: %v", err)
			case !tc.trusted && !errors.As(err, &unknown):
				t.Fatalf("Admission: %v; want an unknown authority error", err)
			}
		})
	}
}

func TestTLS_caFileErrors(t *testing.T) {
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "x.pem")
	if err := os.WriteFile(notPEM, []byte("nothing"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, path, want string
	}{
		{"missing file", filepath.Join(dir, "missing.pem"), "no such file"},
		{"no certificate", notPEM, "no PEM certificate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New("https://127.0.0.1:1", "lk_x", WithCAFile(tc.path))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New: %v; want %q", err, tc.want)
			}
		})
	}
}

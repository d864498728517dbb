package config

// The [node.tls] table: reading and checking its certificate, key and
// client CA files, and checking the principals' client certificate subjects.

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"io"
	"os"
	"strconv"
	"strings"
)

// NodeTLS is the [node.tls] table: the API listener serves HTTPS (TLS 1.2
// or later) when CertFile and KeyFile are set, and plain HTTP when the
// table sets neither. With ClientCAFile, a client may present a
// certificate signed by one of its CAs; a verified certificate whose
// subject a principal lists in client_certificate_subjects authenticates
// as that principal (an API key still works). Paths are relative to the
// node's working directory.
//
// Validation reads the files (so `latent-node check` reports a missing or
// unparsable one under its key); the node reads them again when it starts
// and on reload.
type NodeTLS struct {
	CertFile, KeyFile string // PEM certificate chain and its private key; both or neither
	ClientCAFile      string // PEM CA certificates of client certificates; optional
}

// Enabled reports whether the listener serves TLS.
func (t NodeTLS) Enabled() bool { return t.CertFile != "" || t.KeyFile != "" }

// MaxTLSFileBytes bounds each [node.tls] file: certificate chains, keys and
// CA bundles are kilobytes.
const MaxTLSFileBytes = 1 << 20

// readTLSFile reads a regular file of at most MaxTLSFileBytes (not a device
// or a pipe that would never end).
func readTLSFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil {
		return nil, err
	} else if !st.Mode().IsRegular() {
		return nil, plainError(path + " is not a regular file")
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxTLSFileBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxTLSFileBytes {
		return nil, plainError(path + " is larger than 1 MiB")
	}
	return data, nil
}

// LoadCertificate reads a PEM certificate chain and its private key (each
// a regular file of at most MaxTLSFileBytes), as tls.LoadX509KeyPair does.
func LoadCertificate(certFile, keyFile string) (tls.Certificate, error) {
	certPEM, err := readTLSFile(certFile)
	if err != nil {
		return tls.Certificate{}, err
	}
	keyPEM, err := readTLSFile(keyFile)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.X509KeyPair(certPEM, keyPEM)
}

// LoadClientCAs reads the PEM file of client CA certificates (a regular
// file of at most MaxTLSFileBytes); every CERTIFICATE block must parse and
// there must be at least one.
func LoadClientCAs(path string) (*x509.CertPool, error) {
	data, err := readTLSFile(path)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	n := 0
	for rest := data; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, err
		}
		pool.AddCert(c)
		n++
	}
	if n == 0 {
		return nil, errNoPEMCertificate
	}
	return pool, nil
}

type plainError string

func (e plainError) Error() string { return string(e) }

const errNoPEMCertificate = plainError("no PEM certificate in the file")

// checkTLS checks [node.tls] and the principals' client certificate
// subjects.
func (c *Config) checkTLS(v *checker) {
	t := c.Node.TLS
	switch {
	case (t.CertFile == "") != (t.KeyFile == ""):
		v.add("node.tls", "cert_file and key_file go together: set both or neither")
	case t.CertFile != "":
		switch _, cerr := readTLSFile(t.CertFile); {
		case cerr != nil:
			v.add("node.tls.cert_file", "cannot be read: "+cerr.Error())
		default:
			if _, kerr := readTLSFile(t.KeyFile); kerr != nil {
				v.add("node.tls.key_file", "cannot be read: "+kerr.Error())
			} else if _, err := LoadCertificate(t.CertFile, t.KeyFile); err != nil {
				v.add("node.tls.cert_file", "with key_file: "+err.Error())
			}
		}
	}
	if t.ClientCAFile != "" {
		if !t.Enabled() {
			v.add("node.tls.client_ca_file", "needs cert_file and key_file: client certificates exist only over TLS")
		} else if _, err := LoadClientCAs(t.ClientCAFile); err != nil {
			v.add("node.tls.client_ca_file", err.Error())
		}
	}
	owners := map[string]int{}
	for i, p := range c.Principals {
		fi := "principals[" + strconv.Itoa(i) + "].client_certificate_issuers"
		if len(p.ClientCertificateIssuers) > 0 && len(p.ClientCertificateSubjects) == 0 {
			v.add(fi, "needs client_certificate_subjects: issuers narrow which certificates of those subjects authenticate")
		}
		for j, s := range p.ClientCertificateIssuers {
			if !validSubject(s) {
				v.add(fi+"["+strconv.Itoa(j)+"]", `must be a distinguished name in RFC 2253 form such as "CN=Acme CA,O=acme" (as "openssl x509 -noout -issuer -nameopt RFC2253" prints it, without "issuer=")`)
			}
		}
		f := "principals[" + strconv.Itoa(i) + "].client_certificate_subjects"
		if len(p.ClientCertificateSubjects) > 0 && t.ClientCAFile == "" {
			v.add(f, "needs node.tls.client_ca_file: without it no client certificate is verified")
		}
		for j, s := range p.ClientCertificateSubjects {
			sf := f + "[" + strconv.Itoa(j) + "]"
			if !validSubject(s) {
				v.add(sf, `must be a distinguished name in RFC 2253 form such as "CN=ci,O=acme" (as "openssl x509 -noout -subject -nameopt RFC2253" prints it, without "subject=")`)
				continue
			}
			switch owner, dup := owners[s]; {
			case !dup:
				owners[s] = i
			case owner == i:
				v.add(sf, "the same subject is listed twice")
			default:
				v.add(sf, "the same subject belongs to principals["+strconv.Itoa(owner)+"]: a certificate authenticates exactly one principal")
			}
		}
	}
}

// validSubject reports whether s looks like an RFC 2253 distinguished
// name: comma-separated TYPE=value pairs, no surrounding space.
func validSubject(s string) bool {
	if s == "" || len(s) > 1024 || strings.TrimSpace(s) != s || strings.HasPrefix(s, "subject=") {
		return false
	}
	typ, _, ok := strings.Cut(s, "=")
	return ok && typ != "" && !strings.ContainsAny(typ, " ,")
}

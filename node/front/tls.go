package front

// ServerTLS, the API listener's TLS material, read from [node.tls] and
// reloaded without a restart.

import (
	"crypto/tls"
	"crypto/x509"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/errors"

	"github.com/latent-node/latent-node/node/config"
)

// ServerTLS holds the API listener's TLS material ([node.tls]): the node's
// certificate and, with client_ca_file, the pool of client CAs. Config's
// tls.Config reads the current ones on every handshake, so Reload takes
// effect for new connections without restarting the listener; established
// connections keep what they negotiated. It is safe for concurrent use.
type ServerTLS struct {
	files config.NodeTLS
	cert  atomic.Pointer[tls.Certificate]
	cas   atomic.Pointer[x509.CertPool] // nil without client_ca_file
	// reload serializes Reload and store, so two reloads never interleave
	// their stores of the certificate and the CAs.
	reload sync.Mutex
}

// NewServerTLS reads the certificate, its key and the client CAs named by
// t. t must enable TLS (cert_file and key_file set).
func NewServerTLS(t config.NodeTLS) (*ServerTLS, error) {
	if t.CertFile == "" || t.KeyFile == "" {
		return nil, errors.New("node: node.tls: cert_file and key_file are required")
	}
	s := &ServerTLS{files: t}
	if err := s.Reload(); err != nil {
		return nil, err
	}
	return s, nil
}

// Reload reads the files again and, when all of them load, swaps them in:
// the next handshake presents the new certificate and verifies client
// certificates against the new CAs. When any file fails, nothing changes
// (the old certificate and CAs stay in use) and the error names the key.
func (s *ServerTLS) Reload() error {
	s.reload.Lock()
	defer s.reload.Unlock()
	m, err := s.Load()
	if err != nil {
		return err
	}
	s.storeLocked(m)
	return nil
}

// Material is what the files held when Load read them: Load prepares a
// reload that can fail, Store applies it.
type Material struct {
	cert tls.Certificate
	cas  *x509.CertPool // nil without client_ca_file
}

// load reads the certificate, its key and the client CAs without using
// them: a node reload reads them before it changes anything (store swaps
// them in).
func (s *ServerTLS) Load() (*Material, error) {
	cert, err := config.LoadCertificate(s.files.CertFile, s.files.KeyFile)
	if err != nil {
		return nil, errors.Wrap(err, "node: node.tls.cert_file/key_file")
	}
	var cas *x509.CertPool
	if s.files.ClientCAFile != "" {
		if cas, err = config.LoadClientCAs(s.files.ClientCAFile); err != nil {
			return nil, errors.Wrapf(err, "node: node.tls.client_ca_file %s", s.files.ClientCAFile)
		}
	}
	return &Material{cert: cert, cas: cas}, nil
}

// store makes m the material of the next handshakes.
func (s *ServerTLS) Store(m *Material) {
	s.reload.Lock()
	defer s.reload.Unlock()
	s.storeLocked(m)
}

// storeLocked is store.
//
// REQUIRES: s.reload held.
func (s *ServerTLS) storeLocked(m *Material) {
	s.cert.Store(&m.cert)
	s.cas.Store(m.cas)
}

// Certificate returns the certificate in use.
func (s *ServerTLS) Certificate() *tls.Certificate { return s.cert.Load() }

// Config returns the listener's tls.Config: TLS 1.2 or later, HTTP/1.1
// only (the connection bound follows HTTP/1.1 connection states), the
// current certificate through GetCertificate and, with client CAs, a
// per-handshake configuration (GetConfigForClient) that verifies a client
// certificate when one is given (tls.VerifyClientCertIfGiven).
func (s *ServerTLS) Config() *tls.Config {
	base := &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"http/1.1"},
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return s.cert.Load(), nil
		},
	}
	if s.files.ClientCAFile == "" {
		return base
	}
	cfg := base.Clone()
	cfg.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
		c := base.Clone()
		c.ClientCAs = s.cas.Load()
		c.ClientAuth = tls.VerifyClientCertIfGiven
		return c, nil
	}
	return cfg
}

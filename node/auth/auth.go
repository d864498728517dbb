package auth

// Authentication: the roles, Principal, and the Authenticator that maps an
// API key or a client certificate to its principal.

import (
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"slices"
	"strconv"
	"strings"

	"github.com/cockroachdb/errors"

	"github.com/latent-node/latent-node/admission"
	"github.com/latent-node/latent-node/node/config"
	"github.com/latent-node/latent-node/vocab"
)

// Roles is a set of roles (the configuration's type).
type Roles = config.Roles

// The roles (each a set of one).
const (
	Invoke = config.RoleInvoke // call routes of the principal's tenant
	Deploy = config.RoleDeploy // upload artifacts, activate and delete releases of the principal's tenant
	Admin  = config.RoleAdmin  // read node-wide state (the node admission snapshot)
)

// MaxHeaderBytes bounds the Authorization header value Authenticate
// examines; a generated key needs 62 bytes with the scheme.
const MaxHeaderBytes = 512

// ErrUnauthenticated marks every authentication failure: a missing or
// malformed Authorization header or an unknown key. The API answers 401
// with `WWW-Authenticate: Bearer`. Messages never echo the key.
var ErrUnauthenticated = errors.New("auth: unauthenticated")

// The refusals, prebuilt: refusing allocates nothing.
var (
	errMissing     = errors.Mark(errors.New("auth: unauthenticated: missing Authorization header"), ErrUnauthenticated)
	errTooLong     = errors.Mark(errors.New("auth: unauthenticated: Authorization header longer than "+strconv.Itoa(MaxHeaderBytes)+" bytes"), ErrUnauthenticated)
	errScheme      = errors.Mark(errors.New(`auth: unauthenticated: Authorization header is not "Bearer <key>"`), ErrUnauthenticated)
	errEmptyKey    = errors.Mark(errors.New("auth: unauthenticated: empty bearer key"), ErrUnauthenticated)
	errMalformed   = errors.Mark(errors.New("auth: unauthenticated: malformed bearer key"), ErrUnauthenticated)
	errUnknown     = errors.Mark(errors.New("auth: unauthenticated: unknown key"), ErrUnauthenticated)
	errNoCert      = errors.Mark(errors.New("auth: unauthenticated: no client certificate"), ErrUnauthenticated)
	errCertUnknown = errors.Mark(errors.New("auth: unauthenticated: no principal lists the client certificate's subject"),
		ErrUnauthenticated)
	errCertIssuer = errors.Mark(errors.New("auth: unauthenticated: the client certificate's issuer is not one its principal lists"),
		ErrUnauthenticated)
)

// Principal is an authenticated caller, as configured. Authenticate returns
// the same *Principal for every key of one [[principals]] entry; it is
// shared and must not be modified.
type Principal struct {
	Subject         string
	Kind            admission.PrincipalKind
	Tenant          vocab.TenantID
	ServiceIdentity string // set exactly for admission.KindService
	Roles           Roles
	// issuers, when not empty, are the RFC 2253 issuers one of which must
	// have issued a client certificate of the principal.
	issuers map[string]bool
}

// Can reports whether p holds every role of want (Can(0) is false).
func (p *Principal) Can(want Roles) bool { return p != nil && p.Roles.Has(want) }

// AdmissionPrincipal returns the principal as admission sees it, without
// claims.
func (p *Principal) AdmissionPrincipal() admission.Principal {
	return admission.Principal{Subject: p.Subject, Kind: p.Kind, Tenant: p.Tenant, ServiceIdentity: p.ServiceIdentity}
}

// Authenticator maps key hashes to principals. It is immutable after New
// and safe for concurrent use.
type Authenticator struct {
	byHash    map[[sha256.Size]byte]*Principal
	bySubject map[string]*Principal // client certificate subjects (RFC 2253, see AuthenticateCertificate)
}

// New builds an Authenticator from the configured principals (config
// validation has checked them; New re-checks what it relies on: well-formed
// hashes, each belonging to one principal, and a known kind).
func New(principals []config.Principal) (*Authenticator, error) {
	a := &Authenticator{byHash: make(map[[sha256.Size]byte]*Principal), bySubject: make(map[string]*Principal)}
	for i, cp := range principals {
		if cp.Kind != admission.KindUser && cp.Kind != admission.KindService {
			return nil, errors.Newf("auth: principals[%d]: unknown kind", i)
		}
		p := &Principal{Subject: cp.Subject, Kind: cp.Kind, Tenant: cp.Tenant,
			ServiceIdentity: cp.ServiceIdentity, Roles: cp.Roles}
		for j, h := range cp.APIKeys {
			d, err := parseHash(h)
			if err != nil {
				return nil, errors.Wrapf(err, "principals[%d].api_keys[%d]", i, j)
			}
			if other, dup := a.byHash[d]; dup && other != p {
				return nil, errors.Newf("auth: principals[%d].api_keys[%d]: the key hash belongs to another principal too", i, j)
			}
			a.byHash[d] = p
		}
		if len(cp.ClientCertificateIssuers) > 0 {
			p.issuers = make(map[string]bool, len(cp.ClientCertificateIssuers))
			for _, s := range cp.ClientCertificateIssuers {
				p.issuers[s] = true
			}
		}
		for j, s := range cp.ClientCertificateSubjects {
			if other, dup := a.bySubject[s]; dup && other != p {
				return nil, errors.Newf("auth: principals[%d].client_certificate_subjects[%d]: the subject belongs to another principal too", i, j)
			}
			a.bySubject[s] = p
		}
	}
	return a, nil
}

// AuthenticateCertificate returns the principal whose
// client_certificate_subjects lists the subject of cert, a client
// certificate the TLS handshake has verified against node.tls.client_ca_file
// (the leaf of a verified chain). The subject is compared whole: every
// attribute of every RDN, in the certificate's order, rendered in RFC 2253
// form (last RDN first, "CN=ci,O=acme", as openssl's -nameopt RFC2253
// prints it), must equal an entry exactly. pkix.Name.String, which older
// versions compared, keeps only the last CN (and SERIALNUMBER) and puts the
// attributes in a fixed order, so "CN=ci,O=acme" also matched a
// certificate whose subject holds another CN before ci; that rendering
// still matches, for configurations written against it, but only a subject
// whose RDNs have one attribute each, of types that do not repeat (then it
// shows every attribute and only their order differs). A principal that
// lists client_certificate_issuers accepts only certificates whose issuer,
// compared the same way, is one of them; otherwise any CA in
// client_ca_file vouches for any subject. The caller must pass only a
// verified certificate. Every failure matches ErrUnauthenticated.
func (a *Authenticator) AuthenticateCertificate(cert *x509.Certificate) (*Principal, error) {
	if cert == nil {
		return nil, errNoCert
	}
	var p *Principal
	for _, k := range dnKeys(cert.RawSubject, cert.Subject) {
		if p = a.bySubject[k]; p != nil {
			break
		}
	}
	if p == nil {
		return nil, errCertUnknown
	}
	if len(p.issuers) > 0 && !slices.ContainsFunc(dnKeys(cert.RawIssuer, cert.Issuer), func(k string) bool { return p.issuers[k] }) {
		return nil, errCertIssuer
	}
	return p, nil
}

// dnKeys are the renderings a distinguished name (raw, as parsed into name)
// is looked up by: the RFC 2253 form of the whole name, and
// pkix.Name.String when that shows every attribute (unambiguous). None when
// raw does not parse.
func dnKeys(raw []byte, name pkix.Name) []string {
	var rdns pkix.RDNSequence
	if rest, err := asn1.Unmarshal(raw, &rdns); err != nil || len(rest) > 0 {
		return nil
	}
	if unambiguous(rdns) {
		return []string{rdns.String(), name.String()}
	}
	return []string{rdns.String()}
}

// unambiguous reports whether every RDN of rdns has one attribute and no
// attribute type appears twice: then pkix.Name keeps every attribute and
// its String shows them all.
func unambiguous(rdns pkix.RDNSequence) bool {
	for i, rdn := range rdns {
		if len(rdn) != 1 {
			return false
		}
		for _, prev := range rdns[:i] {
			if prev[0].Type.Equal(rdn[0].Type) {
				return false
			}
		}
	}
	return true
}

// Authenticate parses an Authorization header value ("Bearer <key>", see the
// package documentation) and returns the key's principal. Every failure
// matches ErrUnauthenticated.
func (a *Authenticator) Authenticate(authorization string) (*Principal, error) {
	key, err := bearerKey(authorization)
	if err != nil {
		return nil, err
	}
	p, ok := a.byHash[sha256.Sum256([]byte(key))]
	if !ok {
		return nil, errUnknown
	}
	return p, nil
}

// bearerKey extracts the key of "Bearer <key>".
func bearerKey(h string) (string, error) {
	if len(h) > MaxHeaderBytes {
		return "", errTooLong
	}
	h = strings.Trim(h, " \t")
	if h == "" {
		return "", errMissing
	}
	scheme, rest, _ := strings.Cut(h, " ")
	if !strings.EqualFold(scheme, "Bearer") {
		return "", errScheme
	}
	key := strings.TrimLeft(rest, " ")
	if key == "" {
		return "", errEmptyKey
	}
	if !isToken68(key) {
		return "", errMalformed
	}
	return key, nil
}

// isToken68 reports whether s is an RFC 6750 b64token:
// 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"=".
func isToken68(s string) bool {
	body := strings.TrimRight(s, "=")
	if body == "" {
		return false
	}
	for i := 0; i < len(body); i++ {
		c := body[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case c == '-' || c == '.' || c == '_' || c == '~' || c == '+' || c == '/':
		default:
			return false
		}
	}
	return true
}

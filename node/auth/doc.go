// Package auth turns an `Authorization: Bearer <key>` header (docs/api.md),
// or a verified client certificate, into the principal it belongs to (a
// [[principals]] entry of the configuration, docs/configuration.md). The
// principal, its tenant, kind, service identity and roles come from the key
// or certificate alone, never from request headers or the body.
//
// # Client certificates
//
// Over TLS with node.tls.client_ca_file, a principal may instead list
// client_certificate_subjects. AuthenticateCertificate takes the leaf of a
// chain the TLS handshake verified and returns the principal whose list
// holds the certificate's whole subject in RFC 2253 form ("CN=ci,O=acme"):
// every attribute of every RDN in the certificate's order, compared
// exactly, so neither the common name alone nor a subject with more
// attributes (a second CN) matches. The issuer is not compared: every CA in
// client_ca_file vouches for every subject. The node uses it only for a
// request without an Authorization header.
//
// # Keys
//
// Generate makes a key: "lk_" followed by 32 bytes from crypto/rand in
// lowercase base32 without padding (55 bytes in all), and its hash,
// "sha256:" followed by the 64 lowercase hex digits of SHA-256 of the key.
// `latent-node keygen` prints both; the configuration stores only hashes,
// so a leaked configuration file grants nothing. Several keys may share one
// principal (its quota and fair share): every key of a [[principals]] entry
// authenticates as the same *Principal.
//
// # Authenticate
//
// The header value, after trimming surrounding spaces and tabs (net/http
// already strips them), must be the scheme "Bearer" in any letter case, one
// or more spaces (RFC 7235's 1*SP), and a non-empty key of token68
// characters (RFC 6750) with nothing after it. A value longer than
// MaxHeaderBytes is refused before it is examined. Every failure (missing
// or malformed header, unknown key) matches ErrUnauthenticated; messages
// never echo the key.
//
// Lookup hashes the presented key and looks the digest up in a map. The
// lookup is not constant-time, and need not be: it compares SHA-256 digests,
// not keys, and timing that reveals how a digest of the attacker's own
// input relates to stored digests reveals nothing about the stored keys
// without a preimage of SHA-256. The keys themselves are never compared.
//
// # Internal organization
//
//   - keys.go: Generate, Hash, the key and hash formats.
//   - auth.go: Principal, Roles (config.Roles), Authenticator.
//
// # Usage
//
//	a, err := auth.New(cfg.Principals)
//	…
//	p, err := a.Authenticate(r.Header.Get("Authorization"))
//	if err != nil { // errors.Is(err, auth.ErrUnauthenticated)
//		// 401 with WWW-Authenticate: Bearer
//	}
//	if !p.Can(auth.Invoke) {
//		// 403
//	}
//	req.Principal = p.AdmissionPrincipal()
package auth

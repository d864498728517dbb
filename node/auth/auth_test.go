package auth

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/latent-node/latent-node/admission"
	"github.com/latent-node/latent-node/node/config"
)

func TestGenerate(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		key, hash, err := Generate()
		if err != nil {
			t.Fatal(err)
		}
		if seen[key] {
			t.Fatalf("duplicate key %s", key)
		}
		seen[key] = true
		if len(key) != 55 || !strings.HasPrefix(key, KeyPrefix) {
			t.Fatalf("malformed key %q", key)
		}
		for _, c := range key[len(KeyPrefix):] {
			if (c < 'a' || c > 'z') && (c < '2' || c > '7') {
				t.Fatalf("key %q: %q is not lowercase base32", key, c)
			}
		}
		if hash != Hash(key) {
			t.Fatalf("hash %q is not Hash(key)", hash)
		}
		if _, err := parseHash(hash); err != nil {
			t.Fatalf("hash %q: %v", hash, err)
		}
		// The key authenticates through the header as generated.
		if _, err := bearerKey("Bearer " + key); err != nil {
			t.Fatalf("key %q is not a valid bearer token: %v", key, err)
		}
	}
}

// TestHash pins the format: sha256 of the key bytes, in lowercase hex.
func TestHash(t *testing.T) {
	tests := []struct{ key, want string }{
		{"", "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
		{"lk_designexamplekey", "sha256:ac0532d3c02d16e746c77ae18866a9087c6f3414252ce2d4c2a8ee5bd64ba364"},
	}
	for _, tc := range tests {
		if have := Hash(tc.key); have != tc.want {
			t.Errorf("Hash(%q): want %s, have %s", tc.key, tc.want, have)
		}
	}
}

func TestParseHash(t *testing.T) {
	good := Hash("x")
	for _, bad := range []string{"", "sha256:", good[:len(good)-1], strings.ToUpper(good), "md5:" + good[7:],
		"sha256:" + strings.Repeat("g", 64), good + "0"} {
		if _, err := parseHash(bad); err == nil {
			t.Errorf("parseHash(%q) accepted", bad)
		}
	}
	if _, err := parseHash(good); err != nil {
		t.Fatal(err)
	}
}

func principals(t *testing.T) ([]config.Principal, []string) {
	t.Helper()
	var keys, hashes []string
	for range 4 {
		k, h, err := Generate()
		if err != nil {
			t.Fatal(err)
		}
		keys, hashes = append(keys, k), append(hashes, h)
	}
	return []config.Principal{
		{Subject: "alice", Kind: admission.KindUser, Tenant: "acme", Roles: config.RoleInvoke, APIKeys: hashes[:1]},
		{Subject: "thumbnailer", Kind: admission.KindService, Tenant: "acme", ServiceIdentity: "thumb-svc",
			Roles: config.RoleInvoke | config.RoleDeploy, APIKeys: hashes[1:3]},
		{Subject: "root", Kind: admission.KindUser, Tenant: "ops", Roles: config.RoleInvoke | config.RoleDeploy | config.RoleAdmin,
			APIKeys: hashes[3:]},
	}, keys
}

func TestAuthenticator(t *testing.T) {
	ps, keys := principals(t)
	a, err := New(ps)
	if err != nil {
		t.Fatal(err)
	}
	alice, err := a.Authenticate("Bearer " + keys[0])
	if err != nil || alice.Subject != "alice" || alice.Tenant != "acme" || alice.Kind != admission.KindUser {
		t.Fatalf("alice: %+v, %v", alice, err)
	}
	// Several keys share one principal: the same *Principal.
	t1, err1 := a.Authenticate("Bearer " + keys[1])
	t2, err2 := a.Authenticate("bearer " + keys[2])
	if err1 != nil || err2 != nil || t1 != t2 || t1.ServiceIdentity != "thumb-svc" {
		t.Fatalf("shared principal: %p %p %v %v", t1, t2, err1, err2)
	}
	if t1 == alice {
		t.Fatal("two principals share a *Principal")
	}
	want := admission.Principal{Subject: "thumbnailer", Kind: admission.KindService, Tenant: "acme", ServiceIdentity: "thumb-svc"}
	if have := t1.AdmissionPrincipal(); have.Subject != want.Subject || have.Kind != want.Kind ||
		have.Tenant != want.Tenant || have.ServiceIdentity != want.ServiceIdentity || have.Claims != nil {
		t.Fatalf("admission principal: %+v", have)
	}
	// An unknown key of the right shape.
	other, _, _ := Generate()
	if _, err := a.Authenticate("Bearer " + other); !errors.Is(err, ErrUnauthenticated) || strings.Contains(err.Error(), other) {
		t.Fatalf("unknown key: %v", err)
	}
}

func TestPrincipal_Can(t *testing.T) {
	ps, keys := principals(t)
	a, err := New(ps)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		key  string
		role Roles
		want bool
	}{
		{keys[0], Invoke, true}, {keys[0], Deploy, false}, {keys[0], Admin, false},
		{keys[1], Invoke, true}, {keys[1], Deploy, true}, {keys[1], Admin, false}, {keys[1], Invoke | Deploy, true},
		{keys[1], Deploy | Admin, false},
		{keys[3], Invoke, true}, {keys[3], Deploy, true}, {keys[3], Admin, true}, {keys[3], 0, false},
	}
	for _, tc := range tests {
		p, err := a.Authenticate("Bearer " + tc.key)
		if err != nil {
			t.Fatal(err)
		}
		if have := p.Can(tc.role); have != tc.want {
			t.Errorf("%s.Can(%v): want %v, have %v", p.Subject, tc.role, tc.want, have)
		}
	}
	var nobody *Principal
	if nobody.Can(Invoke) {
		t.Error("a nil principal can do nothing")
	}
}

func TestAuthenticate_header(t *testing.T) {
	ps, keys := principals(t)
	a, err := New(ps)
	if err != nil {
		t.Fatal(err)
	}
	key := keys[0]
	tests := []struct {
		name, header string
		want         error // nil: authenticated
	}{
		{"canonical", "Bearer " + key, nil},
		{"scheme in lower case", "bearer " + key, nil},
		{"scheme in upper case", "BEARER " + key, nil},
		{"several spaces after the scheme", "Bearer   " + key, nil},
		{"surrounding whitespace", " \tBearer " + key + " \t", nil},
		{"missing", "", errMissing},
		{"only whitespace", "   ", errMissing},
		{"basic scheme", "Basic " + key, errScheme},
		{"no scheme", key, errScheme},
		{"scheme only", "Bearer", errEmptyKey},
		{"scheme and a space", "Bearer ", errEmptyKey},
		{"tab after the scheme", "Bearer\t" + key, errScheme},
		{"empty key", "Bearer  \t", errEmptyKey},
		{"two tokens", "Bearer " + key + " " + key, errMalformed},
		{"space inside the key", "Bearer lk_abc def", errMalformed},
		{"comma", "Bearer " + key + ",", errMalformed},
		{"only padding", "Bearer ===", errMalformed},
		{"non-ASCII key", "Bearer lk_é", errMalformed},
		{"control character", "Bearer lk_\x00abc", errMalformed},
		{"unknown key", "Bearer lk_" + strings.Repeat("a", 52), errUnknown},
		{"token68 with padding", "Bearer abc/+~.-_==", errUnknown},
		{"key of another format", "Bearer " + strings.ToUpper(key), errUnknown},
		{"at the length bound", "Bearer " + strings.Repeat("a", MaxHeaderBytes-7), errUnknown},
		{"over the length bound", "Bearer " + strings.Repeat("a", MaxHeaderBytes-6), errTooLong},
		{"huge", "Bearer " + strings.Repeat("a", 1<<20), errTooLong},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := a.Authenticate(tc.header)
			if tc.want == nil {
				if err != nil || p == nil || p.Subject != "alice" {
					t.Fatalf("want alice, have %v, %v", p, err)
				}
				return
			}
			if p != nil || !errors.Is(err, ErrUnauthenticated) {
				t.Fatalf("want ErrUnauthenticated, have %v, %v", p, err)
			}
			if err != tc.want {
				t.Fatalf("want %v, have %v", tc.want, err)
			}
			if len(key) > 0 && strings.Contains(err.Error(), key[3:]) {
				t.Fatalf("the error echoes the key: %v", err)
			}
		})
	}
}

func TestNew_errors(t *testing.T) {
	ps, _ := principals(t)
	tests := []struct {
		name   string
		mutate func([]config.Principal)
		want   string
	}{
		{"malformed hash", func(ps []config.Principal) { ps[0].APIKeys = []string{"sha256:xyz"} }, "principals[0].api_keys[0]"},
		{"raw key", func(ps []config.Principal) { ps[1].APIKeys = []string{"lk_secret"} }, "principals[1].api_keys[0]"},
		{"hash shared by two principals", func(ps []config.Principal) { ps[2].APIKeys = ps[0].APIKeys }, "principals[2].api_keys[0]"},
		{"unknown kind", func(ps []config.Principal) { ps[1].Kind = 0 }, "principals[1]"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ps := append([]config.Principal(nil), ps...)
			tc.mutate(ps)
			_, err := New(ps)
			if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "lk_secret") {
				t.Fatalf("want an error naming %s, have %v", tc.want, err)
			}
		})
	}
	// A hash listed twice by one principal is harmless.
	ps[0].APIKeys = []string{ps[0].APIKeys[0], ps[0].APIKeys[0]}
	if _, err := New(ps); err != nil {
		t.Fatal(err)
	}
}

// TestNew_fromConfig authenticates with the demo configuration, as serve
// --demo does.
func TestNew_fromConfig(t *testing.T) {
	key, hash, err := Generate()
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Demo(config.WithDataDir(t.TempDir()), config.WithDemoKey(hash))
	if err != nil {
		t.Fatal(err)
	}
	a, err := New(cfg.Principals)
	if err != nil {
		t.Fatal(err)
	}
	p, err := a.Authenticate("Bearer " + key)
	if err != nil || p.Subject != "demo" || p.Tenant != "demo" || !p.Can(Invoke|Deploy|Admin) {
		t.Fatalf("demo principal: %+v, %v", p, err)
	}
}

func FuzzAuthenticate(f *testing.F) {
	key, hash, err := Generate()
	if err != nil {
		f.Fatal(err)
	}
	a, err := New([]config.Principal{{Subject: "s", Kind: admission.KindUser, Tenant: "t", Roles: config.RoleInvoke, APIKeys: []string{hash}}})
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range []string{"", "Bearer " + key, "bearer  x", "Basic abc", "Bearer a b", "Bearer ==="} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, h string) {
		p, err := a.Authenticate(h)
		if err != nil {
			if p != nil || !errors.Is(err, ErrUnauthenticated) {
				t.Fatalf("%v, %v", p, err)
			}
			// Only the prebuilt refusals are returned: nothing of the
			// header can reach a message.
			switch err {
			case errMissing, errTooLong, errScheme, errEmptyKey, errMalformed, errUnknown:
			default:
				t.Fatalf("unexpected error %v", err)
			}
			return
		}
		if p.Subject != "s" || !strings.Contains(h, key) {
			t.Fatalf("authenticated %q as %+v", h, p)
		}
	})
}

// certWith makes a self-signed certificate whose subject is rdns, in
// this order (AuthenticateCertificate does not verify chains), each RDN
// given as its attributes "TYPE=value" with TYPE CN, O or UID.
func certWith(t *testing.T, rdns ...[]string) *x509.Certificate {
	t.Helper()
	types := map[string]asn1.ObjectIdentifier{"CN": {2, 5, 4, 3}, "O": {2, 5, 4, 10}, "UID": {0, 9, 2342, 19200300, 100, 1, 1}}
	var seq pkix.RDNSequence
	for _, rdn := range rdns {
		var set pkix.RelativeDistinguishedNameSET
		for _, atv := range rdn {
			typ, value, _ := strings.Cut(atv, "=")
			set = append(set, pkix.AttributeTypeAndValue{Type: types[typ], Value: value})
		}
		seq = append(seq, set)
	}
	raw, err := asn1.Marshal(seq)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), RawSubject: raw, NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

// TestAuthenticateCertificate: the whole subject, every RDN in order, must
// equal a listed entry (pkix.Name.String's rendering still matches a
// subject it shows whole).
func TestAuthenticateCertificate(t *testing.T) {
	_, hash, _ := Generate()
	a, err := New([]config.Principal{
		{Subject: "ci", Kind: admission.KindUser, Tenant: "acme", Roles: Invoke, ClientCertificateSubjects: []string{"CN=ci,O=acme"}},
		{Subject: "ops", Kind: admission.KindUser, Tenant: "acme", Roles: Admin, APIKeys: []string{hash}},
		{Subject: "bot", Kind: admission.KindUser, Tenant: "acme", Roles: Invoke, ClientCertificateSubjects: []string{"O=acme,CN=bot"}},
		// certWith's certificates are self-signed: the issuer is the subject.
		{Subject: "pinned", Kind: admission.KindUser, Tenant: "acme", Roles: Invoke,
			ClientCertificateSubjects: []string{"CN=pin,O=acme"}, ClientCertificateIssuers: []string{"CN=Acme CA,O=acme", "CN=pin,O=acme"}},
		{Subject: "pinned-elsewhere", Kind: admission.KindUser, Tenant: "acme", Roles: Invoke,
			ClientCertificateSubjects: []string{"CN=pin2,O=acme"}, ClientCertificateIssuers: []string{"CN=Acme CA,O=acme"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	one := func(atv string) []string { return []string{atv} }
	for _, tc := range []struct {
		name    string
		cert    *x509.Certificate
		subject string // "": refused
	}{
		{"listed subject", certWith(t, one("O=acme"), one("CN=ci")), "ci"},
		{"same common name, other organization", certWith(t, one("O=evil"), one("CN=ci")), ""},
		{"common name only", certWith(t, one("CN=ci")), ""},
		// pkix.Name keeps the last CN: its String was "CN=ci,O=acme".
		{"another CN first", certWith(t, one("CN=mallory"), one("CN=ci"), one("O=acme")), ""},
		{"another CN between", certWith(t, one("O=acme"), one("CN=mallory"), one("CN=ci")), ""},
		{"another CN last", certWith(t, one("O=acme"), one("CN=ci"), one("CN=mallory")), ""},
		{"one RDN of both attributes", certWith(t, []string{"O=acme", "CN=ci"}), ""},
		{"one more attribute", certWith(t, one("O=acme"), one("CN=ci"), one("UID=mallory")), ""},
		{"empty subject", certWith(t), ""},
		// The attributes in the other order: RFC 2253 says "O=acme,CN=ci",
		// pkix.Name.String "CN=ci,O=acme", which configurations may list.
		{"other order, as pkix.Name.String renders it", certWith(t, one("CN=ci"), one("O=acme")), "ci"},
		{"other order, as openssl renders it", certWith(t, one("CN=bot"), one("O=acme")), "bot"},
		// Otherwise the order is part of the subject.
		{"openssl's order listed, the other presented", certWith(t, one("O=acme"), one("CN=bot")), ""},
		{"no certificate", nil, ""},
		{"issuer listed", certWith(t, one("O=acme"), one("CN=pin")), "pinned"},
		{"issuer not listed", certWith(t, one("O=acme"), one("CN=pin2")), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := a.AuthenticateCertificate(tc.cert)
			if tc.subject == "" {
				if !errors.Is(err, ErrUnauthenticated) {
					t.Fatalf("got %v, %v; want ErrUnauthenticated", p, err)
				}
				return
			}
			if err != nil || p.Subject != tc.subject {
				t.Fatalf("got %v, %v; want %s", p, err, tc.subject)
			}
		})
	}
	if _, err := New([]config.Principal{
		{Subject: "a", Kind: admission.KindUser, Tenant: "acme", Roles: Invoke, ClientCertificateSubjects: []string{"CN=x"}},
		{Subject: "b", Kind: admission.KindUser, Tenant: "acme", Roles: Invoke, ClientCertificateSubjects: []string{"CN=x"}},
	}); err == nil {
		t.Fatal("New accepted one subject for two principals")
	}
}

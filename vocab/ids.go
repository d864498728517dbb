// Identities: tenant, service, route, revision and function names, trust
// classes, generated revision and release ids, generations, targets and
// digests, and the rules every caller-chosen name follows.

package vocab

import (
	"encoding/hex"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/cockroachdb/errors"
)

// MaxNameBytes bounds every caller-chosen catalog name (tenant, service, route,
// revision, function, trust class, placement values, attribute keys).
const MaxNameBytes = 128

// MaxGeneratedIDBytes bounds generated revision and release identities. The
// identities this package generates are 69 bytes; admission must allow at least
// this many bytes for them.
const MaxGeneratedIDBytes = 96

// TenantID names a tenant. Tenants come from node configuration; the catalog
// only checks the syntax.
type TenantID string

// ServiceName names a service within a tenant.
type ServiceName string

// RouteName names a route within a service.
type RouteName string

// RevisionName is the manifest's name for a revision (e.g. "v1").
type RevisionName string

// FunctionName is the exported function a route invokes (usually "_start").
type FunctionName string

// TrustClass names a configured trust class (e.g. "untrusted").
type TrustClass string

// RevisionID is the deterministic identity of a revision: "rev1-" followed by
// 64 lowercase hex digits (see Release for its derivation).
type RevisionID string

// ReleaseID is the deterministic identity of a release: "rel1-" followed by 64
// lowercase hex digits.
type ReleaseID string

// Generation orders the changes of the catalog. Every deploy and every delete
// takes the next value of one catalog-wide counter, so a service's generation
// only grows, even across a delete and a redeploy, and it survives restarts.
type Generation uint64

// Target addresses a route: tenant/service/route.
type Target struct {
	Tenant  TenantID
	Service ServiceName
	Route   RouteName
}

// Validate checks the syntax of each part.
func (t Target) Validate() error {
	if err := ValidatePathName(string(t.Tenant)); err != nil {
		return errors.Wrap(err, "tenant")
	}
	if err := ValidatePathName(string(t.Service)); err != nil {
		return errors.Wrap(err, "service")
	}
	if err := ValidatePathName(string(t.Route)); err != nil {
		return errors.Wrap(err, "route")
	}
	return nil
}

// String renders the target as tenant/service/route.
func (t Target) String() string {
	return string(t.Tenant) + "/" + string(t.Service) + "/" + string(t.Route)
}

// ErrInvalidName is the mark of every name that fails validation.
var ErrInvalidName = errors.New("catalog: invalid name")

// ValidateName checks a caller-chosen name: 1..MaxNameBytes bytes of valid
// UTF-8 without whitespace or control characters. The error never echoes the
// name.
func ValidateName(s string) error {
	return validateName(s, MaxNameBytes)
}

// ValidateNameWithin is ValidateName with a caller-chosen byte bound, for
// layers that configure a tighter bound than the catalog's.
func ValidateNameWithin(s string, maxBytes int) error {
	return validateName(s, maxBytes)
}

var errInvalidChars = errors.Mark(errors.New("must not contain whitespace or control characters"), ErrInvalidName)

func validateName(s string, maxBytes int) error {
	switch {
	case s == "":
		return errors.Mark(errors.New("must not be empty"), ErrInvalidName)
	case len(s) > maxBytes:
		return errors.Mark(errors.Newf("must be at most %d bytes", maxBytes), ErrInvalidName)
	}
	ascii := true
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= utf8.RuneSelf {
			ascii = false
			break
		}
		if c <= ' ' || c == 0x7f { // ASCII whitespace and control characters
			return errInvalidChars
		}
	}
	if ascii {
		return nil
	}
	if !utf8.ValidString(s) {
		return errors.Mark(errors.New("must be valid UTF-8"), ErrInvalidName)
	}
	for _, r := range s {
		if unicode.IsSpace(r) || unicode.IsControl(r) || r == utf8.RuneError {
			return errInvalidChars
		}
	}
	return nil
}

// ValidatePathName is ValidateName for names that are also URL path segments
// (tenant, service, route): they must not contain '/' and must not be "." or "..".
func ValidatePathName(s string) error {
	if err := ValidateName(s); err != nil {
		return err
	}
	if strings.ContainsRune(s, '/') || s == "." || s == ".." {
		return errors.Mark(errors.New(`must not contain '/' or be "." or ".."`), ErrInvalidName)
	}
	return nil
}

const (
	revisionIDPrefix = "rev1-"
	releaseIDPrefix  = "rel1-"
)

// ValidateGeneratedID checks the syntax of a generated revision or release id.
func ValidateGeneratedID(s string) error {
	var hexPart string
	switch {
	case strings.HasPrefix(s, revisionIDPrefix):
		hexPart = s[len(revisionIDPrefix):]
	case strings.HasPrefix(s, releaseIDPrefix):
		hexPart = s[len(releaseIDPrefix):]
	default:
		return errors.Mark(errors.New("must be a generated revision or release id"), ErrInvalidName)
	}
	if len(hexPart) != 64 || !IsLowerHex(hexPart) {
		return errors.Mark(errors.New("must be a generated revision or release id"), ErrInvalidName)
	}
	return nil
}

// Digest is a content address: "sha256:" followed by 64 lowercase hex digits.
type Digest string

// DigestPrefix is the algorithm prefix of every Digest.
const DigestPrefix = "sha256:"

// DigestOf returns the digest of b.
func DigestOf(sum [32]byte) Digest {
	return Digest(DigestPrefix + hex.EncodeToString(sum[:]))
}

// ParseDigest checks the syntax of a digest.
func ParseDigest(s string) (Digest, error) {
	if !strings.HasPrefix(s, DigestPrefix) || len(s) != len(DigestPrefix)+64 || !IsLowerHex(s[len(DigestPrefix):]) {
		return "", errors.Mark(errors.New(`must be "sha256:" followed by 64 lowercase hex digits`), ErrInvalidName)
	}
	return Digest(s), nil
}

// Hex returns the hex part of the digest.
func (d Digest) Hex() string { return strings.TrimPrefix(string(d), DigestPrefix) }

// IsLowerHex reports whether s is only lowercase hex digits (the form of a
// digest's hex part and of the catalog's file names derived from one).
func IsLowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

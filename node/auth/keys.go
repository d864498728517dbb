package auth

// API keys and their hashes: Generate, Hash and the parsing of a hash.

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"encoding/hex"
	"strings"

	"github.com/cockroachdb/errors"
)

// Key and hash formats.
const (
	// KeyPrefix starts every generated key, so a leaked key is recognisable
	// (secret scanners, logs).
	KeyPrefix = "lk_"
	// HashPrefix starts every key hash.
	HashPrefix = "sha256:"
	// keyRandomBytes is the entropy of a generated key.
	keyRandomBytes = 32
)

// keyEncoding is lowercase base32 without padding: 52 characters for 32
// bytes, safe in headers, URLs and shells.
var keyEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// Generate returns a new API key and its hash (see Hash). The key is shown
// once, to the operator; only the hash goes into the configuration.
func Generate() (key, hash string, err error) {
	var b [keyRandomBytes]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", "", errors.Wrap(err, "auth: generate key")
	}
	key = KeyPrefix + keyEncoding.EncodeToString(b[:])
	return key, Hash(key), nil
}

// Hash returns "sha256:" followed by the lowercase hex SHA-256 of key, the
// form [[principals]] api_keys lists.
func Hash(key string) string {
	sum := sha256.Sum256([]byte(key))
	return HashPrefix + hex.EncodeToString(sum[:])
}

// parseHash decodes a key hash into its digest.
func parseHash(h string) ([sha256.Size]byte, error) {
	var d [sha256.Size]byte
	hexPart, ok := strings.CutPrefix(h, HashPrefix)
	if !ok || len(hexPart) != 2*sha256.Size || strings.ToLower(hexPart) != hexPart {
		return d, errors.New(`auth: a key hash must be "sha256:" followed by 64 lowercase hex digits`)
	}
	if _, err := hex.Decode(d[:], []byte(hexPart)); err != nil {
		return d, errors.New(`auth: a key hash must be "sha256:" followed by 64 lowercase hex digits`)
	}
	return d, nil
}

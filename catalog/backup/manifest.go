// The backup manifest: its entries (name, size, sha256), its encoding
// and strict decoding, the signature over it, and the kinds of entry a
// data directory's layout allows.

package backup

import (
	"bufio"
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"

	"github.com/cockroachdb/errors"

	"github.com/latent-node/latent-node/catalog"
	"github.com/latent-node/latent-node/vocab"
)

// entry is one entry listed in a manifest.
type entry struct {
	name string
	size int64
	sum  [32]byte
}

func encodeManifest(gen vocab.Generation, entries []entry) []byte {
	var b bytes.Buffer
	b.WriteString(backupMagic + "\n")
	b.WriteString("generation " + strconv.FormatUint(uint64(gen), 10) + "\n")
	for _, e := range entries {
		b.WriteString("sha256:" + hex.EncodeToString(e.sum[:]) + " " + strconv.FormatInt(e.size, 10) + " " + e.name + "\n")
	}
	return b.Bytes()
}

func decodeManifest(data []byte) (map[string]entry, error) {
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 4096), 4096)
	entries := map[string]entry{}
	for i := 0; sc.Scan(); i++ {
		line := sc.Text()
		switch {
		case i == 0:
			if line != backupMagic {
				return nil, errors.Newf("not a backup manifest (first line %q)", line)
			}
			continue
		case i == 1:
			g, ok := strings.CutPrefix(line, "generation ")
			if _, err := strconv.ParseUint(g, 10, 64); !ok || err != nil {
				return nil, errors.Newf("line 2: want \"generation N\"")
			}
			continue
		}
		f := strings.Split(line, " ")
		if len(f) != 3 {
			return nil, errors.Newf("line %d: want \"sha256:HEX SIZE NAME\"", i+1)
		}
		d, err := vocab.ParseDigest(f[0])
		size, serr := strconv.ParseInt(f[1], 10, 64)
		if err != nil || serr != nil || size < 0 || entryKind(f[2]) == "" {
			return nil, errors.Newf("line %d: malformed entry", i+1)
		}
		if _, dup := entries[f[2]]; dup {
			return nil, errors.Newf("line %d: %s listed twice", i+1, f[2])
		}
		var sum [32]byte
		if _, err := hex.Decode(sum[:], []byte(d.Hex())); err != nil {
			return nil, errors.Newf("line %d: malformed digest", i+1)
		}
		entries[f[2]] = entry{name: f[2], size: size, sum: sum}
	}
	if err := sc.Err(); err != nil {
		return nil, errors.Wrap(err, "manifest")
	}
	return entries, nil
}

// entryKind classifies an entry name by the data directory's layout:
// "state", "service", "owner", "artifact", or "" for a name that is none
// of them (refused).
func entryKind(name string) string {
	parts := strings.Split(name, "/")
	hexRec := func(s string) bool {
		h, ok := strings.CutSuffix(s, ".rec")
		return ok && len(h) == 64 && vocab.IsLowerHex(h)
	}
	switch {
	case name == catalog.StateFile:
		return "state"
	case len(parts) == 3 && parts[0]+"/"+parts[1] == catalog.ServicesDir && hexRec(parts[2]):
		return "service"
	case len(parts) == 4 && parts[0]+"/"+parts[1] == catalog.OwnersDir && len(parts[2]) == 64 && vocab.IsLowerHex(parts[2]) && hexRec(parts[3]):
		return "owner"
	case len(parts) == 3 && parts[0]+"/"+parts[1] == catalog.ArtifactsDir && len(parts[2]) == 64 && vocab.IsLowerHex(parts[2]):
		return "artifact"
	}
	return ""
}

func pathBase(name string) string { return name[strings.LastIndexByte(name, '/')+1:] }

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// signManifest is the signature entry of manifest under key.
func signManifest(key, manifest []byte) []byte {
	mac := hmac.New(sha256.New, key)
	mac.Write(manifest)
	return []byte(signaturePrefix + hex.EncodeToString(mac.Sum(nil)) + "\n")
}

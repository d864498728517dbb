package backup

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cockroachdb/errors"

	"github.com/latent-node/latent-node/catalog"
	"github.com/latent-node/latent-node/internal/testutil/catalogtest"
	"github.com/latent-node/latent-node/internal/testutil/tartest"
	"github.com/latent-node/latent-node/vocab"
)

// countingSource counts the bytes Restore reads from its entries: every
// byte it writes to disk is one of them.
type countingSource struct {
	src  Source
	read int64
}

func (s *countingSource) Next() (string, int64, io.Reader, error) {
	name, size, r, err := s.src.Next()
	if r != nil {
		r = &countingReader{r: r, n: &s.read}
	}
	return name, size, r, err
}

type countingReader struct {
	r io.Reader
	n *int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	*c.n += int64(n)
	return n, err
}

// FuzzRestore feeds arbitrary bytes to Restore as a tar stream: it never
// writes outside the temporary sibling of its target (and leaves nothing
// there when it fails), fails only with its own errors, and reads — so
// writes — no more bytes than the stream holds (no sparse expansion).
func FuzzRestore(f *testing.F) {
	fx := newFixture(f)
	a := fx.module("module a")
	fx.deploy(vocab.Manifest{Tenant: "acme", Service: "svc", Revisions: []vocab.ManifestRevision{revision("v1", a)},
		Routes: []vocab.ManifestRoute{mroute("run", target("v1", 1))}})
	for _, key := range [][]byte{nil, bytes.Repeat([]byte("k"), 32)} {
		var b bytes.Buffer
		sink := NewTarSink(&b)
		if _, err := Write(context.Background(), fx.dir, sink, Options{SignKey: key}); err != nil {
			f.Fatal(err)
		}
		if err := sink.Close(); err != nil {
			f.Fatal(err)
		}
		f.Add(b.Bytes())
	}
	f.Add(append(tartest.Sparse(catalog.ArtifactsDir+"/"+a.Hex(), 1<<20), make([]byte, 1024)...))
	f.Fuzz(func(t *testing.T, data []byte) {
		grand := t.TempDir()
		parent := filepath.Join(grand, "p")
		target := filepath.Join(parent, "data")
		src := &countingSource{src: NewTarSource(bytes.NewReader(data))}
		_, err := Restore(context.Background(), src, target, RestoreOptions{MaxArtifactBytes: 1 << 20,
			Quotas:  catalog.Config{MaxServices: 8, MaxServicesPerTenant: 4, MaxArtifactsPerTenant: 4, MaxArtifactBytesPerTenant: 4 << 20},
			Tenants: []vocab.TenantID{"acme", "beta"}, Verify: openVerify(catalogtest.Inspector{})})
		if src.read > int64(len(data)) {
			t.Fatalf("read %d bytes of entries from a %d-byte stream", src.read, len(data))
		}
		if err != nil && !errors.Is(err, ErrInvalid) && !errors.Is(err, ErrSignature) &&
			!strings.Contains(err.Error(), "restored catalog does not open") {
			t.Fatalf("unexpected error: %v", err)
		}
		if left, _ := os.ReadDir(grand); len(left) > 1 || len(left) == 1 && left[0].Name() != "p" {
			t.Fatalf("wrote %v next to the target's parent", left)
		}
		left, _ := os.ReadDir(parent)
		if err != nil && len(left) != 0 || err == nil && (len(left) != 1 || left[0].Name() != "data") {
			t.Fatalf("after %v the parent holds %v", err, left)
		}
	})
}

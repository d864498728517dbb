package node

import (
	"bytes"
	"context"
	"crypto/sha256"
	"net/http"
	"net/http/httptest"
	"runtime"
	"testing"

	"github.com/latent-node/latent-node/catalog"
	"github.com/latent-node/latent-node/internal/testutil/catalogtest"
	"github.com/latent-node/latent-node/vocab"
)

// discardWriter is a ResponseWriter that keeps only the status and the
// number of body bytes (httptest.ResponseRecorder would buffer the body).
type discardWriter struct {
	h      http.Header
	status int
	n      int64
}

func (w *discardWriter) Header() http.Header { return w.h }
func (w *discardWriter) WriteHeader(s int) {
	if w.status == 0 {
		w.status = s
	}
}
func (w *discardWriter) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	w.n += int64(len(p))
	return len(p), nil
}

func peerArtifactRequest(d vocab.Digest) *http.Request {
	r := httptest.NewRequest(http.MethodGet, "/v1/cluster/artifacts/"+string(d), nil)
	r.SetPathValue("digest", string(d))
	return r
}

// TestServePeerArtifact: an artifact is streamed from its file, so the
// memory a peer's read costs does not grow with the module (before, each
// request read the whole module into memory: 160 MB allocated for the
// 8 requests here);
// beyond maxPeerArtifactReads reads at once a request is refused 503
// peer-busy, and served again once a slot is free (the control).
func TestServePeerArtifact(t *testing.T) {
	ctx := context.Background()
	cat, err := catalog.Open(ctx, catalog.Config{Dir: t.TempDir(), Inspector: catalogtest.Inspector{}})
	if err != nil {
		t.Fatal(err)
	}
	module := bytes.Repeat([]byte("wasm"), 1<<20) // 4 MiB
	d := vocab.DigestOf(sha256.Sum256(module))
	if err := cat.Artifacts().Put(ctx, "acme", d, bytes.NewReader(module)); err != nil {
		t.Fatal(err)
	}
	slots := make(chan struct{}, maxPeerArtifactReads)

	serve := func() *discardWriter {
		w := &discardWriter{h: http.Header{}}
		servePeerArtifact(w, peerArtifactRequest(d), cat, slots)
		return w
	}
	if w := serve(); w.status != http.StatusOK || w.n != int64(len(module)) {
		t.Fatalf("status %d, %d bytes; want 200 and %d", w.status, w.n, len(module))
	}
	const requests = 8
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for range requests {
		if w := serve(); w.status != http.StatusOK || w.n != int64(len(module)) {
			t.Fatalf("status %d, %d bytes", w.status, w.n)
		}
	}
	runtime.ReadMemStats(&after)
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 1<<20 {
		t.Fatalf("%d requests of a %d-byte artifact allocated %d bytes, want under 1 MiB in all", requests, len(module), alloc)
	} else {
		t.Logf("%d requests of a %d-byte artifact allocated %d bytes", requests, len(module), alloc)
	}

	for range maxPeerArtifactReads {
		slots <- struct{}{}
	}
	w := serve()
	if w.status != http.StatusServiceUnavailable || w.h.Get("Retry-After") == "" {
		t.Fatalf("with every slot taken: status %d, Retry-After %q; want 503 with Retry-After", w.status, w.h.Get("Retry-After"))
	}
	<-slots
	if w := serve(); w.status != http.StatusOK {
		t.Fatalf("with a slot free again: status %d", w.status)
	}
	unknown := &discardWriter{h: http.Header{}}
	servePeerArtifact(unknown, peerArtifactRequest("sha256:"+vocab.Digest(bytes.Repeat([]byte("0"), 64))), cat, slots)
	if unknown.status != http.StatusNotFound {
		t.Fatalf("unknown digest: status %d, want 404", unknown.status)
	}
}

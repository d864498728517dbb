package node

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/latent-node/latent-node/node/api"
	"github.com/latent-node/latent-node/refusal"
)

// Body modes of the fuzz targets: how the body reader ends.
const (
	bodyPlain     = iota // the bytes, then io.EOF; Content-Length is their length
	bodyChunked          // the bytes, then io.EOF; no Content-Length
	bodyTruncated        // the bytes, then io.ErrUnexpectedEOF; a longer Content-Length
	bodyBadChunk         // the bytes, then the chunked reader's framing error
	bodyTimeout          // the bytes, then a read timeout
	bodyModes
)

// fuzzBody is a request body as net/http's server would hand it over: the
// bytes, then the error of the mode, in reads of at most step bytes.
type fuzzBody struct {
	data []byte
	end  error
	step int
}

func (b *fuzzBody) Read(p []byte) (int, error) {
	if len(b.data) == 0 {
		return 0, b.end
	}
	n := copy(p[:min(len(p), b.step)], b.data)
	b.data = b.data[n:]
	return n, nil
}

func (b *fuzzBody) Close() error { return nil }

func newFuzzBody(data []byte, mode byte) (body *fuzzBody, contentLength int64) {
	b := &fuzzBody{data: data, end: io.EOF, step: 1 + int(mode>>4)*97}
	contentLength = int64(len(data))
	switch mode % bodyModes {
	case bodyChunked:
		contentLength = -1
	case bodyTruncated:
		b.end = io.ErrUnexpectedEOF
		contentLength += 1 + int64(mode>>4)
	case bodyBadChunk:
		b.end = errors.New("invalid byte in chunk length")
		contentLength = -1
	case bodyTimeout:
		b.end = timeoutErr{}
		contentLength = -1
	}
	return b, contentLength
}

// FuzzHandlers sends arbitrary requests to the node's handler: any method,
// path, headers and body, with bodies that end cleanly, early, in broken
// chunked framing or in a timeout. Every answer must be 2xx, or 4xx/5xx with
// a problem body of the same status; no handler may panic or outlive its
// request's deadline by more than a little.
func FuzzHandlers(f *testing.F) {
	sn := startServed(f)
	h := sn.n.Handler()
	hello := "/v1/invoke/demo/hello/greet"
	manifest := `{"tenant":"demo","service":"f","revisions":[{"name":"v1","artifact":"sha256:` + strings.Repeat("0", 64) +
		`","trust_class":"untrusted"}],"routes":[{"name":"r","targets":[{"revision":"v1","weight":1}]}]}`
	seeds := []struct {
		method, path, headers string
		body                  string
		mode, who             byte
	}{
		{"POST", hello, "", "ada", bodyPlain, 1},
		{"POST", hello, "Latent-Budget: fuel=10\nLatent-Priority: 3", "x", bodyChunked, 1},
		{"POST", hello, "", "abc", bodyTruncated, 1},
		{"POST", hello, "", "abc", bodyBadChunk, 1},
		{"POST", hello, "", "abc", bodyTimeout, 2},
		{"PUT", "/v1/artifacts/sha256:" + strings.Repeat("a", 64), "", "\x00asm\x01\x00\x00\x00", bodyPlain, 1},
		{"PUT", "/v1/artifacts/sha256:" + strings.Repeat("a", 64), "", "\x00asm", bodyTruncated, 1},
		{"PUT", "/v1/deployments/demo/f", "", manifest, bodyPlain, 1},
		{"PUT", "/v1/deployments/demo/f", "", manifest[:40], bodyBadChunk, 1},
		{"PUT", "/v1/deployments/demo/f", "", "{", bodyPlain, 1},
		{"GET", "/v1/deployments/demo/hello", "", "", bodyPlain, 1},
		{"DELETE", "/v1/deployments/demo/nope", "", "", bodyPlain, 1},
		{"GET", "/metrics", "", "", bodyPlain, 2},
		{"GET", "/v1/admin/admission", "", "", bodyPlain, 3},
		{"GET", "/healthz", "", "", bodyPlain, 0},
		{"BREW", "/v1//x/../y", "Authorization: Basic Zm9v", "", bodyPlain, 0},
	}
	for _, s := range seeds {
		f.Add(s.method, s.path, s.headers, []byte(s.body), s.mode, s.who)
	}
	keys := []string{"", sn.admin, sn.inv, "lk_not-a-key"}
	f.Fuzz(func(t *testing.T, method, path, headers string, body []byte, mode, who byte) {
		if !validMethod(method) || len(path) > 4096 || len(body) > 1<<20 {
			return // the server refuses these before any handler
		}
		u, err := url.ParseRequestURI(path)
		if err != nil || strings.ContainsAny(path, " \r\n\x00") {
			return
		}
		b, cl := newFuzzBody(body, mode)
		req := &http.Request{Method: method, URL: u, RequestURI: path, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
			Header: http.Header{}, Host: "node", Body: b, ContentLength: cl, RemoteAddr: "192.0.2.1:1234"}
		if cl < 0 {
			req.TransferEncoding = []string{"chunked"}
		}
		for _, line := range strings.Split(headers, "\n") {
			k, v, ok := strings.Cut(line, ":")
			if ok && validToken(k) && !strings.ContainsAny(v, "\r\n\x00") {
				req.Header.Add(k, strings.TrimSpace(v))
			}
		}
		if k := keys[int(who)%len(keys)]; k != "" {
			req.Header.Set("Authorization", "Bearer "+k)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		rec := httptest.NewRecorder()
		start := time.Now()
		h.ServeHTTP(rec, req.WithContext(ctx))
		if el := time.Since(start); el > 8*time.Second {
			t.Fatalf("%s %q took %v", method, path, el)
		}
		checkFuzzAnswer(t, method, path, rec)
		if strings.Contains(sn.log.String(), "handler panic") {
			t.Fatalf("%s %q: a handler panicked:\n%s", method, path, sn.log.String())
		}
	})
}

func checkFuzzAnswer(t *testing.T, method, path string, rec *httptest.ResponseRecorder) {
	t.Helper()
	switch {
	case rec.Code >= 200 && rec.Code < 300:
		return
	case rec.Code < 400 || rec.Code >= 600:
		t.Fatalf("%s %q: status %d", method, path, rec.Code)
	}
	if path == "/readyz" && rec.Code == http.StatusServiceUnavailable {
		return // a plain-text probe answer
	}
	if rec.Header().Get("Content-Type") != "application/problem+json" {
		t.Fatalf("%s %q: %d without a problem body: %q", method, path, rec.Code, rec.Body.String())
	}
	var p api.Problem
	if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil || p.Status != rec.Code || (p.Code == "" && p.Outcome == "") || p.Type == "" {
		t.Fatalf("%s %q: problem %q: %v", method, path, rec.Body.String(), err)
	}
	if p.Reason == refusal.ReasonPlatformFailure.String() && p.Outcome == "" {
		t.Fatalf("%s %q: the node blamed itself: %s", method, path, rec.Body.String())
	}
}

// validMethod is an HTTP token (what the server accepts as a method).
func validMethod(m string) bool { return m != "" && validToken(m) }

func validToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	return true
}

// FuzzReadBody checks the bounded body reader: a body within its bound is
// returned whole, one past it is 413 whatever follows, and a body that ends
// in an error within its bound is 400 malformed-body.
func FuzzReadBody(f *testing.F) {
	f.Add([]byte("hello"), byte(bodyPlain), uint16(16))
	f.Add([]byte("hello"), byte(bodyTruncated), uint16(16))
	f.Add([]byte("hello"), byte(bodyBadChunk), uint16(3))
	f.Add(bytes.Repeat([]byte("x"), 300), byte(bodyTimeout|0x30), uint16(299))
	f.Add([]byte{}, byte(bodyChunked), uint16(0))
	f.Fuzz(func(t *testing.T, body []byte, mode byte, limit uint16) {
		b, cl := newFuzzBody(body, mode)
		req := httptest.NewRequest("POST", "/", nil)
		req.Body, req.ContentLength = b, cl
		rec := httptest.NewRecorder()
		data, p := readBounded(rec, req, int64(limit), refusal.DimPayloadBytes)
		over := len(body) > int(limit) || cl > int64(limit)
		failed := mode%bodyModes >= bodyTruncated
		switch {
		case over:
			if p == nil || p.Status != http.StatusRequestEntityTooLarge || p.Dimension != "payload-bytes" {
				t.Fatalf("%d bytes (declared %d) over %d: %+v", len(body), cl, limit, p)
			}
		case failed:
			if p == nil || p.Status != http.StatusBadRequest || p.Reason != refusal.ReasonMalformedBody.String() {
				t.Fatalf("mode %d: %+v", mode%bodyModes, p)
			}
		default:
			if p != nil || !bytes.Equal(data, body) {
				t.Fatalf("want the body, have %q %+v", data, p)
			}
		}
	})
}

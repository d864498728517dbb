// The writers of a streamed invocation: BodySource, a request body a
// wasi-http guest reads as it arrives, and ResponseSink, an answer sent as
// the guest writes it.

package front

import (
	"io"
	"net/http"
	"time"

	"github.com/latent-node/latent-node/node/activation"
)

// BodySource is a streamed request body (wasihttp.Source): the caller's
// connection, bounded to limit bytes, its reads bounded by the deadline
// SetReadDeadline sets. It remembers its first error (Err), which the
// answer blames on the caller.
type BodySource struct {
	rc  *http.ResponseController
	src io.Reader
	err error
	eof bool
}

// NewBodySource is r's body as a BodySource of at most limit bytes, with
// full duplex on: the guest may answer while it still reads, and without
// it net/http's HTTP/1 server would consume (and lose) what is left of
// the body as the answer starts.
func NewBodySource(w http.ResponseWriter, r *http.Request, limit uint64) *BodySource {
	rc := http.NewResponseController(w)
	_ = rc.EnableFullDuplex()
	return &BodySource{rc: rc, src: http.MaxBytesReader(w, r.Body, int64(min(limit, 1<<62)))}
}

func (b *BodySource) Read(p []byte) (int, error) {
	n, err := b.src.Read(p)
	if err != nil && err != io.EOF && b.err == nil { //nolint:errorlint // io.EOF is returned as is by readers
		b.err = err
	}
	b.eof = b.eof || err == io.EOF //nolint:errorlint // as above
	return n, err
}

// unread reports whether the body may still hold bytes nobody read.
func (b *BodySource) unread() bool { return b != nil && !b.eof && b.err == nil }

// Err is the first error a read failed with (not the body's end), or nil.
func (b *BodySource) Err() error { return b.err }

func (b *BodySource) SetReadDeadline(t time.Time) error { return b.rc.SetReadDeadline(t) }

// ResponseSink sends an answer a guest streams (wasihttp.Sink): its status
// and headers, with the activation headers declared as trailers, then each
// write, every write bounded by the activation's deadline. inject adds
// the trace context to the headers.
type ResponseSink struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	inject  func(http.Header)
	started bool
	// Body, when set, is the request body the guest streams: an answer
	// that starts (or ends) while some of it is unread closes the
	// connection after it. net/http would otherwise drain the rest once
	// the handler returned and, in full duplex, start reading the
	// connection for the next request while its own read of it is still
	// pending ("invalid concurrent Body.Read call").
	Body *BodySource
}

// CloseIfUnread makes the answer close the connection when its request
// body was not read to its end (s may be nil: no wasi-http answer).
func (s *ResponseSink) CloseIfUnread() {
	if s != nil && !s.started && s.Body.unread() {
		s.w.Header().Set("Connection", "close")
	}
}

// NewResponseSink is a ResponseSink writing to w.
func NewResponseSink(w http.ResponseWriter, inject func(http.Header)) *ResponseSink {
	return &ResponseSink{w: w, rc: http.NewResponseController(w), inject: inject}
}

// Started reports whether the answer's status and headers went out.
func (s *ResponseSink) Started() bool { return s.started }

func (s *ResponseSink) Start(status int, header [][2]string, deadline time.Time) error {
	h := s.w.Header()
	h["Content-Type"] = nil // only the guest's (a wasi-http answer is raw)
	for _, kv := range header {
		h.Add(kv[0], kv[1])
	}
	h.Set("Trailer", activation.TrailerNames)
	if s.Body.unread() {
		h.Set("Connection", "close")
	}
	s.inject(h)
	s.started = true
	s.w.WriteHeader(status)
	return s.rc.SetWriteDeadline(deadline)
}

func (s *ResponseSink) Write(p []byte) error {
	_, err := s.w.Write(p)
	return err
}

func (s *ResponseSink) Flush() error { return s.rc.Flush() }

// Finish bounds what remains of the answer (its trailers) by d from now
// (0: no bound), in place of the activation's deadline.
func (s *ResponseSink) Finish(d time.Duration) {
	var end time.Time
	if d > 0 {
		end = time.Now().Add(d) // socket deadlines are wall-clock time
	}
	_ = s.rc.SetWriteDeadline(end)
}

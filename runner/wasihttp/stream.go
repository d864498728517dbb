package wasihttp

// Streamed bodies: a request body the guest reads as it arrives (Source),
// and a response the host sends as the guest writes it (Sink) once its
// body outgrows what the host holds.

import (
	"io"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/latent-node/latent-node/runner/httpabi"
)

// Source is a request body that arrives while the guest runs: the node's
// reader of the caller's connection, bounded by the payload limit.
type Source interface {
	io.Reader
	// SetReadDeadline bounds every later Read; the host sets the
	// activation's deadline before the first, so that a caller that sends
	// slowly cannot hold the guest past it.
	SetReadDeadline(time.Time) error
}

// Sink takes a response the guest streams. The host holds a response's
// body up to StreamAfter (at most Limits.MaxBodyBytes); a guest that set
// its response and writes more has the status and headers sent (Start)
// and every later write passed on (Write), up to Limits.MaxStreamBytes in
// all. After
// Start the answer is committed: how the activation ended can only follow
// the body (the node sends it as trailers, or cuts the answer off).
type Sink interface {
	// Start sends the status and the headers; deadline (the activation's)
	// bounds every later write.
	Start(status int, header [][2]string, deadline time.Time) error
	Write(p []byte) error
	Flush() error
}

// ErrStreamFailed is the error a guest's stream reports when the caller's
// connection failed under it (a body that stopped arriving or went over
// the payload limit, an answer nobody reads); SourceErr and SinkErr say
// which.
var ErrStreamFailed = errors.New("wasihttp: the caller's connection failed")

// source is the incoming body's reading state.
type source struct {
	src      Source
	buf      []byte // one read's bytes, lowered into the guest before the next
	err      error  // the first error, io.EOF included
	deadline bool   // the read deadline is set
}

// read reads at most n bytes; it returns io.EOF at the body's end and the
// source's error after a failed read. The bytes are the source's buffer,
// valid until the next read.
func (s *source) read(a *Activation, n int) ([]byte, error) {
	if s.err != nil {
		return nil, s.err
	}
	if !s.deadline {
		s.deadline = true
		_ = s.src.SetReadDeadline(a.env.Deadline())
	}
	if s.buf == nil {
		s.buf = make([]byte, maxWrite)
	}
	k, err := s.src.Read(s.buf[:min(n, maxWrite)])
	if err != nil {
		s.err = err
		if err != io.EOF { //nolint:errorlint // io.EOF is returned as is by readers
			a.sourceErr = err
			// A read that failed at the deadline or because the caller went
			// away ends the activation as that, not as a guest's error.
			a.env.SleepUntil(0)
		}
	}
	a.chargeBytes(k)
	if k > 0 {
		return s.buf[:k], nil
	}
	return nil, s.err
}

// streamResult is a read's result for the guest: the bytes, closed at the
// body's end, last-operation-failed after an error.
func (a *Activation) streamResult(b []byte, err error) []any {
	switch {
	case err == nil:
		return one(ok(b))
	case err == io.EOF: //nolint:errorlint // io.EOF is returned as is by readers
		return one(fail(streamClosed))
	}
	return one(fail(a.streamFailed(err)))
}

// streamFailed is stream-error.last-operation-failed of err.
func (a *Activation) streamFailed(err error) any {
	return lastOperationFailed(a.add(resError, &ioError{msg: errors.Wrap(ErrStreamFailed, err.Error()).Error()}))
}

// SourceErr is the error a streamed request body failed with (not its
// end), or nil: the node answers it as it answers a body it reads itself.
func (a *Activation) SourceErr() error { return a.sourceErr }

// Streamed reports whether the response went out through the Sink.
func (a *Activation) Streamed() bool { return a.response != nil && a.response.started }

// SinkErr is the error the Sink failed with, or nil.
func (a *Activation) SinkErr() error { return a.sinkErr }

// writeResponse moves b to the response r's body: held up to its limit,
// then, once r is the set response and a Sink takes it, sent. It returns
// whether the host keeps b (the budget counts what it keeps) or a failed
// write's error for the guest.
func (a *Activation) writeResponse(r *outResponse, b []byte) (kept bool, err error) {
	if n := len(r.body) + len(b); !r.started && n > min(r.limit, StreamAfter) {
		switch {
		case a.streams(r):
			if err := a.startStream(r); err != nil {
				return false, err
			}
		case n > r.limit:
			panic(errors.Wrapf(ErrOutputExceeded, "wasihttp: the response body exceeds %d bytes", r.limit))
		}
	}
	if !r.started {
		r.body = append(r.body, b...)
		return true, nil
	}
	if r.sent+int64(len(b)) > a.lim.MaxStreamBytes {
		panic(errors.Wrapf(ErrOutputExceeded, "wasihttp: the streamed response body exceeds %d bytes", a.lim.MaxStreamBytes))
	}
	r.sent += int64(len(b))
	return false, a.sinkDo(func(s Sink) error { return s.Write(b) })
}

// StreamAfter is how much of a response body the host holds before it
// streams the response (when it may: see streams); a body that ends
// within it is answered whole, with its length and the activation's
// headers.
const StreamAfter = 256 << 10

// streams reports whether the response r may be sent as the guest writes
// it: it is the response the guest set, with a final status, and the
// activation has a Sink that takes more than the host would hold.
func (a *Activation) streams(r *outResponse) bool {
	return a.response == r && a.req.Sink != nil && a.lim.MaxStreamBytes > int64(r.limit) && r.status >= 200 && r.status <= 599
}

// startStream sends r's status and headers and the body held so far.
func (a *Activation) startStream(r *outResponse) error {
	r.started = true
	var header [][2]string
	for _, f := range r.headers.entries {
		if v := string(f.value); httpabi.GuestHeaderAllowed(f.name) && httpabi.GuestHeaderValueValid(v) {
			header = append(header, [2]string{f.name, v})
		}
	}
	if err := a.sinkDo(func(s Sink) error { return s.Start(r.status, header, a.env.Deadline()) }); err != nil {
		return err
	}
	held := r.body
	r.body, r.sent = nil, int64(len(held))
	a.budget += int64(len(held)) // no longer kept (charged as written)
	return a.sinkDo(func(s Sink) error { return s.Write(held) })
}

// flushResponse flushes a streamed response's writes to the caller.
func (a *Activation) flushResponse(r *outResponse) error {
	if !r.started {
		return nil
	}
	return a.sinkDo(Sink.Flush)
}

// sinkDo runs f on the Sink unless it failed before. A failure is the
// guest's stream error; one at the deadline or after the caller went away
// stops the activation as that.
func (a *Activation) sinkDo(f func(Sink) error) error {
	if a.sinkErr != nil {
		return a.sinkErr
	}
	if err := f(a.req.Sink); err != nil {
		a.sinkErr = err
		a.env.SleepUntil(0)
		return err
	}
	return nil
}

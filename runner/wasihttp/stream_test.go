package wasihttp

import (
	"bytes"
	"cmp"
	"io"
	"testing"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/latent-node/latent-node/runner/internal/canon"
)

// chunkSource is a Source of data in reads of at most chunk bytes, then
// err (io.EOF when nil).
type chunkSource struct {
	data     []byte
	chunk    int
	err      error
	deadline time.Time
}

func (s *chunkSource) Read(p []byte) (int, error) {
	if len(s.data) == 0 {
		if s.err != nil {
			return 0, s.err
		}
		return 0, io.EOF
	}
	n := copy(p[:min(len(p), s.chunk)], s.data)
	s.data = s.data[n:]
	return n, nil
}

func (s *chunkSource) SetReadDeadline(t time.Time) error { s.deadline = t; return nil }

// recordSink is a Sink that keeps what it was given; writes fail with
// err once failAfter bytes were written (failAfter 0: never).
type recordSink struct {
	status    int
	header    [][2]string
	deadline  time.Time
	body      bytes.Buffer
	starts    int
	flushes   int
	failAfter int
	err       error
}

func (s *recordSink) Start(status int, header [][2]string, deadline time.Time) error {
	s.starts++
	s.status, s.header, s.deadline = status, header, deadline
	return nil
}

func (s *recordSink) Write(p []byte) error {
	if s.failAfter > 0 && s.body.Len()+len(p) > s.failAfter {
		return s.err
	}
	s.body.Write(p)
	return nil
}

func (s *recordSink) Flush() error { s.flushes++; return nil }

// deadlineEnv is countEnv with a deadline.
type deadlineEnv struct {
	countEnv
	at time.Time
}

func (e *deadlineEnv) Deadline() time.Time { return e.at }

// call runs host function impl, returning its stop (a panic) if any.
func call(impl func(a *Activation, args []any) []any, a *Activation, args ...any) (res []any, stop error) {
	defer func() {
		if r := recover(); r != nil {
			stop = r.(error)
		}
	}()
	return impl(a, args), nil
}

// TestStream_requestBody: a streamed body is read as it arrives, in reads
// no longer than asked or check-write's bound, until closed; the first
// read sets the activation's deadline on the source; a failed read is the
// guest's last-operation-failed and SourceErr, the end is closed.
func TestStream_requestBody(t *testing.T) {
	read := hostFunc(t, modStreams, "[method]input-stream.blocking-read")
	skip := hostFunc(t, modStreams, "[method]input-stream.skip")
	body := bytes.Repeat([]byte("0123456789"), 30000) // 300,000 bytes
	for _, tc := range []struct {
		name    string
		err     error
		askSkip bool
	}{
		{"to its end", nil, false},
		{"skipped to its end", nil, true},
		{"cut off", io.ErrUnexpectedEOF, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := &chunkSource{data: body, chunk: 7000, err: tc.err}
			env := &deadlineEnv{at: time.Unix(1000, 0)}
			a := NewActivation(Request{Stream: src}, env, Limits{MaxBodyBytes: 1 << 10})
			h := a.add(resInputStream, &inputStream{src: &source{src: a.req.Stream}})
			var got []byte
			var end canon.Case
			for range 1000 {
				var res []any
				if tc.askSkip {
					res, _ = call(skip, a, h, uint64(1<<20))
				} else {
					res, _ = call(read, a, h, uint64(5000))
				}
				r := res[0].(canon.Case)
				if r.Index == 1 {
					end = r.Value.(canon.Case)
					break
				}
				if tc.askSkip {
					got = append(got, make([]byte, r.Value.(uint64))...)
					continue
				}
				b := r.Value.([]byte)
				if len(b) > 5000 {
					t.Fatalf("a read of 5000 gave %d bytes", len(b))
				}
				got = append(got, b...)
			}
			if len(got) != len(body) || !tc.askSkip && !bytes.Equal(got, body) {
				t.Fatalf("read %d bytes of %d", len(got), len(body))
			}
			if !src.deadline.Equal(env.at) {
				t.Fatalf("read deadline %v, want the activation's %v", src.deadline, env.at)
			}
			if tc.err == nil {
				if end.Index != 1 || a.SourceErr() != nil {
					t.Fatalf("end %+v, SourceErr %v; want closed", end, a.SourceErr())
				}
				return
			}
			if end.Index != 0 || !errors.Is(a.SourceErr(), tc.err) {
				t.Fatalf("end %+v, SourceErr %v; want last-operation-failed of %v", end, a.SourceErr(), tc.err)
			}
			if msg := get[*ioError](a, end.Value, resError).msg; !bytes.Contains([]byte(msg), []byte("connection failed")) {
				t.Fatalf("the guest's error reads %q", msg)
			}
		})
	}
}

// TestStream_response: a set response whose body outgrows MaxBodyBytes is
// started on the Sink (status, the headers a guest may send, the
// activation's deadline), the held bytes first, then each write as it
// comes, charged to the budget only while held; past MaxStreamBytes, before the
// response is set, or without a Sink, the activation is output-exceeded;
// a failing Sink is the guest's stream error.
func TestStream_response(t *testing.T) {
	write := hostFunc(t, modStreams, "[method]output-stream.blocking-write-and-flush")
	chunk := bytes.Repeat([]byte{'y'}, 4096)
	for _, tc := range []struct {
		name      string
		sink      bool
		set       bool
		maxStream int64
		failAfter int
		writes    int
		want      error // the stop, or nil
		wantFail  bool  // a write answered last-operation-failed
		limit     int   // MaxBodyBytes (0: 16 KiB)
	}{
		{"streamed", true, true, 1 << 20, 0, 100, nil, false, 0},
		{"past max stream bytes", true, true, 100 << 10, 0, 100, ErrOutputExceeded, false, 0},
		{"not yet set", true, false, 1 << 20, 0, 100, ErrOutputExceeded, false, 0},
		{"no sink", false, true, 1 << 20, 0, 100, ErrOutputExceeded, false, 0},
		{"streaming off", true, true, 16 << 10, 0, 100, ErrOutputExceeded, false, 0},
		{"caller gone", true, true, 1 << 20, 64 << 10, 100, nil, true, 0},
		{"within the limit", true, true, 1 << 20, 0, 3, nil, false, 0},
		{"past StreamAfter, within a larger limit", true, true, 4 << 20, 0, 100, nil, false, 1 << 20},
		{"within StreamAfter and a larger limit", true, true, 4 << 20, 0, 60, nil, false, 1 << 20},
		{"past a larger limit without a sink", false, true, 4 << 20, 0, 300, ErrOutputExceeded, false, 1 << 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sink := &recordSink{failAfter: tc.failAfter, err: errors.New("broken pipe")}
			req := Request{}
			if tc.sink {
				req.Sink = sink
			}
			env := &deadlineEnv{at: time.Unix(2000, 0)}
			limit := cmp.Or(tc.limit, 16<<10)
			a := NewActivation(req, env, Limits{MaxBodyBytes: limit, MaxStreamBytes: tc.maxStream})
			hdr := &fields{entries: []field{{"content-type", []byte("text/plain")}, {"x-a", []byte("1")}, {"latent-outcome", []byte("forged")}}}
			resp := &outResponse{status: 201, headers: hdr, limit: limit}
			if tc.set {
				a.set, a.response = true, resp
			}
			h := a.add(resOutputStream, &outputStream{body: &outgoingBody{resp: resp}})
			start := a.budget
			var stop error
			failed := false
			for range tc.writes {
				res, err := call(write, a, h, chunk)
				if err != nil {
					stop = err
					break
				}
				if res[0].(canon.Case).Index != 0 {
					failed = true
				}
			}
			if tc.want != nil || stop != nil {
				if !errors.Is(stop, tc.want) || tc.want == nil {
					t.Fatalf("stopped with %v, want %v", stop, tc.want)
				}
				return
			}
			if failed != tc.wantFail || tc.wantFail != (a.SinkErr() != nil) {
				t.Fatalf("a write failed: %v, SinkErr %v; want a failure: %v", failed, a.SinkErr(), tc.wantFail)
			}
			if tc.wantFail {
				return
			}
			got, err := a.Response()
			if err != nil {
				t.Fatal(err)
			}
			n := tc.writes * len(chunk)
			if n <= min(limit, StreamAfter) { // held: nothing streamed
				if got.Streamed || len(got.Body) != n || sink.starts != 0 {
					t.Fatalf("streamed %v, %d bytes held, %d starts", got.Streamed, len(got.Body), sink.starts)
				}
				return
			}
			if !got.Streamed || len(got.Body) != 0 || sink.starts != 1 || sink.status != 201 || sink.body.Len() != n {
				t.Fatalf("streamed %v, %d held; sink: %d starts, status %d, %d bytes; want %d", got.Streamed, len(got.Body),
					sink.starts, sink.status, sink.body.Len(), n)
			}
			if len(sink.header) != 2 || sink.header[0][0] != "content-type" || sink.header[1][0] != "x-a" {
				t.Fatalf("headers %q, want the guest's without latent-*", sink.header)
			}
			if !sink.deadline.Equal(env.at) || sink.flushes == 0 {
				t.Fatalf("deadline %v, %d flushes", sink.deadline, sink.flushes)
			}
			// Nothing streamed stays counted: the budget is back.
			if a.budget != start {
				t.Fatalf("budget %d after streaming, want %d", a.budget, start)
			}
		})
	}
}

// TestStream_splice: blocking-splice moves a streamed request body to a
// streamed response without the guest holding it.
func TestStream_splice(t *testing.T) {
	splice := hostFunc(t, modStreams, "[method]output-stream.blocking-splice")
	body := bytes.Repeat([]byte("abcdefgh"), 40000)
	sink := &recordSink{}
	a := NewActivation(Request{Stream: &chunkSource{data: body, chunk: 10000}, Sink: sink}, &deadlineEnv{},
		Limits{MaxBodyBytes: 16 << 10, MaxStreamBytes: 1 << 30})
	resp := &outResponse{status: 200, headers: &fields{}, limit: 16 << 10}
	a.set, a.response = true, resp
	out := a.add(resOutputStream, &outputStream{body: &outgoingBody{resp: resp}})
	in := a.add(resInputStream, &inputStream{src: &source{src: a.req.Stream}})
	for range 1000 {
		res, err := call(splice, a, out, in, uint64(1<<20))
		if err != nil {
			t.Fatal(err)
		}
		if res[0].(canon.Case).Index != 0 {
			break
		}
	}
	if !bytes.Equal(sink.body.Bytes(), body) || !a.Streamed() {
		t.Fatalf("spliced %d bytes of %d, streamed %v", sink.body.Len(), len(body), a.Streamed())
	}
}

package wasihttp

// wasi:io: errors, pollables and streams. Every stream is ready: one over
// bytes the host holds at once, a streamed request body (or response) when
// it is read (or written), which blocks until its bytes arrive (or left);
// only a clock's pollable waits.

import (
	"io"

	"github.com/cockroachdb/errors"

	"github.com/latent-node/latent-node/runner/internal/canon"
)

type ioError struct{ msg string }

// pollable is ready at its deadline on the activation's monotonic clock (0:
// always).
type pollable struct{ until uint64 }

func (p *pollable) ready(a *Activation) bool { return p.until == 0 || a.env.Monotonic() >= p.until }

// inputStream reads data: the request body, or an empty stdin.
type inputStream struct {
	data  []byte
	pos   int
	src   *source // a streamed request body (data is then unused), or nil
	stdin bool    // wasi:cli/stdin's, which a reused instance keeps
}

// next is at most n of the stream's next bytes (valid until the next
// call), io.EOF at its end, or a streamed body's error.
func (s *inputStream) next(a *Activation, n int) ([]byte, error) {
	if s.src != nil {
		return s.src.read(a, n)
	}
	if s.pos >= len(s.data) {
		return nil, io.EOF
	}
	n = min(n, len(s.data)-s.pos)
	b := s.data[s.pos : s.pos+n]
	s.pos += n
	return b, nil
}

// outputStream writes the response body (body) or stdout and stderr
// (body nil).
type outputStream struct {
	body *outgoingBody
}

// maxWrite is what check-write allows at a time.
const maxWrite = 64 << 10

// keep charges the budget for the bytes of a written list (a view of the
// guest's memory, not a copy: see defView) that the host keeps, a body it
// holds: the budget bounds what the host keeps of the guest's values, not
// what passes through (the log keeps only its tail, a streamed response
// sends them on).
func (a *Activation) keep(kept bool, b []byte) {
	if kept {
		a.budget -= int64(len(b))
		if a.budget < 0 {
			trap("the guest's values exceed the host buffer bound")
		}
	}
}

// chargeBytes charges the host's work on n bytes.
func (a *Activation) chargeBytes(n int) { a.env.Charge(uint64(n) >> 6) }

func defineIO() {
	def(modError, "[method]error.to-debug-string", ts(borrow(resError)), ts(tString), func(a *Activation, args []any) []any {
		return one(get[*ioError](a, args[0], resError).msg)
	})
	drop(modError, "error", resError, nil)

	def(modPoll, "[method]pollable.ready", ts(borrow(resPollable)), ts(tBool), func(a *Activation, args []any) []any {
		return one(get[*pollable](a, args[0], resPollable).ready(a))
	})
	def(modPoll, "[method]pollable.block", ts(borrow(resPollable)), nil, func(a *Activation, args []any) []any {
		p := get[*pollable](a, args[0], resPollable)
		if !p.ready(a) {
			a.env.SleepUntil(p.until)
		}
		return nil
	})
	def(modPoll, "poll", ts(canon.ListOf(borrow(resPollable))), ts(canon.ListOf(tU32)), func(a *Activation, args []any) []any {
		in := args[0].([]any)
		if len(in) == 0 {
			trap("poll of an empty list")
		}
		a.env.Charge(uint64(len(in)))
		ps := make([]*pollable, len(in))
		earliest := uint64(0)
		for i, h := range in {
			ps[i] = get[*pollable](a, h, resPollable)
			if ps[i].ready(a) {
				earliest = 0
				break
			}
			if earliest == 0 || ps[i].until < earliest {
				earliest = ps[i].until
			}
		}
		if earliest != 0 {
			a.env.SleepUntil(earliest)
		}
		out := []any{}
		for i, p := range ps {
			if p != nil && p.ready(a) {
				out = append(out, uint64(i))
			}
		}
		return one(out)
	})
	drop(modPoll, "pollable", resPollable, nil)

	tReadResult := canon.ResultOf(tBytes, tStreamError)
	tSkipResult := canon.ResultOf(tU64, tStreamError)
	tWriteResult := canon.ResultOf(nil, tStreamError)
	is := borrow(resInputStream)
	read := func(a *Activation, args []any) []any {
		s := get[*inputStream](a, args[0], resInputStream)
		b, err := s.next(a, int(min(args[1].(uint64), maxWrite)))
		if err == nil && s.src == nil {
			a.chargeBytes(len(b))
		}
		return a.streamResult(b, err)
	}
	skip := func(a *Activation, args []any) []any {
		s := get[*inputStream](a, args[0], resInputStream)
		b, err := s.next(a, int(min(args[1].(uint64), 1<<31)))
		if err != nil {
			return a.streamResult(nil, err)
		}
		return one(ok(uint64(len(b))))
	}
	def(modStreams, "[method]input-stream.read", ts(is, tU64), ts(tReadResult), read)
	def(modStreams, "[method]input-stream.blocking-read", ts(is, tU64), ts(tReadResult), read)
	def(modStreams, "[method]input-stream.skip", ts(is, tU64), ts(tSkipResult), skip)
	def(modStreams, "[method]input-stream.blocking-skip", ts(is, tU64), ts(tSkipResult), skip)
	def(modStreams, "[method]input-stream.subscribe", ts(is), ts(own(resPollable)), func(a *Activation, args []any) []any {
		get[*inputStream](a, args[0], resInputStream)
		return one(a.add(resPollable, &pollable{}))
	})
	drop(modStreams, "input-stream", resInputStream, nil)

	os := borrow(resOutputStream)
	def(modStreams, "[method]output-stream.check-write", ts(os), ts(tSkipResult), func(a *Activation, args []any) []any {
		get[*outputStream](a, args[0], resOutputStream)
		return one(ok(uint64(maxWrite)))
	})
	defView(modStreams, "[method]output-stream.write", ts(os, tBytes), ts(tWriteResult), func(a *Activation, args []any) []any {
		s := get[*outputStream](a, args[0], resOutputStream)
		b := args[1].([]byte)
		if len(b) > maxWrite {
			trap("output-stream.write of %d bytes, more than check-write allowed (%d)", len(b), maxWrite)
		}
		kept, err := s.write(a, b)
		return a.writeResult(b, kept, err)
	})
	// blocking-write-and-flush is specified as a loop of check-write and
	// write on contents of "up to 4096 bytes"; wasmtime and jco trap on
	// more. The node takes any length, as the loop would: handlers that
	// hand it a whole response work here. The list is a view of the
	// guest's memory: what a body keeps of it is charged to the budget.
	defView(modStreams, "[method]output-stream.blocking-write-and-flush", ts(os, tBytes), ts(tWriteResult), func(a *Activation, args []any) []any {
		b := args[1].([]byte)
		s := get[*outputStream](a, args[0], resOutputStream)
		kept, err := s.write(a, b)
		if err == nil {
			err = s.flush(a)
		}
		return a.writeResult(b, kept, err)
	})
	flush := func(a *Activation, args []any) []any {
		s := get[*outputStream](a, args[0], resOutputStream)
		if err := s.flush(a); err != nil {
			return one(fail(a.streamFailed(err)))
		}
		return one(ok(nil))
	}
	def(modStreams, "[method]output-stream.flush", ts(os), ts(tWriteResult), flush)
	def(modStreams, "[method]output-stream.blocking-flush", ts(os), ts(tWriteResult), flush)
	def(modStreams, "[method]output-stream.subscribe", ts(os), ts(own(resPollable)), func(a *Activation, args []any) []any {
		get[*outputStream](a, args[0], resOutputStream)
		return one(a.add(resPollable, &pollable{}))
	})
	zeroes := func(a *Activation, args []any) []any {
		s := get[*outputStream](a, args[0], resOutputStream)
		n := args[1].(uint64)
		if n > maxWrite {
			trap("output-stream.write-zeroes of %d bytes, more than check-write allowed (%d)", n, maxWrite)
		}
		b := make([]byte, n)
		kept, err := s.write(a, b)
		return a.writeResult(b, kept, err)
	}
	def(modStreams, "[method]output-stream.write-zeroes", ts(os, tU64), ts(tWriteResult), zeroes)
	def(modStreams, "[method]output-stream.blocking-write-zeroes-and-flush", ts(os, tU64), ts(tWriteResult), zeroes)
	splice := func(a *Activation, args []any) []any {
		s := get[*outputStream](a, args[0], resOutputStream)
		in := get[*inputStream](a, args[1], resInputStream)
		b, err := in.next(a, int(min(args[2].(uint64), maxWrite)))
		if err != nil {
			return a.streamResult(nil, err)
		}
		if _, err := s.write(a, b); err != nil {
			return one(fail(a.streamFailed(err)))
		}
		return one(ok(uint64(len(b))))
	}
	def(modStreams, "[method]output-stream.splice", ts(os, is, tU64), ts(tSkipResult), splice)
	def(modStreams, "[method]output-stream.blocking-splice", ts(os, is, tU64), ts(tSkipResult), splice)
	drop(modStreams, "output-stream", resOutputStream, nil)
}

// writeResult is a write's result for the guest, the bytes b charged to
// the budget if kept.
func (a *Activation) writeResult(b []byte, kept bool, err error) []any {
	a.keep(kept, b)
	if err != nil {
		return one(fail(a.streamFailed(err)))
	}
	return one(ok(nil))
}

// write moves b to the stream's sink: the response body, bounded by the
// output limit (or streamed past it), an outgoing request's body, or the
// activation's log. It returns whether the host keeps b, or the error of
// a streamed response's failed write.
func (s *outputStream) write(a *Activation, b []byte) (kept bool, err error) {
	a.chargeBytes(len(b))
	if s.body == nil {
		a.env.Log(b)
		return false, nil
	}
	if req := s.body.req; req != nil {
		// An outgoing request's body, sent when the guest waits for the
		// response: bounded like the response body.
		if len(req.body)+len(b) > a.lim.MaxBodyBytes {
			panic(errors.Wrapf(ErrOutputExceeded, "wasihttp: an outgoing request's body exceeds %d bytes", a.lim.MaxBodyBytes))
		}
		req.body = append(req.body, b...)
		return true, nil
	}
	if r := s.body.resp; r != nil {
		return a.writeResponse(r, b)
	}
	return false, nil
}

// flush sends a streamed response's writes on.
func (s *outputStream) flush(a *Activation) error {
	if s.body == nil || s.body.resp == nil {
		return nil
	}
	return a.flushResponse(s.body.resp)
}

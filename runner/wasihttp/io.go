package wasihttp

// wasi:io: errors, pollables and streams. Every stream is over bytes the
// host holds, so every stream is always ready; only a clock's pollable
// blocks.

import (
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
	stdin bool // wasi:cli/stdin's, which a reused instance keeps
}

// outputStream writes the response body (body) or stdout and stderr
// (body nil).
type outputStream struct {
	body *outgoingBody
}

// maxWrite is what check-write allows at a time.
const maxWrite = 64 << 10

// refund gives back to the budget the bytes of a lifted list written to
// the log (which keeps only its tail): the budget bounds what the host
// keeps of the guest's values, not what passes through. Bytes written to
// a body stay counted: the host keeps them.
func (a *Activation) refund(s *outputStream, b []byte) {
	if s.body == nil {
		a.budget += int64(len(b))
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
		if s.pos >= len(s.data) {
			return one(fail(streamClosed))
		}
		n := int(min(args[1].(uint64), uint64(len(s.data)-s.pos), maxWrite))
		a.chargeBytes(n)
		b := s.data[s.pos : s.pos+n]
		s.pos += n
		return one(ok(b))
	}
	skip := func(a *Activation, args []any) []any {
		s := get[*inputStream](a, args[0], resInputStream)
		if s.pos >= len(s.data) {
			return one(fail(streamClosed))
		}
		n := int(min(args[1].(uint64), uint64(len(s.data)-s.pos)))
		s.pos += n
		return one(ok(uint64(n)))
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
	def(modStreams, "[method]output-stream.write", ts(os, tBytes), ts(tWriteResult), func(a *Activation, args []any) []any {
		s := get[*outputStream](a, args[0], resOutputStream)
		b := args[1].([]byte)
		if len(b) > maxWrite {
			trap("output-stream.write of %d bytes, more than check-write allowed (%d)", len(b), maxWrite)
		}
		s.write(a, b)
		a.refund(s, b)
		return one(ok(nil))
	})
	// blocking-write-and-flush is specified as a loop of check-write and
	// write on contents of "up to 4096 bytes"; wasmtime and jco trap on
	// more. The node takes any length, as the loop would: handlers that
	// hand it a whole response work here. The list was lifted within the
	// activation's budget, which what a body keeps stays counted in.
	def(modStreams, "[method]output-stream.blocking-write-and-flush", ts(os, tBytes), ts(tWriteResult), func(a *Activation, args []any) []any {
		b := args[1].([]byte)
		s := get[*outputStream](a, args[0], resOutputStream)
		s.write(a, b)
		a.refund(s, b)
		return one(ok(nil))
	})
	flush := func(a *Activation, args []any) []any {
		get[*outputStream](a, args[0], resOutputStream)
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
		s.write(a, make([]byte, n))
		return one(ok(nil))
	}
	def(modStreams, "[method]output-stream.write-zeroes", ts(os, tU64), ts(tWriteResult), zeroes)
	def(modStreams, "[method]output-stream.blocking-write-zeroes-and-flush", ts(os, tU64), ts(tWriteResult), zeroes)
	splice := func(a *Activation, args []any) []any {
		s := get[*outputStream](a, args[0], resOutputStream)
		in := get[*inputStream](a, args[1], resInputStream)
		if in.pos >= len(in.data) {
			return one(fail(streamClosed))
		}
		n := int(min(args[2].(uint64), uint64(len(in.data)-in.pos), maxWrite))
		s.write(a, in.data[in.pos:in.pos+n])
		in.pos += n
		return one(ok(uint64(n)))
	}
	def(modStreams, "[method]output-stream.splice", ts(os, is, tU64), ts(tSkipResult), splice)
	def(modStreams, "[method]output-stream.blocking-splice", ts(os, is, tU64), ts(tSkipResult), splice)
	drop(modStreams, "output-stream", resOutputStream, nil)
}

// write moves b to the stream's sink: the response body, bounded by the
// output limit, or the activation's log.
func (s *outputStream) write(a *Activation, b []byte) {
	a.chargeBytes(len(b))
	if s.body == nil {
		a.env.Log(b)
		return
	}
	if req := s.body.req; req != nil {
		// An outgoing request's body, sent when the guest waits for the
		// response: bounded like the response body.
		if len(req.body)+len(b) > a.lim.MaxBodyBytes {
			panic(errors.Wrapf(ErrOutputExceeded, "wasihttp: an outgoing request's body exceeds %d bytes", a.lim.MaxBodyBytes))
		}
		req.body = append(req.body, b...)
		return
	}
	r := s.body.resp
	if r == nil {
		return
	}
	if len(r.body)+len(b) > r.limit {
		panic(errors.Wrapf(ErrOutputExceeded, "wasihttp: the response body exceeds %d bytes", r.limit))
	}
	r.body = append(r.body, b...)
}

package wasiio

// The four iovec functions and their one loop.

import (
	"context"
	"encoding/binary"
	"io"
	"math"
	"time"

	"github.com/cockroachdb/errors"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
)

// WASI errno values the functions answer.
const (
	errnoBadf  = 8
	errnoFault = 21
	errnoIO    = 29
)

// Stdio is a guest's stdio and fuel for one call, as the runner provides
// them.
type Stdio interface {
	// Charge takes n units of fuel for host work; it may not return (the
	// guest is stopped: its fuel or its deadline ran out).
	Charge(n uint64)
	// Read reads stdin (io.EOF at its end), charging what it reads.
	Read(p []byte) (int, error)
	// Write writes p to stdout (fd 1) or stderr (fd 2), charging what it
	// writes; an error ends the call with EIO.
	Write(fd uint32, p []byte) error
	// Sleep sleeps d for poll_oneoff (charged; it wakes early when the
	// guest must stop).
	Sleep(d time.Duration)
}

// Define exports fd_read, fd_write, fd_pread, fd_pwrite and poll_oneoff
// on b, each working on the Stdio that stdio returns for the call's
// context.
func Define(b wazero.HostModuleBuilder, stdio func(context.Context) Stdio) {
	i32, i64 := api.ValueTypeI32, api.ValueTypeI64
	poll := func(ctx context.Context, mod api.Module, stack []uint64) {
		stack[0] = uint64(pollOneoff(stdio(ctx), mod.Memory(), uint32(stack[0]), uint32(stack[1]), uint32(stack[2]),
			uint32(stack[3])))
	}
	b.NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(poll), []api.ValueType{i32, i32, i32, i32},
		[]api.ValueType{i32}).WithParameterNames("in", "out", "nsubscriptions", "result.nevents").
		WithResultNames("errno").Export("poll_oneoff")
	for _, f := range []struct {
		name              string
		write, positioned bool
	}{{"fd_read", false, false}, {"fd_write", true, false}, {"fd_pread", false, true}, {"fd_pwrite", true, true}} {
		params, names := []api.ValueType{i32, i32, i32, i32}, []string{"fd", "iovs", "iovs_len", "result.n"}
		if f.positioned {
			params, names = []api.ValueType{i32, i32, i32, i64, i32}, []string{"fd", "iovs", "iovs_len", "offset", "result.n"}
		}
		fn := func(ctx context.Context, mod api.Module, stack []uint64) {
			resultAt := stack[3]
			if f.positioned {
				resultAt = stack[4]
			}
			stack[0] = uint64(transfer(stdio(ctx), mod.Memory(), uint32(stack[0]), uint32(stack[1]), uint32(stack[2]),
				uint32(resultAt), f.write, f.positioned))
		}
		b.NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(fn), params, []api.ValueType{i32}).
			WithParameterNames(names...).WithResultNames("errno").Export(f.name)
	}
}

// transfer is the four functions: count iovecs at iovs moved between the
// guest's memory and fd, the bytes moved stored at resultAt. It returns
// the errno.
func transfer(s Stdio, mem api.Memory, fd, iovs, count, resultAt uint32, write, positioned bool) uint32 {
	if fd > 2 || mem == nil {
		return errnoBadf
	}
	s.Charge(uint64(count)) // before the iovecs are looked at: they are the guest's to choose
	if uint64(count)*8 > uint64(mem.Size()) {
		return errnoFault
	}
	vecs, ok := mem.Read(iovs, count*8)
	if !ok {
		return errnoFault
	}
	var moved uint32
	for i := uint32(0); i < count; i++ {
		offset, n := binary.LittleEndian.Uint32(vecs[8*i:]), binary.LittleEndian.Uint32(vecs[8*i+4:])
		if n == 0 && (!write || positioned) {
			continue // as wazero skips them: a zero-length iovec may come before another
		}
		p, ok := mem.Read(offset, n)
		if !ok {
			return errnoFault
		}
		if positioned || write != (fd != 0) {
			return errnoBadf // streams have no position; stdin is read, stdout and stderr written
		}
		if write {
			if s.Write(fd, p) != nil {
				return errnoIO
			}
			moved += n
			continue
		}
		got, err := s.Read(p)
		moved += uint32(got)
		if err != nil && !errors.Is(err, io.EOF) {
			return errnoIO
		}
		if got < len(p) {
			break // stop when an iovec was not filled
		}
	}
	if !mem.WriteUint32Le(resultAt, moved) {
		return errnoFault
	}
	return 0
}

// WASI's poll_oneoff layout: a subscription is 48 bytes (userdata, then
// the tag at 8 and its content from 16), an event 32 (userdata, errno at
// 8, type at 10).
const (
	subscriptionBytes = 48
	eventBytes        = 32
	errnoInval        = 28
	errnoNotsup       = 58
)

// pollOneoff is poll_oneoff over a guest's stdio, charged one unit per
// subscription before any is read and allocating nothing per subscription
// (wazero's made a heap object of each, up to about the guest's memory
// again). Its answers are wazero's: a clock subscription must be relative
// (abstime is ENOTSUP) and the shortest is slept unless a read
// subscription is ready; stdin and the other two streams are always ready
// to read (stdin holds the whole input); a write subscription is ENOTSUP
// on a stream, EBADF on any other descriptor, as a read one is.
func pollOneoff(s Stdio, mem api.Memory, in, out, n, resultAt uint32) uint32 {
	if n == 0 {
		return errnoInval
	}
	s.Charge(uint64(n))
	if uint64(n)*subscriptionBytes > uint64(mem.Size()) {
		return errnoFault
	}
	subs, ok := mem.Read(in, n*subscriptionBytes)
	if !ok {
		return errnoFault
	}
	events, ok := mem.Read(out, n*eventBytes)
	if !ok || !mem.WriteUint32Le(resultAt, n) {
		return errnoFault
	}
	sleep, ready := time.Duration(math.MaxInt64), false
	for i := uint32(0); i < n; i++ {
		sub, ev := subs[i*subscriptionBytes:], events[i*eventBytes:(i+1)*eventBytes]
		clear(ev)
		copy(ev, sub[:8])
		ev[10] = sub[8]
		errno := byte(0)
		switch sub[8] {
		case 0: // clock
			switch flags := binary.LittleEndian.Uint16(sub[16+24:]); flags {
			case 0:
				sleep = min(sleep, time.Duration(binary.LittleEndian.Uint64(sub[16+8:])))
			case 1:
				return errnoNotsup
			default:
				return errnoInval
			}
		case 1, 2: // fd_read, fd_write
			fd := int32(binary.LittleEndian.Uint32(sub[16:]))
			switch {
			case fd < 0:
				return errnoBadf
			case fd > 2:
				errno = errnoBadf
			case sub[8] == 2:
				errno = errnoNotsup
			default:
				ready = true
			}
		default:
			return errnoInval
		}
		ev[8] = errno
	}
	if !ready && sleep > 0 && sleep < time.Duration(math.MaxInt64) {
		s.Sleep(sleep)
	}
	return 0
}

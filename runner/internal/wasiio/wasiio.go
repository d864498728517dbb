package wasiio

// The four iovec functions and their one loop.

import (
	"context"
	"encoding/binary"
	"io"

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
}

// Define exports fd_read, fd_write, fd_pread and fd_pwrite on b, each
// working on the Stdio that stdio returns for the call's context.
func Define(b wazero.HostModuleBuilder, stdio func(context.Context) Stdio) {
	i32, i64 := api.ValueTypeI32, api.ValueTypeI64
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

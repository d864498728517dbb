package wasiio

import (
	"context"
	"encoding/binary"
	"io"
	"slices"
	"testing"
	"time"

	"github.com/cockroachdb/errors"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/latent-node/latent-node/internal/hostilewasm"
)

// fakeStdio records what transfer asks of the runner.
type fakeStdio struct {
	charged  uint64
	input    []byte
	out, err []byte
	writes   int
	failing  bool // Write fails
	slept    []time.Duration
}

func (f *fakeStdio) Sleep(d time.Duration) { f.slept = append(f.slept, d) }

func (f *fakeStdio) Charge(n uint64) { f.charged += n }

func (f *fakeStdio) Read(p []byte) (int, error) {
	if len(f.input) == 0 {
		return 0, io.EOF
	}
	n := copy(p, f.input)
	f.input = f.input[n:]
	return n, nil
}

func (f *fakeStdio) Write(fd uint32, p []byte) error {
	f.writes++
	if f.failing {
		return errors.New("full")
	}
	if fd == 1 {
		f.out = append(f.out, p...)
	} else {
		f.err = append(f.err, p...)
	}
	return nil
}

// memory returns one page of a module's memory.
func memory(t *testing.T) api.Memory {
	t.Helper()
	ctx := context.Background()
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter())
	t.Cleanup(func() { _ = rt.Close(ctx) })
	mod, err := rt.InstantiateWithConfig(ctx, hostilewasm.Trivial(), wazero.NewModuleConfig().WithStartFunctions())
	if err != nil {
		t.Fatal(err)
	}
	return mod.Memory()
}

// TestTransfer: each function's answer, bytes moved and charge, as
// wazero's own functions answer the same calls, with every iovec charged
// first.
func TestTransfer(t *testing.T) {
	const resultAt = 60000
	type vec struct{ offset, n uint32 }
	tests := []struct {
		name              string
		fd                uint32
		write, positioned bool
		vecs              []vec
		count             uint32 // 0: len(vecs)
		input, data       string // stdin; the bytes at 100 and on
		failing           bool
		errno, moved      uint32
		out, err          string
		writes            int
		charged           uint64 // the iovec count, when charged
	}{
		{name: "stdin over iovecs, a zero one skipped, stops short", fd: 0, vecs: []vec{{100, 5}, {200, 0}, {300, 10}},
			input: "hello world", moved: 11, charged: 3},
		{name: "stdin at its end", fd: 0, vecs: []vec{{100, 5}}, moved: 0, charged: 1},
		{name: "stdout takes every iovec, zero ones too", fd: 1, write: true, vecs: []vec{{100, 3}, {104, 0}, {108, 2}},
			data: "abcdefghij", moved: 5, out: "abcij", writes: 3, charged: 3},
		{name: "stderr", fd: 2, write: true, vecs: []vec{{100, 4}}, data: "oops", moved: 4, err: "oops", writes: 1, charged: 1},
		{name: "a failing write is EIO", fd: 1, write: true, vecs: []vec{{100, 4}}, failing: true, errno: errnoIO, writes: 1,
			charged: 1},
		{name: "stdin is not written", fd: 0, write: true, vecs: []vec{{100, 0}}, errno: errnoBadf, charged: 1},
		{name: "stdout is not read", fd: 1, vecs: []vec{{100, 1}}, errno: errnoBadf, charged: 1},
		{name: "reading stdout into nothing", fd: 1, vecs: []vec{{100, 0}}, moved: 0, charged: 1},
		{name: "positioned write of a stream", fd: 1, write: true, positioned: true, vecs: []vec{{100, 0}, {100, 1}},
			errno: errnoBadf, charged: 2},
		{name: "positioned, zero-length only", fd: 0, positioned: true, vecs: []vec{{100, 0}, {100, 0}}, charged: 2},
		{name: "another descriptor, not charged", fd: 3, vecs: []vec{{100, 1}}, errno: errnoBadf},
		{name: "an iovec out of memory", fd: 1, write: true, vecs: []vec{{65530, 10}}, errno: errnoFault, charged: 1},
		{name: "more iovecs than memory holds, charged first", fd: 1, write: true, count: 1 << 20, errno: errnoFault,
			charged: 1 << 20},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			mem := memory(t)
			mem.Write(100, []byte(tc.data))
			var iovs []byte
			for _, v := range tc.vecs {
				iovs = binary.LittleEndian.AppendUint32(iovs, v.offset)
				iovs = binary.LittleEndian.AppendUint32(iovs, v.n)
			}
			mem.Write(1000, iovs)
			mem.WriteUint32Le(resultAt, 0xdead)
			count := tc.count
			if count == 0 {
				count = uint32(len(tc.vecs))
			}
			s := &fakeStdio{input: []byte(tc.input), failing: tc.failing}
			errno := transfer(s, mem, tc.fd, 1000, count, resultAt, tc.write, tc.positioned)
			moved, _ := mem.ReadUint32Le(resultAt)
			if errno != tc.errno || errno == 0 && moved != tc.moved || errno != 0 && moved != 0xdead {
				t.Errorf("errno %d, moved %d; want %d, %d", errno, moved, tc.errno, tc.moved)
			}
			if string(s.out) != tc.out || string(s.err) != tc.err || s.writes != tc.writes || s.charged != tc.charged {
				t.Errorf("stdout %q, stderr %q, %d writes, %d charged; want %q, %q, %d, %d", s.out, s.err, s.writes,
					s.charged, tc.out, tc.err, tc.writes, tc.charged)
			}
			if !tc.write && tc.input != "" {
				if got, _ := mem.Read(100, 5); string(got) != tc.input[:5] {
					t.Errorf("read %q into the first iovec", got)
				}
			}
		})
	}
}

// TestStderrTail: the tail keeps what was written while it fits, then
// the last TailBytes bytes in order.
func TestStderrTail(t *testing.T) {
	var w StderrTail
	if len(w.Bytes()) != 0 {
		t.Fatal("empty tail not empty")
	}
	_, _ = w.Write([]byte("hello "))
	_, _ = w.Write([]byte("world"))
	if string(w.Bytes()) != "hello world" {
		t.Fatalf("%q", w.Bytes())
	}
	big := make([]byte, 3*TailBytes+7)
	for i := range big {
		big[i] = byte('a' + i%26)
	}
	_, _ = w.Write(big)
	_, _ = w.Write([]byte("END"))
	want := append(append([]byte(nil), big...), "END"...)
	want = want[len(want)-TailBytes:]
	if string(w.Bytes()) != string(want) {
		t.Fatal("tail is not the last 4 KiB")
	}
}

// TestPollOneoff: poll_oneoff's events and errors, as wazero's answers
// them, every subscription charged first: the shortest relative clock is
// slept unless a read is ready (stdio always is), writes are ENOTSUP on a
// stream, other descriptors EBADF.
func TestPollOneoff(t *testing.T) {
	type sub struct {
		tag   byte // 0 clock, 1 fd_read, 2 fd_write
		fd    int32
		ns    uint64
		flags uint16
	}
	clock := func(ns uint64) sub { return sub{tag: 0, ns: ns} }
	tests := []struct {
		name   string
		subs   []sub
		n      uint32 // 0: len(subs)
		errno  uint32
		events []uint16 // each event's errno, in order
		slept  []time.Duration
	}{
		{name: "the shortest clock is slept", subs: []sub{clock(5e6), clock(2e6)}, events: []uint16{0, 0},
			slept: []time.Duration{2e6}},
		{name: "a ready read: no sleep", subs: []sub{clock(5e6), {tag: 1, fd: 0}}, events: []uint16{0, 0}},
		{name: "writes are not supported on streams", subs: []sub{{tag: 2, fd: 1}, {tag: 2, fd: 7}, {tag: 1, fd: 9}},
			events: []uint16{errnoNotsup, errnoBadf, errnoBadf}},
		{name: "a zero clock does not sleep", subs: []sub{clock(0)}, events: []uint16{0}},
		{name: "absolute clocks are not supported", subs: []sub{{tag: 0, ns: 1, flags: 1}}, errno: errnoNotsup},
		{name: "unknown flags", subs: []sub{{tag: 0, ns: 1, flags: 2}}, errno: errnoInval},
		{name: "unknown tag", subs: []sub{{tag: 3}}, errno: errnoInval},
		{name: "a negative descriptor", subs: []sub{{tag: 1, fd: -1}}, errno: errnoBadf},
		{name: "no subscription", errno: errnoInval},
		{name: "more subscriptions than memory holds, charged first", n: 1 << 20, errno: errnoFault},
	}
	const in, out, resultAt = 0, 30000, 60000
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			mem := memory(t)
			var b []byte
			for i, s := range tc.subs {
				rec := make([]byte, subscriptionBytes)
				binary.LittleEndian.PutUint64(rec, uint64(100+i)) // userdata
				rec[8] = s.tag
				if s.tag == 0 {
					binary.LittleEndian.PutUint64(rec[24:], s.ns)
					binary.LittleEndian.PutUint16(rec[40:], s.flags)
				} else {
					binary.LittleEndian.PutUint32(rec[16:], uint32(s.fd))
				}
				b = append(b, rec...)
			}
			mem.Write(in, b)
			n := tc.n
			if n == 0 {
				n = uint32(len(tc.subs))
			}
			f := &fakeStdio{}
			if errno := pollOneoff(f, mem, in, out, n, resultAt); errno != tc.errno {
				t.Fatalf("errno %d, want %d", errno, tc.errno)
			}
			if n > 0 && f.charged != uint64(n) {
				t.Errorf("charged %d for %d subscriptions", f.charged, n)
			}
			if !slices.Equal(f.slept, tc.slept) {
				t.Errorf("slept %v, want %v", f.slept, tc.slept)
			}
			if tc.errno != 0 {
				return
			}
			if nevents, _ := mem.ReadUint32Le(resultAt); nevents != n {
				t.Errorf("%d events, want %d", nevents, n)
			}
			for i, want := range tc.events {
				ev, _ := mem.Read(out+uint32(i)*eventBytes, eventBytes)
				if binary.LittleEndian.Uint64(ev) != uint64(100+i) || uint16(ev[8]) != want || ev[10] != tc.subs[i].tag {
					t.Errorf("event %d: userdata %d, errno %d, type %d; want %d, %d, %d", i, binary.LittleEndian.Uint64(ev),
						ev[8], ev[10], 100+i, want, tc.subs[i].tag)
				}
			}
		})
	}
}

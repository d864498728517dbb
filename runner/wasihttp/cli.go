package wasihttp

// wasi:clocks, wasi:random, wasi:cli and an empty wasi:filesystem.

import (
	"encoding/binary"

	"github.com/tetratelabs/wazero/sys"

	"github.com/latent-node/latent-node/runner/internal/canon"
)

func init() {
	defineFields()
	defineRequests()
	defineResponses()
	defineIO()
	defineClocks()
	defineCLI()
	defineFilesystem()
}

// maxRandomBytes bounds one get-random-bytes answer.
const maxRandomBytes = 1 << 20

func defineClocks() {
	def(modMonotonic, "now", nil, ts(tU64), func(a *Activation, _ []any) []any { return one(a.env.Monotonic()) })
	def(modMonotonic, "resolution", nil, ts(tU64), func(*Activation, []any) []any { return one(uint64(1000)) })
	def(modMonotonic, "subscribe-instant", ts(tU64), ts(own(resPollable)), func(a *Activation, args []any) []any {
		return one(a.add(resPollable, &pollable{until: max(args[0].(uint64), 1)}))
	})
	def(modMonotonic, "subscribe-duration", ts(tU64), ts(own(resPollable)), func(a *Activation, args []any) []any {
		d := args[0].(uint64)
		until := a.env.Monotonic() + min(d, 1<<62)
		if d == 0 {
			until = 0
		}
		return one(a.add(resPollable, &pollable{until: until}))
	})
	datetime := canon.RecordOf([]string{"seconds", "nanoseconds"}, tU64, tU32)
	def(modWall, "now", nil, ts(datetime), func(a *Activation, _ []any) []any {
		t := a.env.Wall()
		return one([]any{uint64(t.Unix()), uint64(t.Nanosecond() / 1000 * 1000)})
	})
	def(modWall, "resolution", nil, ts(datetime), func(*Activation, []any) []any {
		return one([]any{uint64(0), uint64(1000)})
	})

	randomBytes := func(a *Activation, args []any) []any {
		n := args[0].(uint64)
		if n > maxRandomBytes {
			trap("get-random-bytes of %d bytes (at most %d at a time)", n, maxRandomBytes)
		}
		a.chargeBytes(int(n))
		b := make([]byte, n)
		a.env.Random(b)
		return one(b)
	}
	randomU64 := func(a *Activation, _ []any) []any {
		var b [8]byte
		a.env.Random(b[:])
		return one(binary.LittleEndian.Uint64(b[:]))
	}
	def(modRandom, "get-random-bytes", ts(tU64), ts(tBytes), randomBytes)
	def(modRandom, "get-random-u64", nil, ts(tU64), randomU64)
	def(modInsecure, "get-insecure-random-bytes", ts(tU64), ts(tBytes), randomBytes)
	def(modInsecure, "get-insecure-random-u64", nil, ts(tU64), randomU64)
	def(modSeed, "insecure-seed", nil, ts(canon.TupleOf(tU64, tU64)), func(a *Activation, _ []any) []any {
		return one([]any{randomU64(a, nil)[0], randomU64(a, nil)[0]})
	})
}

func defineCLI() {
	def(modEnv, "get-environment", nil, ts(canon.ListOf(canon.TupleOf(tString, tString))), func(a *Activation, _ []any) []any {
		// Made once an activation: a guest may ask on every allocation
		// (Rust's std through the preview 1 adapter does).
		if a.environ == nil {
			a.environ = []any{}
			for _, kv := range a.env.Environ() {
				a.environ = append(a.environ, []any{kv[0], kv[1]})
			}
		}
		return one(a.environ)
	})
	def(modEnv, "get-arguments", nil, ts(canon.ListOf(tString)), func(*Activation, []any) []any { return one([]any{}) })
	def(modEnv, "initial-cwd", nil, ts(tOptString), func(*Activation, []any) []any { return one(none) })
	def(modExit, "exit", ts(tResult), nil, func(_ *Activation, args []any) []any {
		code := uint32(0)
		if args[0].(canon.Case).Index != 0 {
			code = 1
		}
		panic(sys.NewExitError(code))
	})
	def(modExit, "exit-with-code", ts(tU8), nil, func(_ *Activation, args []any) []any {
		panic(sys.NewExitError(uint32(args[0].(uint64))))
	})
	def(modStdin, "get-stdin", nil, ts(own(resInputStream)), func(a *Activation, _ []any) []any {
		return one(a.add(resInputStream, &inputStream{stdin: true}))
	})
	for _, m := range []string{modStdout, modStderr} {
		name := "get-stdout"
		if m == modStderr {
			name = "get-stderr"
		}
		def(m, name, nil, ts(own(resOutputStream)), func(a *Activation, _ []any) []any {
			return one(a.add(resOutputStream, &outputStream{}))
		})
	}
	drop(modTermIn, "terminal-input", resTerminalInput, nil)
	drop(modTermOut, "terminal-output", resTerminalOutput, nil)
	noTerminal := func(*Activation, []any) []any { return one(none) }
	def(modTermStdin, "get-terminal-stdin", nil, ts(canon.OptionOf(own(resTerminalInput))), noTerminal)
	def(modTermStdout, "get-terminal-stdout", nil, ts(canon.OptionOf(own(resTerminalOutput))), noTerminal)
	def(modTermStderr, "get-terminal-stderr", nil, ts(canon.OptionOf(own(resTerminalOutput))), noTerminal)
}

// defineFilesystem is a filesystem without preopened directories: no
// descriptor ever exists, so every descriptor method traps on its handle.
// Only the functions the preview 1 adapters import are defined; their
// results are declared by their shape (each comes back through a return
// pointer), which is what the core signature depends on.
func defineFilesystem() {
	tFSError := canon.EnumOf(fsErrorCodes...)
	tDatetime := canon.RecordOf([]string{"seconds", "nanoseconds"}, tU64, tU32)
	tType := canon.EnumOf("unknown", "block-device", "character-device", "directory", "fifo", "symbolic-link",
		"regular-file", "socket")
	tStat := canon.RecordOf([]string{"type", "link-count", "size", "data-access-timestamp", "data-modification-timestamp",
		"status-change-timestamp"}, tType, tU64, tU64, canon.OptionOf(tDatetime), canon.OptionOf(tDatetime), canon.OptionOf(tDatetime))
	tFlags := canon.FlagsOf("read", "write", "file-integrity-sync", "data-integrity-sync", "requested-write-sync", "mutate-directory")
	d := borrow(resDescriptor)
	noDescriptor := func(a *Activation, args []any) []any {
		get[any](a, args[0], resDescriptor)
		return nil
	}
	def(modFS, "[method]descriptor.get-flags", ts(d), ts(canon.ResultOf(tFlags, tFSError)), noDescriptor)
	def(modFS, "[method]descriptor.get-type", ts(d), ts(canon.ResultOf(tType, tFSError)), noDescriptor)
	def(modFS, "[method]descriptor.append-via-stream", ts(d), ts(canon.ResultOf(own(resOutputStream), tFSError)), noDescriptor)
	def(modFS, "[method]descriptor.write-via-stream", ts(d, tU64), ts(canon.ResultOf(own(resOutputStream), tFSError)), noDescriptor)
	def(modFS, "[method]descriptor.read-via-stream", ts(d, tU64), ts(canon.ResultOf(own(resInputStream), tFSError)), noDescriptor)
	def(modFS, "[method]descriptor.stat", ts(d), ts(canon.ResultOf(tStat, tFSError)), noDescriptor)
	def(modFS, "filesystem-error-code", ts(borrow(resError)), ts(canon.OptionOf(tFSError)), func(a *Activation, args []any) []any {
		get[*ioError](a, args[0], resError)
		return one(none)
	})
	drop(modFS, "descriptor", resDescriptor, nil)
	drop(modFS, "directory-entry-stream", resDirectoryEntryStream, nil)
	def(modPreopens, "get-directories", nil, ts(canon.ListOf(canon.TupleOf(own(resDescriptor), tString))), func(*Activation, []any) []any {
		return one([]any{})
	})
}

var fsErrorCodes = []string{"access", "would-block", "already", "bad-descriptor", "busy", "deadlock", "quota", "exist",
	"file-too-large", "illegal-byte-sequence", "in-progress", "interrupted", "invalid", "io", "is-directory", "loop",
	"too-many-links", "message-size", "name-too-long", "no-device", "no-entry", "no-lock", "insufficient-memory",
	"insufficient-space", "not-directory", "not-empty", "not-recoverable", "unsupported", "no-tty", "no-such-device",
	"overflow", "not-permitted", "pipe", "read-only", "invalid-seek", "text-file-busy", "cross-device"}

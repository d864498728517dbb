package wasihttp

// The resource types and the WIT types the interfaces share.

import (
	"github.com/latent-node/latent-node/runner/internal/canon"
)

// Resource type ids of the handle table.
const (
	resFields uint32 = iota + 1
	resIncomingRequest
	resOutgoingRequest
	resRequestOptions
	resResponseOutparam
	resIncomingResponse
	resIncomingBody
	resFutureTrailers
	resOutgoingResponse
	resOutgoingBody
	resFutureIncomingResponse
	resError
	resPollable
	resInputStream
	resOutputStream
	resTerminalInput
	resTerminalOutput
	resDescriptor
	resDirectoryEntryStream
)

// Interfaces (host module names).
const (
	modTypes      = "wasi:http/types@0.2"
	modOutgoing   = "wasi:http/outgoing-handler@0.2"
	modError      = "wasi:io/error@0.2"
	modPoll       = "wasi:io/poll@0.2"
	modStreams    = "wasi:io/streams@0.2"
	modMonotonic  = "wasi:clocks/monotonic-clock@0.2"
	modWall       = "wasi:clocks/wall-clock@0.2"
	modRandom     = "wasi:random/random@0.2"
	modInsecure   = "wasi:random/insecure@0.2"
	modSeed       = "wasi:random/insecure-seed@0.2"
	modEnv        = "wasi:cli/environment@0.2"
	modExit       = "wasi:cli/exit@0.2"
	modStdin      = "wasi:cli/stdin@0.2"
	modStdout     = "wasi:cli/stdout@0.2"
	modStderr     = "wasi:cli/stderr@0.2"
	modTermIn     = "wasi:cli/terminal-input@0.2"
	modTermOut    = "wasi:cli/terminal-output@0.2"
	modTermStdin  = "wasi:cli/terminal-stdin@0.2"
	modTermStdout = "wasi:cli/terminal-stdout@0.2"
	modTermStderr = "wasi:cli/terminal-stderr@0.2"
	modFS         = "wasi:filesystem/types@0.2"
	modPreopens   = "wasi:filesystem/preopens@0.2"
)

var (
	tBool   = canon.Prim(canon.Bool)
	tU8     = canon.Prim(canon.U8)
	tU16    = canon.Prim(canon.U16)
	tU32    = canon.Prim(canon.U32)
	tU64    = canon.Prim(canon.U64)
	tString = canon.Prim(canon.String)
	tBytes  = canon.ListOf(tU8)

	tOptString = canon.OptionOf(tString)
	tOptU16    = canon.OptionOf(tU16)
	tOptU32    = canon.OptionOf(tU32)
	tOptU64    = canon.OptionOf(tU64)

	// result (no payloads) and result<_, e>.
	tResult = canon.ResultOf(nil, nil)

	tMethod = canon.VariantOf([]string{"get", "head", "post", "put", "delete", "connect", "options", "trace", "patch", "other"},
		nil, nil, nil, nil, nil, nil, nil, nil, nil, tString)
	tScheme      = canon.VariantOf([]string{"HTTP", "HTTPS", "other"}, nil, nil, tString)
	tHeaderError = canon.VariantOf([]string{"invalid-syntax", "forbidden", "immutable"}, nil, nil, nil)

	tFieldSize = canon.RecordOf([]string{"field-name", "field-size"}, tOptString, tOptU32)
	tErrorCode = canon.VariantOf([]string{
		"DNS-timeout", "DNS-error", "destination-not-found", "destination-unavailable", "destination-IP-prohibited",
		"destination-IP-unroutable", "connection-refused", "connection-terminated", "connection-timeout",
		"connection-read-timeout", "connection-write-timeout", "connection-limit-reached", "TLS-protocol-error",
		"TLS-certificate-error", "TLS-alert-received", "HTTP-request-denied", "HTTP-request-length-required",
		"HTTP-request-body-size", "HTTP-request-method-invalid", "HTTP-request-URI-invalid", "HTTP-request-URI-too-long",
		"HTTP-request-header-section-size", "HTTP-request-header-size", "HTTP-request-trailer-section-size",
		"HTTP-request-trailer-size", "HTTP-response-incomplete", "HTTP-response-header-section-size",
		"HTTP-response-header-size", "HTTP-response-body-size", "HTTP-response-trailer-section-size",
		"HTTP-response-trailer-size", "HTTP-response-transfer-coding", "HTTP-response-content-coding",
		"HTTP-response-timeout", "HTTP-upgrade-failed", "HTTP-protocol-error", "loop-detected", "configuration-error",
		"internal-error"},
		nil, canon.RecordOf([]string{"rcode", "info-code"}, tOptString, tOptU16), nil, nil, nil,
		nil, nil, nil, nil,
		nil, nil, nil, nil,
		nil, canon.RecordOf([]string{"alert-id", "alert-message"}, canon.OptionOf(tU8), tOptString), nil, nil,
		tOptU64, nil, nil, nil,
		tOptU32, canon.OptionOf(tFieldSize), tOptU32,
		tFieldSize, nil, tOptU32,
		tFieldSize, tOptU64, tOptU32,
		tFieldSize, tOptString, tOptString,
		nil, nil, nil, nil, nil,
		tOptString)

	tStreamError = canon.VariantOf([]string{"last-operation-failed", "closed"}, canon.OwnOf(resError), nil)
)

// errorCodeHTTPRequestDenied is error-code.HTTP-request-denied.
const errorCodeHTTPRequestDenied = 15

func own(r uint32) *canon.Type    { return canon.OwnOf(r) }
func borrow(r uint32) *canon.Type { return canon.BorrowOf(r) }

func ok(v any) canon.Case   { return canon.Case{Index: 0, Value: v} }
func fail(v any) canon.Case { return canon.Case{Index: 1, Value: v} }
func some(v any) canon.Case { return canon.Case{Index: 1, Value: v} }

var none = canon.Case{Index: 0}

func one(v any) []any { return []any{v} }

// Values of the variants.
var (
	headerInvalid   = canon.Case{Index: 0}
	headerForbidden = canon.Case{Index: 1}
	headerImmutable = canon.Case{Index: 2}
	streamClosed    = canon.Case{Index: 1}
)

// lastOperationFailed is stream-error.last-operation-failed of the error
// handle h.
func lastOperationFailed(h uint32) canon.Case { return canon.Case{Index: 0, Value: h} }

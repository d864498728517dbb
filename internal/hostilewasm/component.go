package hostilewasm

import (
	"bytes"

	"github.com/cockroachdb/errors"
)

// Lie is one way a wasi:http component's core module lies to its host
// through the canonical ABI.
type Lie int

// The lies. Each but LieNone and LieStreamFlood must end the activation
// with a trap; LieStreamFlood with the output limit.
const (
	// LieNone tells the truth: it answers 200 with the body "hello", the
	// control that the component is otherwise sound.
	LieNone Lie = iota
	// LieStringOutOfBounds passes fields.append a name whose pointer lies
	// past the end of memory.
	LieStringOutOfBounds
	// LieInvalidUTF8 passes fields.append a name that is not UTF-8.
	LieInvalidUTF8
	// LieListOutOfBounds writes a list that runs past the end of memory.
	LieListOutOfBounds
	// LieDanglingHandle drops an output-stream handle it was never given.
	LieDanglingHandle
	// LieWrongHandleType passes a fields handle where an
	// outgoing-response is owed.
	LieWrongHandleType
	// LieBadDiscriminant sets the response-outparam with result
	// discriminant 7 (a result has two cases).
	LieBadDiscriminant
	// LieReallocOutOfBounds answers the host's cabi_realloc with a
	// pointer past the end of memory.
	LieReallocOutOfBounds
	// LieHandleFlood creates fields until the host's handle table is full.
	LieHandleFlood
	// LieStreamFlood writes its response body without end.
	LieStreamFlood
)

// Lies lists every Lie but LieNone.
var Lies = []Lie{LieStringOutOfBounds, LieInvalidUTF8, LieListOutOfBounds, LieDanglingHandle,
	LieWrongHandleType, LieBadDiscriminant, LieReallocOutOfBounds, LieHandleFlood, LieStreamFlood}

func (l Lie) String() string {
	return [...]string{"none", "string out of bounds", "invalid UTF-8", "list out of bounds", "dangling handle",
		"wrong handle type", "bad discriminant", "realloc out of bounds", "handle flood", "stream flood"}[l]
}

// The imports of the handler core module, in the order and with the types
// of testdata/components/hello.core.wat, whose component LyingComponent
// takes as its template.
const (
	fnFieldsNew = iota
	fnFieldsAppend
	fnRespNew
	fnRespBody
	fnBodyWrite
	fnBodyFinish
	fnPath
	fnOutparamSet
	fnWrite
	fnDropStream
	fnRealloc // the first defined function
	fnHandle
)

var handlerTypes = []FuncType{
	{Results: []ValType{I32}},                                        // 0 [constructor]fields
	{Params: []ValType{I32, I32, I32, I32, I32, I32}},                // 1 fields.append
	{Params: []ValType{I32}, Results: []ValType{I32}},                // 2 [constructor]outgoing-response
	{Params: []ValType{I32, I32}},                                    // 3 (handle, return area)
	{Params: []ValType{I32, I32, I32, I32}},                          // 4
	{Params: []ValType{I32, I32, I32, I32, I64, I32, I32, I32, I32}}, // 5 response-outparam.set
	{Params: []ValType{I32}},                                         // 6 resource drop
	{Params: []ValType{I32, I32, I32, I32}, Results: []ValType{I32}}, // 7 cabi_realloc
}

const (
	httpTypes = "wasi:http/types@0.2.10"
	ioStreams = "wasi:io/streams@0.2.12"
)

var handlerImports = []Import{
	{httpTypes, "[constructor]fields", 0},
	{httpTypes, "[method]fields.append", 1},
	{httpTypes, "[constructor]outgoing-response", 2},
	{httpTypes, "[method]outgoing-response.body", 3},
	{httpTypes, "[method]outgoing-body.write", 3},
	{httpTypes, "[static]outgoing-body.finish", 4},
	{httpTypes, "[method]incoming-request.path-with-query", 3},
	{httpTypes, "[static]response-outparam.set", 5},
	{ioStreams, "[method]output-stream.blocking-write-and-flush", 4},
	{ioStreams, "[resource-drop]output-stream", 6},
}

// The handler's locals: its parameters, then two of its own.
const (
	localReq, localOut, localResp, localStream = 0, 1, 2, 3
	retArea                                    = 256 // a return area in memory
)

// code is a function body under construction.
type code []byte

func (c code) call(fn uint32) code        { return append(append(c, 0x10), AppendU32(nil, fn)...) }
func (c code) i32(v int32) code           { return append(append(c, opI32Const), AppendI32(nil, v)...) }
func (c code) i64(v int64) code           { return append(append(c, 0x42), AppendI64(nil, v)...) }
func (c code) get(l uint32) code          { return append(append(c, 0x20), AppendU32(nil, l)...) }
func (c code) set(l uint32) code          { return append(append(c, 0x21), AppendU32(nil, l)...) }
func (c code) drop() code                 { return append(c, 0x1a) }
func (c code) loadI32(offset uint32) code { return append(c.i32(int32(offset)), 0x28, 2, 0) }
func (c code) forever(body code) code {
	c = append(c, 0x03, 0x40) // loop
	c = append(c, body...)
	return append(c, 0x0c, 0, opEnd) // br 0, end
}

// respond makes a response with an empty fields, sets the outparam to it
// and keeps the response in localResp and its body's stream in
// localStream; the outgoing-body handle stays in memory at retArea+4.
func (c code) respond() code {
	c = c.call(fnFieldsNew).call(fnRespNew).set(localResp)
	c = c.get(localResp).i32(retArea).call(fnRespBody)
	c = c.loadI32(retArea + 4).i32(retArea + 8).call(fnBodyWrite)
	c = c.loadI32(retArea + 12).set(localStream)
	return c.get(localOut).i32(0).get(localResp).i32(0).i64(0).i32(0).i32(0).i32(0).i32(0).call(fnOutparamSet)
}

// finish drops the stream and finishes the body without trailers.
func (c code) finish() code {
	c = c.get(localStream).call(fnDropStream)
	return c.loadI32(retArea + 4).i32(0).i32(0).i32(retArea + 16).call(fnBodyFinish)
}

// HandlerCore is the core module of a wasi:http handler that tells lie
// (hello.core.wat's imports and exports, so that it fits that component).
func HandlerCore(lie Lie) []byte {
	var h code
	realloc := code(nil).i32(8192) // every allocation at 8192: enough for one
	switch lie {
	case LieNone:
		h = h.respond().get(localStream).i32(16).i32(5).i32(retArea + 16).call(fnWrite).finish()
	case LieStringOutOfBounds:
		h = h.call(fnFieldsNew).i32(-65536).i32(9).i32(16).i32(5).i32(retArea).call(fnFieldsAppend)
	case LieInvalidUTF8:
		h = h.call(fnFieldsNew).i32(32).i32(2).i32(16).i32(5).i32(retArea).call(fnFieldsAppend)
	case LieListOutOfBounds:
		h = h.respond().get(localStream).i32(PageSize - 10).i32(100).i32(retArea + 16).call(fnWrite).finish()
	case LieDanglingHandle:
		h = h.i32(12345).call(fnDropStream)
	case LieWrongHandleType:
		h = h.call(fnFieldsNew).i32(retArea).call(fnRespBody)
	case LieBadDiscriminant:
		h = h.call(fnFieldsNew).call(fnRespNew).set(localResp)
		h = h.get(localOut).i32(7).get(localResp).i32(0).i64(0).i32(0).i32(0).i32(0).i32(0).call(fnOutparamSet)
	case LieReallocOutOfBounds:
		realloc = code(nil).i32(-256)
		h = h.get(localReq).i32(retArea).call(fnPath)
	case LieHandleFlood:
		h = h.forever(code(nil).call(fnFieldsNew).drop())
	case LieStreamFlood:
		h = h.respond().forever(code(nil).get(localStream).i32(0).i32(4096).i32(retArea + 16).call(fnWrite))
	}
	m := Module{
		Types:    handlerTypes,
		Imports:  handlerImports,
		Funcs:    []Func{{Type: 7, Body: realloc}, {Type: 3, Locals: []Local{{Count: 2, Type: I32}}, Body: h}},
		Memories: []Limits{{Min: 1}},
		Exports: []Export{{Name: "memory", Kind: ExportMemory}, {Name: "cabi_realloc", Kind: ExportFunc, Index: fnRealloc},
			{Name: "wasi:http/incoming-handler@0.2.10#handle", Kind: ExportFunc, Index: fnHandle}},
		Data: []Data{{Offset: 16, Bytes: []byte("hello")}, {Offset: 32, Bytes: []byte{0xff, 0xfe}}},
	}
	return m.Encode()
}

// LyingComponent returns template, the component of
// testdata/components/hello.core.wat, with its first core module (the
// handler) replaced by HandlerCore(lie): the component's types, imports,
// lowerings and liftings stay as wasm-tools made them, so whatever goes
// wrong is the lie.
func LyingComponent(template []byte, lie Lie) ([]byte, error) {
	preamble := []byte{0x00, 0x61, 0x73, 0x6d, 0x0d, 0x00, 0x01, 0x00}
	if !bytes.HasPrefix(template, preamble) {
		return nil, errors.New("hostilewasm: the template is not a component")
	}
	for at := len(preamble); at < len(template); {
		id := template[at]
		size, n := readU32(template[at+1:])
		if n == 0 || uint64(at+1+n)+uint64(size) > uint64(len(template)) {
			return nil, errors.Newf("hostilewasm: section at %d runs past the template's end", at)
		}
		end := at + 1 + n + int(size)
		if id == 1 { // a core module
			core := HandlerCore(lie)
			out := append([]byte(nil), template[:at]...)
			out = append(out, 1)
			out = AppendU32(out, uint32(len(core)))
			out = append(out, core...)
			return append(out, template[end:]...), nil
		}
		at = end
	}
	return nil, errors.New("hostilewasm: the template has no core module")
}

// readU32 decodes an unsigned LEB128 of at most 5 bytes; n is 0 if b does
// not hold one.
func readU32(b []byte) (v uint32, n int) {
	for i := 0; i < len(b) && i < 5; i++ {
		v |= uint32(b[i]&0x7f) << (7 * i)
		if b[i]&0x80 == 0 {
			return v, i + 1
		}
	}
	return 0, 0
}

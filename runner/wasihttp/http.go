package wasihttp

// wasi:http/types: fields, requests, responses and bodies.

import (
	"strings"

	"github.com/latent-node/latent-node/runner/httpabi"
	"github.com/latent-node/latent-node/runner/internal/canon"
)

type field struct {
	name  string // as the guest or the node gave it
	value []byte
}

// fields is a fields resource; immutable for a request's headers and for
// a response's once it is set.
type fields struct {
	entries   []field
	immutable bool
	bytes     int
}

type incomingRequest struct {
	headers  *fields
	consumed bool
}

type incomingBody struct {
	data     []byte
	src      *source // a body that arrives as the guest reads it, or nil
	streamed bool
}

type outgoingRequest struct {
	method                  canon.Case
	path, scheme, authority canon.Case // options
	headers                 *fields
	bodyTaken               bool
	body                    []byte // what the guest wrote to its body
}

type outparam struct{}

type outResponse struct {
	status    int
	headers   *fields
	bodyTaken bool
	body      []byte // held until the handler returned, or until it streams
	limit     int
	started   bool  // the status and headers went out through the Sink
	sent      int64 // the body bytes the Sink took
}

type outgoingBody struct {
	resp     *outResponse     // the response's body, or nil
	req      *outgoingRequest // an outgoing request's body, or nil
	streamed bool
}

// forbidden are the header names a guest may not set (wasmtime's list).
var forbidden = map[string]bool{"connection": true, "keep-alive": true, "proxy-connection": true,
	"transfer-encoding": true, "upgrade": true, "host": true, "http2-settings": true}

func validValue(v []byte) bool {
	for _, c := range v {
		if c < 0x20 && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}

// checkField is the header-error of setting name to value, or nil.
func (f *fields) checkField(a *Activation, name string, value []byte, extra int) *canon.Case {
	switch {
	case f.immutable:
		return &headerImmutable
	case !httpabi.ValidToken(name) || !validValue(value):
		return &headerInvalid
	case forbidden[strings.ToLower(name)]:
		return &headerForbidden
	case f.bytes+extra > a.lim.MaxFieldsBytes || len(f.entries) >= maxFieldsEntries:
		return &headerInvalid
	}
	return nil
}

func (f *fields) remove(name string) {
	out := f.entries[:0]
	for _, e := range f.entries {
		if strings.EqualFold(e.name, name) {
			f.bytes -= len(e.name) + len(e.value)
			continue
		}
		out = append(out, e)
	}
	f.entries = out
}

func (f *fields) clone() *fields {
	return &fields{entries: append([]field(nil), f.entries...), bytes: f.bytes}
}

func defineFields() {
	b := borrow(resFields)
	def(modTypes, "[constructor]fields", nil, ts(own(resFields)), func(a *Activation, _ []any) []any {
		return one(a.add(resFields, &fields{}))
	})
	def(modTypes, "[static]fields.from-list", ts(canon.ListOf(canon.TupleOf(tString, tBytes))),
		ts(canon.ResultOf(own(resFields), tHeaderError)), func(a *Activation, args []any) []any {
			f := &fields{}
			for _, e := range args[0].([]any) {
				kv := e.([]any)
				name, value := kv[0].(string), kv[1].([]byte)
				if err := f.checkField(a, name, value, len(name)+len(value)); err != nil {
					return one(fail(*err))
				}
				f.entries = append(f.entries, field{name, value})
				f.bytes += len(name) + len(value)
			}
			return one(ok(a.add(resFields, f)))
		})
	def(modTypes, "[method]fields.get", ts(b, tString), ts(canon.ListOf(tBytes)), func(a *Activation, args []any) []any {
		f := get[*fields](a, args[0], resFields)
		out := []any{}
		for _, e := range f.entries {
			if strings.EqualFold(e.name, args[1].(string)) {
				out = append(out, e.value)
			}
		}
		return one(out)
	})
	def(modTypes, "[method]fields.has", ts(b, tString), ts(tBool), func(a *Activation, args []any) []any {
		f := get[*fields](a, args[0], resFields)
		for _, e := range f.entries {
			if strings.EqualFold(e.name, args[1].(string)) {
				return one(true)
			}
		}
		return one(false)
	})
	def(modTypes, "[method]fields.set", ts(b, tString, canon.ListOf(tBytes)), ts(canon.ResultOf(nil, tHeaderError)),
		func(a *Activation, args []any) []any {
			f := get[*fields](a, args[0], resFields)
			name := args[1].(string)
			vals := args[2].([]any)
			size := 0
			for _, v := range vals {
				size += len(name) + len(v.([]byte))
			}
			for _, v := range vals {
				if err := f.checkField(a, name, v.([]byte), size); err != nil {
					return one(fail(*err))
				}
			}
			if f.immutable {
				return one(fail(headerImmutable))
			}
			f.remove(name)
			for _, v := range vals {
				f.entries = append(f.entries, field{name, v.([]byte)})
				f.bytes += len(name) + len(v.([]byte))
			}
			return one(ok(nil))
		})
	def(modTypes, "[method]fields.delete", ts(b, tString), ts(canon.ResultOf(nil, tHeaderError)), func(a *Activation, args []any) []any {
		f := get[*fields](a, args[0], resFields)
		name := args[1].(string)
		switch {
		case f.immutable:
			return one(fail(headerImmutable))
		case !httpabi.ValidToken(name):
			return one(fail(headerInvalid))
		case forbidden[strings.ToLower(name)]:
			return one(fail(headerForbidden))
		}
		f.remove(name)
		return one(ok(nil))
	})
	def(modTypes, "[method]fields.append", ts(b, tString, tBytes), ts(canon.ResultOf(nil, tHeaderError)), func(a *Activation, args []any) []any {
		f := get[*fields](a, args[0], resFields)
		name, value := args[1].(string), args[2].([]byte)
		if err := f.checkField(a, name, value, len(name)+len(value)); err != nil {
			return one(fail(*err))
		}
		f.entries = append(f.entries, field{name, value})
		f.bytes += len(name) + len(value)
		return one(ok(nil))
	})
	def(modTypes, "[method]fields.entries", ts(b), ts(canon.ListOf(canon.TupleOf(tString, tBytes))), func(a *Activation, args []any) []any {
		f := get[*fields](a, args[0], resFields)
		out := make([]any, len(f.entries))
		for i, e := range f.entries {
			out[i] = []any{e.name, e.value}
		}
		return one(out)
	})
	def(modTypes, "[method]fields.clone", ts(b), ts(own(resFields)), func(a *Activation, args []any) []any {
		return one(a.add(resFields, get[*fields](a, args[0], resFields).clone()))
	})
	drop(modTypes, "fields", resFields, nil)
}

// methodCase is method as a variant value.
func methodCase(m string) canon.Case {
	for i, name := range []string{"GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH"} {
		if m == name {
			return canon.Case{Index: uint32(i)}
		}
	}
	return canon.Case{Index: 9, Value: m}
}

func defineRequests() {
	b := borrow(resIncomingRequest)
	def(modTypes, "[method]incoming-request.method", ts(b), ts(tMethod), func(a *Activation, args []any) []any {
		get[*incomingRequest](a, args[0], resIncomingRequest)
		return one(methodCase(a.req.Method))
	})
	def(modTypes, "[method]incoming-request.path-with-query", ts(b), ts(tOptString), func(a *Activation, args []any) []any {
		get[*incomingRequest](a, args[0], resIncomingRequest)
		return one(some(a.req.PathWithQuery))
	})
	def(modTypes, "[method]incoming-request.scheme", ts(b), ts(canon.OptionOf(tScheme)), func(a *Activation, args []any) []any {
		get[*incomingRequest](a, args[0], resIncomingRequest)
		if a.req.Scheme == "https" {
			return one(some(canon.Case{Index: 1}))
		}
		return one(some(canon.Case{Index: 0}))
	})
	def(modTypes, "[method]incoming-request.authority", ts(b), ts(tOptString), func(a *Activation, args []any) []any {
		get[*incomingRequest](a, args[0], resIncomingRequest)
		return one(some(a.req.Authority))
	})
	def(modTypes, "[method]incoming-request.headers", ts(b), ts(own(resFields)), func(a *Activation, args []any) []any {
		r := get[*incomingRequest](a, args[0], resIncomingRequest)
		return one(a.add(resFields, r.headers))
	})
	def(modTypes, "[method]incoming-request.consume", ts(b), ts(canon.ResultOf(own(resIncomingBody), nil)), func(a *Activation, args []any) []any {
		r := get[*incomingRequest](a, args[0], resIncomingRequest)
		if r.consumed {
			return one(fail(nil))
		}
		r.consumed = true
		body := &incomingBody{data: a.req.Body}
		if a.req.Stream != nil {
			body.src = &source{src: a.req.Stream}
		}
		return one(ok(a.add(resIncomingBody, body)))
	})
	drop(modTypes, "incoming-request", resIncomingRequest, nil)

	ib := borrow(resIncomingBody)
	def(modTypes, "[method]incoming-body.stream", ts(ib), ts(canon.ResultOf(own(resInputStream), nil)), func(a *Activation, args []any) []any {
		body := get[*incomingBody](a, args[0], resIncomingBody)
		if body.streamed {
			return one(fail(nil))
		}
		body.streamed = true
		return one(ok(a.add(resInputStream, &inputStream{data: body.data, src: body.src})))
	})
	def(modTypes, "[static]incoming-body.finish", ts(own(resIncomingBody)), ts(own(resFutureTrailers)), func(a *Activation, args []any) []any {
		take[*incomingBody](a, args[0], resIncomingBody)
		return one(a.add(resFutureTrailers, struct{}{}))
	})
	drop(modTypes, "incoming-body", resIncomingBody, nil)
	ft := borrow(resFutureTrailers)
	def(modTypes, "[method]future-trailers.subscribe", ts(ft), ts(own(resPollable)), func(a *Activation, args []any) []any {
		get[struct{}](a, args[0], resFutureTrailers)
		return one(a.add(resPollable, &pollable{}))
	})
	def(modTypes, "[method]future-trailers.get", ts(ft),
		ts(canon.OptionOf(canon.ResultOf(canon.ResultOf(canon.OptionOf(own(resFields)), tErrorCode), nil))),
		func(a *Activation, args []any) []any {
			get[struct{}](a, args[0], resFutureTrailers)
			return one(some(ok(ok(none))))
		})
	drop(modTypes, "future-trailers", resFutureTrailers, nil)

	// Outgoing requests: made, but only ever refused.
	or := borrow(resOutgoingRequest)
	def(modTypes, "[constructor]outgoing-request", ts(own(resFields)), ts(own(resOutgoingRequest)), func(a *Activation, args []any) []any {
		h := take[*fields](a, args[0], resFields)
		return one(a.add(resOutgoingRequest, &outgoingRequest{method: canon.Case{}, headers: h}))
	})
	def(modTypes, "[method]outgoing-request.body", ts(or), ts(canon.ResultOf(own(resOutgoingBody), nil)), func(a *Activation, args []any) []any {
		r := get[*outgoingRequest](a, args[0], resOutgoingRequest)
		if r.bodyTaken {
			return one(fail(nil))
		}
		r.bodyTaken = true
		return one(ok(a.add(resOutgoingBody, &outgoingBody{req: r})))
	})
	def(modTypes, "[method]outgoing-request.method", ts(or), ts(tMethod), func(a *Activation, args []any) []any {
		return one(get[*outgoingRequest](a, args[0], resOutgoingRequest).method)
	})
	def(modTypes, "[method]outgoing-request.set-method", ts(or, tMethod), ts(tResult), func(a *Activation, args []any) []any {
		get[*outgoingRequest](a, args[0], resOutgoingRequest).method = args[1].(canon.Case)
		return one(ok(nil))
	})
	for _, p := range []struct {
		name string
		typ  *canon.Type
		at   func(r *outgoingRequest) *canon.Case
	}{
		{"path-with-query", tOptString, func(r *outgoingRequest) *canon.Case { return &r.path }},
		{"scheme", canon.OptionOf(tScheme), func(r *outgoingRequest) *canon.Case { return &r.scheme }},
		{"authority", tOptString, func(r *outgoingRequest) *canon.Case { return &r.authority }},
	} {
		def(modTypes, "[method]outgoing-request."+p.name, ts(or), ts(p.typ), func(a *Activation, args []any) []any {
			return one(*p.at(get[*outgoingRequest](a, args[0], resOutgoingRequest)))
		})
		def(modTypes, "[method]outgoing-request.set-"+p.name, ts(or, p.typ), ts(tResult), func(a *Activation, args []any) []any {
			*p.at(get[*outgoingRequest](a, args[0], resOutgoingRequest)) = args[1].(canon.Case)
			return one(ok(nil))
		})
	}
	def(modTypes, "[method]outgoing-request.headers", ts(or), ts(own(resFields)), func(a *Activation, args []any) []any {
		r := get[*outgoingRequest](a, args[0], resOutgoingRequest)
		return one(a.add(resFields, r.headers))
	})
	drop(modTypes, "outgoing-request", resOutgoingRequest, nil)

	ro := borrow(resRequestOptions)
	def(modTypes, "[constructor]request-options", nil, ts(own(resRequestOptions)), func(a *Activation, _ []any) []any {
		return one(a.add(resRequestOptions, &[3]canon.Case{}))
	})
	for i, name := range []string{"connect-timeout", "first-byte-timeout", "between-bytes-timeout"} {
		def(modTypes, "[method]request-options."+name, ts(ro), ts(tOptU64), func(a *Activation, args []any) []any {
			return one(get[*[3]canon.Case](a, args[0], resRequestOptions)[i])
		})
		def(modTypes, "[method]request-options.set-"+name, ts(ro, tOptU64), ts(tResult), func(a *Activation, args []any) []any {
			get[*[3]canon.Case](a, args[0], resRequestOptions)[i] = args[1].(canon.Case)
			return one(ok(nil))
		})
	}
	drop(modTypes, "request-options", resRequestOptions, nil)
}

func defineResponses() {
	def(modTypes, "[static]response-outparam.set", ts(own(resResponseOutparam), canon.ResultOf(own(resOutgoingResponse), tErrorCode)), nil,
		func(a *Activation, args []any) []any {
			take[*outparam](a, args[0], resResponseOutparam)
			a.set = true
			res := args[1].(canon.Case)
			if res.Index == 1 {
				a.setErr = ErrGuestError
				return nil
			}
			r := take[*outResponse](a, res.Value, resOutgoingResponse)
			r.headers.immutable = true
			a.response = r
			return nil
		})
	def(modTypes, "[method]response-outparam.send-informational", ts(borrow(resResponseOutparam), tU16, own(resFields)),
		ts(canon.ResultOf(nil, tErrorCode)), func(a *Activation, args []any) []any {
			get[*outparam](a, args[0], resResponseOutparam)
			take[*fields](a, args[2], resFields)
			return one(fail(canon.Case{Index: 38, Value: some("informational responses are not supported")}))
		})
	drop(modTypes, "response-outparam", resResponseOutparam, nil)

	r := borrow(resOutgoingResponse)
	def(modTypes, "[constructor]outgoing-response", ts(own(resFields)), ts(own(resOutgoingResponse)), func(a *Activation, args []any) []any {
		h := take[*fields](a, args[0], resFields)
		return one(a.add(resOutgoingResponse, &outResponse{status: 200, headers: h, limit: a.lim.MaxBodyBytes}))
	})
	def(modTypes, "[method]outgoing-response.status-code", ts(r), ts(tU16), func(a *Activation, args []any) []any {
		return one(uint64(get[*outResponse](a, args[0], resOutgoingResponse).status))
	})
	def(modTypes, "[method]outgoing-response.set-status-code", ts(r, tU16), ts(tResult), func(a *Activation, args []any) []any {
		resp := get[*outResponse](a, args[0], resOutgoingResponse)
		s := int(args[1].(uint64))
		if s < 100 || s > 999 {
			return one(fail(nil))
		}
		resp.status = s
		return one(ok(nil))
	})
	def(modTypes, "[method]outgoing-response.headers", ts(r), ts(own(resFields)), func(a *Activation, args []any) []any {
		return one(a.add(resFields, get[*outResponse](a, args[0], resOutgoingResponse).headers))
	})
	def(modTypes, "[method]outgoing-response.body", ts(r), ts(canon.ResultOf(own(resOutgoingBody), nil)), func(a *Activation, args []any) []any {
		resp := get[*outResponse](a, args[0], resOutgoingResponse)
		if resp.bodyTaken {
			return one(fail(nil))
		}
		resp.bodyTaken = true
		return one(ok(a.add(resOutgoingBody, &outgoingBody{resp: resp})))
	})
	drop(modTypes, "outgoing-response", resOutgoingResponse, nil)

	def(modTypes, "[method]outgoing-body.write", ts(borrow(resOutgoingBody)), ts(canon.ResultOf(own(resOutputStream), nil)),
		func(a *Activation, args []any) []any {
			body := get[*outgoingBody](a, args[0], resOutgoingBody)
			if body.streamed {
				return one(fail(nil))
			}
			body.streamed = true
			return one(ok(a.add(resOutputStream, &outputStream{body: body})))
		})
	def(modTypes, "[static]outgoing-body.finish", ts(own(resOutgoingBody), canon.OptionOf(own(resFields))), ts(canon.ResultOf(nil, tErrorCode)),
		func(a *Activation, args []any) []any {
			take[*outgoingBody](a, args[0], resOutgoingBody)
			if t := args[1].(canon.Case); t.Index == 1 {
				take[*fields](a, t.Value, resFields) // trailers are not sent
			}
			return one(ok(nil))
		})
	drop(modTypes, "outgoing-body", resOutgoingBody, nil)

	defineOutgoing()
	def(modTypes, "http-error-code", ts(borrow(resError)), ts(canon.OptionOf(tErrorCode)), func(a *Activation, args []any) []any {
		get[*ioError](a, args[0], resError)
		return one(none)
	})

}

package wasihttp

// wasi:http/outgoing-handler and the responses it brings: a request is
// sent when the guest first waits for or asks for its response, with the
// body it wrote until then.

import (
	"strconv"
	"strings"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/latent-node/latent-node/runner/httpabi"
	"github.com/latent-node/latent-node/runner/internal/canon"
	"github.com/latent-node/latent-node/runner/internal/outbound"
)

// MaxCalls is how many outgoing requests one activation may make (sent
// or denied); the next are denied and not recorded.
const MaxCalls = 16

// Call is one outgoing request of an activation, for its log line, metric
// and trace span.
type Call struct {
	Method, URL string
	Began       time.Time
	Took        time.Duration
	Status      int    // 0 when it was not answered
	Err         string // the error-code the guest saw, "" when answered
	BytesOut    int
	BytesIn     int
}

// Calls are the activation's outgoing requests.
func (a *Activation) Calls() []Call { return a.calls }

type futureResponse struct {
	req   *outgoingRequest
	done  bool
	taken bool
	resp  *incomingResponse
	code  canon.Case // the error-code when resp is nil
}

type incomingResponse struct {
	status   int
	headers  *fields
	body     []byte
	consumed bool
}

// Indexes of error-code cases the host answers.
const (
	errorCodeDestinationNotFound = 2
	errorCodeConnectionRefused   = 6
	errorCodeConnectionTimeout   = 8
	errorCodeResponseBodySize    = 28
	errorCodeProtocolError       = 35
	errorCodeInternal            = 38
)

// methods are the method cases' names (method.other carries its own).
var methods = []string{"GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH"}

func defineOutgoing() {
	def(modOutgoing, "handle", ts(own(resOutgoingRequest), canon.OptionOf(own(resRequestOptions))),
		ts(canon.ResultOf(own(resFutureIncomingResponse), tErrorCode)), func(a *Activation, args []any) []any {
			r := take[*outgoingRequest](a, args[0], resOutgoingRequest)
			if o := args[1].(canon.Case); o.Index == 1 {
				take[*[3]canon.Case](a, o.Value, resRequestOptions) // the deadline is the activation's
			}
			if a.lim.Outbound == nil || a.futures >= MaxCalls {
				// Denied without being sent; recorded (up to MaxCalls) like
				// any other.
				if len(a.calls) < MaxCalls {
					a.calls = append(a.calls, Call{Method: methodName(r.method), URL: schemeName(r.scheme) + "://" + optString(r.authority) + optString(r.path),
						Began: time.Now(), Err: errorCodeName(errorCodeHTTPRequestDenied)})
				}
				return one(fail(canon.Case{Index: errorCodeHTTPRequestDenied}))
			}
			a.futures++
			return one(ok(a.add(resFutureIncomingResponse, &futureResponse{req: r})))
		})

	fr := borrow(resFutureIncomingResponse)
	def(modTypes, "[method]future-incoming-response.subscribe", ts(fr), ts(own(resPollable)), func(a *Activation, args []any) []any {
		f := get[*futureResponse](a, args[0], resFutureIncomingResponse)
		a.send(f) // blocking the pollable is waiting for the response: it is here once it is ready
		return one(a.add(resPollable, &pollable{}))
	})
	def(modTypes, "[method]future-incoming-response.get", ts(fr),
		ts(canon.OptionOf(canon.ResultOf(canon.ResultOf(own(resIncomingResponse), tErrorCode), nil))), func(a *Activation, args []any) []any {
			f := get[*futureResponse](a, args[0], resFutureIncomingResponse)
			a.send(f)
			if f.taken {
				return one(some(fail(nil)))
			}
			f.taken = true
			if f.resp == nil {
				return one(some(ok(fail(f.code))))
			}
			return one(some(ok(ok(a.add(resIncomingResponse, f.resp)))))
		})
	drop(modTypes, "future-incoming-response", resFutureIncomingResponse, nil)

	ir := borrow(resIncomingResponse)
	def(modTypes, "[method]incoming-response.status", ts(ir), ts(tU16), func(a *Activation, args []any) []any {
		return one(uint64(get[*incomingResponse](a, args[0], resIncomingResponse).status))
	})
	def(modTypes, "[method]incoming-response.headers", ts(ir), ts(own(resFields)), func(a *Activation, args []any) []any {
		return one(a.add(resFields, get[*incomingResponse](a, args[0], resIncomingResponse).headers))
	})
	def(modTypes, "[method]incoming-response.consume", ts(ir), ts(canon.ResultOf(own(resIncomingBody), nil)), func(a *Activation, args []any) []any {
		r := get[*incomingResponse](a, args[0], resIncomingResponse)
		if r.consumed {
			return one(fail(nil))
		}
		r.consumed = true
		return one(ok(a.add(resIncomingBody, &incomingBody{data: r.body})))
	})
	drop(modTypes, "incoming-response", resIncomingResponse, nil)
}

// send sends f's request once, through Limits.Outbound, and keeps its
// answer or error-code in f.
func (a *Activation) send(f *futureResponse) {
	if f.done {
		return
	}
	f.done = true
	r := f.req
	req := &outbound.Request{Method: methodName(r.method), Scheme: schemeName(r.scheme), Body: r.body}
	if r.authority.Index == 1 {
		req.Authority = r.authority.Value.(string)
	}
	req.PathWithQuery = "/"
	if r.path.Index == 1 {
		req.PathWithQuery = r.path.Value.(string)
	}
	for _, e := range r.headers.entries {
		req.Header = append(req.Header, [2]string{e.name, string(e.value)})
	}
	call := Call{Method: req.Method, URL: req.Scheme + "://" + req.Authority + req.PathWithQuery, Began: time.Now(), BytesOut: len(req.Body)}
	a.chargeBytes(len(req.Body))
	resp, err := a.lim.Outbound(req)
	call.Took = time.Since(call.Began)
	if err != nil {
		f.code = errorCodeOf(err)
		call.Err = errorCodeName(f.code.Index)
		a.calls = append(a.calls, call)
		return
	}
	a.chargeBytes(len(resp.Body))
	if int64(len(resp.Body)) > a.budget {
		// Every body the host keeps comes out of the activation's budget.
		f.code = canon.Case{Index: errorCodeResponseBodySize, Value: none}
		call.Err = errorCodeName(errorCodeResponseBodySize)
		a.calls = append(a.calls, call)
		return
	}
	a.budget -= int64(len(resp.Body))
	h := &fields{immutable: true}
	for _, kv := range resp.Header {
		if forbidden[kv[0]] || !httpabi.ValidToken(kv[0]) || !validValue([]byte(kv[1])) || h.bytes+len(kv[0])+len(kv[1]) > a.lim.MaxFieldsBytes || len(h.entries) >= maxFieldsEntries {
			continue
		}
		h.entries = append(h.entries, field{name: kv[0], value: []byte(kv[1])})
		h.bytes += len(kv[0]) + len(kv[1])
	}
	f.resp = &incomingResponse{status: resp.Status, headers: h, body: resp.Body}
	call.Status, call.BytesIn = resp.Status, len(resp.Body)
	a.calls = append(a.calls, call)
}

// optString is an option<string>'s string, "" for none.
func optString(c canon.Case) string {
	s, _ := c.Value.(string)
	return s
}

// methodName is the method's token.
func methodName(m canon.Case) string {
	if int(m.Index) < len(methods) {
		return methods[m.Index]
	}
	if s, ok := m.Value.(string); ok {
		return s
	}
	return "GET"
}

// schemeName is the scheme's name, "https" when the guest set none, and
// what it set otherwise ("other" schemes are then refused by the sender).
func schemeName(s canon.Case) string {
	if s.Index == 0 {
		return "https"
	}
	switch v := s.Value.(canon.Case); v.Index {
	case 0:
		return "http"
	case 1:
		return "https"
	default:
		name, _ := v.Value.(string)
		return strings.ToLower(name)
	}
}

// errorCodeOf is the error-code a sender's error is for the guest.
func errorCodeOf(err error) canon.Case {
	switch {
	case errors.Is(err, outbound.ErrDenied):
		return canon.Case{Index: errorCodeHTTPRequestDenied}
	case errors.Is(err, outbound.ErrDNS):
		return canon.Case{Index: errorCodeDestinationNotFound}
	case errors.Is(err, outbound.ErrRefused):
		return canon.Case{Index: errorCodeConnectionRefused}
	case errors.Is(err, outbound.ErrTimeout):
		return canon.Case{Index: errorCodeConnectionTimeout}
	case errors.Is(err, outbound.ErrTooLarge):
		return canon.Case{Index: errorCodeResponseBodySize, Value: none}
	case errors.Is(err, outbound.ErrProtocol):
		return canon.Case{Index: errorCodeProtocolError}
	}
	return canon.Case{Index: errorCodeInternal, Value: none}
}

// errorCodeName is the name of error-code case i.
func errorCodeName(i uint32) string {
	if names := tErrorCode.Names; int(i) < len(names) {
		return names[i]
	}
	return "error-code " + strconv.Itoa(int(i))
}

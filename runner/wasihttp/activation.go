package wasihttp

// One activation's state: its request, handle table and response; Env,
// the runner's side of it.

import (
	"context"
	"strconv"
	"time"

	"github.com/cockroachdb/errors"
	"github.com/tetratelabs/wazero/api"

	"github.com/latent-node/latent-node/runner/httpabi"
	"github.com/latent-node/latent-node/runner/internal/canon"
	"github.com/latent-node/latent-node/runner/internal/component"
	"github.com/latent-node/latent-node/runner/internal/outbound"
)

// Env is what the host needs from the runner's activation.
type Env interface {
	// Charge takes n units of fuel for host work; it may panic with the
	// runner's typed stop, which must not be recovered.
	Charge(n uint64)
	// Log takes the guest's wasi:cli stdout and stderr output.
	Log(p []byte)
	// Random fills p from the activation's random stream.
	Random(p []byte)
	// Monotonic is the activation's monotonic clock in nanoseconds.
	Monotonic() uint64
	// Wall is the wall clock.
	Wall() time.Time
	// SleepUntil blocks until Monotonic() reaches ns, or the activation
	// must stop (it panics with the runner's stop then); SleepUntil(0)
	// only checks for the stop.
	SleepUntil(ns uint64)
	// Deadline is the activation's wall-time deadline.
	Deadline() time.Time
	// Environ is wasi:cli/environment's get-environment.
	Environ() [][2]string
}

// Request is the HTTP request a guest's incoming-handler receives.
type Request struct {
	Method        string // as sent; an unknown token is method.other
	PathWithQuery string // "/below/the/route?q=1"
	Scheme        string // "http" or "https"
	Authority     string // the Host
	Header        [][2]string
	Body          []byte
	// Stream, when set, is the body as it arrives (Body is then unused):
	// the guest's reads of its incoming body read it.
	Stream Source
	// Sink, when set, takes a response whose body outgrows StreamAfter
	// (see Sink); without one a response is held whole, and one larger
	// than MaxBodyBytes is output-exceeded.
	Sink Sink
}

// Response is the response a guest set.
type Response struct {
	Status int
	Header [][2]string
	Body   []byte
	// Streamed: the status, headers and body went out through the Sink
	// as the guest wrote them (Body is empty).
	Streamed bool
}

// Limits bound one activation's host state.
type Limits struct {
	MaxHandles     int   // live handles (default 4096)
	MaxFieldsBytes int   // names and values of one fields resource (default 64 KiB, and at most 1024 entries)
	MaxBodyBytes   int   // the response body (required)
	MaxHostBytes   int64 // what lifting the guest's values and the bodies the host keeps may take in all, beyond MaxBodyBytes (default 16 MiB)
	// MaxStreamBytes bounds a response body sent through Request.Sink
	// (default 256 MiB); at most MaxBodyBytes, negative included, turns
	// streaming off (every response is held).
	MaxStreamBytes int64
	// Outbound sends an outgoing request (the runner's, within the
	// revision's allowed hosts and the activation's deadline); nil denies
	// every one with HTTP-request-denied.
	Outbound func(*outbound.Request) (*outbound.Response, error)
}

// Defaults of Limits.
const (
	DefaultMaxHandles     = 4096
	DefaultMaxFieldsBytes = 64 << 10
	DefaultMaxHostBytes   = 16 << 20
	DefaultMaxStreamBytes = 256 << 20
	maxFieldsEntries      = 1024
)

// Sentinels of an activation's end.
var (
	// ErrNoResponse: the handler returned without response-outparam.set.
	ErrNoResponse = errors.New("wasihttp: the handler set no response")
	// ErrGuestError: the handler set an error-code as its response.
	ErrGuestError = errors.New("wasihttp: the handler answered with an error")
	// ErrOutputExceeded: the guest wrote more response body than allowed
	// (a host function panics with it).
	ErrOutputExceeded = errors.New("wasihttp: response body over the output limit")
)

// Activation is one activation's host state: the request, the handle
// table and the response.
type Activation struct {
	env    Env
	lim    Limits
	req    Request
	table  *canon.Table
	budget int64

	ctx      context.Context
	mod      api.Module
	reallocs [component.MaxReallocs]api.Function

	set       bool
	setErr    error
	response  *outResponse
	closed    bool
	environ   []any                                        // get-environment's answer, once made
	opts      [component.MaxReallocs + 1][3]*canon.Options // by realloc (the last: none) and encoding
	sourceErr error                                        // the streamed request body's failure
	sinkErr   error                                        // the Sink's failure
	calls     []Call                                       // the outgoing requests, in order
	futures   int                                          // outgoing requests handed a future (at most MaxCalls)
	inst      *Instance                                    // the reused instance whose table this is, or nil
}

// Instance is what a reused instance keeps between its activations: the
// handle table, so that handles its memory holds (an adapter caches its
// stdout and stderr streams) stay valid. At the end of each activation
// every handle but those of the standard streams is dropped: nothing of
// one request reaches the next.
type Instance struct {
	table *canon.Table
}

// NewInstance is the kept state of a new reused instance, its table
// bounded by lim.MaxHandles (default DefaultMaxHandles).
func NewInstance(lim Limits) *Instance {
	if lim.MaxHandles <= 0 {
		lim.MaxHandles = DefaultMaxHandles
	}
	return &Instance{table: canon.NewTable(lim.MaxHandles)}
}

// Live is how many handles the instance keeps.
func (in *Instance) Live() int { return in.table.Len() }

// NewActivation is the state of an activation serving req.
func NewActivation(req Request, env Env, lim Limits) *Activation {
	if lim.MaxHandles <= 0 {
		lim.MaxHandles = DefaultMaxHandles
	}
	if lim.MaxFieldsBytes <= 0 {
		lim.MaxFieldsBytes = DefaultMaxFieldsBytes
	}
	if lim.MaxHostBytes <= 0 {
		lim.MaxHostBytes = DefaultMaxHostBytes
	}
	if lim.MaxStreamBytes == 0 {
		lim.MaxStreamBytes = DefaultMaxStreamBytes
	}
	// The budget covers what lifting allocates and every body the host
	// keeps (the response's, outgoing requests', outbound responses'): the
	// lifting allowance plus room for one whole response.
	return &Activation{env: env, lim: lim, req: req, table: canon.NewTable(lim.MaxHandles), budget: lim.MaxHostBytes + int64(lim.MaxBodyBytes)}
}

// NewActivationOn is NewActivation on a reused instance's kept state.
func NewActivationOn(in *Instance, req Request, env Env, lim Limits) *Activation {
	a := NewActivation(req, env, lim)
	a.table, a.inst = in.table, in
	return a
}

type activationKey struct{}

// WithActivation is ctx carrying a, for the host functions.
func WithActivation(ctx context.Context, a *Activation) context.Context {
	return context.WithValue(ctx, activationKey{}, a)
}

// From is the activation ctx carries.
func From(ctx context.Context) *Activation {
	a, _ := ctx.Value(activationKey{}).(*Activation)
	if a == nil {
		panic(errors.AssertionFailedf("wasihttp: host function called outside an activation"))
	}
	return a
}

// Handle calls the guest's lifted handle export fn, core type
// (i32 i32) -> (), with a new own<incoming-request> and
// own<response-outparam>, and returns fn's error as is.
func (a *Activation) Handle(ctx context.Context, mod api.Module, fn, post api.Function) error {
	a.ctx, a.mod = ctx, mod
	if !coreType(fn, 2) || (post != nil && !coreType(post, 0)) {
		return errors.Wrap(canon.ErrTrap, "wasihttp: the handler's core type is not (i32 i32) -> (), or its post-return's not () -> ()")
	}
	req, err := a.table.Add(resIncomingRequest, &incomingRequest{headers: a.requestFields()})
	if err != nil {
		return err
	}
	out, err := a.table.Add(resResponseOutparam, &outparam{})
	if err != nil {
		return err
	}
	if _, err = fn.Call(ctx, uint64(req), uint64(out)); err != nil || post == nil {
		return err
	}
	_, err = post.Call(ctx)
	return err
}

// coreType reports whether fn takes params i32s and returns nothing.
func coreType(fn api.Function, params int) bool {
	d := fn.Definition()
	if len(d.ResultTypes()) != 0 || len(d.ParamTypes()) != params {
		return false
	}
	for _, t := range d.ParamTypes() {
		if t != api.ValueTypeI32 {
			return false
		}
	}
	return true
}

func (a *Activation) requestFields() *fields {
	f := &fields{immutable: true}
	for _, kv := range a.req.Header {
		f.entries = append(f.entries, field{name: kv[0], value: []byte(kv[1])})
	}
	return f
}

// Response returns the response the guest set (see the sentinels).
func (a *Activation) Response() (*Response, error) {
	switch {
	case !a.set:
		return nil, ErrNoResponse
	case a.setErr != nil:
		return nil, a.setErr
	}
	r := a.response
	resp := &Response{Status: r.status, Body: r.body, Streamed: r.started}
	for _, f := range r.headers.entries {
		resp.Header = append(resp.Header, [2]string{f.name, string(f.value)})
	}
	return resp, nil
}

// Live is how many handles the guest holds.
func (a *Activation) Live() int { return a.table.Len() }

// Close drops every handle; it is idempotent.
func (a *Activation) Close() {
	if a.closed {
		return
	}
	a.closed = true
	if a.inst != nil {
		// Only the standard streams outlive the activation.
		a.inst.table.Retain(func(_ uint32, rep any) bool {
			switch r := rep.(type) {
			case *outputStream:
				return r.body == nil
			case *inputStream:
				return r.stdin
			}
			return false
		})
	}
	a.table = canon.NewTable(0)
	a.mod, a.ctx, a.environ, a.opts = nil, nil, nil, [component.MaxReallocs + 1][3]*canon.Options{}
	a.reallocs = [component.MaxReallocs]api.Function{}
}

// options are the canonical options of a host call: the caller's memory,
// its realloc k (-1: none) and the string encoding.
func (a *Activation) options(ctx context.Context, mod api.Module, k int, enc canon.Encoding) *canon.Options {
	slot := &a.opts[min(uint(k), component.MaxReallocs)][enc%3]
	if o := *slot; o != nil && a.mod == mod {
		// One activation calls into one module on one context: made once.
		return o
	}
	o := &canon.Options{Memory: mod.Memory(), Encoding: enc, Budget: &a.budget}
	if a.mod == mod {
		defer func() { *slot = o }()
	}
	if k >= 0 {
		o.Realloc = func(oldPtr, oldSize, align, newSize uint32) (uint32, error) {
			// One activation calls into one (merged) module: the export
			// found first stays valid until Close.
			fn := a.reallocs[k]
			if fn == nil {
				fn = mod.ExportedFunction(component.ReallocExport(k))
				if fn == nil {
					return 0, errors.AssertionFailedf("wasihttp: %s not exported", component.ReallocExport(k))
				}
				a.reallocs[k] = fn
			}
			res, err := fn.Call(ctx, uint64(oldPtr), uint64(oldSize), uint64(align), uint64(newSize))
			if err != nil {
				return 0, err
			}
			return uint32(res[0]), nil
		}
	}
	return o
}

// trap panics with a canonical ABI trap: the guest broke a rule.
func trap(format string, args ...any) {
	panic(errors.Wrapf(canon.ErrTrap, "wasihttp: "+format, args...))
}

// check panics with err, a trap from the handle table or lifting.
func check(err error) {
	if err != nil {
		panic(err)
	}
}

// get is handle h's rep, which must be a live resource of type res.
func get[T any](a *Activation, h any, res uint32) T {
	rep, err := a.table.Get(h.(uint32), res)
	check(err)
	return rep.(T)
}

// take removes own handle h of type res and returns its rep.
func take[T any](a *Activation, h any, res uint32) T {
	rep, err := a.table.Remove(h.(uint32), res)
	check(err)
	return rep.(T)
}

// add makes a handle of rep.
func (a *Activation) add(res uint32, rep any) uint32 {
	h, err := a.table.Add(res, rep)
	check(err)
	return h
}

// Answer is the activation's answer for the caller once the handler
// returned: its status, the headers a guest may send (httpabi's rule) and
// its body. Without a valid response it returns the error and, as
// malformed, what is wrong in words for the problem body: no response set,
// an error-code set, an incomplete response, a status outside 200-599.
func (a *Activation) Answer() (resp *httpabi.Response, malformed string, err error) {
	r, err := a.Response()
	switch {
	case errors.Is(err, ErrNoResponse):
		return nil, "the handler returned without setting a response", err
	case errors.Is(err, ErrGuestError):
		return nil, "the handler answered with an error: " + err.Error(), err
	case err != nil:
		return nil, "the handler's response is incomplete", err
	case r.Status < 200 || r.Status > 599:
		return nil, "the status " + strconv.Itoa(r.Status) + " is not a final status from 200 to 599",
			errors.Newf("wasihttp: status %d", r.Status)
	}
	resp = &httpabi.Response{Status: r.Status, Body: r.Body, Raw: true, Streamed: r.Streamed}
	for _, kv := range r.Header {
		if httpabi.GuestHeaderAllowed(kv[0]) && httpabi.GuestHeaderValueValid(kv[1]) {
			resp.Header = append(resp.Header, kv)
		}
	}
	return resp, "", nil
}

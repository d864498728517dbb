// The seam of the HTTP guest ABIs: how WAGI and wasi-http enter a guest and
// read its answer, behind one interface; wasi-http's host environment.

package runner

import (
	"context"
	"net/netip"
	"time"

	"github.com/cockroachdb/errors"
	"github.com/tetratelabs/wazero/api"

	"github.com/latent-node/latent-node/admission"
	"github.com/latent-node/latent-node/runner/internal/outbound"
	"github.com/latent-node/latent-node/runner/wagi"
	"github.com/latent-node/latent-node/runner/wasihttp"
	"github.com/latent-node/latent-node/vocab"
)

// httpGuest is an HTTP guest ABI's share of one activation: how the guest
// is entered once its module is instantiated, and how its answer is read
// once it stopped. A stdio revision has none.
type httpGuest interface {
	// enter runs the guest on mod: the module's start function when first,
	// then the ABI's entry (for WAGI the route's function, after init).
	enter(ctx context.Context, a *activation, mod api.Module, first bool, init, entry string) error
	// call runs the guest on a warm instance w whose module is bound to a
	// (snapshot: restored; reuse: initialised by an earlier activation):
	// the ABI's entry only.
	call(ctx context.Context, w *warmInstance, entry string) error
	// answer reads a successful activation's answer into out.Response, or
	// makes out a MalformedResponse saying why there is none.
	answer(out *Outcome)
	// release drops what the ABI held for the activation; idempotent.
	release()
}

// httpGuestFor is the HTTP guest of an activation with obligations ob and
// input in, bound to b (nil for a stdio revision); inst is the kept state
// of the reused instance it runs on, or nil.
func (r *Runner) httpGuestFor(ob admission.Obligations, in Input, b *binding, inst *wasihttp.Instance) httpGuest {
	switch ob.ABI {
	case vocab.ABIWAGI:
		return wagiGuest{}
	case vocab.ABIWASIHTTP:
		req := in.HTTP
		if req == nil {
			req = &wasihttp.Request{Method: "POST", PathWithQuery: "/", Scheme: "http", Authority: "localhost", Body: in.Body}
		}
		lim := wasihttp.Limits{MaxBodyBytes: r.cfg.MaxOutputBytes, MaxStreamBytes: r.cfg.MaxStreamedBytes}
		if hosts := ob.Outbound; len(hosts) > 0 {
			// Within the activation's deadline and its caller's lifetime;
			// the answer's body is bounded like the guest's own output.
			// (The closure takes the list, not ob: capturing ob would move
			// it to the heap on every activation, stdio ones too.)
			lim.Outbound = func(req *outbound.Request) (*outbound.Response, error) {
				ctx, cancel := context.WithDeadline(b.a.ctx, b.a.deadline)
				defer cancel()
				return r.outbound.Do(ctx, hosts, req, r.cfg.MaxOutputBytes)
			}
		}
		if inst != nil {
			return &wasiHTTPGuest{st: wasihttp.NewActivationOn(inst, *req, (*httpEnv)(b), lim)}
		}
		return &wasiHTTPGuest{st: wasihttp.NewActivation(*req, (*httpEnv)(b), lim)}
	}
	return nil
}

// SetOwnAddrs names the node's listening addresses, which no guest's
// outgoing request reaches (an unspecified address: any of this host's at
// that port).
func (r *Runner) SetOwnAddrs(addrs ...netip.AddrPort) { r.outbound.SetOwn(addrs) }

// wagiGuest is the WAGI ABI: the request is in the CGI environment (set
// when the activation is made), the entry is the route's function, and the
// answer a CGI header block at the start of stdout.
type wagiGuest struct{}

func (wagiGuest) enter(ctx context.Context, a *activation, mod api.Module, first bool, init, entry string) error {
	return a.start(ctx, mod, first, init, entry)
}

func (wagiGuest) call(ctx context.Context, w *warmInstance, entry string) error {
	return w.call(ctx, entry)
}

func (wagiGuest) answer(out *Outcome) {
	resp, err := wagi.ParseResponse(out.Stdout)
	if err != nil {
		out.Kind, out.Err = MalformedResponse, err
		out.Malformed = wagi.MalformedDetail(err)
		return
	}
	out.Response = &resp
}

func (wagiGuest) release() {}

// wasiHTTPGuest is the wasi-http ABI: the request is an incoming-request
// resource the guest's incoming-handler receives with a response-outparam;
// the answer is the response it sets.
type wasiHTTPGuest struct {
	st *wasihttp.Activation
}

func (g *wasiHTTPGuest) enter(ctx context.Context, a *activation, mod api.Module, first bool, _, _ string) error {
	ctx = wasihttp.WithActivation(ctx, g.st)
	if err := a.start(ctx, mod, first, "", ""); err != nil {
		return err
	}
	fn := mod.ExportedFunction(wasihttp.HandlerExport)
	if fn == nil {
		return errors.AssertionFailedf("runner: %s not exported", wasihttp.HandlerExport)
	}
	return g.st.Handle(ctx, mod, fn, mod.ExportedFunction(wasihttp.HandlerPostReturn))
}

func (g *wasiHTTPGuest) call(ctx context.Context, w *warmInstance, _ string) error {
	fn, err := w.fn(wasihttp.HandlerExport)
	if err != nil {
		return err
	}
	post, ok := w.fns[wasihttp.HandlerPostReturn] // kept nil when the component has none
	if !ok {
		post = w.mod.ExportedFunction(wasihttp.HandlerPostReturn)
		w.fns[wasihttp.HandlerPostReturn] = post
	}
	return g.st.Handle(wasihttp.WithActivation(ctx, g.st), w.mod, fn, post)
}

func (g *wasiHTTPGuest) answer(out *Outcome) {
	resp, malformed, err := g.st.Answer()
	if err != nil {
		out.Kind, out.Err, out.Malformed = MalformedResponse, err, malformed
		return
	}
	out.Response = resp
}

func (g *wasiHTTPGuest) release() { g.st.Close() }

// httpEnv is a wasi-http activation's host environment (wasihttp.Env): the
// bound activation's fuel, stderr tail, random stream and clocks.
type httpEnv binding

var _ wasihttp.Env = (*httpEnv)(nil)

func (e *httpEnv) Charge(n uint64) { e.a.chargeHostCall(n) }

// Log is a component's stdout and stderr: both go to the stderr tail.
func (e *httpEnv) Log(p []byte) { _, _ = e.a.stderr.Write(p) }

func (e *httpEnv) Random(p []byte) { _, _ = (*bindingRand)(e).Read(p) }

func (e *httpEnv) Monotonic() uint64 { return uint64((*binding)(e).nanotime()) }

func (e *httpEnv) Wall() time.Time {
	e.a.chargeHostCall(hostCallFuel)
	return time.Now()
}

// SleepUntil sleeps until the monotonic clock reads ns, the deadline, or
// the caller's cancellation, whichever comes first; a stop panics with its
// typed error, as the fuel slow path does.
func (e *httpEnv) SleepUntil(ns uint64) {
	if now := e.Monotonic(); ns > now {
		e.a.nanosleep(int64(min(ns-now, 1<<62)))
	}
	if err := e.a.stopAt(time.Now()); err != nil {
		panic(err)
	}
}

func (e *httpEnv) Deadline() time.Time { return e.a.deadline }

// Environ is the two LATENT_ variables every guest gets.
func (e *httpEnv) Environ() [][2]string { return e.a.environ.Pairs() }

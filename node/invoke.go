package node

// The activation manager: an invocation resolved, admitted, queued and run,
// and the answer of its refusal or outcome.

import (
	"context"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/latent-node/latent-node/admission"
	"github.com/latent-node/latent-node/catalog"
	"github.com/latent-node/latent-node/node/activation"
	"github.com/latent-node/latent-node/node/api"
	"github.com/latent-node/latent-node/node/auth"
	"github.com/latent-node/latent-node/node/config"
	"github.com/latent-node/latent-node/node/front"
	"github.com/latent-node/latent-node/node/tracing"
	"github.com/latent-node/latent-node/refusal"
	"github.com/latent-node/latent-node/runner"
	"github.com/latent-node/latent-node/runner/wagi"
	"github.com/latent-node/latent-node/runner/wasihttp"
	"github.com/latent-node/latent-node/scheduler"
	"github.com/latent-node/latent-node/vocab"
)

// invocation is the input a queued job carries to the executor.
type invocation struct {
	body    []byte
	environ []string          // a WAGI revision's CGI environment
	http    *wasihttp.Request // a wasi-http revision's request
}

// heldBytes is what the invocation holds besides its body until the guest
// ran: a WAGI revision's CGI environment, a wasi-http revision's request
// line and headers.
func (in *invocation) heldBytes() uint64 {
	n := environBytes(in.environ)
	if in.http != nil {
		n += uint64(len(in.http.Method)+len(in.http.PathWithQuery)+len(in.http.Scheme)+len(in.http.Authority)) + 64
		for _, kv := range in.http.Header {
			n += uint64(len(kv[0])+len(kv[1])) + 32
		}
	}
	return n
}

// answer is what the activation manager tells the HTTP layer.
type answer struct {
	status     int
	problem    *api.Problem // nil: success, body is the output
	retryAfter time.Duration
	body       []byte
	// stderrTail is an executed activation's Latent-Stderr-Tail value
	// (empty: none); its other headers come from the record.
	stderrTail string
	refused    bool // a refusal before execution (paced per principal)
	// cgi is a WAGI guest's answer (status and body are its own).
	cgi *wagi.Response
	// sink, when set, sent the answer's status, headers and body as a
	// wasi-http guest wrote them: only the trailers remain.
	sink *front.ResponseSink
}

func problemAnswer(p api.Problem, retryAfter time.Duration) answer {
	return answer{status: p.Status, problem: &p, retryAfter: retryAfter, refused: true}
}

// activations is the activation manager: it serves invocations (handle),
// resolving, admitting, queueing and answering each (invoke). The node
// makes one in New; Handler routes invocations to it.
type activations struct {
	cfg     *config.Config
	log     *slog.Logger
	clock   vocab.Clock
	cat     *catalog.Catalog
	run     *runner.Runner
	prov    *admission.LocalQuotaProvider
	sched   *scheduler.Scheduler[*invocation, runner.Outcome]
	metrics *metrics
	tracer  *tracing.Tracer // nil when [tracing] is off
	// holdRefusal holds a refused principal's answer (the node's pacer).
	holdRefusal func(context.Context, *auth.Principal)
}

// refuseEarly answers prob to p's invocation r refused while its headers
// or body were checked, and ends its span with the refusal. The answer is
// held by the refusal pacer like every refusal of p's invocations.
func (m *activations) refuseEarly(w http.ResponseWriter, r *http.Request, p *auth.Principal, span *tracing.Span,
	rec *activation.Record, prob api.Problem) {
	rec.Answer(prob.Refusal)
	span.Inject(w.Header())
	span.End(prob.Status, rec)
	m.holdRefusal(r.Context(), p)
	api.WriteProblem(w, prob, 0)
}

// handle serves an invocation: it checks the target, the headers and the
// body, runs invoke, and writes the answer with the activation's headers.
func (m *activations) handle(w http.ResponseWriter, r *http.Request, p *auth.Principal) {
	arrived := m.clock.Now() // the headers are read; invoke reads the body
	// The front parsed the target from the path (front.RouteInvocations) and
	// chose the id (the caller's, or a fresh one when there is none or it
	// is invalid) and put it on the answer.
	rec := activation.Of(w)
	target := rec.Target
	h, err := api.ParseInvokeHeaders(r.Header, m.clock.Now())
	h.ActivationID = rec.ID
	// The span starts once the target's names are valid and name the
	// principal's tenant (invoke refuses another tenant's), before the
	// headers and the body are checked, so their refusals are traced too.
	invalid := target.Validate()
	ctx, span := r.Context(), (*tracing.Span)(nil)
	if invalid == nil && target.Tenant == p.Tenant {
		ctx, span = m.tracer.Start(r, target, h.ActivationID, arrived)
	}
	if err != nil {
		header, _ := api.InvalidHeader(err)
		m.refuseEarly(w, r, p, span, rec, badRequest(refusal.ReasonInvalidHeader, header, err.Error()))
		return
	}
	if invalid != nil {
		m.refuseEarly(w, r, p, span, rec, badRequest(refusal.ReasonInvalidIdentifier, refusal.DimTarget, ""))
		return
	}
	a := m.invoke(ctx, w, r, rec, p, target, h, arrived)
	if a.problem == nil && a.sink == nil {
		a = holdAnswer(rec, a)
	}
	if a.problem != nil {
		rec.Answer(a.problem.Refusal)
	}
	// The span ends with the answer as the record has it, before the
	// refusal pacer's hold and before the answer's bytes go out.
	span.Inject(w.Header())
	span.End(a.status, rec)
	if a.sink != nil {
		m.finishStream(w, rec, a)
		return
	}
	if rec.Executed {
		rec.WriteHeaders(w.Header(), a.stderrTail)
	}
	if a.refused {
		m.holdRefusal(r.Context(), p)
	}
	if a.problem != nil {
		api.WriteProblem(w, *a.problem, a.retryAfter)
		return
	}
	if a.cgi != nil {
		writeCGIAnswer(w, a)
		return
	}
	hd := w.Header()
	rec.SetHeader(hd, "Content-Type", "application/octet-stream")
	rec.SetHeader(hd, "Content-Length", strconv.Itoa(len(a.body)))
	w.WriteHeader(a.status)
	_, _ = w.Write(a.body)
}

// invoke is the activation manager: resolve against a pin, admit with the
// same pin, enqueue, wait for the one result, answer. ctx is the request's:
// when the caller goes away, the scheduler cancels the queued job (its permit
// is released) or the running guest (its permit is kept until the guest
// stopped and the cell was released).
//
// rec is the request's record: invoke fills in what the activation
// resolved to and, once a guest ran, what it did. r is the HTTP request
// (its method, path suffix and, for a WAGI revision, CGI environment);
// w its answer's writer, which a wasi-http guest's streamed response
// writes to while it runs.
func (m *activations) invoke(ctx context.Context, w http.ResponseWriter, r *http.Request, rec *activation.Record, p *auth.Principal,
	target vocab.Target, h api.InvokeHeaders, arrived time.Time) answer {
	id := h.ActivationID // handle filled it in
	routingKey := h.RoutingKey
	if routingKey == "" {
		routingKey = id // spread key-less callers over the weighted targets
	}
	if target.Tenant != p.Tenant {
		// Refuse before resolving, so other tenants' routes are not probed.
		return m.refuse(target.Tenant, principalNotAuthorized)
	}
	pin := m.cat.Pin()
	rev, err := pin.Resolve(target, routingKey)
	if err != nil {
		return m.refuse(target.Tenant, resolveRefusal(err))
	}
	rec.Revision = rev.Revision
	// The body is read once the target resolved (a request refused
	// before is not read), and before admission, unless the guest
	// streams it (streamsBody).
	var body []byte
	var src *front.BodySource
	tenantScope, payload := false, uint64(0)
	if streamsBody(r, rev.ABI) {
		limit, ts := m.prov.TenantMaxPayloadBytes(target.Tenant)
		if r.ContentLength > int64(min(limit, 1<<62)) {
			a := streamedProblem(&http.MaxBytesError{Limit: int64(limit)}, ts)
			a.refused = true
			return a
		}
		src, tenantScope, payload = front.NewBodySource(w, r, limit), ts, uint64(max(r.ContentLength, 0))
	} else if r != nil {
		var prob *api.Problem
		if body, prob = readBounded(w, r, int64(m.prov.MaxPayloadBytes()), refusal.DimPayloadBytes); prob != nil {
			return answer{status: prob.Status, problem: prob, refused: true}
		}
		payload = uint64(len(body))
	}
	// Admission looks the revision's policy up in the same pin; the input
	// needs only its ABI, which the resolution carries.
	input, refused := invocationInput(r, target, rec.PathRest, rev.ABI, body)
	if refused != nil {
		return *refused
	}
	var sink *front.ResponseSink
	if input.http != nil && w != nil {
		// A wasi-http guest's response larger than the node holds is sent
		// as the guest writes it.
		sink = front.NewResponseSink(w, m.tracer.SpanOf(ctx).Inject)
		input.http.Sink = sink
		if src != nil {
			input.http.Stream, sink.Body = src, src
		}
	}
	// A WAGI revision's environment, a wasi-http revision's request, is held
	// until the guest ran: its bytes count against the ingress pool like the
	// body's.
	if n := input.heldBytes(); n > 0 && rec.Ingress != nil {
		if ref, ok := rec.Ingress.Grow(n); !ok {
			return problemAnswer(api.Refusal(ref), writeRetryAfter)
		}
	}
	req := &admission.Request{ActivationID: id, Principal: p.AdmissionPrincipal(), Revision: rev, Budget: h.Budget,
		Deadline: h.Deadline, PayloadBytes: payload, Priority: h.Priority, Attributes: h.Metadata}
	ctrl := m.prov.WithPolicySource(pin)
	span := m.tracer.SpanOf(ctx) // nil when tracing is off
	span.Admitting()
	permit, err := ctrl.Admit(req)
	if err != nil {
		// Pending-slot fair share: a principal under its share of a full
		// queue class takes the newest slot of the largest over-share holder.
		if rej := (*admission.Rejection)(nil); errors.As(err, &rej) && rej.Reason == refusal.ReasonCapacityExhausted &&
			rej.Scope == refusal.ScopeQueueClass && m.sched.YieldSlotTo(queueIndex(m.cfg, h.Priority), p.Tenant, p.Subject) {
			permit, err = ctrl.Admit(req)
		}
	}
	span.Admitted(rev.Revision, err)
	if err != nil {
		// (rej is declared where it is needed: errors.As moves it to the
		// heap, which the answered path need not pay for.)
		var rej *admission.Rejection
		if errors.As(err, &rej) {
			return m.refuse(target.Tenant, rej)
		}
		return internalAnswer(m.log, err)
	}
	// The compiled module stays with this activation until it answered,
	// even if a deploy or delete releases it meanwhile.
	module, ok := m.run.Acquire(permit.Obligations().Artifact)
	if !ok {
		_ = permit.Release()
		return m.refuse(target.Tenant, revisionNotAvailable)
	}
	defer module.Release()
	cellClass := permit.Obligations().CellClass
	// The guest runs on this goroutine once the fair queue dispatches it.
	job, res, err := m.sched.Do(ctx, permit, input, arrived)
	span.Scheduled(res)
	if err != nil { // Do released the permit
		return m.schedulerRefusal(target.Tenant, err, cellClass)
	}
	// A guest paused for a newcomer (scheduler Pause) waited meanwhile:
	// that is queue time, not execution.
	t := activation.Timing{Front: res.EnqueuedAt.Sub(arrived), Queue: res.QueueWait + res.Paused, Exec: res.Execution,
		Back: m.clock.Now().Sub(res.DoneAt)}
	if res.Err != nil {
		var rej *admission.Rejection
		if errors.As(res.Err, &rej) {
			return m.refuse(target.Tenant, rej)
		}
		return m.schedulerRefusal(target.Tenant, res.Err, cellClass)
	}
	out := res.Completion.Outcome
	// The record is what the answer's headers, the metrics and the access
	// log line say.
	rec.Executed, rec.Outcome, rec.FuelUsed, rec.MemoryPeakBytes = true, out.Kind, out.FuelUsed, out.MemoryPeakBytes
	rec.CellClass, rec.QueueClass = res.Cell, job.Obligations().QueueClass
	rec.Timing, rec.Execution, rec.Stderr = t, out.ExecutionTime, out.StderrTail
	m.metrics.observe(rec)
	m.recordCalls(rec, span, out.Calls)
	a := outcomeAnswer(out)
	if out.Kind == runner.Cancelled && ctx.Err() == nil {
		// The caller is still here: the node cancelled the guest because
		// shutdown_grace ran out. Answer definitely (not 499), like a queued
		// activation dropped at shutdown.
		p := api.Refusal(scheduler.ErrShuttingDown.Refusal())
		p.Outcome = out.Kind.String()
		a = problemAnswer(p, m.drainEstimate())
	}
	if h.WantStderr && out.Kind == runner.Success && len(out.StderrTail) > 0 {
		a.stderrTail = activation.StderrHeader(out.StderrTail)
	}
	sink.CloseIfUnread()
	switch {
	case sink != nil && sink.Started():
		a.sink = sink // the answer went out as the guest wrote it
		if src != nil && src.Err() != nil {
			// The body failed under an answer already started: it must not
			// look whole (finishStream cuts it off).
			a.problem = streamedProblem(src.Err(), tenantScope).problem
		}
	case src != nil && src.Err() != nil:
		// The caller's body failed under the guest (over the limit,
		// truncated, too slow): answered as a body the node read itself.
		a = streamedProblem(src.Err(), tenantScope)
	}
	return a
}

// finishStream ends the answer a whose status, headers and body went out
// as the guest wrote them: the activation headers follow as trailers; an
// activation that failed once its answer had started has its answer cut
// off, so the caller cannot take a truncated body for a whole one.
func (m *activations) finishStream(w http.ResponseWriter, rec *activation.Record, a answer) {
	a.sink.Finish(m.cfg.Node.WriteTimeout)
	if a.problem != nil || rec.Outcome != runner.Success {
		panic(http.ErrAbortHandler)
	}
	rec.WriteHeaders(w.Header(), a.stderrTail)
}

var principalNotAuthorized = &admission.Rejection{Code: refusal.CodePermissionDenied, Reason: refusal.ReasonPrincipalNotAuthorized,
	Scope: refusal.ScopePrincipal}

var revisionNotAvailable = &admission.Rejection{Code: refusal.CodeAdmissionRejected, Reason: refusal.ReasonRevisionNotAvailable,
	Scope: refusal.ScopeRevision}

// The refusals of a target the pin does not resolve: the caller's own
// tenant has no such service, or the service no such route.
var (
	serviceNotFound = &admission.Rejection{Code: refusal.CodeAdmissionRejected, Reason: refusal.ReasonServiceNotFound,
		Scope: refusal.ScopeRevision, Dimension: refusal.DimService}
	routeNotFound = &admission.Rejection{Code: refusal.CodeAdmissionRejected, Reason: refusal.ReasonRouteNotFound,
		Scope: refusal.ScopeRevision, Dimension: refusal.DimRoute}
)

// resolveRefusal is the refusal of a Resolve error.
func resolveRefusal(err error) *admission.Rejection {
	switch {
	case errors.Is(err, catalog.ErrServiceNotFound):
		return serviceNotFound
	case errors.Is(err, catalog.ErrRouteNotFound):
		return routeNotFound
	}
	return revisionNotAvailable
}

func queueIndex(cfg *config.Config, prio uint32) int {
	for i, q := range cfg.QueueClasses {
		if q.MinPriority <= prio && prio <= q.MaxPriority {
			return i
		}
	}
	return -1
}

// refuse answers an admission refusal; Retry-After comes from the queue's
// drain estimate.
// The access log counts the refusal once it is answered.
func (m *activations) refuse(tenant vocab.TenantID, rej *admission.Rejection) answer {
	return problemAnswer(api.Refusal(rej.Refusal()), m.drainEstimate())
}

func (m *activations) schedulerRefusal(tenant vocab.TenantID, err error, cell vocab.CellClass) answer {
	var se *scheduler.Error
	if !errors.As(err, &se) {
		return internalAnswer(m.log, err)
	}
	// A cancelled caller is answered 499: it is gone; nobody reads this.
	p := api.Refusal(se.Refusal())
	return problemAnswer(p, max(m.sched.ObservedQueueDelay(cell), m.drainEstimate()))
}

// drainEstimate is how long the busiest cell class needs to drain its queue,
// as the scheduler observes it (at least one second once rounded).
func (m *activations) drainEstimate() time.Duration {
	var d time.Duration
	for c := range m.cfg.CellClasses {
		d = max(d, m.sched.ObservedQueueDelay(c))
	}
	return d
}

// internalAnswer logs the node's own failure err and answers it without
// naming its cause.
func internalAnswer(log *slog.Logger, err error) answer {
	log.Error("internal error", "err", err)
	return problemAnswer(internalProblem(), 0)
}

// holdAnswer charges the answer a's body to the request's ingress
// reservation before it is held: it stays in memory until the caller has
// read it, however slowly, after the guest's permit and cell were given
// back. An answer that does not fit is refused (capacity-exhausted of the
// pool's bytes; the activation headers still say what the guest did).
func holdAnswer(rec *activation.Record, a answer) answer {
	if rec.Ingress == nil || cap(a.body) == 0 {
		return a
	}
	if ref, ok := rec.Ingress.Grow(uint64(cap(a.body))); !ok {
		refused := problemAnswer(api.Refusal(ref), writeRetryAfter)
		refused.refused = false // the guest ran: not a cheap refusal to pace
		return refused
	}
	return a
}

// environBytes is what a CGI environment holds: its strings and their
// headers.
func environBytes(env []string) uint64 {
	n := uint64(0)
	for _, e := range env {
		n += uint64(len(e)) + 16
	}
	return n
}

// outcomeAnswer maps an executed activation to its HTTP answer (docs/api.md, "Outcomes of executed activations").
func outcomeAnswer(out runner.Outcome) answer {
	if out.Kind == runner.Success && out.Response != nil {
		return answer{status: out.Response.Status, body: out.Response.Body, cgi: out.Response}
	}
	if out.Kind == runner.Success {
		return answer{status: http.StatusOK, body: out.Stdout}
	}
	// The activation ran and failed: code execution-failed, the outcome as
	// the reason, scope activation (its status from the refusal's mapping).
	p := api.Refusal(out.Kind.Refusal())
	p.Outcome = out.Kind.String()
	switch out.Kind {
	case runner.DeclaredError:
		code := int(out.ExitCode)
		p.ExitCode = &code
		p.Stderr = string(out.StderrTail)
	case runner.Trap, runner.FuelExhausted, runner.MemoryExhausted, runner.OutputExceeded:
		p.TrapKind = out.TrapKind
		p.Detail = out.TrapDetail()
		p.Stderr = string(out.StderrTail)
	case runner.MalformedResponse:
		p.Detail = out.Malformed
		p.Stderr = string(out.StderrTail)
	case runner.DeadlineExceeded, runner.Cancelled:
	default:
		p = internalProblem()
		p.Outcome = runner.PlatformFailure.String()
	}
	return answer{status: p.Status, problem: &p}
}

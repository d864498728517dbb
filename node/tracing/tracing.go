// The activation span of an invocation and its children, the node's
// sampler, and their export over OTLP/HTTP.

package tracing

import (
	"context"
	"hash/maphash"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/latent-node/latent-node/node/activation"

	"github.com/cockroachdb/errors"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/latent-node/latent-node/admission"
	"github.com/latent-node/latent-node/node/config"
	"github.com/latent-node/latent-node/refusal"
	"github.com/latent-node/latent-node/runner"
	"github.com/latent-node/latent-node/scheduler"
	"github.com/latent-node/latent-node/vocab"
)

// Tracing: one span per invocation, "activation" (kind server, a child of
// the caller's traceparent), with three children: "admission" (around the
// admission decision), "queue" (submit to dispatch) and "execution" (cell
// lease to release). The queue and execution spans are recorded after the
// fact from the scheduler's result, with its timestamps. Every timestamp
// comes from the node's clock.
//
// The node's activation manager starts the span once the request is
// authenticated, its target names are valid and its tenant is the
// principal's, before the headers and the body are checked, so their refusals (invalid-header,
// payload-too-large) end it with an error status too; a refusal before
// that has no span. The span's name is fixed and its attributes are
// validated names, node-made values or bounded (spanLimits), so every
// string is valid UTF-8 (the OTLP exporter's protobuf encoding refuses a
// whole batch, every tenant's spans, for one invalid string) and a span's
// size is bounded.
//
// Sampling is the node's: sample_ratio, keyed by the trace id with a
// per-process seed (keyedRatio), so a caller's sampled flag or chosen trace
// id does not force spans, unless tracing.respect_remote_sampled lets the
// caller's flag decide. The trace id continues either way.
//
// With [tracing] off the node has no tracer: New returns nil, and every
// method of a nil *Tracer or *Span returns at once, so an invocation does
// no tracing work beyond a nil check.

// Span attribute keys.
const (
	attrActivationID  = attribute.Key("latent.activation_id")
	attrTenant        = attribute.Key("latent.tenant")
	attrService       = attribute.Key("latent.service")
	attrRoute         = attribute.Key("latent.route")
	attrRevision      = attribute.Key("latent.revision")
	attrCellClass     = attribute.Key("latent.cell_class")
	attrOutcome       = attribute.Key("latent.outcome")
	attrFuelUsed      = attribute.Key("latent.fuel_used")
	attrRefusalReason = attribute.Key("latent.refusal.reason")
	attrRefusalCode   = attribute.Key("latent.refusal.code")
	attrStatusCode    = attribute.Key("http.response.status_code")
)

// tracerName is the instrumentation scope of the node's spans.
const tracerName = "github.com/latent-node/latent-node/node"

// Tracer exports the node's spans over OTLP/HTTP. Its provider's batch
// processor owns one goroutine, which Close stops after a last flush.
type Tracer struct {
	tp      *sdktrace.TracerProvider
	tracer  trace.Tracer
	prop    propagation.TextMapPropagator
	clock   vocab.Clock
	timeout time.Duration
}

// New returns the tracer of cfg, its timestamps from clock, or nil when
// tracing is off.
func New(ctx context.Context, cfg config.Tracing, clock vocab.Clock) (*Tracer, error) {
	if !cfg.Enabled {
		return nil, nil
	}
	exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(cfg.Endpoint), otlptracehttp.WithTimeout(cfg.Timeout))
	if err != nil {
		return nil, errors.Wrap(err, "node: tracing exporter")
	}
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp, sdktrace.WithBatchTimeout(cfg.BatchTimeout), sdktrace.WithExportTimeout(cfg.Timeout)),
		sdktrace.WithSampler(sampler(cfg)), sdktrace.WithRawSpanLimits(spanLimits),
		sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", cfg.ServiceName))))
	return &Tracer{tp: tp, tracer: tp.Tracer(tracerName), prop: propagation.TraceContext{}, clock: clock, timeout: cfg.Timeout}, nil
}

// spanLimits bound a span's size: the node sets a dozen attributes and no
// events or links; the length limit is a second line behind the validated
// values.
var spanLimits = sdktrace.SpanLimits{
	AttributeValueLengthLimit:   256,
	AttributeCountLimit:         32,
	EventCountLimit:             0,
	LinkCountLimit:              0,
	AttributePerEventCountLimit: 0,
	AttributePerLinkCountLimit:  0,
}

// sampler is the node's: the activation span (a root, or the child of a
// caller's remote span) is sampled by keyedRatio, unless
// respect_remote_sampled lets a remote parent's flag decide; the children
// follow the activation span.
func sampler(cfg config.Tracing) sdktrace.Sampler {
	ratio := keyedRatio(cfg.SampleRatio)
	if cfg.RespectRemoteSampled {
		return sdktrace.ParentBased(ratio)
	}
	return sdktrace.ParentBased(ratio, sdktrace.WithRemoteParentSampled(ratio), sdktrace.WithRemoteParentNotSampled(ratio))
}

// keyedRatio samples the share ratio of trace ids, by a hash of the id with
// a per-process seed: a caller that chooses its trace ids cannot choose
// sampled ones (TraceIDRatioBased reads the id's low bytes as they are).
// Every span of one trace id gets the same decision on one node.
func keyedRatio(ratio float64) sdktrace.Sampler {
	switch {
	case ratio >= 1:
		return sdktrace.AlwaysSample()
	case ratio <= 0:
		return sdktrace.NeverSample()
	}
	return keyedRatioSampler{bound: uint64(ratio * math.MaxUint64), seed: maphash.MakeSeed()}
}

type keyedRatioSampler struct {
	bound uint64
	seed  maphash.Seed
}

func (s keyedRatioSampler) ShouldSample(p sdktrace.SamplingParameters) sdktrace.SamplingResult {
	tid := p.TraceID
	dec := sdktrace.Drop
	if maphash.Bytes(s.seed, tid[:]) < s.bound {
		dec = sdktrace.RecordAndSample
	}
	return sdktrace.SamplingResult{Decision: dec, Tracestate: trace.SpanContextFromContext(p.ParentContext).TraceState()}
}

func (s keyedRatioSampler) Description() string {
	return "KeyedTraceIDRatio{" + strconv.FormatFloat(float64(s.bound)/math.MaxUint64, 'g', 6, 64) + "}"
}

// Flush exports the finished spans (tests).
func (t *Tracer) Flush(ctx context.Context) error {
	if t == nil {
		return nil
	}
	return errors.Wrap(t.tp.ForceFlush(ctx), "node: tracing flush")
}

// Close exports what is left, within tracing.timeout even when ctx is
// already cancelled, and stops the exporter.
func (t *Tracer) Close(ctx context.Context) error {
	if t == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), t.timeout)
	defer cancel()
	return errors.Wrap(t.tp.Shutdown(ctx), "node: tracing shutdown")
}

// Span is the span of one invocation.
type Span struct {
	t       *Tracer
	clock   vocab.Clock
	ctx     context.Context // carries span: the parent of the children
	span    trace.Span
	admitAt time.Time // when admission began
}

type spanKey struct{}

// Start starts the span of the invocation r of target, a child of r's
// traceparent, at arrived. REQUIRES: target's names are valid and its
// tenant is the principal's; id is valid UTF-8 (ParseInvokeHeaders' or the
// node's). The returned context carries the span for the activation
// manager (SpanOf). Off, it returns r's context and a nil span.
//
// A span outlives its request (it waits for export in the batch queue), so
// it keeps copies of what it takes from the request: the target's names,
// cut from the request line, and the caller's trace state, whose members
// the propagator cuts from the tracestate header (ownTraceState).
func (t *Tracer) Start(r *http.Request, target vocab.Target, id string, arrived time.Time) (context.Context, *Span) {
	if t == nil {
		return r.Context(), nil
	}
	parent := ownTraceState(t.prop.Extract(r.Context(), propagation.HeaderCarrier(r.Header)))
	ctx, span := t.tracer.Start(parent, "activation",
		trace.WithSpanKind(trace.SpanKindServer), trace.WithTimestamp(arrived),
		trace.WithAttributes(attrActivationID.String(strings.ToValidUTF8(id, "\uFFFD")),
			attrTenant.String(strings.Clone(string(target.Tenant))), attrService.String(strings.Clone(string(target.Service))),
			attrRoute.String(strings.Clone(string(target.Route)))))
	sp := &Span{t: t, clock: t.clock, ctx: ctx, span: span}
	return context.WithValue(ctx, spanKey{}, sp), sp
}

// ownTraceState gives the remote span context of parent a trace state of
// its own: the propagator's members are slices of the tracestate header,
// and a header of up to the request's header limit with a single member
// would otherwise stay alive with the span. Rendering the state and
// parsing it again keeps only the members.
func ownTraceState(parent context.Context) context.Context {
	sc := trace.SpanContextFromContext(parent)
	if sc.TraceState().Len() == 0 {
		return parent
	}
	ts, err := trace.ParseTraceState(sc.TraceState().String())
	if err != nil { // cannot happen: the state was parsed once
		ts = trace.TraceState{}
	}
	return trace.ContextWithRemoteSpanContext(parent, sc.WithTraceState(ts))
}

// SpanOf returns the invocation's span carried by ctx; nil when tracing is
// off (without looking into ctx).
func (t *Tracer) SpanOf(ctx context.Context) *Span {
	if t == nil {
		return nil
	}
	sp, _ := ctx.Value(spanKey{}).(*Span)
	return sp
}

// child starts a child span at start; the caller ends it.
func (s *Span) child(name string, start time.Time, attrs ...attribute.KeyValue) trace.Span {
	_, c := s.t.tracer.Start(s.ctx, name, trace.WithTimestamp(start), trace.WithAttributes(attrs...))
	return c
}

// Admitting marks the start of admission.
func (s *Span) Admitting() {
	if s != nil {
		s.admitAt = s.clock.Now()
	}
}

// Admitted records the admission span of the revision rev, from Admitting
// until now; err is the admission's error (nil: admitted).
func (s *Span) Admitted(rev vocab.RevisionID, err error) {
	if s == nil {
		return
	}
	end := s.clock.Now()
	s.span.SetAttributes(attrRevision.String(string(rev)))
	c := s.child("admission", s.admitAt)
	var rej *admission.Rejection
	switch {
	case errors.As(err, &rej):
		c.SetAttributes(attrRefusalReason.String(rej.Reason.String()), attrRefusalCode.String(rej.Code.String()))
		c.SetStatus(codes.Error, rej.Reason.String())
	case err != nil:
		c.SetStatus(codes.Error, refusal.ReasonPlatformFailure.String())
	}
	c.End(trace.WithTimestamp(end))
}

// Scheduled records the queue and execution spans of the scheduler's
// result (the execution span only when the job executed) and the
// activation's cell class, outcome and fuel.
func (s *Span) Scheduled(res scheduler.Result[runner.Outcome]) {
	if s == nil || res.EnqueuedAt.IsZero() {
		return
	}
	dispatched := res.EnqueuedAt.Add(res.QueueWait)
	q := s.child("queue", res.EnqueuedAt)
	if res.Err != nil {
		q.SetStatus(codes.Error, refusalReason(res.Err))
	}
	q.End(trace.WithTimestamp(dispatched))
	if res.Err != nil {
		return
	}
	out := res.Completion.Outcome
	cell := attrCellClass.String(res.Cell.String())
	s.span.SetAttributes(cell, attrOutcome.String(out.Kind.String()), attrFuelUsed.Int64(int64(out.FuelUsed)))
	e := s.child("execution", dispatched, cell, attrOutcome.String(out.Kind.String()))
	if out.Kind != runner.Success {
		e.SetStatus(codes.Error, out.Kind.String())
	}
	e.End(trace.WithTimestamp(dispatched.Add(res.Execution)))
}

// refusalReason is the reason of a scheduler error or admission refusal.
func refusalReason(err error) string {
	var rej *admission.Rejection
	var se *scheduler.Error
	switch {
	case errors.As(err, &rej):
		return rej.Reason.String()
	case errors.As(err, &se):
		return se.Reason().String()
	}
	return refusal.ReasonPlatformFailure.String()
}

// Inject writes the span's traceparent into the answer's headers h, before
// the answer is written.
func (s *Span) Inject(h http.Header) {
	if s == nil {
		return
	}
	s.t.prop.Inject(s.ctx, propagation.HeaderCarrier(h))
}

// End ends the span, at the node's now, with the answer as the request's
// record rec has it: its status, the guest's outcome when one ran, and
// the refusal of a problem answer (for a failed activation, the outcome's:
// code execution-failed). A problem answer ends it with an error status
// naming its reason; a failed outcome without one, naming the outcome.
func (s *Span) End(status int, rec *activation.Record) {
	if s == nil {
		return
	}
	s.span.SetAttributes(attrStatusCode.Int(status))
	failed := rec.Executed && rec.Outcome != refusal.OutcomeSuccess
	if failed {
		s.span.SetAttributes(attrOutcome.String(rec.Outcome.String()))
	}
	switch {
	case rec.Answered:
		s.span.SetAttributes(attrRefusalReason.String(rec.Refusal.Reason.String()), attrRefusalCode.String(rec.Refusal.Code.String()))
		s.span.SetStatus(codes.Error, rec.Refusal.Reason.String())
	case failed:
		s.span.SetStatus(codes.Error, rec.Outcome.String())
	}
	s.span.End(trace.WithTimestamp(s.clock.Now()))
}

// Outbound records one of the guest's outgoing requests as a child span,
// from began for took: its method, URL without the query, the status it
// was answered (0: none) and the error-code the guest saw ("" answered).
func (s *Span) Outbound(method, url string, began time.Time, took time.Duration, status int, errorCode string) {
	if s == nil {
		return
	}
	c := s.child("outbound "+method, began, attribute.String("http.request.method", method), attribute.String("url.full", url),
		attribute.Int("http.response.status_code", status), attribute.String("error.type", errorCode))
	c.End(trace.WithTimestamp(began.Add(took)))
}

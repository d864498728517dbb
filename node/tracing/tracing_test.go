package tracing

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
	"unsafe"

	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/latent-node/latent-node/node/activation"
	"github.com/latent-node/latent-node/refusal"
	"github.com/latent-node/latent-node/runner"
	"github.com/latent-node/latent-node/scheduler"
	"github.com/latent-node/latent-node/vocab"
)

// testTraceID and testParent are a caller's trace and span ids.
const (
	testTraceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	testParent  = "00f067aa0ba902b7"
)

// BenchmarkTracing is the tracing work of an invocation: with tracing off,
// the calls the node makes on a nil tracer; on, the SDK's
// recording of the four spans (without export).
func BenchmarkTracing(b *testing.B) {
	tp := sdktrace.NewTracerProvider()
	b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	b.Run("off", func(b *testing.B) { benchmarkTracing(b, nil) })
	b.Run("on", func(b *testing.B) {
		benchmarkTracing(b, &Tracer{tp: tp, tracer: tp.Tracer(tracerName), prop: propagation.TraceContext{}, clock: vocab.WallClock})
	})
}

func benchmarkTracing(b *testing.B, tr *Tracer) {
	r := httptest.NewRequest("POST", "/v1/invoke/demo/hello/greet", nil)
	r.Header.Set("traceparent", "00-"+testTraceID+"-"+testParent+"-01")
	h := http.Header{}
	target := vocab.Target{Tenant: "demo", Service: "hello", Route: "greet"}
	now := time.Now()
	res := scheduler.Result[runner.Outcome]{EnqueuedAt: now, QueueWait: time.Millisecond, Execution: time.Millisecond}
	rec := &activation.Record{Executed: true, Outcome: refusal.OutcomeSuccess}
	b.ReportAllocs()
	for b.Loop() {
		ctx, span := tr.Start(r, target, "act", now)
		sp := tr.SpanOf(ctx)
		sp.Admitting()
		sp.Admitted("rev", nil)
		sp.Scheduled(res)
		span.Inject(h)
		span.End(200, rec)
	}
}

// TestKeyedRatio: the share of sampled trace ids follows the ratio even
// for ids a caller picks to look sampled to TraceIDRatioBased (low bytes
// zero).
func TestKeyedRatio(t *testing.T) {
	s := keyedRatio(0.25)
	sampled := 0
	for i := range 4000 {
		var tid trace.TraceID
		tid[0], tid[1] = byte(i), byte(i>>8) // the low eight bytes stay zero
		if s.ShouldSample(sdktrace.SamplingParameters{TraceID: tid}).Decision == sdktrace.RecordAndSample {
			sampled++
		}
	}
	if sampled < 800 || sampled > 1200 {
		t.Errorf("%d of 4000 sampled, want about 1000", sampled)
	}
}

// TestStart_ownsWhatItKeeps: the span keeps copies of the target's names
// and of the caller's trace state, not the request line or the
// tracestate header they were cut from (a span waits for export long
// after its request).
func TestStart_ownsWhatItKeeps(t *testing.T) {
	tp := sdktrace.NewTracerProvider()
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	tr := &Tracer{tp: tp, tracer: tp.Tracer(tracerName), prop: propagation.TraceContext{}, clock: vocab.WallClock}
	path := "/v1/invoke/demo/hello/greet/" + strings.Repeat("x", 64<<10)
	target := vocab.Target{Tenant: vocab.TenantID(path[11:15]), Service: vocab.ServiceName(path[16:21]),
		Route: vocab.RouteName(path[22:27])}
	if target != (vocab.Target{Tenant: "demo", Service: "hello", Route: "greet"}) {
		t.Fatalf("cut %+v", target)
	}
	state := strings.Repeat(",", 60<<10) + "vendor=value"
	r := httptest.NewRequest("POST", "/v1/invoke/demo/hello/greet", nil)
	r.Header.Set("traceparent", "00-"+testTraceID+"-"+testParent+"-01")
	r.Header.Set("tracestate", state)
	_, span := tr.Start(r, target, "act", time.Now())
	defer span.End(200, &activation.Record{})
	within := func(s, in string) bool {
		p, start := uintptr(unsafe.Pointer(unsafe.StringData(s))), uintptr(unsafe.Pointer(unsafe.StringData(in)))
		return len(s) > 0 && p >= start && p < start+uintptr(len(in))
	}
	v := span.span.SpanContext().TraceState().Get("vendor")
	if v != "value" {
		t.Fatalf("trace state member %q, want value", v)
	}
	if within(v, r.Header.Get("tracestate")) {
		t.Error("the span's trace state shares the tracestate header")
	}
	ro, ok := span.span.(sdktrace.ReadOnlySpan)
	if !ok {
		t.Fatal("the span does not record")
	}
	for _, a := range ro.Attributes() {
		if within(a.Value.AsString(), path) {
			t.Errorf("attribute %s=%q shares the request's path", a.Key, a.Value.AsString())
		}
	}
}

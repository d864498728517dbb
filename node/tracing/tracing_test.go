package tracing

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

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

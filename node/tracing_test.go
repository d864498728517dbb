package node

import (
	"bytes"
	"context"
	"encoding/hex"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/latent-node/latent-node/internal/testutil"
	"github.com/latent-node/latent-node/internal/testwasm"
	"github.com/latent-node/latent-node/node/config"
	"github.com/latent-node/latent-node/refusal"
	"github.com/latent-node/latent-node/runner/wagi"
)

// otlpReceiver is an in-process OTLP/HTTP traces endpoint: it decodes every
// protobuf export request posted to /v1/traces.
type otlpReceiver struct {
	srv      *httptest.Server
	mu       sync.Mutex
	spans    []*tracepb.Span
	service  string
	requests int
}

func startReceiver(t *testing.T) *otlpReceiver {
	t.Helper()
	rcv := &otlpReceiver{}
	rcv.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" {
			http.Error(w, "unexpected request", http.StatusBadRequest)
			return
		}
		data, err := io.ReadAll(r.Body)
		var req coltracepb.ExportTraceServiceRequest
		if err == nil {
			err = proto.Unmarshal(data, &req)
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		rcv.mu.Lock()
		rcv.requests++
		for _, rs := range req.ResourceSpans {
			for _, kv := range rs.GetResource().GetAttributes() {
				if kv.Key == "service.name" {
					rcv.service = kv.GetValue().GetStringValue()
				}
			}
			for _, ss := range rs.ScopeSpans {
				rcv.spans = append(rcv.spans, ss.Spans...)
			}
		}
		rcv.mu.Unlock()
		resp, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(resp)
	}))
	t.Cleanup(rcv.srv.Close)
	return rcv
}

// taken returns the spans received so far, by name, and their number.
func (r *otlpReceiver) taken() (map[string]*tracepb.Span, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := map[string]*tracepb.Span{}
	for _, s := range r.spans {
		m[s.Name] = s
	}
	return m, len(r.spans)
}

func attrOf(s *tracepb.Span, key string) *commonpb.AnyValue {
	for _, kv := range s.Attributes {
		if kv.Key == key {
			return kv.Value
		}
	}
	return nil
}

func tracingOn(endpoint string) func(*config.Config) {
	return func(c *config.Config) {
		c.Tracing = config.Tracing{Enabled: true, Endpoint: endpoint, SampleRatio: 1, ServiceName: "node-under-test",
			Timeout: 5 * time.Second, BatchTimeout: time.Hour} // exported by the flush only
	}
}

const (
	testTraceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	testParent  = "00f067aa0ba902b7"
)

// TestTracing_activation: an invocation carrying a traceparent produces the
// activation span (a child of the caller's span) with admission, queue and
// execution children, all in the caller's trace, with the activation's
// attributes; the answer carries the activation span's traceparent.
func TestTracing_activation(t *testing.T) {
	rcv := startReceiver(t)
	tn := startNodeWith(t, tracingOn(rcv.srv.URL+"/v1/traces"))
	resp, body := tn.do(t, "POST", "/v1/invoke/demo/hello/greet", tn.key, []byte("ada"), map[string]string{
		"traceparent": "00-" + testTraceID + "-" + testParent + "-01", "tracestate": "vendor=x", "Latent-Activation-Id": "act-1"})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("invoke: %d %s", resp.StatusCode, body)
	}
	if err := tn.n.tracer.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	spans, count := rcv.taken()
	if count != 4 {
		t.Fatalf("received %d spans, want 4: %v", count, spans)
	}
	act := spans["activation"]
	if act == nil {
		t.Fatalf("no activation span among %v", spans)
	}
	if got := hex.EncodeToString(act.ParentSpanId); got != testParent {
		t.Errorf("activation parent %s, want the caller's %s", got, testParent)
	}
	if act.Kind != tracepb.Span_SPAN_KIND_SERVER || act.Status.GetCode() == tracepb.Status_STATUS_CODE_ERROR {
		t.Errorf("activation kind %v status %v", act.Kind, act.Status)
	}
	if act.TraceState != "vendor=x" {
		t.Errorf("activation tracestate %q", act.TraceState)
	}
	for key, want := range map[string]string{"latent.activation_id": "act-1", "latent.outcome": "success",
		"latent.tenant": "demo", "latent.service": "hello", "latent.route": "greet",
		"latent.cell_class": resp.Header.Get("Latent-Cell-Class"), "latent.revision": resp.Header.Get("Latent-Revision")} {
		if got := attrOf(act, key).GetStringValue(); got != want || want == "" {
			t.Errorf("activation %s = %q, want %q", key, got, want)
		}
	}
	if got := strconv.FormatInt(attrOf(act, "latent.fuel_used").GetIntValue(), 10); got != resp.Header.Get("Latent-Fuel-Used") || got == "0" {
		t.Errorf("latent.fuel_used %s, header %s", got, resp.Header.Get("Latent-Fuel-Used"))
	}
	for _, name := range []string{"admission", "queue", "execution"} {
		s := spans[name]
		switch {
		case s == nil:
			t.Errorf("no %s span", name)
		case hex.EncodeToString(s.TraceId) != testTraceID:
			t.Errorf("%s trace %x, want %s", name, s.TraceId, testTraceID)
		case string(s.ParentSpanId) != string(act.SpanId):
			t.Errorf("%s parent %x, want the activation %x", name, s.ParentSpanId, act.SpanId)
		case s.StartTimeUnixNano < act.StartTimeUnixNano || s.EndTimeUnixNano > act.EndTimeUnixNano || s.EndTimeUnixNano < s.StartTimeUnixNano:
			t.Errorf("%s [%d, %d] outside the activation [%d, %d]", name, s.StartTimeUnixNano, s.EndTimeUnixNano,
				act.StartTimeUnixNano, act.EndTimeUnixNano)
		}
	}
	if q, e := spans["queue"], spans["execution"]; q != nil && e != nil && q.EndTimeUnixNano > e.StartTimeUnixNano {
		t.Errorf("queue ends after execution starts")
	}
	if want := "00-" + testTraceID + "-" + hex.EncodeToString(act.SpanId) + "-01"; resp.Header.Get("traceparent") != want {
		t.Errorf("answer traceparent %q, want %q", resp.Header.Get("traceparent"), want)
	}
	rcv.mu.Lock()
	service := rcv.service
	rcv.mu.Unlock()
	if service != "node-under-test" {
		t.Errorf("service.name %q", service)
	}
}

// TestTracing_refusal: a refused invocation's span ends with an error
// status naming the reason (on the admission span too when admission
// refused it); without a traceparent the node starts a trace.
func TestTracing_refusal(t *testing.T) {
	rcv := startReceiver(t)
	tn := startNodeWith(t, tracingOn(rcv.srv.URL+"/v1/traces"))
	for _, tc := range []struct {
		name, route, priority, reason string
		status                        int
		spans                         []string // besides the activation span
	}{
		{"unknown route", "nosuch", "", refusal.ReasonRouteNotFound.String(), http.StatusNotFound, nil},
		{"refused by admission", "greet", "1000000", refusal.ReasonPriorityNotAuthorized.String(), http.StatusForbidden, []string{"admission"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rcv.mu.Lock()
			rcv.spans = nil
			rcv.mu.Unlock()
			headers := map[string]string{}
			if tc.priority != "" {
				headers["Latent-Priority"] = tc.priority
			}
			resp, body := tn.do(t, "POST", "/v1/invoke/demo/hello/"+tc.route, tn.key, []byte("ada"), headers)
			if resp.StatusCode != tc.status {
				t.Fatalf("invoke: %d %s", resp.StatusCode, body)
			}
			if err := tn.n.tracer.Flush(context.Background()); err != nil {
				t.Fatal(err)
			}
			spans, count := rcv.taken()
			act := spans["activation"]
			if count != 1+len(tc.spans) || act == nil {
				t.Fatalf("received %d spans %v, want the activation span and %q", count, spans, tc.spans)
			}
			if act.Status.GetCode() != tracepb.Status_STATUS_CODE_ERROR || act.Status.GetMessage() != tc.reason {
				t.Errorf("status %v, want an error naming %s", act.Status, tc.reason)
			}
			if got := attrOf(act, "latent.refusal.reason").GetStringValue(); got != tc.reason {
				t.Errorf("latent.refusal.reason %q", got)
			}
			if len(act.ParentSpanId) != 0 || len(act.TraceId) != 16 {
				t.Errorf("a new trace: parent %x trace %x", act.ParentSpanId, act.TraceId)
			}
			for _, name := range tc.spans {
				if s := spans[name]; s == nil || s.Status.GetMessage() != tc.reason || string(s.ParentSpanId) != string(act.SpanId) {
					t.Errorf("%s span %v, want a child with status %s", name, s, tc.reason)
				}
			}
		})
	}
}

// TestTracing_failedOutcome: an activation that ran and failed ends its
// span with an error status naming the outcome, with the outcome and its
// refusal (code execution-failed) as attributes, as the answer's problem
// says.
func TestTracing_failedOutcome(t *testing.T) {
	rcv := startReceiver(t)
	tn := startNodeWith(t, tracingOn(rcv.srv.URL+"/v1/traces"))
	tn.deployGuest(t, "trap", "trap_unreachable", "")
	resp, body := tn.do(t, "POST", "/v1/invoke/demo/trap/run", tn.key, nil, nil)
	if resp.StatusCode != http.StatusBadGateway {
		t.Fatalf("invoke: %d %s", resp.StatusCode, body)
	}
	if err := tn.n.tracer.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	spans, _ := rcv.taken()
	act := spans["activation"]
	if act == nil {
		t.Fatalf("no activation span among %v", spans)
	}
	trap := refusal.OutcomeTrap.String()
	if act.Status.GetCode() != tracepb.Status_STATUS_CODE_ERROR || act.Status.GetMessage() != trap {
		t.Errorf("status %v, want an error naming %s", act.Status, trap)
	}
	for key, want := range map[string]string{"latent.outcome": trap, "latent.refusal.reason": trap,
		"latent.refusal.code": refusal.CodeExecutionFailed.String()} {
		if got := attrOf(act, key).GetStringValue(); got != want {
			t.Errorf("%s %q, want %q", key, got, want)
		}
	}
}

// TestTracing_refusedBeforeInvoke: an invocation refused while its headers
// or body are checked (or, for a WAGI revision, its CGI environment is
// built) has a span, with an error status naming the reason and the
// activation id of the answer and of its log line.
func TestTracing_refusedBeforeInvoke(t *testing.T) {
	rcv := startReceiver(t)
	logs := &testutil.SyncBuffer{}
	tn := startNodeLogged(t, tracingOn(rcv.srv.URL+"/v1/traces"), slog.New(slog.NewJSONHandler(logs, nil)))
	big := bytes.Repeat([]byte("x"), int(tn.n.cfg.Node.Limits.MaxPayloadBytes)+1)
	tn.deployGuest(t, "cgi", "cgienv", "wagi")
	for _, tc := range []struct {
		name, path string
		body       []byte
		headers    map[string]string
		status     int
		reason     string
		noSpan     bool // refused before the span starts
	}{
		{"invalid header", "/v1/invoke/demo/hello/greet", []byte("ada"), map[string]string{"Latent-Priority": "high"},
			http.StatusBadRequest, refusal.ReasonInvalidHeader.String(), false},
		{"payload too large", "/v1/invoke/demo/hello/greet", big, nil, http.StatusRequestEntityTooLarge, refusal.ReasonPayloadTooLarge.String(), false},
		// Names the catalog refuses, and another tenant's target: no span
		// (its name and attributes would carry them).
		{"invalid identifier", "/v1/invoke/demo/hello/a%2Fb", []byte("ada"), nil, http.StatusBadRequest, refusal.ReasonInvalidIdentifier.String(), true},
		{"invalid utf-8", "/v1/invoke/demo/%FF/x", []byte("ada"), nil, http.StatusBadRequest, refusal.ReasonInvalidIdentifier.String(), true},
		{"another tenant", "/v1/invoke/other/hello/greet", []byte("ada"), nil, http.StatusForbidden, refusal.ReasonPrincipalNotAuthorized.String(), true},
		// Refused once resolved, before admission: a WAGI revision's CGI
		// environment over its bound (the test server reads headers of up
		// to 1 MiB).
		{"environment too large", "/v1/invoke/demo/cgi/run", []byte("ada"),
			map[string]string{"X-Big": strings.Repeat("b", wagi.MaxEnvironBytes)},
			http.StatusRequestHeaderFieldsTooLarge, refusal.ReasonEnvironmentTooLarge.String(), false},
		// Negative control: a completed invocation's span has no error.
		{"completed", "/v1/invoke/demo/hello/greet", []byte("ada"), nil, http.StatusOK, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rcv.mu.Lock()
			rcv.spans = nil
			rcv.mu.Unlock()
			headers := map[string]string{"traceparent": "00-" + testTraceID + "-" + testParent + "-01"}
			for k, v := range tc.headers {
				headers[k] = v
			}
			resp, body := tn.do(t, "POST", tc.path, tn.key, tc.body, headers)
			if resp.StatusCode != tc.status {
				t.Fatalf("invoke: %d %s", resp.StatusCode, body)
			}
			id := resp.Header.Get("Latent-Activation-Id")
			if id == "" {
				t.Fatal("no Latent-Activation-Id on the answer")
			}
			if err := tn.n.tracer.Flush(context.Background()); err != nil {
				t.Fatal(err)
			}
			rcv.mu.Lock()
			var act *tracepb.Span
			for _, s := range rcv.spans {
				if s.Name == "activation" {
					act = s
				}
			}
			n := len(rcv.spans)
			rcv.mu.Unlock()
			switch {
			case tc.noSpan && (n != 0 || resp.Header.Get("traceparent") != ""):
				t.Errorf("%d spans, answer traceparent %q: want none", n, resp.Header.Get("traceparent"))
			case tc.noSpan:
			case act == nil:
				t.Fatal("no activation span")
			default:
				checkActivationSpan(t, act, id, tc.status, tc.reason)
			}
			lines := logLines(t, logs, "activation", id)
			if len(lines) != 1 {
				t.Fatalf("%d log lines with id %s", len(lines), id)
			}
			if got := lines[0]["status"]; got != float64(tc.status) {
				t.Errorf("log status %v", got)
			}
			if tc.reason != "" && lines[0]["reason"] != tc.reason {
				t.Errorf("log reason %v, want %s", lines[0]["reason"], tc.reason)
			}
		})
	}
}

// checkActivationSpan checks an activation span of the test's trace: its
// id, status code and (for a refusal) error status and reason.
func checkActivationSpan(t *testing.T, act *tracepb.Span, id string, status int, reason string) {
	t.Helper()
	if got := attrOf(act, "latent.activation_id").GetStringValue(); got != id {
		t.Errorf("span activation id %q, answer's %q", got, id)
	}
	if hex.EncodeToString(act.TraceId) != testTraceID {
		t.Errorf("trace %x, want the caller's %s", act.TraceId, testTraceID)
	}
	if got := attrOf(act, "http.response.status_code").GetIntValue(); got != int64(status) {
		t.Errorf("span status code %d", got)
	}
	if reason == "" {
		if act.Status.GetCode() == tracepb.Status_STATUS_CODE_ERROR {
			t.Errorf("completed invocation's span has status %v", act.Status)
		}
		return
	}
	if act.Status.GetCode() != tracepb.Status_STATUS_CODE_ERROR || act.Status.GetMessage() != reason {
		t.Errorf("span status %v, want an error naming %s", act.Status, reason)
	}
	if got := attrOf(act, "latent.refusal.reason").GetStringValue(); got != reason {
		t.Errorf("latent.refusal.reason %q", got)
	}
}

// TestTracing_off: with tracing off (the default) the node has no tracer,
// exports nothing, even at Close, and answers without a traceparent.
func TestTracing_off(t *testing.T) {
	rcv := startReceiver(t)
	t.Cleanup(func() { // runs after the node's Close (cleanups run last-in first-out)
		rcv.mu.Lock()
		defer rcv.mu.Unlock()
		if rcv.requests != 0 {
			t.Errorf("%d export requests with tracing off", rcv.requests)
		}
	})
	tn := startNodeWith(t, func(c *config.Config) {
		tracingOn(rcv.srv.URL + "/v1/traces")(c)
		c.Tracing.Enabled = false
	})
	if tn.n.tracer != nil {
		t.Fatal("a tracer with tracing off")
	}
	resp, _ := tn.do(t, "POST", "/v1/invoke/demo/hello/greet", tn.key, []byte("ada"), map[string]string{
		"traceparent": "00-" + testTraceID + "-" + testParent + "-01"})
	if resp.StatusCode != http.StatusOK || resp.Header.Get("traceparent") != "" {
		t.Errorf("invoke: %d, traceparent %q", resp.StatusCode, resp.Header.Get("traceparent"))
	}
}

// TestTracing_closeFlushes: spans still batched are exported by Close.
func TestTracing_closeFlushes(t *testing.T) {
	rcv := startReceiver(t)
	t.Cleanup(func() { // runs after the node's Close
		if _, count := rcv.taken(); count != 4 {
			t.Errorf("after Close: %d spans, want 4", count)
		}
	})
	tn := startNodeWith(t, tracingOn(rcv.srv.URL+"/v1/traces"))
	resp, _ := tn.do(t, "POST", "/v1/invoke/demo/hello/greet", tn.key, []byte("ada"), nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("invoke: %d", resp.StatusCode)
	}
	if _, count := rcv.taken(); count != 0 {
		t.Fatalf("%d spans before the flush (batch timeout is an hour)", count)
	}
}

// TestTracing_remoteSampled: with sample_ratio 0 a caller's sampled
// traceparent does not force a span, though the answer's traceparent
// continues its trace; with respect_remote_sampled it does (the caller
// decides), and an unsampled caller then gets none.
func TestTracing_remoteSampled(t *testing.T) {
	for _, tc := range []struct {
		name    string
		respect bool
		flags   string
		spans   int
	}{
		{"ignored", false, "01", 0},
		{"respected", true, "01", 4},
		{"respected unsampled", true, "00", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rcv := startReceiver(t)
			tn := startNodeWith(t, func(c *config.Config) {
				tracingOn(rcv.srv.URL + "/v1/traces")(c)
				c.Tracing.SampleRatio, c.Tracing.RespectRemoteSampled = 0, tc.respect
			})
			resp, body := tn.do(t, "POST", "/v1/invoke/demo/hello/greet", tn.key, []byte("ada"), map[string]string{
				"traceparent": "00-" + testTraceID + "-" + testParent + "-" + tc.flags})
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("invoke: %d %s", resp.StatusCode, body)
			}
			if tp := resp.Header.Get("traceparent"); !strings.HasPrefix(tp, "00-"+testTraceID+"-") {
				t.Errorf("answer traceparent %q, want the caller's trace", tp)
			}
			if err := tn.n.tracer.Flush(context.Background()); err != nil {
				t.Fatal(err)
			}
			if _, count := rcv.taken(); count != tc.spans {
				t.Errorf("%d spans, want %d", count, tc.spans)
			}
		})
	}
}

// TestTracing_outbound: a wasi-http guest's outgoing request is a child
// span of its activation, with the method, the URL without its query and
// the status, inside the activation's time.
func TestTracing_outbound(t *testing.T) {
	rcv := startReceiver(t)
	tn := startNodeWith(t, tracingOn(rcv.srv.URL+"/v1/traces"))
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("b")) }))
	t.Cleanup(backend.Close)
	artifact := testwasm.Component(t, "adapted")
	if err := tn.tryDeployComponent(t, "fetcher", artifact, map[string]any{
		"allowed_outbound_hosts": []string{"http://" + backend.Listener.Addr().String()},
		"ceiling":                map[string]any{"cpu_fuel": 200_000_000, "memory_bytes": "8MiB", "wall_time": "5s"}}); err != nil {
		t.Fatal(err)
	}
	url := "http://" + backend.Listener.Addr().String() + "/p"
	if resp, body := tn.do(t, "GET", "/v1/invoke/demo/fetcher/run/fetch?url="+url+"?secret=1", tn.key, nil, nil); resp.StatusCode != 200 {
		t.Fatalf("fetch: %d %s", resp.StatusCode, body)
	}
	if err := tn.n.tracer.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	spans, _ := rcv.taken()
	out, act := spans["outbound GET"], spans["activation"]
	if out == nil || act == nil {
		t.Fatalf("spans %v", spans)
	}
	if string(out.ParentSpanId) != string(act.SpanId) || out.StartTimeUnixNano < act.StartTimeUnixNano || out.EndTimeUnixNano > act.EndTimeUnixNano {
		t.Fatalf("outbound span not inside its activation: %v / %v", out, act)
	}
	if got := attrOf(out, "url.full").GetStringValue(); got != url {
		t.Fatalf("url.full %q, want %q", got, url)
	}
	if got := attrOf(out, "http.response.status_code").GetIntValue(); got != 200 {
		t.Fatalf("status %d", got)
	}
}

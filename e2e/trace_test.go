package e2e

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/errors"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/latent-node/latent-node/refusal"
)

// otlpCollector is an in-process OTLP/HTTP traces endpoint: it decodes the
// protobuf export requests the node posts to /v1/traces.
type otlpCollector struct {
	srv     *httptest.Server
	mu      sync.Mutex
	spans   []*tracepb.Span
	bad     []string      // requests it could not decode
	changed chan struct{} // closed and replaced on every export
}

func startCollector(t *testing.T) *otlpCollector {
	t.Helper()
	c := &otlpCollector{changed: make(chan struct{})}
	c.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		data, err := io.ReadAll(r.Body)
		var req coltracepb.ExportTraceServiceRequest
		if err == nil && (r.Method != http.MethodPost || r.URL.Path != "/v1/traces" ||
			r.Header.Get("Content-Type") != "application/x-protobuf") {
			err = errBadExport
		}
		if err == nil {
			err = proto.Unmarshal(data, &req)
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		if err != nil {
			c.bad = append(c.bad, r.Method+" "+r.URL.Path+": "+err.Error())
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				c.spans = append(c.spans, ss.Spans...)
			}
		}
		close(c.changed)
		c.changed = make(chan struct{})
		resp, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(resp)
	}))
	t.Cleanup(c.srv.Close)
	return c
}

var errBadExport = errors.New("not an OTLP/HTTP protobuf traces export")

// trace waits (at most d) until the spans of traceID include one of every
// name in want, and returns them by name.
func (c *otlpCollector) trace(t *testing.T, traceID string, d time.Duration, want ...string) map[string]*tracepb.Span {
	t.Helper()
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	for {
		c.mu.Lock()
		got := map[string]*tracepb.Span{}
		for _, s := range c.spans {
			if hex.EncodeToString(s.TraceId) == traceID {
				got[s.Name] = s
			}
		}
		ch, bad := c.changed, c.bad
		c.mu.Unlock()
		if len(bad) > 0 {
			t.Fatalf("collector refused exports: %q", bad)
		}
		complete := true
		for _, name := range want {
			complete = complete && got[name] != nil
		}
		if complete {
			return got
		}
		select {
		case <-ch:
		case <-deadline.C:
			t.Fatalf("trace %s: spans %v within %v, want %q", traceID, spanNames(got), d, want)
		}
	}
}

func spanNames(m map[string]*tracepb.Span) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func spanAttr(s *tracepb.Span, key string) string {
	for _, kv := range s.Attributes {
		if kv.Key == key {
			if v, ok := kv.Value.Value.(*commonpb.AnyValue_IntValue); ok {
				return strconv.FormatInt(v.IntValue, 10)
			}
			return kv.Value.GetStringValue()
		}
	}
	return ""
}

// sample is one Prometheus sample: its metric name, labels and value.
type sample struct {
	name   string
	labels map[string]string
	value  float64
}

// scrape reads /metrics with the admin key.
func (n *node) scrape(t *testing.T) []sample {
	t.Helper()
	r := n.do(t, "GET", "/metrics", "root", nil, nil)
	if r.status != 200 {
		t.Fatalf("metrics: %d %.200s", r.status, r.body)
	}
	var out []sample
	eachSample(r.body, func(series string, v float64) {
		s := sample{name: series, labels: map[string]string{}, value: v}
		if name, rest, ok := strings.Cut(series, "{"); ok {
			s.name = name
			for _, kv := range strings.Split(strings.TrimSuffix(rest, "}"), ",") {
				if k, v, ok := strings.Cut(kv, "="); ok {
					s.labels[k], _ = strconv.Unquote(v)
				}
			}
		}
		out = append(out, s)
	})
	return out
}

// eachSample calls f with every sample of a Prometheus text exposition:
// its series (the name with its labels, as written) and its value.
func eachSample(body []byte, f func(series string, v float64)) {
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			f(line[:i], v)
		}
	}
}

// sum adds the samples of name whose labels include want.
func sum(samples []sample, name string, want map[string]string) float64 {
	total := 0.0
	for _, s := range samples {
		if s.name != name {
			continue
		}
		match := true
		for k, v := range want {
			match = match && s.labels[k] == v
		}
		if match {
			total += s.value
		}
	}
	return total
}

// startTracedNode serves the harness configuration with tracing on,
// exporting to a collector of its own with batchTimeout between batches.
func startTracedNode(t *testing.T, batchTimeout string) (*node, *otlpCollector) {
	t.Helper()
	col := startCollector(t)
	k, h := principalKeys(t)
	p := defaults(t)
	p.Hashes = h
	cfg := configTOML(p) + "\n[tracing]\nenabled = true\nendpoint = \"" + col.srv.URL + "/v1/traces\"\n" +
		"service_name = \"e2e\"\ntimeout = \"5s\"\nbatch_timeout = \"" + batchTimeout + "\"\n"
	cfgPath := filepath.Join(t.TempDir(), "node.toml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return &node{proc: serve(t, cfgPath, calm), keys: k}, col
}

// TestTrace_followActivation follows one completed and two refused
// activations (a route that does not exist, and a body over the node's
// payload bound, refused before admission) by the activation id of their
// answers through the access log, the metrics and the spans the node
// exports to an OTLP/HTTP collector, each in the trace of the request's
// traceparent.
func TestTrace_followActivation(t *testing.T) {
	t.Parallel()
	n, col := startTracedNode(t, "20ms")
	n.deploy(t, "alice", "acme", "echo", rev{guest: "echo"})

	for _, tc := range []struct {
		name, target, body string
		traceID            string
		status             int
		reason             string // "" for the completed one
		spans              []string
	}{
		{"completed", "acme/echo/run", "ada", "11111111111111111111111111111111", 200, "",
			[]string{"activation", "admission", "queue", "execution"}},
		{"route not found", "acme/echo/nosuch", "ada", "22222222222222222222222222222222", 404, refusal.ReasonRouteNotFound.String(),
			[]string{"activation"}},
		{"payload too large", "acme/echo/run", strings.Repeat("x", 64<<10+1), "33333333333333333333333333333333", 413,
			refusal.ReasonPayloadTooLarge.String(), []string{"activation"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := n.scrape(t)
			r := n.invoke(t, "alice", tc.target, tc.body, map[string]string{"traceparent": "00-" + tc.traceID + "-00f067aa0ba902b7-01"})
			if r.status != tc.status || r.problem.Reason != tc.reason {
				t.Fatalf("invoke: %d %s", r.status, r.body)
			}
			id := r.header.Get("Latent-Activation-Id")
			if id == "" {
				t.Fatal("no Latent-Activation-Id on the answer")
			}
			if !strings.HasPrefix(r.header.Get("traceparent"), "00-"+tc.traceID+"-") {
				t.Errorf("answer traceparent %q, want one in trace %s", r.header.Get("traceparent"), tc.traceID)
			}

			// The access log: one line with the id.
			line := n.stderr.wait(t, 10*time.Second, func(s string) bool {
				return strings.Contains(s, `"msg":"activation"`) && strings.Contains(s, `"id":"`+id+`"`)
			})
			var logged struct {
				ID, Tenant, Service, Route, Revision, Outcome, Reason string
				Status                                                int
				Fuel                                                  uint64
			}
			if err := json.Unmarshal([]byte(line), &logged); err != nil {
				t.Fatalf("log line %q: %v", line, err)
			}
			route := tc.target[strings.LastIndexByte(tc.target, '/')+1:]
			if logged.Status != tc.status || logged.Tenant != "acme" || logged.Service != "echo" || logged.Route != route {
				t.Errorf("log line %s", line)
			}

			after := n.scrape(t)
			if tc.reason == "" {
				rev := r.header.Get("Latent-Revision")
				if logged.Outcome != "success" || logged.Revision != rev || rev == "" || logged.Fuel == 0 {
					t.Errorf("log line %s, want outcome success, revision %s and fuel", line, rev)
				}
				labels := map[string]string{"tenant": "acme", "service": "echo", "route": "run", "revision": rev, "outcome": "success"}
				if d := sum(after, "latent_activations_total", labels) - sum(before, "latent_activations_total", labels); d != 1 {
					t.Errorf("latent_activations_total%v went up by %v, want 1", labels, d)
				}
			} else {
				if logged.Reason != tc.reason || logged.Outcome != "" {
					t.Errorf("log line %s, want reason %s", line, tc.reason)
				}
				labels := map[string]string{"reason": tc.reason}
				if d := sum(after, "latent_rejections_total", labels) - sum(before, "latent_rejections_total", labels); d != 1 {
					t.Errorf("latent_rejections_total%v went up by %v, want 1", labels, d)
				}
				// Negative control: a refusal is no executed activation.
				if d := sum(after, "latent_activations_total", nil) - sum(before, "latent_activations_total", nil); d != 0 {
					t.Errorf("latent_activations_total went up by %v on a refusal", d)
				}
			}

			// The spans, in the request's trace.
			spans := col.trace(t, tc.traceID, 10*time.Second, tc.spans...)
			act := spans[tc.spans[0]]
			if got := spanAttr(act, "latent.activation_id"); got != id {
				t.Errorf("span activation id %q, answer's %q", got, id)
			}
			if hex.EncodeToString(act.ParentSpanId) != "00f067aa0ba902b7" {
				t.Errorf("activation parent %x, want the caller's span", act.ParentSpanId)
			}
			if got := spanAttr(act, "http.response.status_code"); got != strconv.Itoa(tc.status) {
				t.Errorf("span status code %s", got)
			}
			isErr := act.Status.GetCode() == tracepb.Status_STATUS_CODE_ERROR
			switch {
			case tc.reason == "" && isErr:
				t.Errorf("completed activation's span status %v", act.Status)
			case tc.reason != "" && (!isErr || act.Status.GetMessage() != tc.reason || spanAttr(act, "latent.refusal.reason") != tc.reason):
				t.Errorf("refused activation's span status %v, want an error naming %s", act.Status, tc.reason)
			}
			if tc.reason == "" {
				if got := spanAttr(act, "latent.revision"); got != logged.Revision {
					t.Errorf("span revision %q, log's %q", got, logged.Revision)
				}
				if got := spanAttr(act, "latent.fuel_used"); got != strconv.FormatUint(logged.Fuel, 10) {
					t.Errorf("span fuel %s, log's %d", got, logged.Fuel)
				}
				for _, name := range tc.spans[1:] {
					if string(spans[name].ParentSpanId) != string(act.SpanId) {
						t.Errorf("%s span is not a child of the activation span", name)
					}
				}
			}
		})
	}

	// The CLI: invoke -v prints the activation id, which leads to the log
	// line and to the span in the trace of the -H traceparent.
	t.Run("cli invoke -v", func(t *testing.T) {
		const traceID = "44444444444444444444444444444444"
		cmd := exec.Command(binary(t), "invoke", "-v", "--node", n.url, "--key", n.keys["alice"], "-d", "grace",
			"-H", "traceparent: 00-"+traceID+"-00f067aa0ba902b7-01", "acme/echo/run")
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil || stdout.String() != "grace" {
			t.Fatalf("invoke: %v, stdout %q, stderr:\n%s", err, stdout.String(), stderr.String())
		}
		m := regexp.MustCompile(`(?m)^< Latent-Activation-Id: ([0-9a-f]{32})$`).FindStringSubmatch(stderr.String())
		if m == nil || !strings.Contains(stderr.String(), "\n< Traceparent: 00-"+traceID+"-") {
			t.Fatalf("invoke -v printed:\n%s", stderr.String())
		}
		n.stderr.wait(t, 10*time.Second, func(s string) bool {
			return strings.Contains(s, `"msg":"activation"`) && strings.Contains(s, `"id":"`+m[1]+`"`) &&
				strings.Contains(s, `"outcome":"success"`)
		})
		act := col.trace(t, traceID, 10*time.Second, "activation")["activation"]
		if got := spanAttr(act, "latent.activation_id"); got != m[1] {
			t.Errorf("span activation id %q, invoke -v printed %q", got, m[1])
		}
	})
}

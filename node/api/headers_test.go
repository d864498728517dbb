package api

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/latent-node/latent-node/admission"
	"github.com/latent-node/latent-node/refusal"
)

func TestParseInvokeHeaders(t *testing.T) {
	now := time.UnixMilli(1_000_000)
	tests := []struct {
		name    string
		headers map[string][]string
		check   func(t *testing.T, h InvokeHeaders)
		bad     string // header named by the error
	}{
		{"none", nil, func(t *testing.T, h InvokeHeaders) {
			if h.Priority != 0 || !h.Deadline.IsZero() || h.Budget.HasCPUFuel {
				t.Fatalf("%+v", h)
			}
		}, ""},
		{"all", map[string][]string{"Latent-Activation-Id": {"a1"}, "Latent-Routing-Key": {"k"}, "Latent-Priority": {"7"},
			"Latent-Timeout-Ms": {"500"}, "Latent-Budget": {"fuel=10, memory=1MiB, wall-ms=250"},
			"Latent-Meta-Team": {"media"}}, func(t *testing.T, h InvokeHeaders) {
			if h.ActivationID != "a1" || h.RoutingKey != "k" || h.Priority != 7 || !h.Deadline.Equal(now.Add(500*time.Millisecond)) ||
				h.Budget != (admission.BudgetRequest{CPUFuel: 10, MemoryBytes: 1 << 20, WallTime: 250 * time.Millisecond,
					HasCPUFuel: true, HasMemoryBytes: true, HasWallTime: true}) ||
				len(h.Metadata) != 1 || h.Metadata[0].Key != "team" || h.Metadata[0].Value != "media" {
				t.Fatalf("%+v", h)
			}
		}, ""},
		{"earlier deadline wins", map[string][]string{"Latent-Timeout-Ms": {"500"}, "Latent-Deadline-Unix-Ms": {"1000100"}},
			func(t *testing.T, h InvokeHeaders) {
				if !h.Deadline.Equal(time.UnixMilli(1_000_100)) {
					t.Fatalf("%v", h.Deadline)
				}
			}, ""},
		{"later absolute deadline loses", map[string][]string{"Latent-Timeout-Ms": {"50"}, "Latent-Deadline-Unix-Ms": {"9000000"}},
			func(t *testing.T, h InvokeHeaders) {
				if !h.Deadline.Equal(now.Add(50 * time.Millisecond)) {
					t.Fatalf("%v", h.Deadline)
				}
			}, ""},
		{"zero fuel is a request", map[string][]string{"Latent-Budget": {"fuel=0"}}, func(t *testing.T, h InvokeHeaders) {
			if !h.Budget.HasCPUFuel || h.Budget.CPUFuel != 0 {
				t.Fatalf("%+v", h.Budget)
			}
		}, ""},
		{"bad priority", map[string][]string{"Latent-Priority": {"high"}}, nil, "Latent-Priority"},
		{"negative priority", map[string][]string{"Latent-Priority": {"-1"}}, nil, "Latent-Priority"},
		{"twice", map[string][]string{"Latent-Priority": {"1", "2"}}, nil, "Latent-Priority"},
		{"zero timeout", map[string][]string{"Latent-Timeout-Ms": {"0"}}, nil, "Latent-Timeout-Ms"},
		{"huge timeout", map[string][]string{"Latent-Timeout-Ms": {"99999999999999999"}}, nil, "Latent-Timeout-Ms"},
		{"bad deadline", map[string][]string{"Latent-Deadline-Unix-Ms": {"soon"}}, nil, "Latent-Deadline-Unix-Ms"},
		{"empty id", map[string][]string{"Latent-Activation-Id": {" "}}, nil, "Latent-Activation-Id"},
		{"budget unknown key", map[string][]string{"Latent-Budget": {"gpu=1"}}, nil, "Latent-Budget"},
		{"budget repeated", map[string][]string{"Latent-Budget": {"fuel=1,fuel=2"}}, nil, "Latent-Budget"},
		{"budget no equals", map[string][]string{"Latent-Budget": {"fuel"}}, nil, "Latent-Budget"},
		{"budget bad size", map[string][]string{"Latent-Budget": {"memory=lots"}}, nil, "Latent-Budget"},
		{"budget negative wall", map[string][]string{"Latent-Budget": {"wall-ms=-5"}}, nil, "Latent-Budget"},
		{"budget empty", map[string][]string{"Latent-Budget": {""}}, nil, "Latent-Budget"},
		{"too long", map[string][]string{"Latent-Routing-Key": {strings.Repeat("k", 2000)}}, nil, "Latent-Routing-Key"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{}
			for k, vs := range tc.headers {
				for _, v := range vs {
					h.Add(k, v)
				}
			}
			have, err := ParseInvokeHeaders(h, now)
			if tc.bad != "" {
				he, ok := isHeaderError(err)
				if !ok || he.header.String() != tc.bad {
					t.Fatalf("want an error naming %s, have %v", tc.bad, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, have)
		})
	}
	h := http.Header{}
	for i := 0; i < 70; i++ {
		h.Add("Latent-Meta-K"+strings.Repeat("x", i), "v")
	}
	if _, err := ParseInvokeHeaders(h, now); err == nil {
		t.Fatal("unbounded metadata headers accepted")
	}
}

func TestRefusalAndWriteProblem(t *testing.T) {
	tests := []struct {
		r      refusal.Refusal
		status int
	}{
		{refusal.Refusal{Code: refusal.CodeUnauthenticated, Reason: refusal.ReasonUnauthenticated}, 401},
		{refusal.Refusal{Code: refusal.CodeAdmissionRejected, Reason: refusal.ReasonRevisionNotAvailable}, 404},
		{refusal.Refusal{Code: refusal.CodeResourceExhausted, Reason: refusal.ReasonPayloadTooLarge}, 413},
		{refusal.Refusal{Code: refusal.CodeInvalidArgument, Reason: refusal.ReasonInvalidManifest}, 422},
		{refusal.Refusal{Code: refusal.CodeCancelled, Reason: refusal.ReasonCancelled}, 499},
		{refusal.Internal, 500},
	}
	for _, tc := range tests {
		p := Refusal(tc.r)
		if p.Status != tc.status || p.Code != tc.r.Code.String() || p.Reason != tc.r.Reason.String() ||
			p.Type != tc.r.HTTP().Type || p.Title != tc.r.HTTP().Title {
			t.Errorf("%+v: problem %+v, want status %d", tc.r, p, tc.status)
		}
	}
	rec := httptest.NewRecorder()
	WriteProblem(rec, Refusal(refusal.Refusal{Code: refusal.CodeResourceExhausted, Reason: refusal.ReasonCapacityExhausted,
		Scope: refusal.ScopeTenant, Retryable: true}), 1500*time.Millisecond)
	if rec.Code != 429 || rec.Header().Get("Retry-After") != "2" || rec.Header().Get("Content-Type") != "application/problem+json" {
		t.Fatalf("%d %v", rec.Code, rec.Header())
	}
	want := `{"type":"https://latent-node.dev/problems/resource-exhausted","title":"resource-exhausted/capacity-exhausted",` +
		`"status":429,"code":"resource-exhausted","reason":"capacity-exhausted","scope":"tenant","retryable":true}` + "\n"
	if rec.Body.String() != want {
		t.Fatalf("body %s, want %s", rec.Body.String(), want)
	}
	rec = httptest.NewRecorder()
	WriteProblem(rec, Refusal(refusal.Refusal{Code: refusal.CodeUnauthenticated, Reason: refusal.ReasonUnauthenticated,
		Scope: refusal.ScopePrincipal}), 0)
	if rec.Header().Get("Retry-After") != "" || rec.Header().Get("WWW-Authenticate") == "" {
		t.Fatalf("401 headers: %v", rec.Header())
	}
	rec = httptest.NewRecorder()
	p := Refusal(refusal.Refusal{Code: refusal.CodeInvalidArgument, Reason: refusal.ReasonInvalidManifest,
		Scope: refusal.ScopeRequest, Dimension: refusal.DimManifest})
	p.Fields = []FieldProblem{{Field: "revisions[0].artifact", Problem: "deploy_limits.functions is 50000"}}
	WriteProblem(rec, p, 0)
	if !strings.Contains(rec.Body.String(), `"invalid_fields":[{"field":"revisions[0].artifact","problem":"deploy_limits.functions is 50000"}]`) {
		t.Fatalf("field problems: %s", rec.Body.String())
	}
	if RetryAfterSeconds(0) != 1 || RetryAfterSeconds(10*time.Hour) != 3600 {
		t.Fatal("RetryAfterSeconds bounds")
	}
}

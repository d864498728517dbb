package api

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/latent-node/latent-node/admission"
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
				if !ok || he.header != tc.bad {
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

func TestStatusOfAndWriteProblem(t *testing.T) {
	tests := []struct {
		code, reason string
		status       int
	}{
		{"unauthenticated", "", 401}, {"permission-denied", "principal-not-authorized", 403},
		{"invalid-argument", "invalid-identifier", 400}, {"admission-rejected", "revision-not-available", 404},
		{"admission-rejected", "no-compatible-cell", 422}, {"admission-rejected", "placement-not-compatible", 422},
		{"admission-rejected", "unsupported-execution-requirement", 422}, {"resource-exhausted", "payload-too-large", 413},
		{"resource-exhausted", "capacity-exhausted", 429}, {"resource-exhausted", "fair-share-of-waiting-slots", 429},
		{"resource-exhausted", "queue-wait-exceeded", 429}, {"resource-exhausted", "node-overloaded", 503},
		{"admission-rejected", "queue-deadline-infeasible", 503}, {"deadline-exceeded", "deadline-exceeded", 504},
		{"unavailable", "load-sample-stale", 503}, {"already-exists", "activation-id-unavailable", 409},
		{"invalid-argument", "malformed-body", 400}, {"invalid-argument", "unknown-path", 404},
		{"invalid-argument", "method-not-allowed", 405}, {"resource-exhausted", "insufficient-storage", 507},
		{"resource-exhausted", "catalog-full", 507}, {"resource-exhausted", "tenant-quota-exceeded", 429},
		{"something-else", "", 500},
	}
	for _, tc := range tests {
		if have := StatusOf(tc.code, tc.reason); have != tc.status {
			t.Errorf("%s/%s: want %d, have %d", tc.code, tc.reason, tc.status, have)
		}
	}
	rec := httptest.NewRecorder()
	WriteProblem(rec, FromRejection(&admission.Rejection{Code: "resource-exhausted", Reason: "capacity-exhausted", Scope: "tenant", Retryable: true}), 1500*time.Millisecond)
	if rec.Code != 429 || rec.Header().Get("Retry-After") != "2" || rec.Header().Get("Content-Type") != "application/problem+json" {
		t.Fatalf("%d %v", rec.Code, rec.Header())
	}
	rec = httptest.NewRecorder()
	WriteProblem(rec, Problem{Status: 401, Title: "unauthenticated", Code: "unauthenticated"}, 0)
	if rec.Header().Get("Retry-After") != "" || rec.Header().Get("WWW-Authenticate") == "" {
		t.Fatalf("401 headers: %v", rec.Header())
	}
	rec = httptest.NewRecorder()
	p := Refusal(422, "invalid-argument", "invalid-manifest", "request", "manifest", false)
	p.Fields = []FieldProblem{{Field: "revisions[0].artifact", Problem: "deploy_limits.functions is 50000"}}
	WriteProblem(rec, p, 0)
	if !strings.Contains(rec.Body.String(), `"invalid_fields":[{"field":"revisions[0].artifact","problem":"deploy_limits.functions is 50000"}]`) {
		t.Fatalf("field problems: %s", rec.Body.String())
	}
	if RetryAfterSeconds(0) != 1 || RetryAfterSeconds(10*time.Hour) != 3600 {
		t.Fatal("RetryAfterSeconds bounds")
	}
}

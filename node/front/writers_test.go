package front

import (
	"net/http/httptest"
	"testing"
	"time"

	"github.com/latent-node/latent-node/node/activation"
	"github.com/latent-node/latent-node/node/api"
	"github.com/latent-node/latent-node/refusal"
	"github.com/latent-node/latent-node/runner"
)

// TestAccessWriter_recordsRefusal: a problem written through the wrappers
// a handler sees reaches the request's record as a typed refusal; an
// executed activation's outcome problem is recorded with the outcome's
// refusal but does not count as a refusal (Refused), and a writer chain
// without the access writer records nothing (the negative control: the
// record comes from the writer, not from the body).
func TestAccessWriter_recordsRefusal(t *testing.T) {
	ref := refusal.Refusal{Code: refusal.CodeResourceExhausted, Reason: refusal.ReasonCapacityExhausted,
		Scope: refusal.ScopeTenant, Dimension: refusal.DimQueued, Retryable: true}
	aw := NewAccessWriter(httptest.NewRecorder())
	rec := aw.Record()
	w := NewDeadlineWriter(aw, 0)
	if activation.Of(w) != rec {
		t.Fatal("the record is not found through the deadline writer")
	}
	api.WriteProblem(w, api.Refusal(ref), time.Second)
	if !rec.Refused() || rec.Refusal != ref {
		t.Fatalf("record %+v, want the refusal %+v", rec, ref)
	}
	aw = NewAccessWriter(httptest.NewRecorder())
	rec = aw.Record()
	rec.Executed = true
	p := api.Refusal(runner.Trap.Refusal())
	p.Outcome = runner.Trap.String()
	api.WriteProblem(aw, p, 0)
	if rec.Refused() || !rec.Answered || rec.Refusal != runner.Trap.Refusal() {
		t.Fatalf("an outcome problem: record %+v, want its refusal kept and not counted as refused", rec)
	}
	bare := httptest.NewRecorder()
	rec = activation.Of(bare)
	api.WriteProblem(bare, api.Refusal(ref), 0)
	if rec.Answered {
		t.Fatal("recorded without the access writer")
	}
}

func TestRouteKind(t *testing.T) {
	for pattern, want := range map[string]string{
		"POST /v1/invoke/{tenant}/{service}/{route}": "invoke", "PUT /v1/artifacts/{digest}": "artifact",
		"GET /v1/deployments/{tenant}/{service}": "deployment", "/v1/deployments/{tenant}": "deployment",
		"GET /v1/admin/admission": "admin", "GET /v1/admission": "admission", "GET /healthz": "health",
		"GET /metrics": "metrics", "/": "other", "": "other",
	} {
		if got := RouteKind(pattern); got != want {
			t.Errorf("RouteKind(%q) = %q, want %q", pattern, got, want)
		}
	}
}

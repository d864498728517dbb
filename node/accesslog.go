// The access log: the front's middleware that makes each request's
// activation.Record and, once the answer is out, writes its line and
// counts its refusal and duration.

package node

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/latent-node/latent-node/node/activation"
	"github.com/latent-node/latent-node/node/api"
	"github.com/latent-node/latent-node/node/front"
	"github.com/latent-node/latent-node/runner"
)

// accessWriter records the answer's status for the access log, and the
// refusal of a problem answer (RecordProblem).
type accessWriter struct {
	http.ResponseWriter
	status int
	rec    *activation.Record
}

func (w *accessWriter) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *accessWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(p)
}

// RecordProblem notes in the request's record the refusal whose problem
// api.WriteProblem is writing (an executed activation's outcome problem
// is not one).
func (w *accessWriter) RecordProblem(p api.Problem) {
	if p.Outcome == "" {
		w.rec.Answered, w.rec.Refusal = true, p.Refusal
	}
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (w *accessWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// routeKind names the API route of a mux pattern; the set is fixed, so the
// HTTP metrics' labels stay bounded.
func routeKind(pattern string) string {
	if _, p, ok := strings.Cut(pattern, " "); ok {
		pattern = p
	}
	for _, k := range [...]struct{ prefix, kind string }{
		{"/v1/invoke/", "invoke"}, {"/v1/artifacts/", "artifact"}, {"/v1/deployments", "deployment"},
		{"/v1/admin/", "admin"}, {"/v1/admission", "admission"}, {"/healthz", "health"}, {"/readyz", "health"},
		{"/metrics", "metrics"}, {"/ui", "ui"},
	} {
		if strings.HasPrefix(pattern, k.prefix) {
			return k.kind
		}
	}
	return "other"
}

// requestActivationID is the activation id of an invocation request, chosen
// before its handler runs: the caller's (one Latent-Activation-Id header,
// not blank, at most maxActivationIDBytes, trimmed as the header parser
// trims it) or a fresh one. It goes into the request's record and on the
// answer, refusals before the handler ran included; the handler and the
// log read the record.
func requestActivationID(r *http.Request) string {
	if v := r.Header.Values("Latent-Activation-Id"); len(v) == 1 && len(v[0]) <= maxActivationIDBytes {
		if id := strings.TrimSpace(v[0]); id != "" {
			return id
		}
	}
	return activation.NewID() // the handler refuses such a header (invalid-header)
}

// maxActivationIDBytes is the longest Latent-Activation-Id the node
// accepts (api.ParseInvokeHeaders' bound on a header's value).
const maxActivationIDBytes = 1024

// accessLogged writes one INFO line per request (rate-limited per tenant),
// counts every refusal in latent_rejections_total and observes the request's
// duration. Invocations carry their activation id in the answer's
// Latent-Activation-Id header, refusals before the handler ran included.
func (n *Node) accessLogged(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := n.clock.Now()
		rec := &activation.Record{}
		aw := &accessWriter{ResponseWriter: w, rec: rec}
		invoke := strings.HasPrefix(r.URL.Path, "/v1/invoke/")
		if invoke {
			rec.ID = requestActivationID(r)
			w.Header().Set("Latent-Activation-Id", rec.ID)
		}
		r = r.WithContext(activation.With(r.Context(), rec))
		defer func() {
			n.finishAccess(aw, r, rec, invoke, n.clock.Now().Sub(start))
		}()
		next.ServeHTTP(aw, r)
	})
}

func (n *Node) finishAccess(aw *accessWriter, r *http.Request, rec *activation.Record, invoke bool, took time.Duration) {
	status := aw.status
	if status == 0 {
		status = http.StatusOK // the handler wrote nothing: net/http answers 200
	}
	kind := routeKind(r.Pattern)
	n.metrics.request(kind, status, took)
	if rec.Refused() {
		n.metrics.rejected(rec.Refusal)
	}
	args := make([]slog.Attr, 0, 12)
	if invoke {
		id := rec.ID
		// The target as the path names it (the rate limit goes by the
		// authenticated tenant); names the catalog refuses are not logged.
		args = append(args, slog.String("id", front.LogSafe(id, front.MaxLogFieldBytes)), slog.String("tenant", front.LogName(r.PathValue("tenant"))),
			slog.String("service", front.LogName(r.PathValue("service"))), slog.String("route", front.LogName(r.PathValue("route"))),
			slog.String("revision", string(rec.Revision)),
			slog.Int("status", status))
	} else {
		args = append(args, slog.String("method", front.LogSafe(r.Method, front.MaxLogFieldBytes)), slog.String("route_kind", kind),
			slog.String("tenant", string(rec.Tenant)), slog.Int("status", status))
	}
	switch {
	case rec.Executed:
		args = append(args, slog.String("outcome", rec.Outcome.String()), slog.Uint64("fuel", rec.FuelUsed),
			slog.Float64("queue_ms", ms(rec.Timing.QueueWait())), slog.Float64("exec_ms", ms(rec.Execution)))
	case rec.Refused():
		args = append(args, slog.String("reason", rec.Refusal.Reason.String()))
	}
	args = append(args, slog.Float64("ms", ms(took)))
	src := front.LogSource{Tenant: rec.Tenant, Peer: rec.Peer, Addr: front.ClientAddr(r)}
	if !n.metrics.access.Allow(src, front.LineBytes(args)) {
		return
	}
	msg := "request"
	if invoke {
		msg = "activation"
	}
	ctx := context.Background()
	n.log.LogAttrs(ctx, slog.LevelInfo, msg, args...)
	if rec.Executed && len(rec.Stderr) > 0 {
		level := slog.LevelInfo
		if rec.Outcome == runner.Success {
			level = slog.LevelDebug
		}
		if !n.log.Enabled(ctx, level) {
			return
		}
		attrs := []slog.Attr{args[0], slog.String("stderr", front.LogSafe(string(rec.Stderr), front.MaxLogStderrBytes))}
		if n.metrics.access.Allow(src, front.LineBytes(attrs)) {
			n.log.LogAttrs(ctx, level, "guest stderr", attrs...)
		}
	}
}

// ms is d in milliseconds with microsecond resolution.
func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

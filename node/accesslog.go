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
	"github.com/latent-node/latent-node/node/front"
	"github.com/latent-node/latent-node/node/history"
	"github.com/latent-node/latent-node/runner"
	"github.com/latent-node/latent-node/vocab"
)

// accessLog is the front's access log: it makes each request's record,
// and once the answer is out writes its line and counts it in the metrics.
type accessLog struct {
	clock   vocab.Clock
	log     *slog.Logger
	metrics *metrics
	hist    *history.History // the status page's plots: invocations only
}

// logged writes one INFO line per request (rate-limited per tenant),
// counts every refusal in latent_rejections_total and observes the request's
// duration. Invocations carry their activation id in the answer's
// Latent-Activation-Id header, refusals before the handler ran included.
func (l *accessLog) logged(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := l.clock.Now()
		aw := front.NewAccessWriter(w) // handlers find the record through it (activation.Of)
		rec := aw.Record()
		invoke := strings.HasPrefix(r.URL.Path, "/v1/invoke/")
		if invoke {
			rec.ID = front.ActivationID(r)
			rec.SetHeader(w.Header(), "Latent-Activation-Id", rec.ID)
		}
		defer func() {
			l.finish(aw, r, rec, invoke, l.clock.Now().Sub(start))
		}()
		next.ServeHTTP(aw, r)
	})
}

func (l *accessLog) finish(aw *front.AccessWriter, r *http.Request, rec *activation.Record, invoke bool, took time.Duration) {
	status := aw.Status()
	if status == 0 {
		status = http.StatusOK // the handler wrote nothing: net/http answers 200
	}
	kind := front.RouteKind(r.Pattern)
	l.metrics.request(kind, status, took)
	if rec.Refused() {
		l.metrics.rejected(rec.Refusal)
	}
	args := make([]slog.Attr, 0, 12)
	if invoke {
		id := rec.ID
		// The target as the path names it (the rate limit goes by the
		// authenticated tenant); names the catalog refuses are not logged.
		args = append(args, slog.String("id", front.LogSafe(id, front.MaxLogFieldBytes)), slog.String("tenant", front.LogName(string(rec.Target.Tenant))),
			slog.String("service", front.LogName(string(rec.Target.Service))), slog.String("route", front.LogName(string(rec.Target.Route))),
			slog.String("revision", string(rec.Revision)),
			slog.Int("status", status))
	} else {
		args = append(args, slog.String("method", front.LogSafe(r.Method, front.MaxLogFieldBytes)), slog.String("route_kind", kind),
			slog.String("tenant", string(rec.Tenant)), slog.Int("status", status))
	}
	if invoke {
		l.hist.Observe(history.Obs{Tenant: rec.Tenant, Took: took, Queue: rec.Timing.QueueWait(), Fuel: rec.FuelUsed, Outcome: rec.OutcomeName(), Reason: rec.ReasonName()})
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
	if !l.metrics.access.Allow(src, front.LineBytes(args)) {
		return
	}
	msg := "request"
	if invoke {
		msg = "activation"
	}
	ctx := context.Background()
	l.log.LogAttrs(ctx, slog.LevelInfo, msg, args...)
	if rec.Executed && len(rec.Stderr) > 0 {
		level := slog.LevelInfo
		if rec.Outcome == runner.Success {
			level = slog.LevelDebug
		}
		if !l.log.Enabled(ctx, level) {
			return
		}
		attrs := []slog.Attr{args[0], slog.String("stderr", front.LogSafe(string(rec.Stderr), front.MaxLogStderrBytes))}
		if l.metrics.access.Allow(src, front.LineBytes(attrs)) {
			l.log.LogAttrs(ctx, level, "guest stderr", attrs...)
		}
	}
}

// ms is d in milliseconds with microsecond resolution.
func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

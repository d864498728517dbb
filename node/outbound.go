package node

// A wasi-http guest's outgoing requests: a log line, a metric and a trace
// span each.

import (
	"context"
	"log/slog"
	"strings"

	"github.com/latent-node/latent-node/node/activation"
	"github.com/latent-node/latent-node/node/front"
	"github.com/latent-node/latent-node/node/tracing"
	"github.com/latent-node/latent-node/runner/wasihttp"
)

// recordCalls logs (within the tenant's access-log rate), counts and
// traces the activation's outgoing requests. URLs are logged without
// their query, which may carry a guest's secrets.
func (m *activations) recordCalls(rec *activation.Record, span *tracing.Span, calls []wasihttp.Call) {
	for _, c := range calls {
		url, _, _ := strings.Cut(c.URL, "?")
		result := "answered"
		switch {
		case c.Err == "HTTP-request-denied":
			result = "denied"
		case c.Err != "":
			result = "failed"
		}
		m.metrics.outbound.WithLabelValues(result).Inc()
		span.Outbound(c.Method, url, c.Began, c.Took, c.Status, c.Err)
		args := []slog.Attr{slog.String("id", front.LogSafe(rec.ID, front.MaxLogFieldBytes)),
			slog.String("tenant", front.LogName(string(rec.Target.Tenant))), slog.String("service", front.LogName(string(rec.Target.Service))),
			slog.String("method", front.LogSafe(c.Method, front.MaxLogFieldBytes)), slog.String("url", front.LogSafe(url, front.MaxLogFieldBytes)),
			slog.String("result", result), slog.Int("status", c.Status), slog.String("error", c.Err),
			slog.Int("bytes_out", c.BytesOut), slog.Int("bytes_in", c.BytesIn), slog.Float64("ms", ms(c.Took))}
		if m.metrics.access.Allow(front.LogSource{Tenant: rec.Tenant, Peer: rec.Peer}, front.LineBytes(args)) {
			m.log.LogAttrs(context.Background(), slog.LevelInfo, "outbound", args...)
		}
	}
}

package node

import (
	"log/slog"
	"net/http"
	"reflect"
	"slices"
	"sync"

	"github.com/cockroachdb/errors"

	"github.com/latent-node/latent-node/admission"
	"github.com/latent-node/latent-node/node/api"
	"github.com/latent-node/latent-node/node/auth"
	"github.com/latent-node/latent-node/node/config"
	"github.com/latent-node/latent-node/node/front"
	"github.com/latent-node/latent-node/refusal"
	"github.com/latent-node/latent-node/vocab"
)

// A reload (SIGHUP, or POST /v1/admin/reload) reads the configuration file
// again. An invalid file changes nothing and is reported with every
// problem. A valid one applies what can change while the node serves:
//
//   - principals and their API keys and client-certificate subjects: the
//     authenticator is swapped atomically; requests authenticated before
//     finish as they were, the next one meets the new set;
//   - tenants, their limits and allowlists, trust classes, the node's
//     limits and budget ceiling, overload, deadline and metadata settings
//     and the node's placement: the admission ledger takes the new policy
//     (admission.LocalQuotaProvider.Reload) — new admissions meet it, live
//     permits finish and release into the same counters, a removed tenant
//     gets no new admissions while its live work completes;
//   - the TLS certificate, key and client CAs, read again from the same
//     files (new connections get them).
//
// All of it or nothing: the TLS files and the principals are read and
// checked first; when one fails (a key file replaced by a mismatched one
// between the file's validation and the reload, say) the reload answers
// 500 reload-failed and nothing changed, not even the configuration the
// next reload is compared with.
//
// Every other table that differs from the running configuration (the
// listener, the data directory, cell and queue classes, the scheduler,
// ingress, catalog and deploy limits, tracing, cluster) is named in the
// answer as requiring a restart, and the running node keeps its value; the
// rest still applies.

// ReloadResult says what a reload applied and what needs a restart.
type ReloadResult struct {
	// Applied names what the reload changed live.
	Applied []string `json:"applied"`
	// RestartRequired names the configuration's tables that differ from
	// the running node's and take effect only after a restart.
	RestartRequired []string `json:"restart_required"`
}

// ReloadSource tells the node where a reload reads its configuration and
// what else it reloads; main sets it (SetReloadSource).
type ReloadSource struct {
	// Load reads and validates the configuration file.
	Load func() (*config.Config, error)
	// TLS is the listener's certificate holder (nil without [node.tls]).
	TLS *front.ServerTLS
}

// ErrNotReloadable: the node was started without a configuration file (the
// demo), so there is nothing to read again.
var ErrNotReloadable = errors.New("node: no configuration file to reload")

type reloader struct {
	mu  sync.Mutex // one reload at a time
	src ReloadSource
	cfg *config.Config // the configuration the live parts came from
}

// SetReloadSource sets what Reload reads. Call it before serving.
func (n *Node) SetReloadSource(src ReloadSource) {
	n.reload.mu.Lock()
	defer n.reload.mu.Unlock()
	n.reload.src = src
}

// Reload reads the configuration again and applies what can change live
// (see the comment at the top of reload.go). With an invalid file nothing
// changes and the error is the file's problems (*config.Error). A reload
// applies in full or not at all: it reads everything that can fail (the
// principals' keys, the TLS files) before it changes anything, so a
// failure leaves the node and the configuration later reloads compare
// against as they were.
func (n *Node) Reload() (ReloadResult, error) {
	n.reload.mu.Lock()
	defer n.reload.mu.Unlock()
	if n.reload.src.Load == nil {
		return ReloadResult{}, ErrNotReloadable
	}
	next, err := n.reload.src.Load()
	if err != nil {
		n.log.Warn("configuration reload refused: nothing changed", "err", err.Error())
		return ReloadResult{}, err
	}
	prev := n.reload.cfg
	if prev == nil {
		prev = n.cfg
	}
	res := ReloadResult{Applied: []string{}, RestartRequired: restartRequired(prev, next)}

	// Prepare everything that can fail before anything changes: a failed
	// reload leaves the principals, the admission tables, the TLS material
	// and the recorded configuration exactly as they were.
	var principals *auth.Authenticator
	if !reflect.DeepEqual(prev.Principals, next.Principals) {
		if principals, err = auth.New(next.Principals); err != nil { // validated by Load
			return ReloadResult{}, errors.Wrap(err, "node: reload principals")
		}
	}
	var tlsFiles *front.Material
	if t := n.reload.src.TLS; t != nil && next.Node.TLS == n.cfg.Node.TLS {
		if tlsFiles, err = t.Load(); err != nil {
			// The file is valid, the certificate files are not readable as
			// a pair right now.
			n.log.Warn("TLS certificate reload failed; nothing changed", "err", err.Error())
			return ReloadResult{}, errors.Wrap(err, "node: reload TLS")
		}
	}

	// Apply. Admission goes first: it refuses a policy it cannot take (new
	// cell or queue classes) without changing, and that refusal is a
	// restart to report, not a failure; nothing after it can fail.
	admissionApplied := false
	if live := admissionChanges(prev, next); len(live) > 0 {
		// The ledger takes the new policy with the running queue and cell
		// classes (those need a restart and are reported so).
		mixed := *next
		mixed.QueueClasses, mixed.CellClasses = prev.QueueClasses, prev.CellClasses
		// The ingress pools keep their running sizes until a restart: a
		// payload ceiling a running data pool cannot hold waits for it too.
		if fit := n.cfg.Ingress.Data.Bytes - config.IngressOverheadBytes; next.Node.Limits.MaxPayloadBytes > fit &&
			next.Node.Limits.MaxPayloadBytes != prev.Node.Limits.MaxPayloadBytes {
			mixed.Node.Limits.MaxPayloadBytes = prev.Node.Limits.MaxPayloadBytes
			res.RestartRequired = append(res.RestartRequired, "node.limits.max_payload_bytes")
		}
		if err := n.prov.Reload(mixed.AdmissionPolicy()); err != nil {
			// The new tenants need cell or queue classes the node does not
			// run yet: nothing of admission changes until a restart.
			n.log.Warn("admission policy not reloaded: it needs the new cell or queue classes", "err", err.Error())
			res.RestartRequired = append(res.RestartRequired, live...)
		} else {
			res.Applied = append(res.Applied, live...)
			admissionApplied = true
			// New tenants' access-log lines get buckets of their own.
			var tenants []string
			for t := range next.Tenants {
				tenants = append(tenants, string(t))
			}
			n.metrics.access.AddTenants(tenants)
		}
	}
	if principals != nil {
		n.auth.Store(principals)
		res.Applied = append(res.Applied, "principals")
	}
	if tlsFiles != nil {
		n.reload.src.TLS.Store(tlsFiles)
		res.Applied = append(res.Applied, "node.tls files")
	}
	// What runs now: the new file's live parts over the running rest.
	kept := *prev
	kept.Principals = slices.Clone(next.Principals)
	if admissionApplied {
		kept.Tenants, kept.TrustClasses = next.Tenants, next.TrustClasses
		kept.Overload, kept.Deadline, kept.Metadata = next.Overload, next.Deadline, next.Metadata
		kept.Node.Limits, kept.Node.BudgetCeiling = next.Node.Limits, next.Node.BudgetCeiling
		kept.Node.Region, kept.Node.Zone, kept.Node.Architecture = next.Node.Region, next.Node.Zone, next.Node.Architecture
	}
	n.reload.cfg = &kept
	n.log.Info("configuration reloaded", "applied", res.Applied, "restart_required", res.RestartRequired)
	return res, nil
}

// admissionChanges names the tables of next that differ from prev and
// that the admission ledger takes live.
func admissionChanges(prev, next *config.Config) []string {
	var out []string
	for _, f := range []struct {
		name       string
		prev, next any
	}{
		{"node.limits", prev.Node.Limits, next.Node.Limits}, {"node.budget_ceiling", prev.Node.BudgetCeiling, next.Node.BudgetCeiling},
		{"node placement", [3]string{prev.Node.Architecture, prev.Node.Region, prev.Node.Zone},
			[3]string{next.Node.Architecture, next.Node.Region, next.Node.Zone}},
		{"trust_classes", prev.TrustClasses, next.TrustClasses}, {"tenants", prev.Tenants, next.Tenants},
		{"overload", prev.Overload, next.Overload}, {"deadline", prev.Deadline, next.Deadline},
		{"metadata", prev.Metadata, next.Metadata},
	} {
		if !reflect.DeepEqual(f.prev, f.next) {
			out = append(out, f.name)
		}
	}
	return out
}

// restartRequired names the tables of next that differ from prev and are
// not applied live.
func restartRequired(prev, next *config.Config) []string {
	out := []string{}
	pn, nn := prev.Node, next.Node
	for _, n := range []*config.Node{&pn, &nn} { // the live parts of [node]
		n.TLS, n.Limits, n.BudgetCeiling = config.NodeTLS{}, admission.TenantLimits{}, vocab.Budget{}
		n.Architecture, n.Region, n.Zone = "", "", ""
	}
	if !reflect.DeepEqual(pn, nn) {
		out = append(out, "node")
	}
	if prev.Node.TLS != next.Node.TLS {
		out = append(out, "node.tls")
	}
	for _, f := range []struct {
		name       string
		prev, next any
	}{
		{"queue_classes", prev.QueueClasses, next.QueueClasses}, {"cell_classes", prev.CellClasses, next.CellClasses},
		{"scheduler", prev.Scheduler, next.Scheduler}, {"deploy_limits", prev.DeployLimits, next.DeployLimits},
		{"catalog", prev.Catalog, next.Catalog}, {"ingress", prev.Ingress, next.Ingress},
		{"tracing", prev.Tracing, next.Tracing}, {"cluster", prev.Cluster, next.Cluster},
	} {
		if !reflect.DeepEqual(f.prev, f.next) {
			out = append(out, f.name)
		}
	}
	return out
}

// reloadHandler is POST /v1/admin/reload: it answers what reload (the
// node's Reload) did, logging a failure to log.
func reloadHandler(reload func() (ReloadResult, error), log *slog.Logger) authedHandler {
	return func(w http.ResponseWriter, _ *http.Request, _ *auth.Principal) {
		res, err := reload()
		var ce *config.Error
		switch {
		case errors.Is(err, ErrNotReloadable):
			p := api.Refusal(refusal.Refusal{Code: refusal.CodeInvalidArgument, Reason: refusal.ReasonNotReloadable,
				Scope: refusal.ScopeNode, Dimension: refusal.DimConfiguration})
			p.Detail = "the node was started without a configuration file"
			api.WriteProblem(w, p, 0)
		case errors.As(err, &ce):
			p := badRequest(refusal.ReasonInvalidConfiguration, refusal.DimConfiguration, "the file has problems; nothing changed")
			for _, pr := range ce.Problems {
				p.Fields = append(p.Fields, api.FieldProblem{Field: pr.Field, Problem: pr.Problem})
			}
			api.WriteProblem(w, p, 0)
		case err != nil:
			log.Warn("reload failed", "err", err.Error())
			p := api.Refusal(refusal.Refusal{Code: refusal.CodeUnavailable, Reason: refusal.ReasonReloadFailed,
				Scope: refusal.ScopeNode, Dimension: refusal.DimConfiguration, Retryable: true})
			p.Detail = "the file is valid but could not be applied in full; see the node's log"
			api.WriteProblem(w, p, 0)
		default:
			api.WriteJSON(w, http.StatusOK, res)
		}
	}
}

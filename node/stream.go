package node

// Streamed bodies of wasi-http revisions (node/front's BodySource and
// ResponseSink): when a body streams, and the answers to its failures.

import (
	"net/http"

	"github.com/latent-node/latent-node/node/api"
	"github.com/latent-node/latent-node/refusal"
	"github.com/latent-node/latent-node/vocab"
)

// streamsBody reports whether the invocation r of a revision with guest
// ABI abi has its body streamed to the guest instead of read before
// admission: a wasi-http revision's body of unknown length or longer than
// declaredAtOnce. A short body is read first, as for every other ABI, so
// that a slow caller holds no cell for it.
func streamsBody(r *http.Request, abi vocab.ABI) bool {
	return abi == vocab.ABIWASIHTTP && r != nil && r.Body != nil && r.Body != http.NoBody &&
		(r.ContentLength < 0 || r.ContentLength > declaredAtOnce)
}

// streamedProblem is the answer to a streamed body's failure: 413 when it
// passed the tenant's limit (scope tenant when that is below the node's),
// 400 malformed-body otherwise.
func streamedProblem(err error, tenantScope bool) answer {
	p := bodyProblem(err, refusal.DimPayloadBytes)
	if tenantScope && p.Refusal.Reason == refusal.ReasonPayloadTooLarge {
		ref := p.Refusal
		ref.Scope = refusal.ScopeTenant
		p = api.Refusal(ref)
	}
	return answer{status: p.Status, problem: &p}
}

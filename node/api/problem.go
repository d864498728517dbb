package api

// Problem, the node's problem+json body, built from a refusal and written
// with its status and Retry-After.

import (
	"encoding/json"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/latent-node/latent-node/node/activation"
	"github.com/latent-node/latent-node/refusal"
)

// Problem is an application/problem+json body (RFC 9457) with the node's
// structured fields.
type Problem struct {
	Type      string `json:"type"`
	Title     string `json:"title"`
	Status    int    `json:"status"`
	Detail    string `json:"detail,omitempty"`
	Code      string `json:"code,omitempty"`
	Reason    string `json:"reason,omitempty"`
	Scope     string `json:"scope,omitempty"`
	Dimension string `json:"dimension,omitempty"`
	Retryable bool   `json:"retryable"`
	// Fields lists the problems of an invalid manifest or module, one per
	// field (a module refusal names the deploy limit or the import).
	Fields []FieldProblem `json:"invalid_fields,omitempty"`
	// Execution outcomes.
	Outcome  string `json:"outcome,omitempty"`
	ExitCode *int   `json:"exit_code,omitempty"`
	TrapKind string `json:"trap_kind,omitempty"`
	Stderr   string `json:"stderr,omitempty"`
	// Refusal is the typed refusal the wire fields render (not encoded):
	// what the node's own readers of an answer use (ProblemRecorder).
	Refusal refusal.Refusal `json:"-"`
}

// ProblemRecorder is a ResponseWriter (or one it wraps, reached through
// Unwrap) that wants to know which problem is written to it: the front's
// access log records the refusal instead of reading the body back.
type ProblemRecorder interface {
	RecordProblem(p Problem)
}

// FieldProblem is one problem of a refused manifest or module.
type FieldProblem struct {
	Field   string `json:"field"`
	Problem string `json:"problem"`
}

// Refusal builds the problem of a structured refusal: its status, type and
// title from r.HTTP (the one mapping, docs/api.md), its fields' wire names.
func Refusal(r refusal.Refusal) Problem {
	h := r.HTTP()
	return Problem{Type: h.Type, Title: h.Title, Status: h.Status, Code: r.Code.String(), Reason: r.Reason.String(),
		Scope: r.Scope.String(), Dimension: r.Dimension.String(), Retryable: r.Retryable, Refusal: r}
}

// RetryAfterSeconds rounds a drain estimate up to whole seconds, at least 1.
func RetryAfterSeconds(d time.Duration) int {
	s := math.Ceil(d.Seconds())
	if s < 1 || math.IsNaN(s) {
		return 1
	}
	if s > 3600 {
		return 3600
	}
	return int(s)
}

// WriteProblem writes p with its status; Retry-After only when retryable,
// WWW-Authenticate on 401. The first ProblemRecorder among w and the
// writers it wraps is told.
func WriteProblem(w http.ResponseWriter, p Problem, retryAfter time.Duration) {
	for rw := w; rw != nil; {
		if rec, ok := rw.(ProblemRecorder); ok {
			rec.RecordProblem(p)
			break
		}
		u, ok := rw.(interface{ Unwrap() http.ResponseWriter })
		if !ok {
			break
		}
		rw = u.Unwrap()
	}
	h := w.Header()
	h.Set("Content-Type", "application/problem+json")
	h.Set("Cache-Control", "no-store")
	if p.Retryable {
		h.Set("Retry-After", strconv.Itoa(RetryAfterSeconds(retryAfter)))
	}
	if p.Status == http.StatusUnauthorized {
		h.Set("WWW-Authenticate", `Bearer realm="latent-node"`)
	}
	w.WriteHeader(p.Status)
	data, _ := json.Marshal(p) // a Problem always encodes
	_, _ = w.Write(append(data, '\n'))
}

// WriteJSON writes v as indented JSON with status; a value that does not
// encode (a bug) is answered as the node's own failure. The answer is held
// until the caller has read it, so its bytes are charged to the request's
// ingress reservation first (activation.Record.Ingress); one that does not
// fit is refused like a full pool.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		WriteProblem(w, Refusal(refusal.Internal), 0)
		return
	}
	if !Hold(w, uint64(len(data))) {
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(data, '\n'))
}

// Hold charges n bytes the answer to w's request will hold to that
// request's ingress reservation (activation.Record.Ingress; nothing
// without one). When they do not fit it writes the pool's refusal and
// returns false.
func Hold(w http.ResponseWriter, n uint64) bool {
	res := activation.Of(w).Ingress
	if res == nil {
		return true
	}
	ref, ok := res.Grow(n)
	if !ok {
		WriteProblem(w, Refusal(ref), time.Second)
	}
	return ok
}

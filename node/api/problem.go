package api

import (
	"encoding/json"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/latent-node/latent-node/admission"
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
}

// FieldProblem is one problem of a refused manifest or module.
type FieldProblem struct {
	Field   string `json:"field"`
	Problem string `json:"problem"`
}

// StatusOf maps a structured refusal to its HTTP status (the table in
// docs/api.md).
func StatusOf(code, reason string) int {
	switch code {
	case admission.CodeUnauthenticated:
		return http.StatusUnauthorized
	case admission.CodePermissionDenied:
		return http.StatusForbidden
	case admission.CodeInvalidArgument:
		switch reason {
		case "unknown-path":
			return http.StatusNotFound
		case "method-not-allowed":
			return http.StatusMethodNotAllowed
		}
		return http.StatusBadRequest
	case admission.CodeAlreadyExists:
		return http.StatusConflict
	case admission.CodeDeadlineExceeded:
		return http.StatusGatewayTimeout
	case admission.CodeUnavailable:
		return http.StatusServiceUnavailable
	case admission.CodeAdmissionRejected:
		switch reason {
		case "revision-not-available", "service-not-found", "route-not-found":
			return http.StatusNotFound
		case "queue-deadline-infeasible":
			return http.StatusServiceUnavailable
		}
		return http.StatusUnprocessableEntity
	case admission.CodeResourceExhausted:
		switch reason {
		case "payload-too-large":
			return http.StatusRequestEntityTooLarge
		case "insufficient-storage", "catalog-full":
			return http.StatusInsufficientStorage
		case "node-overloaded":
			return http.StatusServiceUnavailable
		}
		return http.StatusTooManyRequests
	}
	return http.StatusInternalServerError
}

// Refusal builds the problem of a structured refusal; its type and title
// come from the code and reason.
func Refusal(status int, code, reason, scope, dimension string, retryable bool) Problem {
	return Problem{Type: "https://latent-node.dev/problems/" + code, Title: code + "/" + reason, Status: status,
		Code: code, Reason: reason, Scope: scope, Dimension: dimension, Retryable: retryable}
}

// FromRejection builds the problem of an admission refusal.
func FromRejection(r *admission.Rejection) Problem {
	return Refusal(StatusOf(r.Code, r.Reason), r.Code, r.Reason, r.Scope, r.Dimension, r.Retryable)
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
// WWW-Authenticate on 401.
func WriteProblem(w http.ResponseWriter, p Problem, retryAfter time.Duration) {
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

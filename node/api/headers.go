package api

// The request headers of an invocation (InvokeHeaders), parsed strictly,
// and the refusal of a malformed one.

import (
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/latent-node/latent-node/admission"
	"github.com/latent-node/latent-node/refusal"
	"github.com/latent-node/latent-node/vocab"
)

// InvokeHeaders are the parsed request headers of an invocation.
type InvokeHeaders struct {
	ActivationID string // empty: the node generates one
	RoutingKey   string
	Priority     uint32
	Timeout      time.Duration // 0: none
	Deadline     time.Time     // zero: none
	Budget       admission.BudgetRequest
	Metadata     []vocab.Attribute // Latent-Meta-* as lower-case keys
	// WantStderr: Latent-Stderr: tail asks for a successful activation's
	// stderr tail in the answer (Latent-Stderr-Tail); a failed one's is in
	// its problem body anyway.
	WantStderr bool
}

// headerError is a malformed request header: 400 invalid-argument with the
// header's name as the dimension (never its value).
type headerError struct {
	header  refusal.Dimension
	problem string
}

func (e *headerError) Error() string { return e.header.String() + ": " + e.problem }

// Bounds on what the parser accepts before admission's own bounds apply.
const (
	maxHeaderValueBytes = 1024
	maxMetadataHeaders  = 64
)

// oneValue reads header name, which may appear at most once and hold at
// most maxHeaderValueBytes, trimmed; ok is false when it is absent.
func oneValue(h http.Header, name refusal.Dimension) (v string, ok bool, err error) {
	vs := h.Values(name.String())
	switch {
	case len(vs) == 0:
		return "", false, nil
	case len(vs) > 1:
		return "", false, &headerError{name, "must appear once"}
	case len(vs[0]) > maxHeaderValueBytes:
		return "", false, &headerError{name, "too long"}
	}
	return strings.TrimSpace(vs[0]), true, nil
}

// CallerActivationID is the caller's Latent-Activation-Id when it is one
// ParseInvokeHeaders accepts (present once, not too long, not blank once
// trimmed), as that parser reads it.
func CallerActivationID(h http.Header) (string, bool) {
	v, ok, err := oneValue(h, refusal.DimHeaderActivationID)
	return v, ok && err == nil && v != ""
}

// ParseInvokeHeaders parses the Latent-* headers strictly: a malformed value
// is an error naming the header, never silently ignored. now anchors the
// relative timeout.
func ParseInvokeHeaders(h http.Header, now time.Time) (InvokeHeaders, error) {
	var out InvokeHeaders
	one := func(name refusal.Dimension) (string, bool, error) { return oneValue(h, name) }
	var err error
	var v string
	var ok bool
	if v, ok, err = one(refusal.DimHeaderActivationID); err != nil {
		return out, err
	} else if ok {
		if v == "" {
			return out, &headerError{refusal.DimHeaderActivationID, "must not be empty"}
		}
		out.ActivationID = v
	}
	if v, ok, err = one(refusal.DimHeaderRoutingKey); err != nil {
		return out, err
	} else if ok {
		out.RoutingKey = v
	}
	if v, ok, err = one(refusal.DimHeaderStderr); err != nil {
		return out, err
	} else if ok {
		if v != "tail" {
			return out, &headerError{refusal.DimHeaderStderr, `must be "tail"`}
		}
		out.WantStderr = true
	}
	if v, ok, err = one(refusal.DimHeaderPriority); err != nil {
		return out, err
	} else if ok {
		p, err := strconv.ParseUint(v, 10, 32)
		if err != nil {
			return out, &headerError{refusal.DimHeaderPriority, "must be a non-negative integer"}
		}
		out.Priority = uint32(p)
	}
	if v, ok, err = one(refusal.DimHeaderTimeoutMs); err != nil {
		return out, err
	} else if ok {
		ms, err := strconv.ParseInt(v, 10, 64)
		if err != nil || ms <= 0 || ms > math.MaxInt64/int64(time.Millisecond) {
			return out, &headerError{refusal.DimHeaderTimeoutMs, "must be a positive integer of milliseconds"}
		}
		out.Timeout = time.Duration(ms) * time.Millisecond
		out.Deadline = now.Add(out.Timeout)
	}
	if v, ok, err = one(refusal.DimHeaderDeadlineUnixMs); err != nil {
		return out, err
	} else if ok {
		ms, err := strconv.ParseInt(v, 10, 64)
		if err != nil || ms <= 0 {
			return out, &headerError{refusal.DimHeaderDeadlineUnixMs, "must be a positive integer of Unix milliseconds"}
		}
		d := time.UnixMilli(ms)
		if out.Deadline.IsZero() || d.Before(out.Deadline) {
			out.Deadline = d // the earlier wins
		}
	}
	if v, ok, err = one(refusal.DimHeaderBudget); err != nil {
		return out, err
	} else if ok {
		if out.Budget, err = parseBudget(v); err != nil {
			return out, err
		}
	}
	for name, vs := range h {
		key, isMeta := strings.CutPrefix(http.CanonicalHeaderKey(name), "Latent-Meta-")
		if !isMeta {
			continue
		}
		if len(out.Metadata)+len(vs) > maxMetadataHeaders {
			return out, &headerError{refusal.DimHeaderMeta, "too many metadata headers"}
		}
		for _, v := range vs {
			out.Metadata = append(out.Metadata, vocab.Attribute{Key: strings.ToLower(key), Value: v})
		}
	}
	return out, nil
}

// parseBudget parses "fuel=N, memory=BYTES, wall-ms=N" (any subset, each once).
func parseBudget(v string) (admission.BudgetRequest, error) {
	var b admission.BudgetRequest
	bad := func(p string) error { return &headerError{refusal.DimHeaderBudget, p} }
	if v == "" {
		return b, bad("must name at least one of fuel, memory, wall-ms")
	}
	for _, part := range strings.Split(v, ",") {
		k, val, found := strings.Cut(strings.TrimSpace(part), "=")
		if !found {
			return b, bad("want key=value pairs: fuel=N, memory=BYTES, wall-ms=N")
		}
		k, val = strings.TrimSpace(k), strings.TrimSpace(val)
		switch k {
		case "fuel":
			n, err := strconv.ParseUint(val, 10, 64)
			if err != nil || b.HasCPUFuel {
				return b, bad("fuel must be a non-negative integer, given once")
			}
			b.CPUFuel, b.HasCPUFuel = n, true
		case "memory":
			n, err := vocab.ParseByteSize(val)
			if err != nil || b.HasMemoryBytes {
				return b, bad("memory must be a byte size, given once")
			}
			b.MemoryBytes, b.HasMemoryBytes = uint64(n), true
		case "wall-ms":
			n, err := strconv.ParseInt(val, 10, 64)
			if err != nil || n < 0 || n > math.MaxInt64/int64(time.Millisecond) || b.HasWallTime {
				return b, bad("wall-ms must be a non-negative integer, given once")
			}
			b.WallTime, b.HasWallTime = time.Duration(n)*time.Millisecond, true
		default:
			return b, bad("unknown dimension (want fuel, memory or wall-ms)")
		}
	}
	return b, nil
}

// isHeaderError reports whether err is a malformed header.
func isHeaderError(err error) (*headerError, bool) {
	var he *headerError
	ok := errors.As(err, &he)
	return he, ok
}

// InvalidHeader returns the malformed header err reports (the problem's
// dimension, named as the header), or false when err is not a header error.
func InvalidHeader(err error) (refusal.Dimension, bool) {
	he, ok := isHeaderError(err)
	if !ok {
		return refusal.DimNone, false
	}
	return he.header, true
}

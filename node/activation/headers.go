package activation

// The headers that describe an executed activation, rendered from its
// record.

import (
	"net/http"
	"strconv"
	"time"
)

// headerKeys are the activation headers, in the order of WriteHeaders'
// values.
var headerKeys = [...]string{"Latent-Revision", "Latent-Outcome", "Latent-Fuel-Used", "Latent-Memory-Peak-Bytes",
	"Latent-Queue-Wait-Ms", "Latent-Execution-Ms", "Server-Timing", "Latent-Cell-Class", "Latent-Stderr-Tail"}

// WriteHeaders sets the headers of the executed activation r on h, with
// stderrTail (StderrHeader's form) when not empty. Canonical keys are
// assigned directly and every value shares one backing array: an answer's
// headers are otherwise a dozen small allocations.
func (r *Record) WriteHeaders(h http.Header, stderrTail string) {
	vals := []string{string(r.Revision), r.Outcome.String(), strconv.FormatUint(r.FuelUsed, 10),
		strconv.FormatUint(r.MemoryPeakBytes, 10), strconv.FormatInt(r.Timing.QueueWait().Milliseconds(), 10),
		strconv.FormatInt(r.Execution.Milliseconds(), 10), r.Timing.ServerTiming(), r.CellClass.String(), stderrTail}
	if stderrTail == "" {
		vals = vals[:len(vals)-1]
	}
	for i := range vals {
		h[headerKeys[i]] = vals[i : i+1 : i+1]
	}
}

// ServerTiming renders t as a Server-Timing header value, in milliseconds
// with microsecond resolution.
func (t Timing) ServerTiming() string {
	b := make([]byte, 0, 80)
	for i, p := range [...]struct {
		name string
		d    time.Duration
	}{{"front", t.Front}, {"queue", t.Queue}, {"exec", t.Exec}, {"back", t.Back}} {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = append(b, p.name...)
		b = append(b, ";dur="...)
		b = strconv.AppendFloat(b, float64(p.d.Microseconds())/1000, 'f', 3, 64)
	}
	return string(b)
}

// MaxStderrHeaderBytes bounds the Latent-Stderr-Tail header.
const MaxStderrHeaderBytes = 4 << 10

// StderrHeader is a stderr tail as a header value: Go-quoted (control
// bytes, newlines and non-ASCII escaped, so the value is printable ASCII),
// keeping the end of the tail when the quoted text would pass
// MaxStderrHeaderBytes.
func StderrHeader(tail []byte) string {
	q := strconv.QuoteToASCII(string(tail))
	for len(q) > MaxStderrHeaderBytes && len(tail) > 0 {
		tail = tail[len(tail)/4+1:]
		q = strconv.QuoteToASCII(string(tail))
	}
	return q
}

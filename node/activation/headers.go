package activation

// The headers that describe an executed activation, rendered from its
// record.

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// headerKeys are the activation headers, in the order of WriteHeaders'
// values.
var headerKeys = [...]string{"Latent-Revision", "Latent-Outcome", "Latent-Fuel-Used", "Latent-Memory-Peak-Bytes",
	"Latent-Queue-Wait-Ms", "Latent-Execution-Ms", "Server-Timing", "Latent-Cell-Class", "Latent-Stderr-Tail"}

// TrailerNames is the Trailer header of an answer whose body streamed
// before its activation ended: the activation headers follow the body.
var TrailerNames = strings.Join(headerKeys[:], ", ")

// WriteHeaders sets the headers of the executed activation r on h, with
// stderrTail (StderrHeader's form) when not empty. Canonical keys are
// assigned directly, the numbers are rendered into one string that the
// values share, and the values are held in the record (SetHeader): an
// answer's headers are otherwise a dozen small allocations.
func (r *Record) WriteHeaders(h http.Header, stderrTail string) {
	var buf [160]byte
	b := buf[:0]
	var ends [5]int // where each number and Server-Timing end in b
	b = strconv.AppendUint(b, r.FuelUsed, 10)
	ends[0] = len(b)
	b = strconv.AppendUint(b, r.MemoryPeakBytes, 10)
	ends[1] = len(b)
	b = strconv.AppendInt(b, r.Timing.QueueWait().Milliseconds(), 10)
	ends[2] = len(b)
	b = strconv.AppendInt(b, r.Execution.Milliseconds(), 10)
	ends[3] = len(b)
	b = r.Timing.appendServerTiming(b)
	ends[4] = len(b)
	nums := string(b)
	vals := [...]string{string(r.Revision), r.Outcome.String(), nums[:ends[0]], nums[ends[0]:ends[1]],
		nums[ends[1]:ends[2]], nums[ends[2]:ends[3]], nums[ends[3]:ends[4]], r.CellClass.String(), stderrTail}
	n := len(vals)
	if stderrTail == "" {
		n--
	}
	for i := range n {
		r.SetHeader(h, headerKeys[i], vals[i])
	}
}

// SetHeader sets the header key (canonical) to the single value v on h,
// with v held in the record: the front sets an answer's headers through
// its record, which has room for all of an invocation's.
func (r *Record) SetHeader(h http.Header, key, v string) {
	if r.nvals == len(r.vals) {
		h[key] = []string{v}
		return
	}
	i := r.nvals
	r.vals[i] = v
	r.nvals++
	h[key] = r.vals[i : i+1 : i+1]
}

// ServerTiming renders t as a Server-Timing header value, in milliseconds
// with microsecond resolution.
func (t Timing) ServerTiming() string {
	var buf [80]byte
	return string(t.appendServerTiming(buf[:0]))
}

func (t Timing) appendServerTiming(b []byte) []byte {
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
	return b
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

// The answer writers of the front: AccessWriter notes an answer's status
// and refusal for the access log, DeadlineWriter bounds the writing of an
// answer (node.write_timeout).

package front

import (
	"net/http"
	"time"

	"github.com/latent-node/latent-node/node/activation"
	"github.com/latent-node/latent-node/node/api"
)

// AccessWriter holds the request's record (activation.Of finds it through
// the writers wrapping it) and records the answer's status for the access
// log, and the refusal of a problem answer (RecordProblem) in the record.
// The two are one allocation per request.
type AccessWriter struct {
	http.ResponseWriter
	status int
	rec    activation.Record
}

// NewAccessWriter wraps w with a new record.
func NewAccessWriter(w http.ResponseWriter) *AccessWriter {
	return &AccessWriter{ResponseWriter: w}
}

// Record is the request's record.
func (w *AccessWriter) Record() *activation.Record { return &w.rec }

// Status is the answer's status (0: nothing was written).
func (w *AccessWriter) Status() int { return w.status }

// WriteHeader records the first status written.
func (w *AccessWriter) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *AccessWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(p)
}

// RecordProblem notes in the request's record the refusal of the problem
// api.WriteProblem is writing (for an executed activation that failed, its
// outcome's; the record tells the two apart).
func (w *AccessWriter) RecordProblem(p api.Problem) {
	w.rec.Answer(p.Refusal)
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (w *AccessWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// DeadlineWriter records whether the answer's status line was written, and
// sets the connection's write deadline when it starts.
type DeadlineWriter struct {
	http.ResponseWriter
	rc      http.ResponseController
	bound   time.Duration // node.write_timeout (0: no deadline)
	started bool
}

// NewDeadlineWriter wraps w and sets its connection's write deadline bound
// from now (0: none); it is set again as the answer starts.
func NewDeadlineWriter(w http.ResponseWriter, bound time.Duration) *DeadlineWriter {
	dw := &DeadlineWriter{ResponseWriter: w, rc: *http.NewResponseController(w), bound: bound}
	dw.extend()
	return dw
}

// Started reports whether the answer's status line was written.
func (w *DeadlineWriter) Started() bool { return w.started }

// extend sets the write deadline bound from now. Socket deadlines are wall
// clock time, whatever clock the node runs on.
func (w *DeadlineWriter) extend() {
	if w.bound > 0 {
		_ = w.rc.SetWriteDeadline(time.Now().Add(w.bound))
	}
}

func (w *DeadlineWriter) start() {
	if !w.started {
		w.started = true
		w.extend()
	}
}

// WriteHeader starts the answer.
func (w *DeadlineWriter) WriteHeader(status int) {
	w.start()
	w.ResponseWriter.WriteHeader(status)
}

func (w *DeadlineWriter) Write(p []byte) (int, error) {
	w.start()
	return w.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (w *DeadlineWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

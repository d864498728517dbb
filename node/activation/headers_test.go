package activation

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/latent-node/latent-node/refusal"
	"github.com/latent-node/latent-node/vocab"
)

// TestStderrHeader: the header value is printable ASCII and bounded, keeping
// the end of a long tail.
func TestStderrHeader(t *testing.T) {
	long := []byte(strings.Repeat("\x01é\n", 4000) + "the end")
	h := StderrHeader(long)
	if len(h) > MaxStderrHeaderBytes {
		t.Fatalf("header of %d bytes", len(h))
	}
	for _, r := range h {
		if r < 0x20 || r > 0x7e {
			t.Fatalf("byte %q in the header", r)
		}
	}
	if tail, err := strconv.Unquote(h); err != nil || !strings.HasSuffix(tail, "the end") {
		t.Fatalf("unquoted %q, %v", tail, err)
	}
}

// TestWriteHeaders: an executed activation's headers come from its record,
// each value in its canonical key, Latent-Stderr-Tail only when given.
func TestWriteHeaders(t *testing.T) {
	rec := &Record{Revision: "rev1-abc", Executed: true, Outcome: refusal.OutcomeSuccess, FuelUsed: 1184,
		MemoryPeakBytes: 67872, CellClass: vocab.CellTiny,
		Timing:    Timing{Front: 1500 * time.Microsecond, Queue: 2 * time.Millisecond, Exec: 3 * time.Millisecond, Back: 40 * time.Microsecond},
		Execution: 2900 * time.Microsecond}
	h := http.Header{}
	rec.WriteHeaders(h, "")
	want := map[string]string{"Latent-Revision": "rev1-abc", "Latent-Outcome": "success", "Latent-Fuel-Used": "1184",
		"Latent-Memory-Peak-Bytes": "67872", "Latent-Queue-Wait-Ms": "3", "Latent-Execution-Ms": "2",
		"Server-Timing": "front;dur=1.500, queue;dur=2.000, exec;dur=3.000, back;dur=0.040", "Latent-Cell-Class": "tiny"}
	if len(h) != len(want) {
		t.Fatalf("headers %v, want %v", h, want)
	}
	for k, v := range want {
		if got := h.Get(k); got != v {
			t.Errorf("%s: %q, want %q", k, got, v)
		}
	}
	rec.WriteHeaders(h, `"x\n"`)
	if h.Get("Latent-Stderr-Tail") != `"x\n"` {
		t.Fatalf("stderr tail %q", h.Get("Latent-Stderr-Tail"))
	}
}

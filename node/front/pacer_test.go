package front

import (
	"testing"
	"time"
)

// TestRefusalPacer: a burst is answered at once, then refusals are held to
// the rate, up to MaxRefusalHold; another principal is not affected, and an
// idle principal gets its burst back.
func TestRefusalPacer(t *testing.T) {
	t0 := time.Unix(1000, 0)
	p := NewRefusalPacer(100, 3) // 10ms apart, burst 3
	var holds []time.Duration
	for range 6 {
		holds = append(holds, p.Hold("acme/alice", t0))
	}
	want := []time.Duration{0, 0, 0, 10 * time.Millisecond, 20 * time.Millisecond, 30 * time.Millisecond}
	for i := range want {
		if holds[i] != want[i] {
			t.Fatalf("holds at one instant: have %v, want %v", holds, want)
		}
	}
	if h := p.Hold("beta/carol", t0); h != 0 {
		t.Fatalf("another principal held %v", h)
	}
	// Far behind: capped, and the schedule does not run further ahead.
	for range 500 {
		p.Hold("acme/alice", t0)
	}
	if h := p.Hold("acme/alice", t0); h != MaxRefusalHold {
		t.Fatalf("far behind: held %v, want %v", h, MaxRefusalHold)
	}
	// The rate holds over time: one refusal per 10ms answered at once.
	t1 := t0.Add(10 * time.Second)
	for i := range 50 {
		if h := p.Hold("acme/alice", t1.Add(time.Duration(i)*10*time.Millisecond)); h != 0 {
			t.Fatalf("refusal %d at the rate held %v", i, h)
		}
	}
}

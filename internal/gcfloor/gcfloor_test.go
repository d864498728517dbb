package gcfloor

import (
	"runtime"
	"testing"
)

// goal is Go's heap goal for a live heap and GOGC percent (the larger of
// the proportional goal and the scaled minimum).
func goal(live uint64, percent int) uint64 {
	return max(live+live*uint64(percent)/100, minHeap*uint64(percent)/100)
}

func TestPercent(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct {
		live, floor uint64
		want        int
	}{
		{live: 1 * mib, floor: 64 * mib, want: 1600}, // the minimum goal reaches the floor
		{live: 0, floor: 64 * mib, want: 1600},       // before the first collection
		{live: 20 * mib, floor: 64 * mib, want: 220}, // live × 3.2 = 64 MiB
		{live: 32 * mib, floor: 64 * mib, want: 100}, // the default reaches the floor
		{live: 64 * mib, floor: 64 * mib, want: 100}, // the default: twice the floor
		{live: 100 * mib, floor: 64 * mib, want: 64}, // headroom of the floor
		{live: 128 * mib, floor: 64 * mib, want: 50}, // half the live heap, from here on
		{live: 400 * mib, floor: 64 * mib, want: 50},
		{live: 1 * mib, floor: 4 * mib, want: 100}, // a floor at Go's own minimum
		{live: 1 * mib, floor: 0, want: 100},       // no floor
	} {
		got := Percent(tc.live, tc.floor)
		if got != tc.want {
			t.Errorf("Percent(%d MiB, %d MiB) = %d, want %d", tc.live/mib, tc.floor/mib, got, tc.want)
		}
	}
}

// TestPercent_goalOracle: for live heaps from 64 KiB to 1 GiB, checked
// against Go's goal formula: up to the floor the goal is at least the
// default's and no more than the floor unless the default's is; above it,
// the headroom is the floor or half the live heap, whichever is larger,
// and never more than the default's.
func TestPercent_goalOracle(t *testing.T) {
	for _, floor := range []uint64{8 << 20, DefaultFloor, 256 << 20} {
		for live := uint64(64 << 10); live <= 1<<30; live += live/7 + 1 {
			p := Percent(live, floor)
			g, def := goal(live, p), goal(live, 100)
			if g > def && live > floor {
				t.Fatalf("floor %d live %d: GOGC %d gives goal %d above the default's %d", floor, live, p, g, def)
			}
			if live > floor {
				want := live + max(floor, live/2)
				if g < want-want/100 || g > want+want/100 {
					t.Fatalf("floor %d live %d: GOGC %d gives goal %d, want about %d", floor, live, p, g, want)
				}
				continue
			}
			if g < def {
				t.Fatalf("floor %d live %d: GOGC %d gives goal %d below the default's %d", floor, live, p, g, def)
			}
			if g > max(floor+floor/100, def) { // 1 %: integer division
				t.Fatalf("floor %d live %d: GOGC %d gives goal %d above the floor and the default's %d", floor, live, p, g, def)
			}
			if def < floor && g < floor-floor/50 {
				t.Fatalf("floor %d live %d: GOGC %d gives goal %d well below the floor", floor, live, p, g)
			}
		}
	}
}

func TestTuner_setsOnChange(t *testing.T) {
	live := uint64(1 << 20)
	var sets []int
	tu := &Tuner{floor: DefaultFloor, live: func() uint64 { return live }, set: func(p int) int { sets = append(sets, p); return 0 }}
	tu.Tune()
	tu.Tune() // unchanged: not set again
	live = 48 << 20
	tu.Tune()
	if len(sets) != 2 || sets[0] != 1600 || sets[1] != 100 {
		t.Fatalf("sets = %v, want [1600 100]", sets)
	}
}

// TestLiveHeap: after a collection the runtime reports a live heap that
// holds at least what this test keeps reachable.
func TestLiveHeap(t *testing.T) {
	keep := make([]byte, 8<<20)
	runtime.GC()
	if got := LiveHeap(); got < uint64(len(keep)) {
		t.Fatalf("LiveHeap() = %d, want ≥ %d", got, len(keep))
	}
	runtime.KeepAlive(keep)
}

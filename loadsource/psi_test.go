package loadsource

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/latent-node/latent-node/internal/testutil"
)

// psi formats a PSI file whose "some" line has avg10 and total.
func psi(avg10, total string) string {
	return "some avg10=" + avg10 + " avg60=1.00 avg300=0.50 total=" + total + "\n" +
		"full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"
}

func TestParsePSI(t *testing.T) {
	const full = "full avg10=0.00 avg60=0.00 avg300=0.00 total=0"
	tests := []struct {
		name  string
		in    string
		ok    bool
		avg10 float64
		total uint64
	}{
		{"some and full", "some avg10=31.99 avg60=18.31 avg300=18.56 total=2073110393\n" + full + "\n", true, 31.99, 2073110393},
		{"some only (older kernels' cpu)", "some avg10=0.00 avg60=0.00 avg300=0.00 total=42\n", true, 0, 42},
		{"full before some", full + "\nsome avg10=100.00 avg60=0 avg300=5 total=7\n", true, 100, 7},
		{"no trailing newline", "some avg10=1.50 avg60=0.00 avg300=0.00 total=18446744073709551615", true, 1.5, 1<<64 - 1},
		{"missing some line", full + "\n", false, 0, 0},
		{"empty", "", false, 0, 0},
		{"only a newline", "\n", false, 0, 0},
		{"garbage", "hello world\n", false, 0, 0},
		{"binary", "\x00\x01\x02\n", false, 0, 0},
		{"duplicate some", psi("1.00", "5") + "some avg10=1.00 avg60=0.00 avg300=0.00 total=9\n", false, 0, 0},
		{"duplicate full", psi("1.00", "5") + full + "\n", false, 0, 0},
		{"unknown line", psi("1.00", "5") + "io avg10=1.00 avg60=0.00 avg300=0.00 total=9\n", false, 0, 0},
		{"blank line between", "some avg10=1.00 avg60=0.00 avg300=0.00 total=9\n\n" + full + "\n", false, 0, 0},
		{"negative total", psi("1.00", "-5"), false, 0, 0},
		{"negative avg", psi("-1.00", "5"), false, 0, 0},
		{"plus sign", psi("+1.00", "5"), false, 0, 0},
		{"huge total", psi("1.00", "18446744073709551616"), false, 0, 0},
		{"huge avg", psi("100.01", "5"), false, 0, 0},
		{"avg exponent", psi("1e1", "5"), false, 0, 0},
		{"avg NaN", psi("NaN", "5"), false, 0, 0},
		{"avg Inf", psi("Inf", "5"), false, 0, 0},
		{"avg trailing dot", psi("1.", "5"), false, 0, 0},
		{"avg leading dot", psi(".5", "5"), false, 0, 0},
		{"total with decimals", psi("1.00", "5.0"), false, 0, 0},
		{"total hex", psi("1.00", "0x5"), false, 0, 0},
		{"missing field", "some avg10=1.00 avg60=0.00 total=5\n", false, 0, 0},
		{"extra field", "some avg10=1.00 avg60=0.00 avg300=0.00 total=5 x=1\n", false, 0, 0},
		{"fields out of order", "some avg60=0.00 avg10=1.00 avg300=0.00 total=5\n", false, 0, 0},
		{"double space", "some  avg10=1.00 avg60=0.00 avg300=0.00 total=5\n", false, 0, 0},
		{"tab", "some\tavg10=1.00 avg60=0.00 avg300=0.00 total=5\n", false, 0, 0},
		{"CRLF", "some avg10=1.00 avg60=0.00 avg300=0.00 total=5\r\n", false, 0, 0},
		{"empty value", psi("", "5"), false, 0, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			some, ok := parsePSI([]byte(tc.in))
			if ok != tc.ok || (ok && (some.avg10 != tc.avg10 || some.total != tc.total)) {
				t.Fatalf("want %v %v %v, have %v %v %v", tc.ok, tc.avg10, tc.total, ok, some.avg10, some.total)
			}
		})
	}
}

// hostPSI is a fake /proc/pressure with the given cpu and memory files.
func hostPSI(cpu, memory string) cgroupTree { return cgroupTree{"cpu": cpu, "memory": memory} }

func TestPSISource_Sample(t *testing.T) {
	type call struct {
		update      cgroupTree // applied before the call
		cpu, memory float64
		malformed   bool   // the error matches ErrSourceMalformed
		err         string // substring; "" for success
	}
	tests := []struct {
		name  string
		tree  cgroupTree
		step  time.Duration // between clock readings (one per call)
		calls []call
	}{
		{
			name: "prime with avg10 then windows",
			tree: hostPSI(psi("25.00", "1000000"), psi("2.50", "500")),
			step: 250 * time.Millisecond,
			calls: []call{
				{cpu: 0.25, memory: 0.025},
				// 125ms of cpu stall and 25ms of memory stall in 250ms.
				{update: hostPSI(psi("90.00", "1125000"), psi("90.00", "25500")), cpu: 0.5, memory: 0.1},
				{cpu: 0, memory: 0}, // nothing moved; avg10 no longer counts
				{update: hostPSI(psi("0.00", "1375000"), psi("0.00", "25500")), cpu: 1, memory: 0},
			},
		},
		{
			name: "clamped to one",
			tree: hostPSI(psi("0.00", "0"), psi("0.00", "0")),
			step: 250 * time.Millisecond,
			calls: []call{
				{cpu: 0, memory: 0},
				{update: hostPSI(psi("0.00", "18446744073709551615"), psi("0.00", "300000")), cpu: 1, memory: 1},
			},
		},
		{
			name: "cpu total going backwards, then recovery",
			tree: hostPSI(psi("0.00", "1000"), psi("0.00", "1000")),
			step: 250 * time.Millisecond,
			calls: []call{
				{cpu: 0, memory: 0},
				{update: hostPSI(psi("0.00", "999"), psi("0.00", "1000")), malformed: true, err: "psi cpu: malformed: total went backwards"},
				{update: hostPSI(psi("0.00", "63499"), psi("0.00", "1000")), cpu: 0.25, memory: 0},
			},
		},
		{
			name: "memory total going backwards",
			tree: hostPSI(psi("0.00", "1000"), psi("0.00", "1000")),
			step: 250 * time.Millisecond,
			calls: []call{
				{cpu: 0, memory: 0},
				{update: hostPSI(psi("0.00", "1000"), psi("0.00", "0")), malformed: true, err: "psi memory: malformed: total went backwards"},
			},
		},
		{
			name: "clock did not advance",
			tree: hostPSI(psi("0.00", "1000"), psi("0.00", "1000")),
			step: 0,
			calls: []call{
				{cpu: 0, memory: 0},
				{malformed: true, err: "no time elapsed"},
			},
		},
		{
			name:  "malformed cpu on the first call",
			tree:  hostPSI("some avg10=lots\n", psi("0.00", "0")),
			step:  time.Second,
			calls: []call{{malformed: true, err: "psi cpu: malformed"}},
		},
		{
			name: "malformed memory later",
			tree: hostPSI(psi("0.00", "0"), psi("0.00", "0")),
			step: time.Second,
			calls: []call{
				{cpu: 0, memory: 0},
				{update: cgroupTree{"memory": "full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"}, malformed: true, err: "psi memory: malformed"},
			},
		},
		{
			name:  "too large",
			tree:  hostPSI(psi("0.00", "0")+strings.Repeat("x", maxPSIFileSize), psi("0.00", "0")),
			step:  time.Second,
			calls: []call{{malformed: true, err: "psi cpu: malformed: too large"}},
		},
		{
			name:  "cpu missing",
			tree:  cgroupTree{"memory": psi("0.00", "0")},
			step:  time.Second,
			calls: []call{{err: "psi cpu: no such file"}},
		},
		{
			name:  "memory missing",
			tree:  cgroupTree{"cpu": psi("0.00", "0")},
			step:  time.Second,
			calls: []call{{err: "psi memory: no such file"}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			tc.tree.write(t, dir)
			src := NewPSISource(dir, testutil.NewClock(t0, testutil.WithStep(tc.step)))
			for i, c := range tc.calls {
				c.update.write(t, dir)
				cpu, memory, err := src.Sample(context.Background())
				if c.err != "" {
					if err == nil || !strings.Contains(err.Error(), c.err) {
						t.Fatalf("call %d: want an error containing %q, have %v", i, c.err, err)
					}
					if errors.Is(err, ErrSourceMalformed) != c.malformed {
						t.Fatalf("call %d: want errors.Is(ErrSourceMalformed) %v, have %v", i, c.malformed, err)
					}
					if msg := err.Error(); strings.Contains(msg, dir) || strings.ContainsAny(msg, "0123456789") {
						t.Fatalf("call %d: error names a path or a number: %v", i, err)
					}
					continue
				}
				if err != nil || cpu != c.cpu || memory != c.memory {
					t.Fatalf("call %d: want %v, %v; have %v, %v, %v", i, c.cpu, c.memory, cpu, memory, err)
				}
			}
		})
	}
}

func TestPSISource_cgroup(t *testing.T) {
	dir := t.TempDir()
	cgroupTree{"cpu.pressure": psi("50.00", "0"), "memory.pressure": psi("10.00", "0")}.write(t, dir)
	src := NewCgroupPSISource(dir, testutil.NewClock(t0, testutil.WithStep(250*time.Millisecond)))
	if cpu, memory, err := src.Sample(context.Background()); err != nil || cpu != 0.5 || memory != 0.1 {
		t.Fatalf("want 0.5, 0.1; have %v, %v, %v", cpu, memory, err)
	}
	cgroupTree{"cpu.pressure": psi("0.00", "125000"), "memory.pressure": ""}.write(t, dir)
	if _, _, err := src.Sample(context.Background()); !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "memory.pressure") {
		t.Fatalf("want memory.pressure not to exist, have %v", err)
	}
	if Describe(src) != KindPSICgroup || Describe(NewPSISource(dir, nil)) != KindPSIHost {
		t.Fatal("wrong kinds")
	}
	if NewPSISource("", nil).dir != DefaultPressureDir || NewCgroupPSISource("", nil).dir != DefaultCgroupRoot {
		t.Fatal("wrong default directories")
	}
}

// TestPSISource_real reads this machine's /proc/pressure when it has one.
func TestPSISource_real(t *testing.T) {
	if !psiReadable(DefaultPressureDir, filePSIHostCPU, filePSIHostMemory) {
		t.Skip("no PSI on this kernel")
	}
	src := NewPSISource("", nil)
	for i := range 2 {
		cpu, memory, err := src.Sample(context.Background())
		if err != nil || !isPressure(cpu) || !isPressure(memory) {
			t.Fatalf("call %d: want pressures, have %v, %v, %v", i, cpu, memory, err)
		}
	}
}

func TestDetect(t *testing.T) {
	cgroupPSI := cgroupTree{"cpu.pressure": psi("0.00", "0"), "memory.pressure": psi("0.00", "0")}
	join := func(trees ...cgroupTree) cgroupTree {
		out := cgroupTree{}
		for _, tree := range trees {
			for k, v := range tree {
				out[k] = v
			}
		}
		return out
	}
	goodHost := hostPSI(psi("0.00", "0"), psi("0.00", "0"))
	tests := []struct {
		name         string
		cgroup, host cgroupTree
		isDir        string // a directory created under the host dir (a read error)
		want         string
	}{
		{"nothing", cgroupTree{}, cgroupTree{}, "", KindUtilizationHost},
		{"cgroup psi preferred", join(limited(), cgroupPSI), goodHost, "", KindPSICgroup},
		{"cgroup psi without limits", join(cgroupTree{"cgroup.controllers": "cpu memory"}, cgroupPSI), cgroupTree{}, "", KindPSICgroup},
		{"pressure files without cgroup.controllers", cgroupPSI, goodHost, "", KindPSIHost},
		{"cgroup psi malformed", join(limited(), cgroupPSI, cgroupTree{"cpu.pressure": "garbage"}), goodHost, "", KindPSIHost},
		{"host psi only", cgroupTree{}, goodHost, "", KindPSIHost},
		{"host psi with v2 limits", limited(), goodHost, "", KindPSIHost},
		{"no psi, cgroup v2 limits", limited(), cgroupTree{}, "", KindUtilizationCgroup},
		{"host psi unreadable, cgroup v2 limits", limited(), cgroupTree{"memory": psi("0.00", "0")}, "cpu", KindUtilizationCgroup},
		{"host psi missing memory", cgroupTree{}, cgroupTree{"cpu": psi("0.00", "0")}, "", KindUtilizationHost},
		{"host psi malformed", cgroupTree{}, hostPSI(psi("0.00", "-1"), psi("0.00", "0")), "", KindUtilizationHost},
		{"no cgroup.controllers (v1)", cgroupTree{"memory.current": "1", "memory.max": "1", "cpu.max": "max 100000", "cpu.stat": "usage_usec 1"}, cgroupTree{}, "", KindUtilizationHost},
		{"v2 root cgroup (no memory.max)", cgroupTree{"cgroup.controllers": "cpu memory", "cpu.stat": "usage_usec 1"}, cgroupTree{}, "", KindUtilizationHost},
		{"cpu controller not delegated", cgroupTree{"cgroup.controllers": "memory", "memory.current": "1", "memory.max": "max", "cpu.stat": "usage_usec 1"}, cgroupTree{}, "", KindUtilizationHost},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cg, host := t.TempDir(), t.TempDir()
			tc.cgroup.write(t, cg)
			tc.host.write(t, host)
			if tc.isDir != "" {
				if err := os.Mkdir(filepath.Join(host, tc.isDir), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			src := Detect(DetectConfig{CgroupRoot: cg, PressureDir: host})
			if have := Describe(src); have != tc.want {
				t.Fatalf("want %s, have %s (%T)", tc.want, have, src)
			}
			var dir string
			switch s := src.(type) {
			case *PSISource:
				dir = s.dir
			case *CgroupSource:
				dir = s.root
			}
			switch tc.want {
			case KindPSICgroup, KindUtilizationCgroup:
				if dir != cg {
					t.Fatalf("want the cgroup directory, have %q", dir)
				}
			case KindPSIHost:
				if dir != host {
					t.Fatalf("want the pressure directory, have %q", dir)
				}
			}
		})
	}
	if DetectSource("") == nil {
		t.Fatal("DetectSource(\"\") returned nil")
	}
}

func TestDescribe(t *testing.T) {
	tests := []struct {
		name string
		src  Source
		want string
	}{
		{"fixed", FixedSource{CPU: 0.5, Memory: 0.25}, KindFixed},
		{"host", NewHostSource(), KindUtilizationHost},
		{"cgroup", NewCgroupSource(CgroupConfig{}), KindUtilizationCgroup},
		{"psi host", NewPSISource("", nil), KindPSIHost},
		{"psi cgroup", NewCgroupPSISource("", nil), KindPSICgroup},
		{"foreign", &sourceFunc{}, KindOther},
		{"nil", nil, KindOther},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if have := Describe(tc.src); have != tc.want {
				t.Fatalf("want %q, have %q", tc.want, have)
			}
		})
	}
	if cpu, memory, err := (FixedSource{CPU: 0.5, Memory: 0.25}).Sample(context.Background()); cpu != 0.5 || memory != 0.25 || err != nil {
		t.Fatalf("want 0.5, 0.25; have %v, %v, %v", cpu, memory, err)
	}
}

package loadsource

// PSISource: Linux pressure stall information, host-wide or per cgroup, and
// the strict parser of its files.

import (
	"bytes"
	"context"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/latent-node/latent-node/vocab"
)

// DefaultPressureDir is where Linux publishes host-wide pressure stall
// information (PSI): the files cpu, memory and io.
const DefaultPressureDir = "/proc/pressure"

// The PSI files PSISource reads: host-wide in DefaultPressureDir, per cgroup
// in a cgroup v2 directory.
const (
	filePSIHostCPU      = "cpu"
	filePSIHostMemory   = "memory"
	filePSICgroupCPU    = "cpu.pressure"
	filePSICgroupMemory = "memory.pressure"
)

// maxPSIFileSize bounds a PSI file read; real ones are two lines of about 60
// bytes. A larger file is malformed.
const maxPSIFileSize = 4096

// PSISource measures pressure with Linux pressure stall information (PSI):
// the share of wall time during which runnable work waited for a resource.
//
//	cpu    = Δ cpu "some" total / Δ wall time
//	memory = Δ memory "some" total / Δ wall time
//
// both clamped to [0,1], between two consecutive calls; the totals are
// cumulative stall microseconds and the wall time comes from the Clock. CPU
// "some" is the share of time in which at least one runnable task waited for
// a CPU, so a node whose own work keeps every CPU busy without a queue reads
// near 0, and reads near 1 only when work queues for CPUs. Memory "some" is
// the share of time in which a task stalled on memory (reclaim, refaults,
// swap-in): it measures stalls, not occupancy, and stays near 0 until the
// kernel has to reclaim.
//
// The first call has no earlier totals: it records them and returns the
// kernel's own 10-second averages (avg10/100) for both resources, so the
// Sampler's immediate first sample is a real measurement without waiting.
//
// Parsing is strict: each file must hold a "some" line and at most one "full"
// line, each exactly "avg10=A avg60=B avg300=C total=T" with A, B and C plain
// decimals in [0,100] and T a decimal uint64. Anything else, a file larger than
// 4KiB or a total lower than the previous call's, is an error matching
// ErrSourceMalformed; so is a call whose Clock did not advance. After any
// error the next call measures from that call's readings. Errors name the file
// relative to the directory, never the host path or a number. A kernel without
// PSI (files missing, or EOPNOTSUPP on read) gives a read error.
//
// Safe for concurrent use. The constructors start nothing and read nothing.
type PSISource struct {
	dir              string
	cpuFile, memFile string
	kind             string
	clock            vocab.Clock

	mu struct {
		sync.Mutex
		cpu, memory uint64 // "some" totals at `at`
		at          time.Time
		has         bool
	}
}

// NewPSISource returns a PSISource reading the host-wide files dir/cpu and
// dir/memory (dir: DefaultPressureDir when empty). A nil clock is the system
// clock. Its Kind is KindPSIHost.
func NewPSISource(dir string, clock vocab.Clock) *PSISource {
	if dir == "" {
		dir = DefaultPressureDir
	}
	return newPSISource(dir, filePSIHostCPU, filePSIHostMemory, KindPSIHost, clock)
}

// NewCgroupPSISource returns a PSISource reading cpu.pressure and
// memory.pressure in the cgroup v2 directory dir (DefaultCgroupRoot when
// empty): the stalls of that cgroup's tasks only. A nil clock is the system
// clock. Its Kind is KindPSICgroup.
func NewCgroupPSISource(dir string, clock vocab.Clock) *PSISource {
	if dir == "" {
		dir = DefaultCgroupRoot
	}
	return newPSISource(dir, filePSICgroupCPU, filePSICgroupMemory, KindPSICgroup, clock)
}

func newPSISource(dir, cpuFile, memFile, kind string, clock vocab.Clock) *PSISource {
	if clock == nil {
		clock = vocab.WallClock
	}
	return &PSISource{dir: dir, cpuFile: cpuFile, memFile: memFile, kind: kind, clock: clock}
}

// Kind implements Describer: KindPSIHost or KindPSICgroup.
func (p *PSISource) Kind() string { return p.kind }

// Sample implements Source.
func (p *PSISource) Sample(context.Context) (cpu, memory float64, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	cpuStall, err := readPSI(p.dir, p.cpuFile)
	if err != nil {
		return 0, 0, err
	}
	memStall, err := readPSI(p.dir, p.memFile)
	if err != nil {
		return 0, 0, err
	}
	at := p.clock.Now()
	prev, prevCPU, prevMem, had := p.mu.at, p.mu.cpu, p.mu.memory, p.mu.has
	p.mu.cpu, p.mu.memory, p.mu.at, p.mu.has = cpuStall.total, memStall.total, at, true
	if !had {
		return cpuStall.avg10 / 100, memStall.avg10 / 100, nil
	}
	elapsed := at.Sub(prev)
	if elapsed <= 0 {
		return 0, 0, errors.Mark(errors.New("loadsource: psi: no time elapsed between readings"), ErrSourceMalformed)
	}
	if cpuStall.total < prevCPU {
		return 0, 0, malformedPSI(p.cpuFile, "total went backwards")
	}
	if memStall.total < prevMem {
		return 0, 0, malformedPSI(p.memFile, "total went backwards")
	}
	us := float64(elapsed) / float64(time.Microsecond)
	return clamp01(float64(cpuStall.total-prevCPU) / us), clamp01(float64(memStall.total-prevMem) / us), nil
}

// psiLine is one parsed PSI line; avg10 is a percentage.
type psiLine struct {
	avg10 float64
	total uint64
}

// readPSI reads and parses dir/name and returns its "some" line.
func readPSI(dir, name string) (psiLine, error) {
	f, err := os.Open(filepath.Join(dir, name))
	if err == nil {
		var b []byte
		b, err = io.ReadAll(io.LimitReader(f, maxPSIFileSize+1))
		_ = f.Close() // read-only: nothing to flush
		if err == nil {
			if len(b) > maxPSIFileSize {
				return psiLine{}, malformedPSI(name, "too large")
			}
			some, ok := parsePSI(b)
			if !ok {
				return psiLine{}, malformedPSI(name, "")
			}
			return some, nil
		}
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	return psiLine{}, errors.Wrapf(err, "loadsource: psi %s", errors.Safe(name))
}

// parsePSI parses a PSI file strictly and returns its "some" line.
func parsePSI(b []byte) (some psiLine, ok bool) {
	s := string(bytes.TrimSuffix(b, []byte("\n")))
	if s == "" {
		return psiLine{}, false
	}
	var hasSome, hasFull bool
	for _, line := range strings.Split(s, "\n") {
		f := strings.Split(line, " ")
		if len(f) != 5 {
			return psiLine{}, false
		}
		l, ok := parsePSIFields(f[1:])
		if !ok {
			return psiLine{}, false
		}
		switch {
		case f[0] == "some" && !hasSome:
			some, hasSome = l, true
		case f[0] == "full" && !hasFull:
			hasFull = true
		default:
			return psiLine{}, false
		}
	}
	return some, hasSome
}

// parsePSIFields parses "avg10=A avg60=B avg300=C total=T".
func parsePSIFields(f []string) (psiLine, bool) {
	var l psiLine
	for i, key := range []string{"avg10=", "avg60=", "avg300=", "total="} {
		v, found := strings.CutPrefix(f[i], key)
		if !found {
			return psiLine{}, false
		}
		if key == "total=" {
			t, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				return psiLine{}, false
			}
			l.total = t
			continue
		}
		avg, ok := parsePercent(v)
		if !ok {
			return psiLine{}, false
		}
		if key == "avg10=" {
			l.avg10 = avg
		}
	}
	return l, true
}

// parsePercent parses a plain decimal ("31.99", "0", "100.00") in [0,100];
// no sign, exponent, hex, Inf or NaN.
func parsePercent(s string) (float64, bool) {
	whole, frac, hasDot := strings.Cut(s, ".")
	if !isDigits(whole) || (hasDot && !isDigits(frac)) {
		return 0, false
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || v > 100 {
		return 0, false
	}
	return v, true
}

func isDigits(s string) bool {
	if s == "" || len(s) > 20 {
		return false
	}
	for _, c := range []byte(s) {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

func malformedPSI(name, why string) error {
	if why == "" {
		return errors.Mark(errors.Newf("loadsource: psi %s: malformed", errors.Safe(name)), ErrSourceMalformed)
	}
	return errors.Mark(errors.Newf("loadsource: psi %s: malformed: %s", errors.Safe(name), errors.Safe(why)), ErrSourceMalformed)
}

// psiReadable reports whether dir/cpu and dir/memory (by the given names)
// read and parse: PSI is there and the kernel has it enabled.
func psiReadable(dir, cpuFile, memFile string) bool {
	_, errCPU := readPSI(dir, cpuFile)
	_, errMem := readPSI(dir, memFile)
	return errCPU == nil && errMem == nil
}

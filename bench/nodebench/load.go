package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cockroachdb/errors"
)

// newTransportClient returns a keep-alive client with room for conns idle
// connections to the node.
func newTransportClient(conns int) *http.Client {
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		MaxIdleConns: conns + 8, MaxIdleConnsPerHost: conns + 8, IdleConnTimeout: time.Minute,
		DisableCompression: true,
	}}
}

// target is what a client group sends.
type target struct {
	hc    *http.Client
	url   string // full invoke URL
	key   string
	input []byte
}

// tally is one client group's results in the measurement window.
type tally struct {
	lat      []time.Duration    // of successful answers (kept only when wanted)
	timing   [4][]time.Duration // their Server-Timing front, queue, exec, back
	outside  []time.Duration    // their latency less the four (time the node's handler did not see)
	ok       int
	refused  int // answered, non-2xx
	errs     int // transport errors
	statuses map[int]int
}

func (t *tally) merge(o *tally) {
	t.lat = append(t.lat, o.lat...)
	for i := range t.timing {
		t.timing[i] = append(t.timing[i], o.timing[i]...)
	}
	t.outside = append(t.outside, o.outside...)
	t.ok += o.ok
	t.refused += o.refused
	t.errs += o.errs
	for s, c := range o.statuses {
		t.statuses[s] += c
	}
}

func newTally() *tally { return &tally{statuses: map[int]int{}} }

// closedLoop sends tg's request, reads the answer, and sends the next one,
// until ctx ends; answers that arrive within [from, to] count.
func closedLoop(ctx context.Context, tg target, from, to time.Time, keepLat bool) *tally {
	t := newTally()
	for ctx.Err() == nil {
		req, err := http.NewRequestWithContext(ctx, "POST", tg.url, bytes.NewReader(tg.input))
		if err != nil {
			t.errs++
			return t
		}
		req.Header.Set("Authorization", "Bearer "+tg.key)
		start := time.Now()
		resp, err := tg.hc.Do(req)
		status, st := 0, ""
		if err == nil {
			st = resp.Header.Get("Server-Timing")
			_, err = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			status = resp.StatusCode
		}
		end := time.Now()
		if ctx.Err() != nil {
			break // cut off by the end of the scenario
		}
		if end.Before(from) || end.After(to) {
			continue
		}
		switch {
		case err != nil:
			t.errs++
		case status/100 == 2:
			t.ok++
			if keepLat {
				t.lat = append(t.lat, end.Sub(start))
				seen, all := time.Duration(0), true
				for i, name := range timingNames {
					d, err := serverTiming(st, name)
					if err != nil {
						all = false
						continue
					}
					t.timing[i] = append(t.timing[i], d)
					seen += d
				}
				if all {
					t.outside = append(t.outside, end.Sub(start)-seen)
				}
			}
		default:
			t.refused++
		}
		if err == nil {
			t.statuses[status]++
		}
	}
	return t
}

// group is a set of closed-loop clients sending the same request.
type group struct {
	tg      target
	clients int
	keepLat bool
}

// runGroups runs every group's clients for warm-up + duration and returns
// each group's merged tally over the measurement window (after warm-up) and
// the CPU the node (nodePID) and this process used in that window.
func runGroups(ctx context.Context, warmup, duration time.Duration, groups []group, nodePID int) ([]*tally, cpuUse) {
	begin := time.Now()
	from, to := begin.Add(warmup), begin.Add(warmup+duration)
	ctx, cancel := context.WithDeadline(ctx, to)
	defer cancel()
	var cpu cpuUse
	var sampler sync.WaitGroup
	sampler.Go(func() {
		select {
		case <-time.After(time.Until(from)):
		case <-ctx.Done():
			return
		}
		n0, g0, w0 := procCPU(nodePID), selfCPU(), time.Now()
		<-ctx.Done()
		w := time.Since(w0).Seconds()
		cpu = cpuUse{node: (procCPU(nodePID) - n0).Seconds() / w, gen: (selfCPU() - g0).Seconds() / w}
	})
	out := make([]*tally, len(groups))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i, g := range groups {
		out[i] = newTally()
		for range g.clients {
			wg.Go(func() {
				t := closedLoop(ctx, g.tg, from, to, g.keepLat)
				mu.Lock()
				out[i].merge(t)
				mu.Unlock()
			})
		}
	}
	wg.Wait()
	sampler.Wait()
	return out, cpu
}

// percentile returns the p-quantile (0..1) of sorted durations by the
// nearest-rank method.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(p*float64(len(sorted)) + 0.999999)
	i = min(max(i, 1), len(sorted))
	return sorted[i-1]
}

func ms(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e6 }

// median of xs (not modified).
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// invokeOnce sends one request and returns the Server-Timing exec duration.
func invokeOnce(ctx context.Context, tg target) (exec time.Duration, err error) {
	req, err := http.NewRequestWithContext(ctx, "POST", tg.url, bytes.NewReader(tg.input))
	if err != nil {
		return 0, errors.Wrap(err, "nodebench: request")
	}
	req.Header.Set("Authorization", "Bearer "+tg.key)
	resp, err := tg.hc.Do(req)
	if err != nil {
		return 0, errors.Wrap(err, "nodebench: invoke")
	}
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		return 0, errors.Wrap(err, "nodebench: invoke body")
	}
	if resp.StatusCode != http.StatusOK {
		return 0, errors.Newf("nodebench: invoke %s: %d %s", tg.url, resp.StatusCode, bytes.TrimSpace(body))
	}
	return serverTiming(resp.Header.Get("Server-Timing"), "exec")
}

// timingNames are the node's Server-Timing metrics, in tally.timing order.
var timingNames = [4]string{"front", "queue", "exec", "back"}

// serverTiming reads metric name's dur (milliseconds) from a Server-Timing
// header value.
func serverTiming(h, name string) (time.Duration, error) {
	for _, m := range strings.Split(h, ",") {
		parts := strings.Split(strings.TrimSpace(m), ";")
		if parts[0] != name {
			continue
		}
		for _, p := range parts[1:] {
			if v, ok := strings.CutPrefix(strings.TrimSpace(p), "dur="); ok {
				f, err := strconv.ParseFloat(v, 64)
				if err != nil {
					return 0, errors.Wrapf(err, "nodebench: Server-Timing %q", h)
				}
				return time.Duration(f * 1e6), nil
			}
		}
	}
	return 0, errors.Newf("nodebench: no %s in Server-Timing %q", name, h)
}

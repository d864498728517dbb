package main

// The load generator: HTTP clients, closed- and open-loop senders, client
// groups, the tallies of their answers, and percentiles and medians.

import (
	"bytes"
	"context"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/latent-node/latent-node/bench/internal/stats"
)

// newTransportClient returns a keep-alive client with room for conns idle
// connections to the node.
func newTransportClient(conns int) *http.Client {
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		MaxIdleConns: conns + 8, MaxIdleConnsPerHost: conns + 8, IdleConnTimeout: time.Minute,
		DisableCompression: true,
	}}
}

// newPoolClient returns a keep-alive client of at most conns connections
// to the node, all of which stay open between requests.
func newPoolClient(conns int) *http.Client {
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		MaxIdleConns: conns, MaxIdleConnsPerHost: conns, MaxConnsPerHost: conns, IdleConnTimeout: time.Minute,
		DisableCompression: true,
	}}
}

// target is what a client group sends.
type target struct {
	hc     *http.Client
	method string // empty: POST with input as the body
	url    string // full invoke URL
	key    string
	input  []byte
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
	// Open loop only: requests sent (scheduled in the window), sends that
	// waited for a free connection, and each send's lag behind its
	// scheduled time.
	sent int
	late int
	lag  []time.Duration
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
	t.sent += o.sent
	t.late += o.late
	t.lag = append(t.lag, o.lag...)
}

func newTally() *tally { return &tally{statuses: map[int]int{}} }

// outcome is one request's result.
type outcome struct {
	start, end time.Time
	status     int    // 0 on a transport error
	timing     string // the Server-Timing header
	err        error
}

// send sends tg's request and reads the whole answer.
func send(ctx context.Context, tg target) outcome {
	var body io.Reader
	method := tg.method
	if method == "" {
		method, body = "POST", bytes.NewReader(tg.input)
	}
	req, err := http.NewRequestWithContext(ctx, method, tg.url, body)
	if err != nil {
		return outcome{err: err}
	}
	req.Header.Set("Authorization", "Bearer "+tg.key)
	o := outcome{start: time.Now()}
	resp, err := tg.hc.Do(req)
	if err == nil {
		o.timing = resp.Header.Get("Server-Timing")
		_, err = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		o.status = resp.StatusCode
	}
	o.end, o.err = time.Now(), err
	return o
}

// record counts o; with keepLat a successful answer's latency and
// Server-Timing are kept too.
func (t *tally) record(o outcome, keepLat bool) {
	switch {
	case o.err != nil:
		t.errs++
	case o.status/100 == 2:
		t.ok++
		if keepLat {
			t.lat = append(t.lat, o.end.Sub(o.start))
			seen, all := time.Duration(0), true
			for i, name := range timingNames {
				d, err := serverTiming(o.timing, name)
				if err != nil {
					all = false
					continue
				}
				t.timing[i] = append(t.timing[i], d)
				seen += d
			}
			if all {
				t.outside = append(t.outside, o.end.Sub(o.start)-seen)
			}
		}
	default:
		t.refused++
	}
	if o.err == nil {
		t.statuses[o.status]++
	}
}

// closedLoop sends tg's request, reads the answer, and sends the next one,
// until ctx ends; answers that arrive within [from, to] count.
func closedLoop(ctx context.Context, tg target, from, to time.Time, keepLat bool) *tally {
	t := newTally()
	for ctx.Err() == nil {
		o := send(ctx, tg)
		if o.start.IsZero() {
			t.errs++ // the request could not be built
			return t
		}
		if ctx.Err() != nil {
			break // cut off by the end of the scenario
		}
		if o.end.Before(from) || o.end.After(to) {
			continue
		}
		t.record(o, keepLat)
	}
	return t
}

// openLoop sends tg's request at Poisson arrivals of rate per second (the
// gaps drawn from rng) from now until to, whatever the answers do: each
// request runs on a goroutine of its own holding one of conns connection
// slots (tg.hc must allow that many connections). A send that finds no
// free slot waits for one and counts as late. Requests scheduled within
// [from, to] count, and their answers are awaited even after to (reqCtx
// bounds them; gen ends the sending).
func openLoop(reqCtx, gen context.Context, tg target, rate float64, conns int, rng *rand.Rand, from, to time.Time, keepLat bool) *tally {
	t := newTally()
	slots := make(chan struct{}, conns)
	var mu sync.Mutex
	var wg sync.WaitGroup
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	next := time.Now()
loop:
	for {
		next = next.Add(time.Duration(rng.ExpFloat64() / rate * float64(time.Second)))
		if next.After(to) {
			break
		}
		if d := time.Until(next); d > 0 {
			timer.Reset(d)
			select {
			case <-timer.C:
			case <-gen.Done():
				break loop
			}
		}
		counted := !next.Before(from)
		select {
		case slots <- struct{}{}:
		default:
			if counted {
				t.late++
			}
			select {
			case slots <- struct{}{}:
			case <-gen.Done():
				break loop
			}
		}
		if counted {
			t.sent++
			t.lag = append(t.lag, time.Since(next))
		}
		wg.Go(func() {
			defer func() { <-slots }()
			o := send(reqCtx, tg)
			if !counted {
				return
			}
			mu.Lock()
			t.record(o, keepLat)
			mu.Unlock()
		})
	}
	wg.Wait()
	return t
}

// group is a set of closed-loop clients sending the same request, or, with
// rate > 0, one open-loop sender of rate requests per second over conns
// connections.
type group struct {
	tg      target
	clients int
	keepLat bool
	rate    float64
	conns   int
	rng     *rand.Rand
}

// runGroups runs every group's clients for warm-up + duration and returns
// each group's merged tally over the measurement window (after warm-up) and
// the CPU the process pid (the server) and this process used in that
// window, and what other processes used of serverCPU (the server's pinned
// CPU; -1: not pinned).
func runGroups(ctx context.Context, warmup, duration time.Duration, groups []group, pid, serverCPU int) ([]*tally, cpuUse) {
	reqCtx := ctx
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
		n0, g0, w0 := procCPU(pid), selfCPU(), time.Now()
		b0, ok0 := cpuBusy(serverCPU)
		<-ctx.Done()
		w := time.Since(w0).Seconds()
		cpu = cpuUse{node: (procCPU(pid) - n0).Seconds() / w, gen: (selfCPU() - g0).Seconds() / w, others: -1}
		if b1, ok1 := cpuBusy(serverCPU); ok0 && ok1 {
			cpu.others = max((b1-b0).Seconds()/w-cpu.node, 0)
		}
	})
	out := make([]*tally, len(groups))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i, g := range groups {
		out[i] = newTally()
		if g.rate > 0 {
			wg.Go(func() {
				t := openLoop(reqCtx, ctx, g.tg, g.rate, g.conns, g.rng, from, to, g.keepLat)
				mu.Lock()
				out[i].merge(t)
				mu.Unlock()
			})
			continue
		}
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

// The sample arithmetic is the benchmarks' shared one.
var (
	percentile = stats.Percentile
	ms         = stats.Ms
	median     = stats.Median
)

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

// checkAnswer sends tg's request once and wants 200, and with echo the
// request body back.
func checkAnswer(ctx context.Context, tg target, echo bool) error {
	resp, body, err := sendOnce(ctx, tg)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return errors.Newf("nodebench: %s answered %d %s", tg.url, resp.StatusCode, bytes.TrimSpace(body))
	}
	if echo && !bytes.Equal(body, tg.input) {
		return errors.Newf("nodebench: %s answered %q, not the body %q", tg.url, body, tg.input)
	}
	return nil
}

// sendOnce sends tg's request (as send does) and returns the answer with
// its whole body, for the checks before a scenario.
func sendOnce(ctx context.Context, tg target) (*http.Response, []byte, error) {
	var reqBody io.Reader
	method := tg.method
	if method == "" {
		method, reqBody = "POST", bytes.NewReader(tg.input)
	}
	req, err := http.NewRequestWithContext(ctx, method, tg.url, reqBody)
	if err != nil {
		return nil, nil, errors.Wrap(err, "nodebench: request")
	}
	req.Header.Set("Authorization", "Bearer "+tg.key)
	resp, err := tg.hc.Do(req)
	if err != nil {
		return nil, nil, errors.Wrap(err, "nodebench: send")
	}
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		return nil, nil, errors.Wrap(err, "nodebench: answer body")
	}
	return resp, body, nil
}

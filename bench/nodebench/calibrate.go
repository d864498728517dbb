package main

// Calibration: the compute guest's N whose activation executes in about
// -target-exec.

import (
	"context"
	"slices"
	"strconv"
	"time"

	"github.com/cockroachdb/errors"
)

// calibrationRuns is the number of activations per calibration point.
const calibrationRuns = 200

// probeN is the compute input of the second calibration point.
const probeN = 200_000

// execAt runs calibrationRuns activations with input n (after a few
// unmeasured ones) and returns the median Server-Timing exec and the median
// request latency.
func execAt(ctx context.Context, tg target, n uint64) (exec, latency time.Duration, err error) {
	tg.input = []byte(strconv.FormatUint(n, 10))
	for range 20 {
		if _, err := invokeOnce(ctx, tg); err != nil {
			return 0, 0, err
		}
	}
	execs := make([]time.Duration, 0, calibrationRuns)
	lats := make([]time.Duration, 0, calibrationRuns)
	for range calibrationRuns {
		start := time.Now()
		e, err := invokeOnce(ctx, tg)
		if err != nil {
			return 0, 0, err
		}
		lats = append(lats, time.Since(start))
		execs = append(execs, e)
	}
	slices.Sort(execs)
	slices.Sort(lats)
	return execs[len(execs)/2], lats[len(lats)/2], nil
}

// calibrate picks the compute N whose activation executes in about
// o.targetExec (a line through N=1 and N=probeN), unless o.computeN fixes
// it, and measures the activation at that N.
func calibrate(ctx context.Context, tg target, o options) (calibration, error) {
	c := calibration{ComputeN: o.computeN, TargetExecMs: ms(o.targetExec), CalibrationRuns: calibrationRuns}
	if c.ComputeN == 0 {
		e1, _, err := execAt(ctx, tg, 1)
		if err != nil {
			return c, errors.Wrap(err, "nodebench: calibrate at N=1")
		}
		e2, _, err := execAt(ctx, tg, probeN)
		if err != nil {
			return c, errors.Wrapf(err, "nodebench: calibrate at N=%d", probeN)
		}
		c.ExecMsAtN1, c.ExecMsAtProbe, c.ProbeN = ms(e1), ms(e2), probeN
		perN := float64(e2-e1) / float64(probeN-1)
		c.ComputeN = 1
		if perN > 0 && o.targetExec > e1 {
			c.ComputeN = uint64(float64(o.targetExec-e1)/perN) + 1
		}
	}
	e, lat, err := execAt(ctx, tg, c.ComputeN)
	if err != nil {
		return c, errors.Wrapf(err, "nodebench: measure at N=%d", c.ComputeN)
	}
	c.ActivationExec, c.SoloLatencyP50 = ms(e), ms(lat)
	return c, nil
}

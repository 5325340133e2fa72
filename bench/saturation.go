package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"

	"github.com/tracekit/tracekit/internal/calibrate"
)

// Goals of the client-as-bottleneck stages.
const (
	saturatedP99GoalMs  = 1.0 // default stamp mode, one-core saturated client
	cpuPerEventGoalUs   = 8.0 // client CPU per token event with kernel-grade stamps
	manyStreamsP99Ms    = 1.0 // steady-window p99 at the many-streams step
	projectedStreams    = 100_000
	projectedRSSGoalGiB = 4.0
	projectedCoresGoal  = 2.0
)

// saturationBench: the client pinned to one CPU and the mock to the
// other, 1,000 streams at 50 events/s each (50,000 events/s: more than one
// core of client can read), in each stamp mode side by side. The default
// mode must hold its p99 where the client is the bottleneck.
// Run alone: go run ./bench -only saturation -o /tmp/sat.md.
func saturationBench(ctx context.Context, e *env) ([]figure, error) {
	const sec = "A saturated client (tracekit calibrate --client-cpus 1 --saturated)"
	before := loadAvg()
	rep, cmd, err := runCalibrate(ctx, e, filepath.Join(e.work, "saturation"),
		"--client-cpus", "1", "--saturated", "1000", "--streams", "", "--stamp", "goroutine,kernel,kernel-offset", "--duration", "2s")
	if err != nil {
		return nil, err
	}
	la := fmt.Sprintf("load average %s before the run, %s after", before, loadAvg())
	var figs []figure
	for _, r := range rep.Steps {
		if r.Step.Kind != calibrate.KindSaturated {
			continue
		}
		p99 := float64(r.ErrP99Ns) / 1e6
		f := figure{Section: sec, Name: fmt.Sprintf("1,000 streams on one client CPU, stamp mode %s", r.Step.Stamp),
			Value: fmt.Sprintf("error p50 %.3f ms, p99 %.3f ms, max %.3f ms; %d/%d events matched, %d failed requests; client %.2f core (of 1), %.0f events/s",
				float64(r.ErrP50Ns)/1e6, p99, float64(r.ErrMaxNs)/1e6, r.Matched, r.EventsServer, r.Errors, r.ClientCores, r.EventsPerS),
			Command: cmd, Note: la + fmt.Sprintf("; client on CPUs %v, mock on %v", rep.ClientCPUs, rep.MockCPUs)}
		f.Note += stampSaid(r)
		if r.Step.Stamp == "kernel-offset" { // the default
			f.Name += " (the default)"
			f.Goal = fmt.Sprintf("p99 <= %g ms in the default mode", saturatedP99GoalMs)
			f.Verdict = atMost(p99, saturatedP99GoalMs, func(v float64) string { return fmt.Sprintf("%.3f ms", v) })
		}
		figs = append(figs, f)
	}
	return figs, nil
}

// cpuPerEventBench: e.cpuStreams streams of one event every 500 ms for
// 50 s (100 events each, the goal's shape: per-request costs spread over
// 100 events), in the two kernel-grade modes: the client's CPU (its
// arrival observer included) per token event, over the whole step and
// over its steady window (every stream open), on which the goal is judged.
func cpuPerEventBench(ctx context.Context, e *env) ([]figure, error) {
	const sec = "Client CPU per event (tracekit calibrate)"
	n := e.cpuStreams
	before := loadAvg()
	rep, cmd, err := runCalibrate(ctx, e, filepath.Join(e.work, "cpu-per-event"),
		"--streams", strconv.Itoa(n), "--events-per-s", strconv.Itoa(2*n), "--stamp", "kernel,kernel-offset", "--duration", "50s")
	if err != nil {
		return nil, err
	}
	la := fmt.Sprintf("load average %s before the run, %s after", before, loadAvg())
	var figs []figure
	for _, r := range rep.Steps {
		if r.Step.Kind != calibrate.KindStreams || r.EventsPerS == 0 {
			continue
		}
		whole := r.ClientCores / r.EventsPerS * 1e6
		f := figure{Section: sec, Name: fmt.Sprintf("%d streams, one event every 500 ms each for 50 s, stamp mode %s", n, r.Step.Stamp),
			Goal:    fmt.Sprintf("<= %g us per event in the steady window", cpuPerEventGoalUs),
			Command: cmd, Note: la + "; the client's CPU is the calibrate process's and its arrival observer process's if it has one, the mock's is apart"}
		steady := "no steady window"
		if st := r.Steady; st != nil && st.ClientCPUPerEventNs > 0 {
			us := st.ClientCPUPerEventNs / 1e3
			steady = fmt.Sprintf("%.1f us per event in the steady window (%.2f core over %.1f s, %d events)", us, st.ClientCores, float64(st.WindowNs)/1e9, st.Events)
			f.Verdict = atMost(us, cpuPerEventGoalUs, func(v float64) string { return fmt.Sprintf("%.1f us", v) })
			f.Note += "; the goal is judged on the steady window (every stream open), the whole step adds the ramp's dials and request writes and the tail"
		} else {
			f.Verdict = "not judged: no steady window"
		}
		f.Value = fmt.Sprintf("%s; %.1f us per event over the whole step (%.2f core at %.0f events/s); error p99 %.3f ms; %d/%d events matched",
			steady, whole, r.ClientCores, r.EventsPerS, float64(r.ErrP99Ns)/1e6, r.Matched, r.EventsServer)
		f.Note += stampSaid(r)
		figs = append(figs, f)
	}
	return figs, nil
}

// manyStreamsBench: e.maxStreams concurrent streams of 50 events, one a
// second, in the default mode: every stream completes, the steady-window
// p99, and the client's memory and CPU per stream projected to
// projectedStreams.
func manyStreamsBench(ctx context.Context, e *env) ([]figure, error) {
	const sec = "Many streams from one process (tracekit calibrate)"
	n := e.maxStreams
	before := loadAvg()
	rep, cmd, err := runCalibrate(ctx, e, filepath.Join(e.work, "many-streams"),
		"--streams", strconv.Itoa(n), "--events-per-s", strconv.Itoa(n), "--duration", "50s")
	if err != nil {
		return nil, err
	}
	la := fmt.Sprintf("load average %s before the run, %s after", before, loadAvg())
	var figs []figure
	for _, r := range rep.Steps {
		if r.Step.Kind != calibrate.KindStreams {
			continue
		}
		all := r.Errors == 0 && r.Matched == r.EventsServer && r.Requests == n
		p99 := float64(r.ErrP99Ns) / 1e6
		if r.Steady != nil {
			p99 = float64(r.Steady.ErrP99Ns) / 1e6
		}
		verdict := atMost(p99, manyStreamsP99Ms, func(v float64) string { return fmt.Sprintf("%.3f ms", v) })
		if !all {
			verdict = fmt.Sprintf("**missed**: %d of %d requests, %d failed, %d/%d events matched", r.Requests, n, r.Errors, r.Matched, r.EventsServer)
		}
		figs = append(figs, figure{Section: sec, Name: fmt.Sprintf("%d streams, 50 events each at one a second", n),
			Value: fmt.Sprintf("%d requests, %d failed, %d/%d events matched; steady-window error p99 %.3f ms (whole step %.3f ms)",
				r.Requests, r.Errors, r.Matched, r.EventsServer, p99, float64(r.ErrP99Ns)/1e6),
			Goal: fmt.Sprintf("all complete, steady p99 <= %g ms", manyStreamsP99Ms), Verdict: verdict, Command: cmd, Note: la + stampSaid(r)})
		rssPer := float64(r.ClientRSSBytes) / float64(n)
		gib := rssPer * projectedStreams / (1 << 30)
		figs = append(figs, figure{Section: sec, Name: fmt.Sprintf("client memory per stream, projected to %d streams", projectedStreams),
			Value:   fmt.Sprintf("%.1f KiB per stream (peak RSS %.0f MiB over %d streams): %.2f GiB at %d", rssPer/1024, float64(r.ClientRSSBytes)/(1<<20), n, gib, projectedStreams),
			Goal:    fmt.Sprintf("<= %g GiB at %d streams", projectedRSSGoalGiB, projectedStreams),
			Verdict: atMost(gib, projectedRSSGoalGiB, func(v float64) string { return fmt.Sprintf("%.2f GiB", v) }), Command: cmd,
			Note: "peak resident set of the client during the step, divided by its streams (it includes the process's fixed part, so the projection is high)"})
		cores := r.ClientCores / float64(n) * projectedStreams
		figs = append(figs, figure{Section: sec, Name: fmt.Sprintf("client CPU per stream, projected to %d streams", projectedStreams),
			Value:   fmt.Sprintf("%.1f us/s per stream (%.2f core over %d streams at one event a second): %.2f cores at %d", r.ClientCores/float64(n)*1e6, r.ClientCores, n, cores, projectedStreams),
			Goal:    fmt.Sprintf("<= %g cores at %d streams", projectedCoresGoal, projectedStreams),
			Verdict: atMost(cores, projectedCoresGoal, func(v float64) string { return fmt.Sprintf("%.2f cores", v) }), Command: cmd,
			Note: "the client's CPU (an observer process's included) over the step's wall time, ramp included"})
	}
	return figs, nil
}

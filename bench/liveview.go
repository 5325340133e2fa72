package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"

	"github.com/tracekit/tracekit/internal/calibrate"
)

// liveViewBench measures what the live view (replay --progress dashboard)
// costs the client: `tracekit calibrate --live-pair N` replays N streams
// against the mock twice, back to back, each into a recording file, first
// without and then with the recorder's tap feeding the view and its
// dashboard program drawing (to nowhere: no terminal). Per step: the
// per-event stamp error, the dispatch lag and the client's CPU; the view
// is free when the second step's figures match the first's within the
// step-to-step noise.
//
//	go run ./bench -only "live view" -live-streams 1000 -o /tmp/live.md
func liveViewBench(ctx context.Context, e *env) ([]figure, error) {
	const sec = "Live view cost (tracekit calibrate --live-pair, mock in a child process)"
	before := loadAvg()
	args := []string{"--streams", "10", "--live-pair", strconv.Itoa(e.liveStreams), "--duration", "5s"}
	rep, cmd, err := runCalibrate(ctx, e, filepath.Join(e.work, "liveview"), args...)
	if err != nil {
		return nil, err
	}
	la := fmt.Sprintf("load average %s before the run, %s after", before, loadAvg())
	var off *calibrate.Result
	var figs []figure
	for i, r := range rep.Steps {
		if r.Step.LiveView == "" {
			continue
		}
		name := fmt.Sprintf("%d streams, live view %s", r.Step.Streams, r.Step.LiveView)
		v := fmt.Sprintf("stamp error p50 %s, p99 %s, max %s; dispatch lag p50 %s, p99 %s; client %.2f core, RSS %s; %d/%d events matched, %d failed requests",
			usMs(r.ErrP50Ns), usMs(r.ErrP99Ns), usMs(r.ErrMaxNs), usMs(r.LagP50Ns), usMs(r.LagP99Ns), r.ClientCores, mib(float64(r.ClientRSSBytes)),
			r.Matched, r.EventsServer, r.Errors)
		if st := r.Steady; st != nil {
			v += fmt.Sprintf("; steady state p50 %s, p99 %s over %d events", usMs(st.ErrP50Ns), usMs(st.ErrP99Ns), st.Events)
		}
		f := figure{Section: sec, Name: name, Value: v, Command: cmd, Note: la}
		switch r.Step.LiveView {
		case "off":
			off = &rep.Steps[i]
		case "on":
			if off != nil && off.Step.Streams == r.Step.Streams {
				f.Value += fmt.Sprintf("; against the step without: stamp error p50 %s, p99 %s, dispatch lag p99 %s, client %+.2f core",
					signed(r.ErrP50Ns-off.ErrP50Ns), signed(r.ErrP99Ns-off.ErrP99Ns), signed(r.LagP99Ns-off.LagP99Ns), r.ClientCores-off.ClientCores)
			}
			f.Note = fmt.Sprintf("the recorder's tap fed the view %d records (%d dropped), which keeps the rolling windows; the dashboard program redraws every 500 ms; %s",
				r.LiveSamples, r.LiveDropped, la)
		}
		figs = append(figs, f)
	}
	if len(figs) == 0 {
		return nil, fmt.Errorf("%s: no live-pair step in the report", cmd)
	}
	return figs, nil
}

// usMs writes ns as µs below a millisecond, else as ms.
func usMs(ns int64) string {
	if ns < 1e6 && ns > -1e6 {
		return fmt.Sprintf("%.1f µs", float64(ns)/1e3)
	}
	return fmt.Sprintf("%.3f ms", float64(ns)/1e6)
}

// signed is usMs with a sign.
func signed(ns int64) string {
	if ns >= 0 {
		return "+" + usMs(ns)
	}
	return usMs(ns)
}

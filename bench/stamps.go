package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/tracekit/tracekit/internal/calibrate"
)

// stampArgs are the stamps stage's calibrate loads: 10
// streams for TTFT inflation, 10,000 steady streams, bursts of 500 and
// 1,000 streams with a wave boundary, a CPU burner beside 500 streams and a
// with/without-scrape pair at 500 streams, each in the three stamp modes
// back to back.
var stampArgs = []string{"--streams", "10,10000", "--bursts", "500,1000", "--burn", "500", "--scrape-pair", "500",
	"--stamp", "goroutine,kernel,kernel-offset", "--duration", "5s"}

// stampsBench runs `tracekit calibrate` with every stamp mode side by
// side and turns each step into a row: per-event stamp error and TTFT
// inflation, with their goals where one is set and each
// kernel mode's p99 as a ratio of the goroutine stamp's on the same load.
// Run alone: go run ./bench -only stamps -o /tmp/stamps.md.
func stampsBench(ctx context.Context, e *env) ([]figure, error) {
	const sec = "Stamp modes side by side (tracekit calibrate --stamp, mock in a child process)"
	before := loadAvg()
	rep, cmd, err := runCalibrate(ctx, e, filepath.Join(e.work, "stamps"), stampArgs...)
	if err != nil {
		return nil, err
	}
	la := fmt.Sprintf("%s before the run, %s after", before, loadAvg())
	goroutineP99 := map[string]int64{}
	noScrapeP99 := map[string]int64{}
	for _, r := range rep.Steps {
		base := strings.TrimSuffix(r.Name, "/"+r.Step.Stamp)
		if r.Step.Stamp == "goroutine" {
			goroutineP99[base] = r.ErrP99Ns
		}
		if r.Step.Kind == calibrate.KindStreams && !r.Step.Scrape && !r.Step.Burner {
			noScrapeP99[r.Step.Stamp] = r.ErrP99Ns
		}
	}
	var figs []figure
	for _, r := range rep.Steps {
		if r.Step.Kind == calibrate.KindProbe {
			continue
		}
		base := strings.TrimSuffix(r.Name, "/"+r.Step.Stamp)
		p99 := float64(r.ErrP99Ns) / 1e6
		f := figure{Section: sec, Name: fmt.Sprintf("%s, stamp mode %s", base, r.Step.Stamp),
			Value: fmt.Sprintf("error p50 %.3f ms, p99 %.3f ms, max %.3f ms; TTFT inflation p50 %.3f ms; %d/%d events matched, %d failed requests; client %.2f core",
				float64(r.ErrP50Ns)/1e6, p99, float64(r.ErrMaxNs)/1e6, float64(r.TTFTInflP50Ns)/1e6, r.Matched, r.EventsServer, r.Errors, r.ClientCores),
			Command: cmd, Note: "load average " + la}
		if g := goroutineP99[base]; g > 0 && r.Step.Stamp != "goroutine" {
			f.Value += fmt.Sprintf("; p99 %.2fx the goroutine stamp's", float64(r.ErrP99Ns)/float64(g))
		}
		f.Note += stampSaid(r)
		switch {
		case r.Step.Kind == calibrate.KindStreams && r.Step.Streams >= 10000 && !r.Step.Burner && !r.Step.Scrape:
			f.Goal = "per-event error p99 <= 0.2 ms steady at 10,000 streams"
			if st := r.Steady; st != nil {
				v := float64(st.ErrP99Ns) / 1e6
				f.Value += fmt.Sprintf("; steady state (%d events in %.2f s, every stream open but 1 in 100 stragglers): p50 %.3f ms, p99 %.3f ms, max %.3f ms",
					st.Events, float64(st.WindowNs)/1e9, float64(st.ErrP50Ns)/1e6, v, float64(st.ErrMaxNs)/1e6)
				f.Verdict = atMost(v, 0.2, ms)
			} else {
				f.Value += "; no steady-state window (the streams were never all open at once)"
				f.Verdict = "**not measured** (no steady window)"
			}
		case r.Step.Kind == calibrate.KindStreams && r.Step.Streams == 10 && !r.Step.Burner && !r.Step.Scrape:
			v := float64(r.TTFTInflP50Ns) / 1e6
			f.Goal, f.Verdict = "TTFT inflation p50 <= 0.1 ms at 10 streams", atMost(v, 0.1, ms)
		case r.Step.Kind == calibrate.KindBurst:
			f.Goal, f.Verdict = fmt.Sprintf("per-event error p99 <= 1 ms at %d streams including wave boundaries", r.Step.Streams), atMost(p99, 1, ms)
		case r.Step.Scrape:
			if off, ok := noScrapeP99[r.Step.Stamp]; ok {
				f.Value += fmt.Sprintf("; scraping changed p99 by %+.3f ms against the same step without", float64(r.ErrP99Ns-off)/1e6)
			}
			f.Note += fmt.Sprintf("; %d scrapes of the mock's /metrics (%d failed) during the step", r.Scrapes, r.ScrapeFailures)
		case r.Step.Burner:
			f.Note += fmt.Sprintf("; %d burner goroutines spinning beside the client", r.Burners)
		}
		figs = append(figs, f)
	}
	return figs, nil
}

// stampSaid is a note on kernel-offset's arrival observer, and on the
// stamp mode a step's recording says it used when that is not the mode
// asked for or comes with a note; "" when there is nothing to say.
func stampSaid(r calibrate.Result) string {
	said := ""
	if r.StampObserver != "" {
		said = "; kernel-offset's arrival observer: " + r.StampObserver
	}
	if r.StampMode == r.Step.Stamp && r.StampNote == "" {
		return said
	}
	return said + fmt.Sprintf("; the recording says mode %s: %s", r.StampMode, r.StampNote)
}

package main

import (
	"context"
	"fmt"
	"io"
	"sync/atomic"

	"github.com/spf13/pflag"

	"github.com/tracekit/tracekit/internal/live"
	"github.com/tracekit/tracekit/internal/replay"
	"github.com/tracekit/tracekit/internal/telemetry"
	"github.com/tracekit/tracekit/trace"
)

// liveFlags are the live view's flags of replay, sweep and capture
// (besides --progress dashboard).
type liveFlags struct {
	serveUI string
	public  bool
}

func (f *liveFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.serveUI, "serve-ui", "", "serve a live page of the run's figures (server-sent events) on this HOST:PORT, e.g. 127.0.0.1:8089 (loopback only unless --serve-ui-public)")
	fs.BoolVar(&f.public, "serve-ui-public", false, "allow --serve-ui on a non-loopback address (the page has no login)")
}

// validate checks --serve-ui; errors are bad input.
func (f *liveFlags) validate() error {
	if f.serveUI == "" {
		return nil
	}
	if err := live.CheckAddr(f.serveUI, f.public); err != nil {
		return fmt.Errorf("--serve-ui %w", err)
	}
	return nil
}

// liveRun is the live view of one run: the feed the recorder taps, the
// view it fills, and the dashboard and page that show it.
type liveRun struct {
	feed   *live.Feed
	view   *live.View
	cancel context.CancelFunc
	done   chan struct{}
	dash   func()
	srv    *live.Server
}

// wantLive reports whether the run needs a feed: a dashboard on a
// terminal or a page.
func wantLive(progress string, f *liveFlags, stderr io.Writer) bool {
	return (progress == "dashboard" && isTerminal(stderr)) || (f != nil && f.serveUI != "")
}

// startLive starts the view of feed over src, its dashboard when
// dashboard is true, its page when --serve-ui is given (a page that
// cannot listen is a warning: the run goes on).
func startLive(feed *live.Feed, src live.Sources, label string, dashboard bool, f *liveFlags, stderr io.Writer) *liveRun {
	ctx, cancel := context.WithCancel(context.Background())
	l := &liveRun{feed: feed, view: live.NewView(feed, src, live.Options{Label: label}), cancel: cancel, done: make(chan struct{})}
	go func() { defer close(l.done); l.view.Run(ctx) }()
	if f != nil && f.serveUI != "" {
		srv, err := live.Serve(f.serveUI, l.view, 0)
		if err != nil {
			fmt.Fprintf(stderr, "warning: --serve-ui %s: %v (the run goes on without the page)\n", f.serveUI, err)
		} else {
			l.srv = srv
			fmt.Fprintf(stderr, "live page: %s\n", srv.URL())
		}
	}
	if dashboard {
		l.dash = live.Dashboard(l.view, stderr)
	}
	return l
}

// stop ends the view: the dashboard prints its last state, the page
// sends its last (finished) event.
func (l *liveRun) stop() {
	if l == nil {
		return
	}
	l.cancel()
	<-l.done
	l.view.Finish()
	if l.dash != nil {
		l.dash()
	}
	if l.srv != nil {
		l.srv.Close()
	}
}

// scrapeGauges are the live figures of a sidecar: scrapes and failures
// per endpoint.
func scrapeGauges(sc *telemetry.Sidecar) func() []live.Gauge {
	if sc == nil {
		return nil
	}
	return func() []live.Gauge {
		var gs []live.Gauge
		for _, e := range sc.Stats() {
			g := live.Gauge{Name: "scrapes " + e.Target, Value: float64(e.Scrapes)}
			if e.Failures > 0 {
				g.Note = fmt.Sprintf("%d failed: %s", e.Failures, e.LastError)
			}
			gs = append(gs, g)
		}
		return gs
	}
}

// stepsLive is the live view of a run of steps (a sweep): a view per step,
// its dashboard while the step runs, and one page for them all, which
// shows the current step and says finished only once every step ended.
type stepsLive struct {
	dashboard bool
	stderr    io.Writer
	cur       atomic.Pointer[live.View]
	finished  atomic.Bool
	srv       *live.Server
}

// startStepsLive starts the page when --serve-ui is given; dashboard is
// whether each step draws one.
func startStepsLive(dashboard bool, f *liveFlags, stderr io.Writer) *stepsLive {
	s := &stepsLive{dashboard: dashboard, stderr: stderr}
	if f != nil && f.serveUI != "" {
		srv, err := live.Serve(f.serveUI, s, 0)
		if err != nil {
			fmt.Fprintf(stderr, "warning: --serve-ui %s: %v (the run goes on without the page)\n", f.serveUI, err)
		} else {
			s.srv = srv
			fmt.Fprintf(stderr, "live page: %s\n", srv.URL())
		}
	}
	return s
}

// Snapshot is the current step's, finished only once the run ended.
func (s *stepsLive) Snapshot() live.Snapshot {
	v := s.cur.Load()
	if v == nil {
		return live.Snapshot{Label: "waiting for the first step", FailedByKind: map[string]int64{}, Finished: s.finished.Load()}
	}
	snap := v.Snapshot()
	snap.Finished = s.finished.Load()
	return snap
}

// step is sweep.ReplayOptions.StepView.
func (s *stepsLive) step(label string, r *replay.Runner) (func(*trace.Record), func()) {
	feed := live.NewFeed(0)
	l := startLive(feed, replaySources(r, nil), label, s.dashboard, nil, s.stderr)
	s.cur.Store(l.view)
	return feed.Offer, l.stop
}

// stop ends the page with a last, finished event.
func (s *stepsLive) stop() {
	if s == nil {
		return
	}
	s.finished.Store(true)
	if s.srv != nil {
		s.srv.Close()
	}
}

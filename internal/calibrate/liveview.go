package calibrate

import (
	"context"
	"io"
	"sync/atomic"

	"github.com/tracekit/tracekit/internal/live"
	"github.com/tracekit/tracekit/internal/replay"
	"github.com/tracekit/tracekit/trace"
)

// liveView is the live view of a Step.LiveView "on" step, as replay
// --progress dashboard runs it: the recorder's tap feeds a View, and the
// dashboard program redraws it, here to nowhere (no terminal), so the
// step pays for the feed, the view and the drawing.
type liveView struct {
	feed   *live.Feed
	view   *live.View
	cancel context.CancelFunc
	done   chan struct{}
	dash   func()
	offers atomic.Int64
}

// liveCounts are the records a live view was offered and those its feed
// dropped.
type liveCounts struct{ samples, dropped int64 }

// offer is the recorder's tap.
func (l *liveView) offer(rec *trace.Record) {
	l.offers.Add(1)
	l.feed.Offer(rec)
}

// startLiveView starts the view of r's run.
func startLiveView(r *replay.Runner, label string) *liveView {
	ctx, cancel := context.WithCancel(context.Background())
	l := &liveView{feed: live.NewFeed(0), cancel: cancel, done: make(chan struct{})}
	l.view = live.NewView(l.feed, live.Sources{
		Counts: func() live.Counts {
			s := r.Stats()
			return live.Counts{Total: s.Total, Sent: s.Sent, Done: s.Done, Failed: s.Errors, InFlight: s.InFlight, Elapsed: s.Elapsed}
		},
		Health: func() live.Health {
			h := r.HealthSoFar()
			if h == nil {
				return live.Health{}
			}
			return live.Health{DispatchLagP50Ns: h.DispatchLagP50Ns, DispatchLagP99Ns: h.DispatchLagP99Ns, DispatchLagMaxNs: h.DispatchLagMaxNs,
				SchedLatP99Ns: h.SchedLatP99Ns, CPUSeconds: h.CPUSeconds, Cores: h.Cores}
		},
	}, live.Options{Label: "calibrate " + label})
	go func() { defer close(l.done); l.view.Run(ctx) }()
	l.dash = live.Dashboard(l.view, io.Discard)
	return l
}

// stop ends the dashboard and the view and counts the records the view
// took; a nil view ignores it.
func (l *liveView) stop() liveCounts {
	if l == nil {
		return liveCounts{}
	}
	l.cancel()
	<-l.done
	l.dash() // takes what is left in the feed
	d := l.feed.Dropped()
	return liveCounts{samples: l.offers.Load() - d, dropped: d}
}
